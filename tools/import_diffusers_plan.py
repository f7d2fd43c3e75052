#!/usr/bin/env python3
"""Print a diffusers model class's parallelism plans as a weft plan (DSL).

Reads the class attributes `_cp_plan` (context parallelism) and `_tp_plan` (tensor
parallelism) of the installed diffusers and translates them:

  _cp_plan["mod"] = {"arg": ContextParallelInput(d, e)}   ->  split "mod" arg dim d rank e
  _cp_plan["mod"] = {"arg": [CPInput, CPInput]}           ->  split "mod" { arg[0] ... arg[1] ... }
  _cp_plan["mod"] = {0: ContextParallelInput(d, e, True)} ->  split "mod" output 0 dim d rank e
  _cp_plan["mod"] = ContextParallelOutput(d, e) (or list) ->  gather "mod" output i dim d rank e
  _tp_plan["glob"] = "colwise" | "rowwise"                ->  colwise "glob" | rowwise "glob"
  PackedColwiseParallel(blocks) / PackedRowwiseParallel   ->  ... packed [blocks]

Packed styles without explicit blocks take them from the `_tp_packed_{col,row}_blocks`
assignment in the model's source, with sizes named by graph config values
(`inner_dim`, `mlp_hidden_dim`) where the source uses them.

Gathers and tensor-parallel rules that differ only in one path segment are merged into
one glob (`blocks.{0..39}.{attn1,ffn}`, `attn.{to_q,to_k}`); splits are kept one rule per
diffusers key, in order. diffusers' `expected_dims` becomes a strict `rank`: diffusers
skips a split silently when the rank differs, weft reports it unless the rule says
`optional` -- add `optional` by hand where the model relies on skipping (Wan's timestep).

  .venv/bin/python tools/import_diffusers_plan.py FluxTransformer2DModel --name flux > plans/flux.weft
  .venv/bin/python tools/import_diffusers_plan.py --list
  .venv/bin/python tools/import_diffusers_plan.py --all --out-dir /tmp/imported   # every class
"""
import argparse
import ast
import inspect
import re
import sys
from collections import OrderedDict

# Source spellings of packed block sizes -> graph config names (tools/export_graph.py).
CONFIG_NAMES = {
    "dim": "inner_dim",
    "inner_dim": "inner_dim",
    "self.inner_dim": "inner_dim",
    "mlp_hidden_dim": "mlp_hidden_dim",
    "self.mlp_hidden_dim": "mlp_hidden_dim",
}


def load_diffusers():
    try:
        import diffusers  # noqa: F401
        import diffusers.models.transformers as transformers
        from diffusers.models import _modeling_parallel as mp
        from diffusers.hooks import tensor_parallel as tp
    except ImportError as e:
        sys.exit(f"import_diffusers_plan: cannot import diffusers ({e}); use the project venv")
    return diffusers, transformers, mp, tp


def classes_with_plans(transformers):
    out = []
    for name in sorted(dir(transformers)):
        cls = getattr(transformers, name, None)
        if isinstance(cls, type) and (getattr(cls, "_cp_plan", None) or getattr(cls, "_tp_plan", None)):
            out.append(name)
    return out


# Plan names of plans/ (where the mechanical rule below reads worse).
KNOWN_NAMES = {
    "ChronoEditTransformer3DModel": "chronoedit",
    "LTXVideoTransformer3DModel": "ltx",
    "LTX2VideoTransformer3DModel": "ltx2",
    "MiniMaxH3Transformer3DModel": "minimax_h3",
    "QwenImageTransformer2DModel": "qwenimage",
    "QwenImage21Transformer2DModel": "qwenimage21",
}


def default_name(class_name):
    if class_name in KNOWN_NAMES:
        return KNOWN_NAMES[class_name]
    name = re.sub(r"Transformer\dDModel$|Model$", "", class_name)
    return re.sub(r"[^a-z0-9_]", "", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower())


def quote(pattern):
    return '"' + pattern + '"'


def fields(dim, expected_dims):
    text = f"dim {dim}"
    if expected_dims is not None:
        text += f" rank {expected_dims}"
    return text


# ---- packed block sizes -----------------------------------------------------------------

def eval_blocks(node, env):
    """Evaluates a block-size expression to a list of names/ints, or raises ValueError."""
    if isinstance(node, ast.List):
        out = []
        for element in node.elts:
            out.extend(eval_blocks(element, env))
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return eval_blocks(node.left, env) + eval_blocks(node.right, env)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for seq, count in ((node.left, node.right), (node.right, node.left)):
            if isinstance(seq, ast.List):
                n = eval_int(count, env)
                return eval_blocks(seq, env) * n
        raise ValueError("unsupported product")
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return [node.value]
    text = ast.unparse(node)
    if text in CONFIG_NAMES:
        return [CONFIG_NAMES[text]]
    raise ValueError(f"unknown block size `{text}`")


def eval_int(node, env):
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    text = ast.unparse(node)
    if text in env:
        return env[text]
    raise ValueError(f"unknown factor `{text}`")


def init_defaults(class_node):
    """`self.x` -> int for attributes assigned from __init__ parameters with int defaults."""
    env = {}
    for item in class_node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            args = item.args.args[-len(item.args.defaults):] if item.args.defaults else []
            params = {}
            for arg, default in zip(args, item.args.defaults):
                if isinstance(default, ast.Constant) and isinstance(default.value, int):
                    params[arg.arg] = default.value
            for stmt in ast.walk(item):
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                    target = ast.unparse(stmt.targets[0])
                    if isinstance(stmt.value, ast.Name) and stmt.value.id in params:
                        env[target] = params[stmt.value.id]
            env.update(params)
    return env


def packed_blocks_from_source(model_cls, path, kind):
    """Block sizes of `path` (`..._tp_packed_{kind}_blocks = ...` in the model's module)."""
    attr = f"_tp_packed_{kind}_blocks"
    leaf = path.split(".")[-1]
    try:
        tree = ast.parse(inspect.getsource(inspect.getmodule(model_cls)))
    except (OSError, TypeError):
        return None, "source not available"
    for class_node in [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]:
        for node in ast.walk(class_node):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            target = ast.unparse(node.targets[0])
            if target == f"self.{leaf}.{attr}":
                try:
                    return eval_blocks(node.value, init_defaults(class_node)), ast.unparse(node.value)
                except ValueError as e:
                    return None, f"{ast.unparse(node.value)} ({e})"
    return None, f"no `{attr}` assignment for `{leaf}`"


# ---- rules ------------------------------------------------------------------------------

def cp_rules(model_cls, mp):
    """(kind, pattern, [item text]) for each _cp_plan entry, in order."""
    rules = []
    for key, value in (model_cls._cp_plan or {}).items():
        if isinstance(value, dict):
            items = []
            for arg, spec in value.items():
                if isinstance(spec, (list, tuple)):
                    for i, element in enumerate(spec):
                        if element.split_output:
                            continue  # diffusers skips these for tuple arguments
                        items.append(f"{arg}[{i}]  " + fields(element.split_dim, element.expected_dims))
                elif isinstance(arg, int):
                    items.append(f"output {arg}  " + fields(spec.split_dim, spec.expected_dims))
                else:
                    items.append(f"{arg}  " + fields(spec.split_dim, spec.expected_dims))
            rules.append(("split", key, items))
        else:
            outputs = value if isinstance(value, (list, tuple)) else [value]
            items = [f"output {i}  " + fields(o.gather_dim, o.expected_dims) for i, o in enumerate(outputs)]
            rules.append(("gather", key, items))
    return rules


def compress_ranges(entries):
    """Merges entries (pattern, payload) whose patterns differ in one integer segment,
    contiguous and with equal payloads, into `{m..n}`."""
    groups = OrderedDict()
    for pattern, payload in entries:
        parts = pattern.split(".")
        placed = False
        for i, part in enumerate(parts):
            if part.isdigit():
                template = ".".join(parts[:i] + ["#"] + parts[i + 1:])
                groups.setdefault((template, i, payload), []).append(int(part))
                placed = True
                break
        if not placed:
            groups.setdefault((pattern, -1, payload), []).append(None)
    out = []
    for (template, i, payload), numbers in groups.items():
        if i < 0:
            out.append((template, payload))
            continue
        numbers = sorted(set(numbers))
        if len(numbers) > 1 and numbers == list(range(numbers[0], numbers[-1] + 1)):
            out.append((template.replace("#", f"{{{numbers[0]}..{numbers[-1]}}}"), payload))
        else:
            out.extend((template.replace("#", str(n)), payload) for n in numbers)
    return out


def merge_last_segment(entries):
    """Merges entries that differ only in their last path segment (equal payloads) into an
    alternation `prefix.{a,b}`, keeping first-seen order."""
    groups = OrderedDict()
    for pattern, payload in entries:
        prefix, _, last = pattern.rpartition(".")
        if "{" in last or not prefix:
            groups.setdefault((pattern, None, payload), []).append(None)
        else:
            groups.setdefault((prefix, "", payload), []).append(last)
    out = []
    for (prefix, marker, payload), lasts in groups.items():
        if marker is None:
            out.append((prefix, payload))
        elif len(lasts) == 1:
            out.append((f"{prefix}.{lasts[0]}", payload))
        else:
            out.append((f"{prefix}.{{{','.join(lasts)}}}", payload))
    return out


def tp_rules(model_cls, tp):
    entries = []
    notes = []
    for key, style in (getattr(model_cls, "_tp_plan", None) or {}).items():
        if isinstance(style, str):
            entries.append((key, style))
            continue
        kind = "col" if isinstance(style, tp.PackedColwiseParallel) else "row"
        word = "colwise" if kind == "col" else "rowwise"
        blocks = style.blocks
        source = None
        if blocks is None:
            blocks, source = packed_blocks_from_source(model_cls, key, kind)
        if blocks is None:
            notes.append(f"{word} \"{key}\": packed blocks unknown: {source}")
            continue
        text = f"{word} packed [{', '.join(str(b) for b in blocks)}]"
        entries.append((key, text))
    return merge_last_segment(entries), notes


def render(class_name, name, diffusers, transformers, mp, tp):
    model_cls = getattr(transformers, class_name, None)
    if model_cls is None:
        sys.exit(f"import_diffusers_plan: diffusers {diffusers.__version__} has no `{class_name}`")
    out = [f"# {class_name}: imported from diffusers {diffusers.__version__} by tools/import_diffusers_plan.py",
           f"plan {name} for {class_name}"]
    rules = cp_rules(model_cls, mp)
    if rules:
        out += ["", "context_parallel {"]
        gathers = [(pattern, tuple(items)) for kind, pattern, items in rules if kind == "gather"]
        merged_gathers = merge_last_segment(compress_ranges(gathers))
        emitted_gathers = False
        for kind, pattern, items in rules:
            if kind == "gather":
                if emitted_gathers:
                    continue
                emitted_gathers = True
                for g_pattern, g_items in merged_gathers:
                    out += rule_lines("gather", g_pattern, list(g_items))
            else:
                out += rule_lines("split", pattern, items)
        out.append("}")
    tp_entries, notes = tp_rules(model_cls, tp)
    if tp_entries or notes:
        out += ["", "tensor_parallel {"]
        for note in notes:
            out.append(f"  # TODO {note}")
        for pattern, text in tp_entries:
            word, _, packed = text.partition(" ")
            out.append(f"  {word} {quote(pattern)}" + (f" {packed}" if packed else ""))
        out.append("}")
    return "\n".join(out) + "\n"


def rule_lines(kind, pattern, items):
    if len(items) == 1:
        target, _, rest = items[0].partition("  ")
        return [f"  {kind} {quote(pattern)} {target} {rest.strip()}"]
    width = max(len(item.partition("  ")[0]) for item in items)
    lines = [f"  {kind} {quote(pattern)} {{"]
    for item in items:
        target, _, rest = item.partition("  ")
        lines.append(f"    {target.ljust(width)}  {rest.strip()}")
    lines.append("  }")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_class", nargs="?", help="diffusers model class, e.g. FluxTransformer2DModel")
    ap.add_argument("--name", help="plan name ([a-z0-9_]); default from the class name")
    ap.add_argument("--list", action="store_true", help="list the classes that carry a plan")
    ap.add_argument("--all", action="store_true", help="import every class that carries a plan")
    ap.add_argument("--out-dir", help="with --all: write <name>.weft files here")
    args = ap.parse_args()
    diffusers, transformers, mp, tp = load_diffusers()
    if args.list:
        for name in classes_with_plans(transformers):
            print(name)
        return
    if args.all:
        if not args.out_dir:
            ap.error("--all needs --out-dir")
        import os
        os.makedirs(args.out_dir, exist_ok=True)
        for class_name in classes_with_plans(transformers):
            name = default_name(class_name)
            with open(os.path.join(args.out_dir, name + ".weft"), "w") as f:
                f.write(render(class_name, name, diffusers, transformers, mp, tp))
            print(f"{class_name} -> {name}.weft")
        return
    if not args.model_class:
        ap.error("give a MODEL_CLASS or --list")
    name = args.name or default_name(args.model_class)
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        ap.error(f"plan name `{name}` must match [a-z_][a-z0-9_]*")
    sys.stdout.write(render(args.model_class, name, diffusers, transformers, mp, tp))


if __name__ == "__main__":
    main()
