#!/usr/bin/env python3
"""Export a diffusers transformer once as a torch.export program that weft runs in C++.

  tools/export_program.py tools/model_configs/flux1-dev.json --workload 1024x1024 -o flux1-dev.pt2
  tools/export_program.py --model-dir DIR --inputs I.safetensors -o M.pt2
  tools/export_program.py tools/model_configs/flux-tiny.json --workload 128x128 --batch 2 --dtype bf16 -o f.pt2

The model is built with its parameters on the meta device (no weights are read; they come from
the checkpoint by name when weft runs the program) but its buffers real: buffers and lifted constants
(Wan's RoPE tables, QwenImage's complex frequencies) are derived from the config and are not in
checkpoints. The parameters are then handed to torch.export as fake tensors, so the archive holds
no parameter bytes (their entries are empty; names, shapes and dtypes stay in the weights index).

The export runs non-strict at one set of example inputs -- a named workload of the config, or an
inputs file -- with every dimension of every tensor input and every integer argument marked
`Dim.AUTO`: torch.export keeps dynamic what the model lets vary (tokens, frames, batch >= 2) and
specialises the rest (channels). Example sizes of 1 are specialised (torch's 0/1 rule), so the
batch stays 1 unless --batch >= 2. `scaled_dot_product_attention` stays one node (no decompositions).
Every module's call signature is preserved, so weft sees each module's inputs and outputs.

Inputs files are safetensors keyed by forward-argument name; non-tensor arguments (ints, floats,
lists and tuples such as QwenImage's `img_shapes` or LTX's `num_frames`) are one JSON object under
the metadata key `weft.args`. A tensor inside a list, tuple or dict argument (ZImage's list of
latents `x`, a (cos, sin) RoPE tuple) is an entry of its own named by its path -- `x[0]`,
`video_rotary_emb[1]`, `added_cond_kwargs['resolution']` -- and the rest of the argument, if any,
is JSON with null where the tensors go. `weft-run --inputs` reads the same file.

Besides torch's own entries, the archive carries `extra/weft.json` (format `weft.program/1`): the
model class and config, the named config values plans use, each module class's forward signature,
the module tree with containers and attributes, the dtype, every workload of the config as
concrete input shapes, so `weft check --program` can evaluate the program's symbolic sizes at
each, and the sizes of the inputs the model's own code fixed while torch traced it, with the line
that fixed each (`fixed_sizes`; also printed after the export: ZImage's `len(tensor)` makes its
token counts constants). torch writes stack traces into every node; they are dropped (they name this machine's paths)
and the entries are deflated. See compiler/program/README.md for what weft reads.
"""

import argparse
import builtins
import contextlib
import functools
import io
import json
import logging
import math
import os
import re
import sys
import time
import zipfile
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from diffusers_models import RandomFactory, make_inputs  # noqa: E402

FORMAT = "weft.program/1"
ARGS_KEY = "weft.args"
DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


# ----------------------------------------------------------------------------------------------
# Building the model: parameters on meta, buffers real.

@contextlib.contextmanager
def parameters_on_meta():
    """Every parameter a module registers goes to the meta device; buffers stay where they are made."""
    import torch
    original = torch.nn.Module.register_parameter

    def register(self, name, param):
        if param is not None and not param.is_meta:
            param = torch.nn.Parameter(param.to("meta"), requires_grad=param.requires_grad)
        original(self, name, param)

    torch.nn.Module.register_parameter = register
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original


def build_model(cls_name, cfg, dtype):
    """The model as from_pretrained(torch_dtype=dtype) leaves it: parameters in `dtype` except those
    of `_keep_in_fp32_modules`, buffers as computed at construction. Parameters are meta tensors."""
    import torch
    import diffusers
    cls = getattr(diffusers, cls_name, None)
    if cls is None:
        raise SystemExit("export_program: diffusers %s has no class %s" % (diffusers.__version__, cls_name))
    with parameters_on_meta():
        model = cls.from_config(dict(cfg)).eval()
    keep = set(cls._keep_in_fp32_modules or [])
    for name, p in list(model.named_parameters()):
        want = torch.float32 if keep & set(name.split(".")) else dtype
        if p.dtype != want:
            mod_name, _, pname = name.rpartition(".")
            mod = model.get_submodule(mod_name)
            mod._parameters[pname] = torch.nn.Parameter(p.to(want), requires_grad=False)
    return model


def fake_parameters(model):
    """Replaces every parameter by a fake CPU tensor of the same shape and dtype (no storage), and
    returns the fake mode torch.export must trace in."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    for mod in model.modules():
        for name, p in list(mod._parameters.items()):
            if p is None:
                continue
            fake = FakeTensor(mode, torch.empty(p.shape, dtype=p.dtype, device="meta"), torch.device("cpu"))
            mod._parameters[name] = torch.nn.Parameter(fake, requires_grad=False)
    return mode


# ----------------------------------------------------------------------------------------------
# Shims that keep symbolic sizes symbolic. Python-level casts in a forward (`int(n)`,
# `torch.as_tensor(n)`, `max(h, w)`) turn a symbolic size into a constant and the program into one
# for that size only. Each shim is active only during the export and only changes what happens to a
# SymInt; plain Python numbers go to the builtin unchanged.

def _int_keeping_symbols(x, *args):
    import torch
    if isinstance(x, torch.SymInt) and not args:
        return x
    return builtins.int(x, *args)


def _max_keeping_symbols(*args, **kwargs):
    import torch
    values = tuple(args[0]) if len(args) == 1 else args
    if not kwargs and any(isinstance(v, torch.SymInt) for v in values):
        return functools.reduce(torch.sym_max, values)
    return builtins.max(*args, **kwargs)


# diffusers module -> names its forward code looks up globally, and the shim for each.
MODULE_SHIMS = {
    # QwenEmbedRope: int(max_txt_seq_len) and max(height // 2, width // 2, ...).
    "diffusers.models.transformers.transformer_qwenimage": {"int": _int_keeping_symbols, "max": _max_keeping_symbols},
}


def _cogvideox_positional_embeddings(self, sample_height, sample_width, sample_frames, device=None):
    """CogVideoXPatchEmbed._get_positional_embeddings without writing through `.data` (which
    torch.export lifts to a constant whose values the fake tensors of the export never had): the
    text rows' zeros and the sin-cos table of the video's patches, concatenated."""
    import torch
    from diffusers.models.embeddings import get_3d_sincos_pos_embed
    frames = (sample_frames - 1) // self.temporal_compression_ratio + 1
    table = get_3d_sincos_pos_embed(self.embed_dim, (sample_width // self.patch_size, sample_height // self.patch_size),
                                    frames, self.spatial_interpolation_scale, self.temporal_interpolation_scale,
                                    device=device, output_type="pt").flatten(0, 1)
    text = table.new_zeros(self.max_text_seq_length, self.embed_dim)
    return torch.cat([text, table]).unsqueeze(0)


def _omnigen_scaled_rope(self, hidden_states, position_ids):
    """OmniGenSuScaledRotaryEmbedding.forward with its choice of frequency factors a select on the
    tensor, not a Python branch on its value (which torch.export cannot trace): the long factors
    where the largest position reaches past the original context, the short ones otherwise. cos and
    sin of the first row's positions times those frequencies (each angle one product, as the
    original's outer product computes it), scaled by sqrt(1 + log(scale) / log(original context))
    when the context was extended."""
    import torch
    device = hidden_states.device
    long_factors = torch.tensor(self.long_factor, dtype=torch.float32, device=device)
    short_factors = torch.tensor(self.short_factor, dtype=torch.float32, device=device)
    beyond = position_ids.max() + 1 > self.original_max_position_embeddings
    factors = torch.where(beyond, long_factors, short_factors)
    exponents = torch.arange(0, self.dim, 2, dtype=torch.int64, device=device).float() / self.dim
    inv_freq = 1.0 / (factors * self.base ** exponents)
    angles = position_ids[0].float()[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    scale = self.max_position_embeddings / self.original_max_position_embeddings
    magnitude = 1.0 if scale <= 1.0 else math.sqrt(1 + math.log(scale) / math.log(self.original_max_position_embeddings))
    return emb.cos() * magnitude, emb.sin() * magnitude


def _hidream_moe_dense(self, x, flat_expert_indices, flat_expert_weights):
    """MOEFeedForwardSwiGLU.moe_infer without its `.numpy()` of the tokens each expert got (a count
    torch.export cannot trace): every expert runs on every token and its output is weighted by the
    gate's weight for that token, zero where the expert was not among the token's top k. Each
    token's sum is the original's (the same products, added in expert order from zero); the
    program computes all experts, not only the chosen ones. The sum starts from zeros_like(x), which
    follows x's token split, not from a tensor sized by x's full token count."""
    import torch
    k = self.num_activated_experts
    chosen = flat_expert_indices.view(-1, k)
    weights = flat_expert_weights.view(-1, k)
    out = torch.zeros_like(x)
    for i, expert in enumerate(self.experts):
        weight = (weights * (chosen == i).to(weights.dtype)).sum(dim=-1, keepdim=True)
        out = out + expert(x) * weight
    return out


def _uncached(module, cls, method):
    """The function under a functools.lru_cache method: the cache hashes its arguments, and a
    symbolic size is unhashable (`unhashable type: non-nested SymInt`)."""
    import importlib
    return getattr(getattr(importlib.import_module(module), cls), method).__wrapped__


# (diffusers module, class, method) -> the method used during the export (a function, or a
# callable of the three names that returns it).
METHOD_SHIMS = {
    ("diffusers.models.embeddings", "CogVideoXPatchEmbed", "_get_positional_embeddings"): _cogvideox_positional_embeddings,
    ("diffusers.models.transformers.transformer_nucleusmoe_image", "NucleusMoEEmbedRope", "_compute_video_freqs"):
        _uncached,
    ("diffusers.models.transformers.transformer_omnigen", "OmniGenSuScaledRotaryEmbedding", "forward"): _omnigen_scaled_rope,
    ("diffusers.models.transformers.transformer_hidream_image", "MOEFeedForwardSwiGLU", "moe_infer"): _hidream_moe_dense,
}


@contextlib.contextmanager
def symbolic_shims():
    import importlib
    import torch
    restore = []
    for mod_name, names in MODULE_SHIMS.items():
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue
        for name, shim in names.items():
            restore.append((mod, name, mod.__dict__.get(name, None), name in mod.__dict__))
            setattr(mod, name, shim)
    for (mod_name, cls_name, method), shim in METHOD_SHIMS.items():
        try:
            owner = getattr(importlib.import_module(mod_name), cls_name)
        except (ImportError, AttributeError):
            continue
        restore.append((owner, method, owner.__dict__.get(method), method in owner.__dict__))
        setattr(owner, method, shim(mod_name, cls_name, method) if shim is _uncached else shim)
    as_tensor = torch.as_tensor

    def as_tensor_keeping_symbols(data, dtype=None, device=None):
        # compute_text_seq_len_from_mask: torch.as_tensor(text_seq_len) of a symbolic length.
        if isinstance(data, torch.SymInt):
            return torch.full((), data, dtype=dtype or torch.int64, device=device)
        return as_tensor(data, dtype=dtype, device=device)

    torch.as_tensor = as_tensor_keeping_symbols
    try:
        yield
    finally:
        torch.as_tensor = as_tensor
        for mod, name, old, had in restore:
            if had:
                setattr(mod, name, old)
            else:
                delattr(mod, name)


# ----------------------------------------------------------------------------------------------
# Inputs

LEAF_PATH = re.compile(r"\[(\d+)\]|\['([^']*)'\]")


def leaf_path(key):
    """`x[0]['a']` -> ("x", [0, "a"]); a plain name -> (name, [])."""
    at = key.find("[")
    if at < 0:
        return key, []
    steps, pos = [], at
    while pos < len(key):
        m = LEAF_PATH.match(key, pos)
        if not m:
            raise SystemExit("export_program: input entry %r: expected [N] or ['key'] at %r" % (key, key[pos:]))
        steps.append(int(m.group(1)) if m.group(1) is not None else m.group(2))
        pos = m.end()
    return key[:at], steps


def place(container, steps, value):
    """Puts `value` at `steps` inside `container`, growing lists and making dicts on the way."""
    for i, step in enumerate(steps):
        if isinstance(step, int):
            while len(container) <= step:
                container.append(None)
        if i == len(steps) - 1:
            container[step] = value
            return
        if (container[step] if isinstance(step, int) else container.get(step)) is None:
            container[step] = [] if isinstance(steps[i + 1], int) else OrderedDict()
        container = container[step]


def read_inputs_file(path):
    """Arguments by name: the tensor entries (those named by a path, `x[0]`, put back inside their
    list or dict) and the JSON object under `weft.args` (non-tensor arguments)."""
    from safetensors import safe_open
    entries = OrderedDict()
    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
        for key in f.keys():
            entries[key] = f.get_tensor(key)
    args = json.loads(meta[ARGS_KEY], object_pairs_hook=OrderedDict) if ARGS_KEY in meta else {}
    if not isinstance(args, dict):
        raise SystemExit("export_program: %s: metadata %s is not a JSON object" % (path, ARGS_KEY))
    args = OrderedDict((k, plain_dicts(v)) for k, v in args.items())
    tensors = OrderedDict()
    for key, t in entries.items():
        name, steps = leaf_path(key)
        if not steps:
            if name in args:
                raise SystemExit("export_program: %s: %s is both a tensor and in %s" % (path, name, ARGS_KEY))
            tensors[name] = t
            continue
        holder = args if name in args else tensors
        if name not in holder:
            holder[name] = [] if isinstance(steps[0], int) else OrderedDict()
        place(holder[name], steps, t)
    return tensors, args


def split_tensors(name, v, out):
    """`v` with every tensor inside it moved to `out[path]`, None left in its place."""
    import torch
    if isinstance(v, torch.Tensor):
        out[name] = v.contiguous()
        return None
    if isinstance(v, (list, tuple)):
        return [split_tensors("%s[%d]" % (name, i), x, out) for i, x in enumerate(v)]
    if isinstance(v, dict):
        return OrderedDict((k, split_tensors("%s['%s']" % (name, k), x, out)) for k, x in v.items())
    return v


def has_value(v):
    """Whether `v` (a split_tensors skeleton) holds anything but the None of a moved tensor."""
    if isinstance(v, list):
        return any(has_value(x) for x in v)
    if isinstance(v, dict):
        return any(has_value(x) for x in v.values())
    return v is not None


def write_inputs_file(path, kwargs):
    """The inverse of read_inputs_file: tensors as entries (those inside lists and dicts by their
    path), everything else under `weft.args`."""
    import torch
    from safetensors.torch import save_file
    tensors, args = OrderedDict(), OrderedDict()
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            tensors[k] = v.contiguous()
            continue
        before = len(tensors)
        skeleton = split_tensors(k, v, tensors)
        if len(tensors) == before or has_value(skeleton):  # not only tensors (an empty list too)
            args[k] = plain_json(skeleton)
    save_file(dict(tensors), path, metadata={ARGS_KEY: json.dumps(args)} if args else None)


def plain_json(v):
    if isinstance(v, (list, tuple)):
        return [plain_json(x) for x in v]
    if isinstance(v, dict):
        return OrderedDict((str(k), plain_json(x)) for k, x in v.items())
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise SystemExit("export_program: argument value of type %s cannot be written as JSON" % type(v).__name__)


def ordered_kwargs(cls, kwargs):
    """The arguments in forward-signature order (the program's input order follows it)."""
    import inspect
    names = [n for n in inspect.signature(cls.forward).parameters if n != "self"]
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise SystemExit("export_program: %s.forward has no argument %s (it takes %s)" % (
            cls.__name__, ", ".join(unknown), ", ".join(names)))
    return OrderedDict((n, kwargs[n]) for n in names if n in kwargs)


def dynamic_spec(v):
    """Dim.AUTO for every dimension of a tensor and every integer; nested lists/tuples alike."""
    import torch
    from torch.export import Dim
    if isinstance(v, torch.Tensor):
        return {i: Dim.AUTO for i in range(v.dim())} if v.dim() else None
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return Dim.AUTO
    if isinstance(v, (list, tuple)):
        return type(v)(dynamic_spec(x) for x in v)
    if isinstance(v, dict):
        return {k: dynamic_spec(x) for k, x in v.items()}
    return None


def plain_dicts(v):
    """JSON objects as plain dicts (torch.export matches a dynamic-shapes spec by container type)."""
    if isinstance(v, dict):
        return {k: plain_dicts(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain_dicts(x) for x in v]
    return v


def describe_inputs(kwargs):
    """Concrete input shapes (tensors, those inside lists and dicts by their path) and values (the
    rest) of one workload, for the manifest."""
    import torch
    from export_graph import dtype_name
    out = OrderedDict()
    for k, v in kwargs.items():
        if isinstance(v, torch.Tensor):
            out[k] = OrderedDict(shape=list(v.shape), dtype=dtype_name(v.dtype))
            continue
        inner = OrderedDict()
        skeleton = split_tensors(k, v, inner)
        for path, t in inner.items():
            out[path] = OrderedDict(shape=list(t.shape), dtype=dtype_name(t.dtype))
        if not inner or has_value(skeleton):
            out[k] = OrderedDict(value=plain_json(skeleton))
    return out


# ----------------------------------------------------------------------------------------------
# The manifest: what Python knows and the graph does not.

def manifest(name, cls_name, cfg, model, dtype, workloads, source):
    import torch
    import diffusers
    import export_graph as eg
    full_cfg = OrderedDict((k, v) for k, v in model.config.items() if not k.startswith("_"))
    types = OrderedDict()
    modules = []
    attention_types = []
    for path, mod in model.named_modules():
        t = type(mod)
        if t.__name__ not in types:
            types[t.__name__] = OrderedDict(module=t.__module__, forward=eg.signature_of(t))
            if eg.is_attention(mod):
                attention_types.append(t.__name__)
        entry = OrderedDict(path=path, type=t.__name__)
        if isinstance(mod, (torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.Sequential)):
            entry["container"] = ("list" if isinstance(mod, torch.nn.ModuleList) else
                                  "dict" if isinstance(mod, torch.nn.ModuleDict) else "sequential")
        children = [c for c, _ in mod.named_children()]
        if children:
            entry["children"] = children
        attrs = eg.module_attrs(mod)
        if attrs:
            entry["attrs"] = attrs
        modules.append(entry)
    m = OrderedDict()
    m["format"] = FORMAT
    m["model"] = OrderedDict(name=name, class_name=cls_name, source=source, config=full_cfg)
    m["producer"] = OrderedDict(tool="tools/export_program.py", diffusers=diffusers.__version__,
                                torch=torch.__version__.split("+")[0])
    m["dtype"] = eg.dtype_name(dtype)
    m["config"] = eg.derived_config(cls_name, cfg, model)
    m["types"] = types
    m["attention_types"] = attention_types
    m["modules"] = modules
    m["workloads"] = workloads
    return m


# ----------------------------------------------------------------------------------------------
# Writing the archive

def strip_and_deflate(raw, out_path, extra):
    """Rewrites torch's archive: node metadata keeps `nn_module_stack` only, the serialization id
    made reproducible, every entry deflated, `extra/weft.json` added under the archive's root
    folder."""
    src = zipfile.ZipFile(io.BytesIO(raw))
    names = src.namelist()
    root = names[0].split("/")[0]
    tmp = out_path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == root + "/.data/serialization_id":
                # torch writes 20 digits of the records' CRC and 20 that vary from run to run
                # (seen to differ between two machines): keep the CRC, so a re-export is byte
                # for byte the same.
                data = data[:20] + b"0" * max(0, len(data) - 20)
            if info.filename.startswith(root + "/models/") and info.filename.endswith(".json"):
                program = json.loads(data)
                for node in program["graph_module"]["graph"]["nodes"]:
                    meta = node.get("metadata") or {}
                    node["metadata"] = {k: v for k, v in meta.items() if k == "nn_module_stack"}
                data = json.dumps(program, separators=(",", ":")).encode()
            dst.writestr(zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0)), data,
                         compress_type=zipfile.ZIP_DEFLATED)
        dst.writestr(zipfile.ZipInfo(root + "/extra/weft.json", date_time=(1980, 1, 1, 0, 0, 0)),
                     json.dumps(extra, indent=1) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    os.replace(tmp, out_path)


def _is_constant(a):
    """A leaf a preserved call signature can hold: a tensor or a plain Python constant."""
    import torch
    return a is None or isinstance(a, (torch.Tensor, str, bool, int, float)) and not isinstance(
        a, (torch.SymInt, torch.SymFloat, torch.SymBool))


@contextlib.contextmanager
def preserving_signatures(bypassed):
    """torch.export preserves a module's call signature by passing its flattened arguments through
    a tracepoint, which takes tensors and Python constants only: a module called with a symbolic
    size (LTX's rope gets num_frames, QwenImage's pos_embed the text length) or a device cannot be
    preserved, and torch raises without naming it. This wrapper (active during the export) passes
    those leaves around the tracepoint instead, so the module keeps a signature whose inputs are
    its tensors and constants, and records in `bypassed` (path -> leaf positions) which leaves of
    the input spec have no input, so readers can align the rest."""
    import torch
    import torch._export.wrappers as wrappers
    from torch.utils import _pytree as pytree

    def wrap(mod, wrapped_path, module_call_specs):
        submodule = torch.fx.graph_module._get_attr(mod, wrapped_path)
        path = wrapped_path.split("_export_root.", 1)[-1]  # non-strict export wraps the model

        def pre_hook(module, args, kwargs):
            flat, in_spec = pytree.tree_flatten((args, kwargs))
            kept = [i for i, a in enumerate(flat) if _is_constant(a)]
            skipped = [i for i in range(len(flat)) if i not in kept]
            if skipped:
                bypassed[path] = skipped
            traced = wrappers._export_tracepoint(*[flat[i] for i in kept], kind="module_call_inputs", path=wrapped_path)
            for i, v in zip(kept, traced):
                flat[i] = v
            return pytree.tree_unflatten(flat, in_spec)

        def post_hook(module, args, kwargs, result):
            _, in_spec = pytree.tree_flatten((args, kwargs))
            flat, out_spec = pytree.tree_flatten(result)
            flat = list(wrappers._export_tracepoint(*flat, kind="module_call_outputs", path=wrapped_path))
            known = module_call_specs.get(wrapped_path)
            if known is not None and (known["in_spec"] != in_spec or known["out_spec"] != out_spec):
                raise AssertionError("module %s is called twice with different arguments" % path)
            module_call_specs[wrapped_path] = {"in_spec": in_spec, "out_spec": out_spec}
            return pytree.tree_unflatten(flat, out_spec)

        return (submodule.register_forward_pre_hook(pre_hook, with_kwargs=True),
                submodule.register_forward_hook(post_hook, with_kwargs=True))

    original = wrappers._wrap_submodule
    wrappers._wrap_submodule = wrap
    try:
        yield
    finally:
        wrappers._wrap_submodule = original


def unpreservable_modules(model, call, spec, paths):
    """Modules whose call signature cannot be preserved even so, each with the reason: called twice
    with different argument structures (Helios's condition_embedder), or returning something other
    than tensors and constants. Found by one export that records every call of every module instead
    of preserving it; it also records, for every attention module, whether it was called with
    encoder_hidden_states (see below)."""
    import inspect
    import torch
    import torch._export.wrappers as wrappers
    import export_graph as eg
    from torch.utils import _pytree as pytree
    found = OrderedDict()
    specs = {}
    cross = {}  # attention module -> called with encoder_hidden_states

    def record(mod, wrapped_path, module_call_specs):
        submodule = torch.fx.graph_module._get_attr(mod, wrapped_path)
        path = wrapped_path.split("_export_root.", 1)[-1]  # non-strict export wraps the model

        def pre_hook(module, args, kwargs):
            _, in_spec = pytree.tree_flatten((args, kwargs))
            if path in specs and specs[path] != in_spec:
                found.setdefault(path, "called twice with different arguments")
            specs.setdefault(path, in_spec)
            if eg.is_attention(module) and path not in cross:
                try:
                    bound = inspect.signature(module.forward).bind_partial(*args, **kwargs).arguments
                except TypeError:
                    bound = kwargs
                cross[path] = bound.get("encoder_hidden_states") is not None

        def post_hook(module, args, kwargs, result):
            flat, _ = pytree.tree_flatten(result)
            if not all(_is_constant(a) for a in flat):
                found.setdefault(path, "returns a symbolic size or another non-tensor")

        return (submodule.register_forward_pre_hook(pre_hook, with_kwargs=True),
                submodule.register_forward_hook(post_hook, with_kwargs=True))

    original = wrappers._wrap_submodule
    wrappers._wrap_submodule = record
    try:
        torch.export.export(model, (), call, dynamic_shapes=spec, strict=False, preserve_module_call_signature=paths)
    except Exception:  # noqa: BLE001 -- the recording export only has to run the forward
        pass
    finally:
        wrappers._wrap_submodule = original
    # Which inputs feed Q and K/V, by structure as tools/export_graph.py decides it; weft's graph
    # view uses it where an attention module's call signature could not be preserved.
    sites = OrderedDict()
    for path, is_cross in cross.items():
        site = eg.attention_site(path, model.get_submodule(path),
                                 [{"args": {"encoder_hidden_states": {} if is_cross else None}}], [])
        sites[path] = OrderedDict((k, site[k]) for k in ("kind", "q", "kv"))
    return found, sites


@contextlib.contextmanager
def state_kept(model):
    """Undoes, on leaving, what a trace assigned to the model's modules and to the plain objects they
    hold: a table a forward computes on its first call and keeps (BriaFibo2's rope embedder) would be
    a fake tensor of the recording export in the next one, lifted as a constant without data."""
    import torch
    saved = []
    for mod in model.modules():
        saved += [(mod.__dict__, dict(mod.__dict__)), (mod._buffers, dict(mod._buffers))]
        saved += [(v.__dict__, dict(v.__dict__)) for v in mod.__dict__.values()
                  if type(v).__module__.startswith("diffusers.") and not isinstance(v, torch.nn.Module)
                  and hasattr(v, "__dict__")]
    try:
        yield
    finally:
        for live, kept in saved:
            live.clear()
            live.update(kept)


def export(cls_name, cfg, kwargs, dtype, name, workloads, source, out_path):
    import torch
    logging.getLogger("diffusers").setLevel(logging.ERROR)
    model = build_model(cls_name, cfg, dtype)
    kwargs = ordered_kwargs(type(model), kwargs)
    extra = manifest(name, cls_name, cfg, model, dtype, workloads, source)
    mode = fake_parameters(model)
    call = OrderedDict(kwargs)
    call["return_dict"] = False
    spec = OrderedDict((k, dynamic_spec(v)) for k, v in kwargs.items())
    spec["return_dict"] = None
    with symbolic_shims(), mode, torch_log_aside() as torch_log:
        # Tensors inside lists and tuples too (BriaFibo's 46 text_encoder_layers): a real one would be
        # saved with the program as its sample input (2.3 GB for FIBO's at 3000 text tokens).
        fake_call = OrderedDict((k, torch.utils._pytree.tree_map_only(torch.Tensor, mode.from_tensor, v))
                                for k, v in call.items())
        candidates = tuple(p for p, m in model.named_modules()
                           if p and not isinstance(m, (torch.nn.ModuleList, torch.nn.ModuleDict)))
        with state_kept(model):
            unpreserved, attention = unpreservable_modules(model, fake_call, spec, candidates)
        preserve = tuple(p for p in candidates if p not in unpreserved)
        extra["unpreserved"] = unpreserved
        extra["attention"] = attention
        bypassed = OrderedDict()
        start = time.time()
        with preserving_signatures(bypassed):
            try:
                ep = torch.export.export(model, (), fake_call, dynamic_shapes=spec, strict=False,
                                         preserve_module_call_signature=preserve)
            except Exception as e:  # noqa: BLE001 -- said in a few lines, no traceback
                torch_log.keep = True
                raise SystemExit(trace_failure(cls_name, e) + "\n  (torch's own log of the trace: %s)" % torch_log.path)
        extra["bypassed"] = bypassed
        extra["fixed_sizes"] = fixed_sizes(ep)
    seconds = time.time() - start
    serializable_rounding(ep)
    buf = io.BytesIO()
    try:
        torch.export.save(ep, buf)
    except Exception as e:  # noqa: BLE001 -- traced, but torch cannot write a node of it
        first = (str(e).strip().splitlines() or [""])[0]
        raise SystemExit("export_program: torch.export traced %s but cannot serialize it: %s: %s" % (
            cls_name, type(e).__name__, first[:400]))
    strip_and_deflate(buf.getvalue(), out_path, extra)
    return ep, seconds, extra["fixed_sizes"]


def serializable_rounding(ep):
    """Rewrites `math.ceil(x)` and `math.floor(x)` on a symbolic float, which torch.export traces but
    cannot serialize (NucleusMoE's expert capacity, ceil(capacity_factor x tokens / experts)), into
    the operators it can: floor(x) = int(x // 1), ceil(x) = int(-((-x) // 1)). Returns how many."""
    import math
    import operator
    import torch
    graph = ep.graph_module.graph
    rewritten = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (math.ceil, math.floor) or len(node.args) != 1:
            continue
        x = node.args[0]
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else x

        def emit(target, args, value):
            out = graph.call_function(target, args)
            out.meta["val"] = value
            return out

        with graph.inserting_before(node):
            if node.target is math.floor:
                floored = emit(operator.floordiv, (x, 1), val // 1)
                result = emit(torch.sym_int, (floored,), torch.sym_int(val // 1))
            else:
                negated = emit(operator.neg, (x,), -val)
                floored = emit(operator.floordiv, (negated, 1), (-val) // 1)
                back = emit(operator.neg, (floored,), -((-val) // 1))
                result = emit(torch.sym_int, (back,), torch.sym_int(-((-val) // 1)))
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        rewritten += 1
    if rewritten:
        ep.graph_module.recompile()
    return rewritten


def _input_name(source):
    """torch's source of a symbol (`L['cap_feats'][0].size()[0]`) as the input's path reads in weft
    (`cap_feats[0].shape[0]`)."""
    name = re.sub(r"^L\['([^']+)'\]", r"\1", source)
    return re.sub(r"\.size\(\)\[(\d+)\]", r".shape[\1]", name)


def fixed_sizes(ep, limit=16):
    """Sizes of the inputs that the model's own code fixed while torch traced it, each once: an
    expression of input dims (`cap_feats[0].shape[0]`, or ZImage's image tokens
    `(x[0].shape[2]//2)*(x[0].shape[3]//2)`) equated with a constant >= 2 by a guard raised in the
    model's code (torch's own guards are left out), with the file, line and code that raised it.
    The program keeps its guards without their source; weft suggest and weft program say from these
    why a token length is fixed (ZImage reads `len(tensor)`, a Python int)."""
    import sympy
    shape_env = next((n.meta["val"].fake_mode.shape_env for n in ep.graph.nodes
                      if n.op == "placeholder" and getattr(n.meta.get("val"), "fake_mode", None) is not None), None)
    if shape_env is None:
        return []
    inputs = {s: sympy.Symbol(_input_name(srcs[0].name), integer=True, positive=True)
              for s, srcs in shape_env.var_to_sources.items() if srcs}
    found, seen = [], set()
    for guard in shape_env.guards:
        frame = guard.sloc.framework_loc  # the innermost frame outside torch's tracing machinery
        if not isinstance(guard.expr, sympy.Eq) or not hasattr(frame, "filename"):
            continue
        if "%storch%s" % (os.sep, os.sep) in frame.filename:
            continue  # torch's own reasoning (a dim meeting a weight's width, a view's divisibility)
        lhs, rhs = guard.expr.args
        if lhs.is_Integer:
            lhs, rhs = rhs, lhs
        if not rhs.is_Integer or int(rhs) < 2 or not lhs.free_symbols or not lhs.free_symbols <= set(inputs):
            continue
        size = re.sub(r"\(\(([^()]*)\)\)", r"(\1)", str(lhs.xreplace(inputs)))  # sympy's ((a//2))
        if size in seen:
            continue
        seen.add(size)
        path = frame.filename
        path = path[path.rindex("%sdiffusers%s" % (os.sep, os.sep)) + 1:] if "%sdiffusers%s" % (os.sep, os.sep) in path \
            else os.path.basename(path)
        found.append(OrderedDict(size=size, value=int(rhs), at="%s:%d in %s" % (path, frame.lineno, frame.name),
                                 code=(frame.line or "").strip()[:200]))
        if len(found) == limit:
            break
    return found


class _TorchLog:
    path = None
    keep = False


@contextlib.contextmanager
def torch_log_aside():
    """What torch writes to stderr while it traces (on a data-dependent guard, thousands of lines:
    the partial graph, fake-tensor op traces) goes to a file instead; it is kept, and named, only
    when the trace fails."""
    import tempfile
    log = _TorchLog()
    fd, log.path = tempfile.mkstemp(prefix="export_program-", suffix=".log")
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield log
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)
        if not log.keep:
            os.remove(log.path)


def trace_failure(cls_name, e):
    """What stopped torch.export, in a few lines: the exception's first line, then the innermost
    call in diffusers (or torch's functional layer) where it was raised, file:line and the code."""
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    here = [f for f in frames if "/diffusers/" in f.filename]
    first = (str(e).strip().splitlines() or [""])[0]
    lines = ["export_program: torch.export cannot trace %s: %s: %s" % (cls_name, type(e).__name__, first[:400])]
    if here:
        f = here[-1]
        lines.append("  at %s:%d in %s: %s" % (f.filename.split("/diffusers/", 1)[1], f.lineno, f.name,
                                              (f.line or "").strip()[:200]))
    return "\n".join(lines)


def verify_with_weft(out):
    """The program as weft's reader sees it: `weft program OUT` must accept it, else the file is
    removed and the reader's reason is the export's error. Skipped when weft is not built."""
    import subprocess
    weft = os.environ.get("WEFT_BIN") or os.path.join(os.path.dirname(HERE), "build", "compiler", "driver", "weft")
    if not os.path.exists(weft):
        return
    p = subprocess.run([weft, "program", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       errors="replace")
    if p.returncode != 0:
        os.remove(out)
        reason = next((l for l in p.stderr.splitlines() if l.strip()), "exit %d" % p.returncode)
        raise SystemExit("export_program: weft cannot read the program it exported (removed): %s" % reason.strip())


def class_workloads(cls_name, cfg=None):
    """The workloads of the tools/model_configs entries of `cls_name` (the tiny ones first): the
    input sizes a save_pretrained directory, which has no workloads of its own, is exported at.
    With `cfg` (the directory's config, when an inputs file gives the example), only an entry of
    the same model: its config agrees with `cfg` on every key both have -- a published config's
    workloads are no sizes of a shrunk model (SD3 3.5 Large's 1024^2 is above a tiny config's
    position table)."""
    configs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model_configs")
    entries = []
    for file in sorted(os.listdir(configs)) if os.path.isdir(configs) else []:
        try:
            with open(os.path.join(configs, file)) as f:
                spec = json.load(f, object_pairs_hook=OrderedDict)
        except (OSError, ValueError):
            continue
        other = spec.get("config", {})
        if cfg is not None and any(other[k] != v for k, v in cfg.items() if k in other and not k.startswith("_")):
            continue
        if other.get("_class_name") == cls_name and spec.get("workloads"):
            entries.append((not file.endswith("-tiny.json"), file, spec["workloads"]))
    return sorted(entries)[0][2] if entries else []


def load_spec(config=None, model_dir=None, same_model=False):
    """(class name, config without _class_name, name, source, workloads) of a model config file
    (tools/model_configs format) or a save_pretrained directory."""
    if model_dir:
        path = os.path.join(model_dir, "config.json")
        try:
            with open(path) as f:
                cfg = json.load(f, object_pairs_hook=OrderedDict)
        except (OSError, ValueError) as e:
            raise SystemExit("export_program: cannot read %s: %s" % (path, e))
        name, source = os.path.basename(os.path.normpath(model_dir)), path
        workload_specs = class_workloads(cfg.get("_class_name"), cfg if same_model else None)
    else:
        with open(config) as f:
            spec = json.load(f, object_pairs_hook=OrderedDict)
        cfg, name, source = OrderedDict(spec["config"]), spec["name"], spec.get("source", "")
        workload_specs = spec.get("workloads", [])
    cfg = OrderedDict((k, v) for k, v in cfg.items() if not k.startswith("_") or k == "_class_name")
    if "_class_name" not in cfg:
        raise SystemExit("export_program: the config has no _class_name (which diffusers class to build)")
    cls_name = cfg.pop("_class_name")
    return cls_name, cfg, name, source, workload_specs


def manifest_workloads(cls_name, cfg, workload_specs, batch, dtype):
    """Every workload of the config as concrete input shapes, for the manifest."""
    out = []
    for wl in workload_specs:
        wl = dict(wl, batch=wl.get("batch", batch))
        kw = make_inputs(cls_name, cfg, wl, RandomFactory(dtype, 0))
        out.append(OrderedDict(name=wl["name"], params=OrderedDict((k, v) for k, v in wl.items() if k != "name"),
                               inputs=describe_inputs(kw)))
    return out


def same_call(workload, example):
    """Whether a config workload calls the forward as the example does (the same tensors, each of
    the same rank): one that does not -- SkyReels-V2's 1-D timesteps for an example of diffusion
    forcing's per-frame ones -- is no size of this program, so it is left out of the manifest, said so."""
    def ranks(inputs):
        return {k: len(v["shape"]) for k, v in inputs.items() if "shape" in v}
    a, b = ranks(workload["inputs"]), ranks(example)
    if a == b:
        return True
    why = next(("argument `%s` has %d dims there, %d in the example" % (k, a[k], b[k]) for k in a if k in b and a[k] != b[k]),
               "it passes %s, the example %s" % (", ".join(sorted(a)), ", ".join(sorted(b))))
    print("export_program: workload %s of tools/model_configs left out of the manifest: %s" % (workload["name"], why),
          file=sys.stderr)
    return False


def export_config(config, out, workload=None, batch=None, dtype_name="fp32", model_dir=None, inputs=None,
                  write_inputs=None):
    """The command line's job: exports `config` (or `model_dir`) at a workload or an inputs file."""
    import torch
    dtype = getattr(torch, DTYPES[dtype_name])
    cls_name, cfg, name, source, workload_specs = load_spec(config, model_dir, same_model=bool(inputs))
    if inputs:
        tensors, extra_args = read_inputs_file(inputs)
        if batch is None:
            # The config's own workloads are described at the batch of the example, which the
            # program is exported at (a batch of 2 exports a batch dim >= 2; 1 would be below it).
            first = tensors.get("hidden_states")
            batch = int(first.shape[0]) if first is not None and first.dim() >= 2 else 1
    batch = batch or 1
    workloads = manifest_workloads(cls_name, cfg, workload_specs, batch, dtype)
    if inputs:
        kwargs = OrderedDict(list(tensors.items()) + list(extra_args.items()))
        example = describe_inputs(kwargs)
        workloads = [w for w in workloads if same_call(w, example)]
        workloads.insert(0, OrderedDict(name="example", params=OrderedDict(file=os.path.basename(inputs)),
                                        inputs=example))
    else:
        if not workload_specs:
            raise SystemExit("export_program: --model-dir of a %s needs --inputs (no tools/model_configs entry of "
                             "the class has workloads to make inputs at)" % cls_name)
        chosen = workload or workload_specs[0]["name"]
        match = [w for w in workload_specs if w["name"] == chosen]
        if not match:
            raise SystemExit("export_program: no workload %s; the config has %s" % (
                chosen, ", ".join(w["name"] for w in workload_specs)))
        wl = dict(match[0], batch=match[0].get("batch", batch))
        kwargs = make_inputs(cls_name, cfg, wl, RandomFactory(dtype, 0))
    if write_inputs:
        write_inputs_file(write_inputs, kwargs)
    ep, seconds, fixed = export(cls_name, cfg, kwargs, dtype, name, workloads, source, out)
    verify_with_weft(out)
    nodes = sum(1 for n in ep.graph.nodes if n.op == "call_function")
    print("%s: %s, %d nodes, %d dynamic sizes, exported in %.1f s, %d bytes" % (
        out, cls_name, nodes, len(ep.range_constraints), seconds, os.path.getsize(out)), file=sys.stderr)
    for f in fixed[:3]:
        print("  the forward fixed %s = %d at %s: %s" % (f["size"], f["value"], f["at"], f["code"]), file=sys.stderr)
    if len(fixed) > 3:
        print("  ... and %d more sizes fixed (weft program %s lists them)" % (len(fixed) - 3, out), file=sys.stderr)
    return ep, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", nargs="?", help="tools/model_configs/<name>.json (class, config and workloads)")
    ap.add_argument("--model-dir", help="a diffusers save_pretrained directory (its config.json)")
    ap.add_argument("--inputs", help="example inputs: safetensors by argument name, non-tensors under weft.args")
    ap.add_argument("--workload", help="example inputs at this workload of the config (default: its first)")
    ap.add_argument("--batch", type=int, help="batch of a workload's inputs (>= 2 keeps it dynamic; default 1, with "
                    "--inputs the batch of its hidden_states)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    ap.add_argument("--write-inputs", help="also write the example inputs to this safetensors file")
    ap.add_argument("-o", "--output", required=True, help="the program, M.pt2")
    args = ap.parse_args()
    if bool(args.config) == bool(args.model_dir):
        ap.error("give a model config or --model-dir (exactly one)")
    export_config(args.config, args.output, args.workload, args.batch, args.dtype, args.model_dir, args.inputs,
                  args.write_inputs)


if __name__ == "__main__":
    main()
