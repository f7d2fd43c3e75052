#!/usr/bin/env python3
"""Export a diffusers / PyTorch model as a `weft.graph/1` JSON file.

The model is built on the meta device from a published config (tools/model_configs/*.json), so no
weights are read and nothing is downloaded. It is then run on meta inputs at each named workload
while forward pre/post hooks record, for every module call, the shapes of the arguments (bound to
the forward signature by name) and of the outputs. Attention calls are recorded by wrapping
diffusers' `dispatch_attention_fn`, which gives the (B, S, H, D) of q, k and v at every site.

A model whose forward reads the *values* of an input to decide shapes (QwenImage 2.1 expands its
`img_mask` with `repeat_interleave` and scatters latents through it) gets that input as a real CPU
tensor, everything else stays on meta; see `host_values` for why the shapes stay exact.

Usage:
  tools/export_graph.py tools/model_configs/flux1-dev.json -o graphs/flux1-dev.graph.json
  tools/export_graph.py --all                 # every config in tools/model_configs -> graphs/
  tools/export_graph.py CONFIG --workload 1024x1024 --workload 512x512   # a subset of workloads

The format is documented in compiler/model/README.md. Paths whose list indices repeat identical
content are written once with `{a..b}` index ranges (see "Compression" there).
"""

import argparse
import contextlib
import importlib
import inspect
import json
import os
import re
import sys
from collections import OrderedDict

from diffusers_models import EmptyFactory, make_inputs

FORMAT = "weft.graph/1"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

DTYPE_NAMES = {}


def dtype_name(dt):
    import torch
    if not DTYPE_NAMES:
        DTYPE_NAMES.update({
            torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
            torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
            torch.uint8: "u8", torch.bool: "bool",
            torch.complex64: "c64", torch.complex128: "c128",
            torch.float8_e4m3fn: "f8e4m3", torch.float8_e5m2: "f8e5m2",
        })
    return DTYPE_NAMES.get(dt, str(dt).replace("torch.", ""))


# ----------------------------------------------------------------------------------------------
# Values in a trace

def encode_value(v):
    """A traced value: tensors by shape and dtype, containers element-wise, scalars by value."""
    import torch
    if isinstance(v, torch.Tensor):
        return {"shape": list(v.shape), "dtype": dtype_name(v.dtype)}
    if v is None:
        return None
    if isinstance(v, bool):
        return {"value": v}
    if isinstance(v, (int, float, str)):
        return {"value": v}
    if isinstance(v, (list, tuple)):
        items = [encode_value(x) for x in v]
        if any(isinstance(x, dict) and ("shape" in x or "tuple" in x) for x in items):
            return {"tuple": items}
        # A plain (nested) list of scalars, e.g. img_shapes.
        return {"value": plain(v)}
    if isinstance(v, dict):
        return {"value": {str(k): plain(x) for k, x in v.items()}}
    return {"value": type(v).__name__}


def plain(v):
    import torch
    if isinstance(v, torch.Tensor):
        return "tensor" + str(list(v.shape))
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return type(v).__name__


def encode_outputs(out):
    """Outputs as a list: a tensor is one output, a tuple/list one per element, a dataclass-like
    ModelOutput one per field (in field order)."""
    import torch
    if isinstance(out, torch.Tensor):
        return [encode_value(out)]
    if isinstance(out, (list, tuple)):
        return [encode_value(x) for x in out]
    if isinstance(out, dict):  # diffusers BaseOutput is an OrderedDict
        return [encode_value(x) for x in out.values()]
    if out is None:
        return []
    return [encode_value(out)]


# ----------------------------------------------------------------------------------------------
# Module tree

def module_attrs(mod):
    """A few integer attributes the compiler checks: Linear widths, attention heads, conv kernels,
    and fused-weight block sizes (diffusers' `_tp_packed_{row,col}_blocks`)."""
    import torch.nn as nn
    a = OrderedDict()
    if isinstance(mod, nn.Linear):
        a["in_features"] = mod.in_features
        a["out_features"] = mod.out_features
        a["bias"] = mod.bias is not None
    if isinstance(mod, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        a["in_channels"] = mod.in_channels
        a["out_channels"] = mod.out_channels
        a["kernel_size"] = list(mod.kernel_size)
        a["stride"] = list(mod.stride)
    for src, dst in (("_tp_packed_row_blocks", "tp_packed_row_blocks"),
                     ("_tp_packed_col_blocks", "tp_packed_col_blocks")):
        val = getattr(mod, src, None)
        if val is not None:
            a[dst] = [int(x) for x in val]
    if is_attention(mod):
        heads = getattr(mod, "heads", None)
        if heads is not None:
            a["heads"] = int(heads)
    return a


def is_attention(mod):
    try:
        from diffusers.models.attention import AttentionModuleMixin
        from diffusers.models.attention_processor import Attention, MochiAttention
    except ImportError:  # pragma: no cover
        return False
    # MochiAttention is a plain nn.Module of its own (its processor calls SDPA once per sample).
    return isinstance(mod, (AttentionModuleMixin, Attention, MochiAttention))


def signature_of(cls):
    """Forward arguments in positional order (without self) and which of them have defaults."""
    try:
        sig = inspect.signature(cls.forward)
    except (TypeError, ValueError):
        return {"args": [], "variadic": True}
    args = []
    variadic = False
    for i, (name, p) in enumerate(sig.parameters.items()):
        if i == 0 and name == "self":
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            variadic = True
            continue
        entry = OrderedDict(name=name)
        if p.kind == p.KEYWORD_ONLY:
            entry["keyword_only"] = True
        if p.default is not p.empty:
            entry["optional"] = True
        args.append(entry)
    sig_json = OrderedDict(args=args)
    if variadic:
        sig_json["variadic"] = True
    return sig_json


# ----------------------------------------------------------------------------------------------
# Path compression: list indices with identical content become {a..b} ranges.

def split_path(path):
    return path.split(".") if path else []


def format_indices(values):
    values = sorted(set(values))
    parts = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        if j == i:
            parts.append(str(values[i]))
        elif j == i + 1:
            parts.extend([str(values[i]), str(values[j])])
        else:
            parts.append("%d..%d" % (values[i], values[j]))
        i = j + 1
    if len(parts) == 1 and ".." not in parts[0]:
        return parts[0]
    return "{" + ",".join(parts) + "}"


def compress(entries, list_paths):
    """entries: list of (path, content) with content a JSON-able value. Returns a list of
    (pattern, content) where every path component that indexes a ModuleList (its prefix is in
    list_paths) may be a {a..b,c} set. Merging is exact: a pattern expands to exactly the paths
    that had that content. Order: by first expanded path in the input order."""
    order = {}
    rows = []
    for n, (path, content) in enumerate(entries):
        comps = split_path(path)
        idx_pos = []
        for k in range(len(comps)):
            if ".".join(comps[:k]) in list_paths and comps[k].isdigit():
                idx_pos.append(k)
        key = json.dumps(content, sort_keys=True, separators=(",", ":"))
        row = [comps, idx_pos, key, content, n]
        rows.append(row)
        order[id(row)] = n
    # Represent each row as template comps with sets at index positions.
    items = []
    for comps, idx_pos, key, content, n in rows:
        comps2 = [frozenset([int(c)]) if k in idx_pos else c for k, c in enumerate(comps)]
        items.append((comps2, key, content, n))
    # Merge dimension by dimension, innermost first.
    max_len = max((len(c) for c, _, _, _ in items), default=0)
    for d in reversed(range(max_len)):
        groups = OrderedDict()
        for comps, key, content, n in items:
            if d < len(comps) and isinstance(comps[d], frozenset):
                rest = tuple(c if k != d else None for k, c in enumerate(comps))
                gk = (rest, key, len(comps))
            else:
                gk = (("__solo__", n, d), key, len(comps))
            if gk in groups:
                g = groups[gk]
                g[0][d] = g[0][d] | comps[d]
                g[3] = min(g[3], n)
            else:
                groups[gk] = [list(comps), key, content, n]
        items = [(g[0], g[1], g[2], g[3]) for g in groups.values()]
    items.sort(key=lambda it: it[3])
    out = []
    for comps, key, content, n in items:
        parts = [format_indices(c) if isinstance(c, frozenset) else c for c in comps]
        out.append((".".join(parts), content))
    return out


# ----------------------------------------------------------------------------------------------
# Tracing

class Tracer:
    def __init__(self, model):
        self.model = model
        self.names = {}
        for name, mod in model.named_modules():
            self.names.setdefault(id(mod), name)
        self.calls = OrderedDict()      # path -> [call, ...]
        self.attention = OrderedDict()  # path -> [qkv record, ...]
        self.stack = []
        self.handles = []
        self.sig_cache = {}

    def _bind(self, mod, args, kwargs):
        cls = type(mod)
        if cls not in self.sig_cache:
            try:
                self.sig_cache[cls] = inspect.signature(mod.forward)
            except (TypeError, ValueError):
                self.sig_cache[cls] = None
        sig = self.sig_cache[cls]
        named = OrderedDict()
        if sig is None:
            for i, a in enumerate(args):
                named["arg%d" % i] = a
            named.update(kwargs)
            return named
        try:
            bound = sig.bind_partial(*args, **kwargs)
        except TypeError:
            for i, a in enumerate(args):
                named["arg%d" % i] = a
            named.update(kwargs)
            return named
        for name, val in bound.arguments.items():
            p = sig.parameters[name]
            if p.kind == p.VAR_KEYWORD:
                for k, v in val.items():
                    named[k] = v
            elif p.kind == p.VAR_POSITIONAL:
                for i, v in enumerate(val):
                    named["%s[%d]" % (name, i)] = v
            else:
                named[name] = val
        return named

    def pre(self, mod, args, kwargs):
        path = self.names.get(id(mod), "?")
        named = self._bind(mod, args, kwargs)
        call = OrderedDict()
        call["args"] = OrderedDict((k, encode_value(v)) for k, v in named.items())
        call["positional"] = len(args)
        self.stack.append((path, call))

    def post(self, mod, args, kwargs, output):
        path, call = self.stack.pop()
        call["outputs"] = encode_outputs(output)
        self.calls.setdefault(path, []).append(call)

    def record_attention(self, query, key, value):
        # The innermost attention module on the call stack owns this call.
        site = None
        for path, _ in reversed(self.stack):
            mod = self.model.get_submodule(path) if path else self.model
            if is_attention(mod):
                site = path
                break
        if site is None:
            site = self.stack[-1][0] if self.stack else ""
        self.attention.setdefault(site, []).append(OrderedDict(
            q=list(query.shape), k=list(key.shape), v=list(value.shape)))

    def install(self):
        for mod in self.model.modules():
            self.handles.append(mod.register_forward_pre_hook(self.pre, with_kwargs=True))
            self.handles.append(mod.register_forward_hook(self.post, with_kwargs=True))

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []


@contextlib.contextmanager
def patched_attention(tracer):
    """Wrap dispatch_attention_fn wherever a diffusers module imported it, recording q/k/v; and
    torch's scaled_dot_product_attention for processors that call it directly (CogVideoX), unless
    dispatch_attention_fn is the caller (its native backend), so that no call counts twice."""
    import diffusers.models.attention_dispatch as ad
    import torch.nn.functional as F
    original = ad.dispatch_attention_fn
    original_sdpa = F.scaled_dot_product_attention
    inside_dispatch = [0]

    def wrapper(query, key, value, *args, **kwargs):
        tracer.record_attention(query, key, value)
        inside_dispatch[0] += 1
        try:
            return original(query, key, value, *args, **kwargs)
        finally:
            inside_dispatch[0] -= 1

    def sdpa_wrapper(query, key, value, *args, **kwargs):
        if inside_dispatch[0] == 0 and query.dim() == 4:
            # SDPA takes (B, H, S, D); the records are (B, S, H, D) like dispatch_attention_fn's.
            tracer.record_attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2))
        return original_sdpa(query, key, value, *args, **kwargs)

    F.scaled_dot_product_attention = sdpa_wrapper

    patched = []
    for name, mod in list(sys.modules.items()):
        if name.startswith("diffusers.") and getattr(mod, "dispatch_attention_fn", None) is original:
            setattr(mod, "dispatch_attention_fn", wrapper)
            patched.append(mod)
    try:
        yield
    finally:
        for mod in patched:
            setattr(mod, "dispatch_attention_fn", original)
        F.scaled_dot_product_attention = original_sdpa


@contextlib.contextmanager
def meta_autocast():
    """torch.autocast rejects device_type="meta"; models that open an autocast region on their
    input's device (Helios RoPE) get the CPU one instead, which is equally a no-op here."""
    import torch
    original = torch.autocast

    class MetaAutocast(original):
        def __init__(self, device_type, *args, **kwargs):
            super().__init__("cpu" if device_type == "meta" else device_type, *args, **kwargs)

    torch.autocast = MetaAutocast
    try:
        yield
    finally:
        torch.autocast = original


def _tensors_in(x, out):
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for y in x:
            _tensors_in(y, out)
    elif isinstance(x, dict):
        for y in x.values():
            _tensors_in(y, out)
    return out


@contextlib.contextmanager
def host_values():
    """Run a forward whose heavy tensors are on meta while its few control tensors (masks, index
    lists the forward reads values from) are real CPU tensors.

    Why the traced shapes are exactly those of a real run: a meta kernel never invents a
    data-dependent shape. Every op whose output shape depends on values (nonzero, masked_select,
    indexing with a boolean meta mask, repeat_interleave without output_size, item, tolist, bool)
    raises on meta instead. So each shape is either computed by PyTorch's own meta kernel from
    shapes alone, or computed on the host from the real values of the control tensors, which hold
    what the pipeline would pass. Nothing is guessed; a forward that needs a value that exists
    only on meta fails loudly.

    PyTorch already accepts a CPU index into a meta tensor (`meta[:, cpu_bool]`,
    `meta.repeat_interleave(cpu_repeats)` read the index values on the host). What it rejects is
    an ordinary op mixing devices (`torch.where(cpu_mask, meta_a, meta_b)`). This mode, active
    only around such a forward, intercepts calls that mix meta tensors with CPU tensors of rank
    >= 1 and:
      * leaves indexing (`__getitem__`, `__setitem__`) and `repeat_interleave` to PyTorch, which
        reads the CPU index values; for `__setitem__` it first checks what a real run checks and
        meta's `index_put_` does not: that the value broadcasts to the indexed shape;
      * moves the CPU tensors to meta for any other op: its output shape cannot depend on their
        values (else its meta kernel would raise), so the values are not needed there.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    index_ops = {torch.Tensor.__getitem__, torch.Tensor.__setitem__, torch.Tensor.repeat_interleave,
                 torch.repeat_interleave}

    def to_meta(x):
        if isinstance(x, torch.Tensor) and not x.is_meta and x.dim() > 0:
            return x.to("meta")
        if isinstance(x, (list, tuple)):
            return type(x)(to_meta(y) for y in x)
        if isinstance(x, dict):
            return {k: to_meta(v) for k, v in x.items()}
        return x

    class HostValues(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            ts = _tensors_in((args, kwargs), [])
            if not (any(t.is_meta for t in ts) and any(not t.is_meta and t.dim() > 0 for t in ts)):
                return func(*args, **kwargs)
            if func in index_ops:
                if func is torch.Tensor.__setitem__:
                    target, index, value = args
                    if isinstance(value, torch.Tensor):
                        indexed = tuple(target[index].shape)
                        if torch.broadcast_shapes(tuple(value.shape), indexed) != indexed:
                            raise RuntimeError("shape mismatch: value of shape %s cannot be broadcast to "
                                               "indexing result of shape %s" % (list(value.shape),
                                                                                list(indexed)))
                return func(*args, **kwargs)
            return func(*to_meta(args), **to_meta(kwargs))

    with HostValues():
        yield


# ----------------------------------------------------------------------------------------------
# Config values the plans may name (packed block sizes, widths).

def derived_config(cls_name, cfg, model):
    d = OrderedDict()
    heads = cfg.get("num_attention_heads")
    # Named head_dim by some (ACE-Step), or left to hidden_size / heads (JoyImage, OmniGen).
    head_dim = cfg.get("attention_head_dim") or cfg.get("head_dim")
    if heads and not head_dim and isinstance(cfg.get("hidden_size"), int) and cfg["hidden_size"] % heads == 0:
        head_dim = cfg["hidden_size"] // heads
    if heads and head_dim:
        d["num_attention_heads"] = heads
        d["attention_head_dim"] = head_dim
        d["inner_dim"] = heads * head_dim
    d["hidden_size"] = cfg.get("hidden_size", d.get("inner_dim"))
    for key in ("num_layers", "num_single_layers", "num_refiner_layers", "ffn_dim", "in_channels",
                "out_channels", "joint_attention_dim", "text_dim", "caption_channels",
                "cross_attention_dim", "audio_num_attention_heads", "audio_attention_head_dim",
                "image_dim", "added_kv_proj_dim", "pooled_projection_dim", "audio_in_channels"):
        if isinstance(cfg.get(key), int) and not isinstance(cfg.get(key), bool):
            d[key] = cfg[key]
    if "mlp_ratio" in cfg and d.get("inner_dim"):
        d["mlp_hidden_dim"] = int(d["inner_dim"] * cfg["mlp_ratio"])
    if cls_name == "FluxTransformer2DModel":
        d["mlp_hidden_dim"] = int(d["inner_dim"] * 4.0)
    if "ffn_dim" in cfg:
        d["mlp_hidden_dim"] = cfg["ffn_dim"]
    if cls_name in ("LTXVideoTransformer3DModel", "LTX2VideoTransformer3DModel"):
        d["mlp_hidden_dim"] = d["inner_dim"] * 4
    if cls_name == "LTX2VideoTransformer3DModel":
        d["audio_inner_dim"] = cfg["audio_num_attention_heads"] * cfg["audio_attention_head_dim"]
        d["audio_mlp_hidden_dim"] = d["audio_inner_dim"] * 4
    if cls_name == "QwenImageTransformer2DModel":
        d["mlp_hidden_dim"] = d["inner_dim"] * 4
    if cls_name == "QwenImage21Transformer2DModel":
        d["context_in_dim"] = cfg["context_in_dim"]
    if d.get("hidden_size") is None:
        d.pop("hidden_size")
    return d


# ----------------------------------------------------------------------------------------------
# Attention sites: which forward arguments of the attention module feed Q and K/V.

def attention_site(path, mod, calls, qkv):
    a = OrderedDict(path=path)
    heads = getattr(mod, "heads", None)
    if heads is None and qkv:
        heads = qkv[0]["q"][2]  # (B, S, H, D) at the call: modules that name it otherwise (Kandinsky's num_heads)
    a["heads"] = int(heads) if heads is not None else None
    if qkv:
        a["head_dim"] = int(qkv[0]["q"][3])
    else:
        inner = getattr(mod, "inner_dim", None)
        a["head_dim"] = int(inner // heads) if inner and heads else None
    first = calls[0]["args"] if calls else {}
    ehs = first.get("encoder_hidden_states") is not None and "encoder_hidden_states" in first
    joint = getattr(mod, "add_q_proj", None) is not None
    if ehs and qkv and not joint:
        # One projection over [text | tokens] (CogVideoX's processor concatenates the two streams
        # itself): the queries are as long as both streams together, so the site is joint.
        hs_shape = (first.get("hidden_states") or {}).get("shape")
        ehs_shape = (first.get("encoder_hidden_states") or {}).get("shape")
        if hs_shape and ehs_shape and len(hs_shape) == 3 and len(ehs_shape) == 3:
            joint = int(qkv[0]["q"][1]) == int(hs_shape[1]) + int(ehs_shape[1])
    if joint:
        a["kind"] = "joint"
        a["q"] = ["hidden_states", "encoder_hidden_states"]
        a["kv"] = ["hidden_states", "encoder_hidden_states"]
    elif ehs:
        a["kind"] = "cross"
        a["q"] = ["hidden_states"]
        a["kv"] = ["encoder_hidden_states"]
    else:
        a["kind"] = "self"
        a["q"] = ["hidden_states"]
        a["kv"] = ["hidden_states"]
    return a


# ----------------------------------------------------------------------------------------------

def export(config_path, workload_names=None, device="meta"):
    """device "meta" (the default: no weights, shapes only) or "cpu": seeded random weights and
    random inputs, a real forward. The CPU mode is for small test configs, to check that a meta
    trace equals the trace of a real run (tests/unit/model: tools.export_graph_host_values_exact)."""
    import torch
    import diffusers

    with open(config_path) as f:
        spec = json.load(f, object_pairs_hook=OrderedDict)
    cfg = OrderedDict(spec["config"])
    cls_name = cfg.pop("_class_name")
    cls = getattr(diffusers, cls_name)
    import logging
    logging.getLogger("diffusers").setLevel(logging.ERROR)
    torch.manual_seed(0)
    with torch.device(device):
        model = cls.from_config(dict(cfg))
    model = model.to(torch.bfloat16).eval()
    full_cfg = OrderedDict((k, v) for k, v in model.config.items() if not k.startswith("_"))

    list_paths = set()
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.ModuleList):
            list_paths.add(name)

    # Module tree.
    types = OrderedDict()
    mod_entries = []
    for name, mod in model.named_modules():
        t = type(mod)
        tname = t.__name__
        if tname not in types:
            types[tname] = OrderedDict(module=t.__module__, forward=signature_of(t))
        entry = OrderedDict(type=tname)
        if isinstance(mod, (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)):
            entry["container"] = ("list" if isinstance(mod, torch.nn.ModuleList) else
                                  "dict" if isinstance(mod, torch.nn.ModuleDict) else "sequential")
        children = [c for c, _ in mod.named_children()]
        if children:
            entry["children"] = children
        params = []
        for pname, p in mod.named_parameters(recurse=False):
            params.append(OrderedDict(name=pname, shape=list(p.shape), dtype=dtype_name(p.dtype)))
        for bname, b in mod.named_buffers(recurse=False):
            if b is None:
                continue
            params.append(OrderedDict(name=bname, shape=list(b.shape), dtype=dtype_name(b.dtype),
                                      buffer=True))
        if params:
            entry["params"] = params
        attrs = module_attrs(mod)
        if attrs:
            entry["attrs"] = attrs
        mod_entries.append((name, entry))

    # Workloads.
    workloads = []
    sites = OrderedDict()
    output_counts = {}  # type name -> set of output counts seen
    for wl in spec["workloads"]:
        if workload_names and wl["name"] not in workload_names:
            continue
        with torch.device(device):
            inputs = make_inputs(cls_name, cfg, wl, EmptyFactory(torch.bfloat16))
        for x in _tensors_in(inputs, []):
            if x.is_floating_point() and not x.is_meta:
                x.normal_()
        host = device == "meta" and any(not x.is_meta for x in _tensors_in(inputs, []))
        tracer = Tracer(model)
        tracer.install()
        try:
            with torch.no_grad(), patched_attention(tracer), meta_autocast(), \
                    (host_values() if host else contextlib.nullcontext()):
                model(**inputs, return_dict=False)
        finally:
            tracer.remove()
        for path, recs in tracer.attention.items():
            mod = model.get_submodule(path) if path else model
            if path not in sites and is_attention(mod):
                sites[path] = attention_site(path, mod, tracer.calls.get(path, []), recs)
        for path, calls in tracer.calls.items():
            tname = type(model.get_submodule(path) if path else model).__name__
            for c in calls:
                output_counts.setdefault(tname, set()).add(len(c["outputs"]))
        trace = compress([(p, c) for p, c in tracer.calls.items()], list_paths)
        attn = compress([(p, r) for p, r in tracer.attention.items()], list_paths)
        w = OrderedDict(name=wl["name"])
        w["params"] = OrderedDict((k, v) for k, v in wl.items() if k != "name")
        w["calls"] = [OrderedDict(module=p, calls=c) for p, c in trace]
        w["attention"] = [OrderedDict(site=p, calls=c) for p, c in attn]
        workloads.append(w)

    # Attention modules that never ran (e.g. unused branches) still count as sites.
    for name, mod in model.named_modules():
        if is_attention(mod) and name not in sites:
            sites[name] = attention_site(name, mod, [], [])
            sites[name]["traced"] = False

    # A forward returns a fixed number of outputs when every traced call agreed.
    for tname, counts in output_counts.items():
        if len(counts) == 1:
            types[tname]["forward"]["outputs"] = next(iter(counts))
    modules = [OrderedDict([("path", p)] + list(e.items()))
               for p, e in compress(mod_entries, list_paths)]
    site_list = [OrderedDict([("path", p)] + list(e.items()))
                 for p, e in compress([(p, OrderedDict((k, v) for k, v in s.items() if k != "path"))
                                       for p, s in sites.items()], list_paths)]

    graph = OrderedDict()
    graph["format"] = FORMAT
    graph["model"] = OrderedDict(name=spec["name"], class_name=cls_name, source=spec.get("source", ""),
                                 config=full_cfg)
    graph["producer"] = OrderedDict(tool="tools/export_graph.py", diffusers=diffusers.__version__,
                                    torch=torch.__version__.split("+")[0])
    graph["config"] = derived_config(cls_name, cfg, model)
    graph["types"] = types
    graph["modules"] = modules
    graph["attention_sites"] = site_list
    graph["workloads"] = workloads
    return graph


def dump(graph, fp):
    """JSON with one module / call entry per line: diffable and still small."""
    def one(v):
        return json.dumps(v, separators=(", ", ": "))

    fp.write("{\n")
    keys = list(graph.keys())
    for i, k in enumerate(keys):
        v = graph[k]
        sep = "," if i + 1 < len(keys) else ""
        if k in ("modules", "attention_sites"):
            fp.write('  "%s": [\n' % k)
            fp.write(",\n".join("    " + one(x) for x in v))
            fp.write("\n  ]%s\n" % sep)
        elif k == "types":
            fp.write('  "types": {\n')
            fp.write(",\n".join("    %s: %s" % (json.dumps(n), one(t)) for n, t in v.items()))
            fp.write("\n  }%s\n" % sep)
        elif k == "workloads":
            fp.write('  "workloads": [\n')
            parts = []
            for w in v:
                s = '    {"name": %s, "params": %s,\n' % (json.dumps(w["name"]), one(w["params"]))
                s += '     "calls": [\n' + ",\n".join("      " + one(c) for c in w["calls"]) + "\n     ],\n"
                s += '     "attention": [\n' + ",\n".join("      " + one(c) for c in w["attention"]) + "\n     ]}"
                parts.append(s)
            fp.write(",\n".join(parts))
            fp.write("\n  ]%s\n" % sep)
        else:
            fp.write("  %s: %s%s\n" % (json.dumps(k), one(v), sep))
    fp.write("}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="*", help="tools/model_configs/<name>.json")
    ap.add_argument("-o", "--output", help="output file (one config only); default graphs/<name>.graph.json")
    ap.add_argument("--all", action="store_true", help="every config in tools/model_configs")
    ap.add_argument("--workload", action="append", help="only these workloads (by name)")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "graphs"))
    ap.add_argument("--device", choices=("meta", "cpu"), default="meta",
                    help="meta (default): shapes only, no weights; cpu: a real forward with random "
                         "weights, to check a small config's meta trace against a real run")
    args = ap.parse_args()
    configs = list(args.config)
    if args.all:
        d = os.path.join(HERE, "model_configs")
        configs += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".json"))
    if not configs:
        ap.error("give a config or --all")
    if args.output and len(configs) != 1:
        ap.error("-o needs exactly one config")
    for c in configs:
        graph = export(c, args.workload, args.device)
        out = args.output or os.path.join(args.out_dir, graph["model"]["name"] + ".graph.json")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as fp:
            dump(graph, fp)
        print("%s: %d module entries, %d attention site entries, %d workloads, %d bytes" % (
            out, len(graph["modules"]),
            len(graph["attention_sites"]), len(graph["workloads"]), os.path.getsize(out)),
            file=sys.stderr)


if __name__ == "__main__":
    main()
