#!/usr/bin/env python3
"""The Python half of the GPU kit (bench/gpu/run.sh calls it; see the README's GPU kit section).

  kit.py selftest
      weft's seeded weights as computed here (torch integer ops, any device) against an
      independent pure-Python computation; exit 1 on any difference.
  kit.py diffusers --model flux-dev --device cuda --dtype bf16 --seed 0 --workdir W \\
                   [--iters 10] [--warmup 2] [--save-weights]
      diffusers' model at the config `weft-run --model` runs (its tools/model_configs file) with
      the weights weft-run gives the same model for `--seed` (bit for bit: see seeded_values),
      seeded inputs at the config's first workload (weft-run's default), `--warmup` untimed and
      `--iters` timed eager forwards;
      writes W/inputs.safetensors, W/diffusers_out.safetensors, W/diffusers.json (and with
      --save-weights W/weights.safetensors, for weft-run --weights).
  kit.py compare --ref A.safetensors --out B.safetensors [--tolerance 2e-2]
      max |B - A| and its ratio to max |A| (key "output"); prints one JSON line; exit 1 above
      the tolerance (relative to max |A|) or on a shape mismatch or NaN.
  kit.py program-batch1 P.pt2
      exit 0 when the exported program takes batch 1 (its first input's batch is the constant 1).
  kit.py line env|model|program|mesh ...
      run.sh's one-line summary of a measurement from the JSON files above and weft-run's
      --report (and, with --weft-log, whether weft-run exported its program first), and its
      record appended to --results. A measurement that is missing is named as FAILED.
  kit.py report-check R.json [--want-check]
      exit 0 when weft-run's --report R.json holds a latency (and, with --want-check, a --check
      result that passed); else names what is missing and exits 1.
  kit.py report-program R.json
      prints the program file weft-run's --report names (exit 1 when it names none).

Every model runs in weft as an exported program (weft-run --model exports it once into the
program cache, with tools/export_program.py, before loading; that export is not timed).
Timing is what weft-run does: wall time of one forward, the device synchronised after it,
median over the timed iterations. Peak memory is torch.cuda.max_memory_allocated from the
moment the model is on the device (weights included), as weft-run's report counts it
(`peak_cuda_allocated_bytes`, rank 0's on a mesh).
"""

import argparse
import json
import math
import os
import pathlib
import re
import shutil
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent

# Kit model name -> (tools/model_configs file, weft-run --model).
MODELS = {
    "flux-dev": ("flux1-dev.json", "flux:dev"),
    "flux-tiny": ("flux-tiny.json", "flux:tiny"),
    "wan-14b": ("wan2.1-t2v-14b.json", "wan:14b"),
    "wan-tiny": ("wan-tiny.json", "wan:tiny"),
}

# ----------------------------------------------------------------------------------------------
# weft's seeded weights (runtime/nn/load_weights.h SeededValues): element i of parameter `fqn`
# is scale * u_i, u_i = (splitmix64(splitmix64(seed ^ fnv1a64(fqn)) + i) >> 40) * 2^-23 - 1, all
# exact in fp32; scale = 0.5 for 0/1-D parameters, else fp32(1 / sqrt(numel / shape[0])).
# weft-run seeds its random weights with 1000 + --seed. Computed here with int64 tensor ops on
# the model's device (a 12B-parameter model in seconds on a GPU): int64 arithmetic wraps like
# uint64, and logical right shifts are arithmetic shifts masked to the remaining bits.

_M64 = (1 << 64) - 1


def _signed(x):
    x &= _M64
    return x - (1 << 64) if x >> 63 else x


_C1, _C2, _C3 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _splitmix64_int(x):
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _fnv1a64(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & _M64
    return h


def _lsr(z, k):
    return (z >> k) & ((1 << (64 - k)) - 1)


def _splitmix64_tensor(x):
    z = x + _C1
    z = (z ^ _lsr(z, 30)) * _C2
    z = (z ^ _lsr(z, 27)) * _C3
    return z ^ _lsr(z, 31)


def _scale(shape):
    import numpy as np
    n = math.prod(shape) if shape else 1
    if len(shape) <= 1:
        return float(np.float32(0.5))
    return float(np.float32(1.0 / math.sqrt(n // max(1, shape[0]))))


def seeded_values(fqn, shape, seed, device="cpu", chunk=1 << 26):
    """fp32 tensor of `shape` on `device` holding weft's SeededValues(fqn, shape, seed)."""
    import torch
    shape = tuple(shape)
    n = math.prod(shape) if shape else 1
    base = _splitmix64_int((seed ^ _fnv1a64(fqn)) & _M64)
    scale = _scale(shape)
    out = torch.empty(n, dtype=torch.float32, device=device)
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        idx = torch.arange(start, stop, dtype=torch.int64, device=device) + _signed(base)
        u = _lsr(_splitmix64_tensor(idx), 40).to(torch.float32) * (1.0 / 8388608.0) - 1.0
        out[start:stop] = u * scale
    return out.reshape(shape)


def seeded_value_int(fqn, shape, seed, i):
    """Element i of the same values, from Python integers and one fp32 rounding (the reference)."""
    import numpy as np
    bits = _splitmix64_int((_splitmix64_int((seed ^ _fnv1a64(fqn)) & _M64) + i) & _M64)
    u = np.float32(bits >> 40) * np.float32(1.0 / 8388608.0) - np.float32(1.0)
    return float(np.float32(u) * np.float32(_scale(tuple(shape))))


def cmd_selftest(args):
    import torch
    cases = [("transformer_blocks.0.attn.to_q.weight", (48, 32)), ("proj_out.bias", (16,)),
             ("blocks.3.scale_shift_table", (1, 6, 64)), ("x", ()), ("time_text_embed.linear_1.weight", (7, 1000))]
    bad = 0
    for seed in (1000, 1007):
        for name, shape in cases:
            got = seeded_values(name, shape, seed, device=args.device, chunk=97).cpu().reshape(-1)
            n = got.numel()
            for i in sorted(i for i in {0, 1, n // 2, n - 1} | set(range(0, n, max(1, n // 13))) if i < n):
                want = seeded_value_int(name, shape, seed, i)
                if got[i].item() != want:
                    bad += 1
                    print(f"selftest: {name}{list(shape)} seed {seed} element {i}: {got[i].item()!r} != {want!r}")
    # Where tools/diffusers_models.py has the same values, agree with it too.
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from diffusers_models import seeded_values as tools_values
    except ImportError:
        tools_values = None
    if tools_values is not None:
        for name, shape in cases:
            if not torch.equal(seeded_values(name, shape, 1000, device=args.device).cpu(), tools_values(name, shape, 1000)):
                bad += 1
                print(f"selftest: {name}{list(shape)} differs from tools/diffusers_models.py seeded_values")
    print(json.dumps({"kind": "selftest", "device": args.device, "mismatches": bad,
                      "tools_reference": tools_values is not None}))
    return 1 if bad else 0


# ----------------------------------------------------------------------------------------------
# The diffusers side.

def load_spec(model):
    spec = json.loads((ROOT / "tools" / "model_configs" / MODELS[model][0]).read_text())
    config = {k: v for k, v in spec["config"].items() if not k.startswith("_")}
    return spec["config"]["_class_name"], config, spec["workloads"][0]


def make_inputs(cls_name, config, wl, seed, dtype):
    """Forward arguments at workload `wl`, as a pipeline would pass them: seeded normal latents
    and text states rounded to `dtype`, the timestep in fp32 (weft-run keeps it as given), Flux's
    position ids as its pipeline lays them out."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    text = wl.get("text_len", 512)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    if cls_name == "FluxTransformer2DModel":
        h, w = wl["height"] // 16, wl["width"] // 16
        rows, cols = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        inputs = {
            "hidden_states": randn(1, h * w, config["in_channels"]),
            "encoder_hidden_states": randn(1, text, config["joint_attention_dim"]),
            "pooled_projections": randn(1, config.get("pooled_projection_dim", 768)),
            "timestep": torch.tensor([0.5], dtype=torch.float32),
            "img_ids": torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3).float(),
            "txt_ids": torch.zeros(text, 3),
        }
        if config.get("guidance_embeds", False):
            inputs["guidance"] = torch.tensor([3.5], dtype=torch.float32)
        return inputs
    if cls_name == "WanTransformer3DModel":
        frames = (wl["frames"] - 1) // 4 + 1
        return {
            "hidden_states": randn(1, config["in_channels"], frames, wl["height"] // 8, wl["width"] // 8),
            "timestep": torch.tensor([500.0], dtype=torch.float32),
            "encoder_hidden_states": randn(1, text, config["text_dim"]),
        }
    raise SystemExit(f"kit.py: no inputs for {cls_name}")


def build_model(cls_name, config, seed, device, dtype):
    """The model on `device` with weft's seeded weights, in `dtype` as diffusers'
    from_pretrained(torch_dtype=dtype) leaves it: parameters under _keep_in_fp32_modules stay
    fp32, buffers (computed at construction) untouched."""
    import diffusers
    import torch
    cls = getattr(diffusers, cls_name)
    with torch.device(device):
        model = cls(**config).eval()
    keep = set(type(model)._keep_in_fp32_modules or [])
    with torch.no_grad():
        for name, p in model.named_parameters():
            target = torch.float32 if keep & set(name.split(".")) else dtype
            p.data = seeded_values(name, p.shape, seed, device=device).to(target)
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()
    return model


def synchronize(device):
    import torch
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def cmd_diffusers(args):
    import torch
    from safetensors.torch import save_file
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    device = torch.device(args.device)
    cls_name, config, wl = load_spec(args.model)
    result = {"kind": "diffusers", "model": args.model, "workload": wl["name"], "device": args.device,
              "dtype": args.dtype, "seed": args.seed, "ok": False}
    t0 = time.time()
    inputs = make_inputs(cls_name, config, wl, 7 + args.seed, dtype)
    save_file({k: v.contiguous() for k, v in inputs.items()}, str(work / "inputs.safetensors"))
    model = build_model(cls_name, config, 1000 + args.seed, device, dtype)
    result["build_s"] = round(time.time() - t0, 2)
    result["parameters"] = sum(p.numel() for p in model.parameters())
    if args.save_weights:
        need = sum(p.numel() * p.element_size() for p in model.parameters())
        free = shutil.disk_usage(work).free
        if free < need * 1.05 + 2**30:
            raise SystemExit(f"kit.py: {work} has {free / 2**30:.1f} GiB free; the weights file needs "
                             f"{need / 2**30:.1f} GiB (pass run.sh --workdir on a larger disk)")
        t1 = time.time()
        # weft-run --weights casts what it loads to --dtype; the values are the seeded fp32 ones
        # rounded as above.
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()
                   if not any(k == b for b, _ in model.named_buffers())}, str(work / "weights.safetensors"))
        result["save_weights_s"] = round(time.time() - t1, 2)
    dev_inputs = {k: v.to(device) for k, v in inputs.items()}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    latencies = []
    with torch.inference_mode():
        for _ in range(args.warmup):
            out = model(**dev_inputs, return_dict=False)[0]
        synchronize(device)
        for _ in range(args.iters):
            start = time.perf_counter()
            out = model(**dev_inputs, return_dict=False)[0]
            synchronize(device)
            latencies.append((time.perf_counter() - start) * 1e3)
    save_file({"output": out.float().cpu().contiguous()}, str(work / "diffusers_out.safetensors"))
    result.update(ok=True, latency_ms={"median": statistics.median(latencies), "min": min(latencies),
                                       "max": max(latencies), "all": latencies, "iters": args.iters,
                                       "warmup": args.warmup},
                  output_shape=list(out.shape), output_max_abs=float(out.float().abs().max()),
                  output_nan=bool(torch.isnan(out).any()))
    if device.type == "cuda":
        result["peak_cuda_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        result["gpu"] = torch.cuda.get_device_name(device)
    result["torch"] = torch.__version__
    import diffusers
    result["diffusers"] = diffusers.__version__
    (work / "diffusers.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "latency_ms"} |
                     {"median_ms": result["latency_ms"]["median"]}))
    return 0


def cmd_compare(args):
    import torch
    from safetensors.torch import load_file
    ref = load_file(args.ref)["output"].double()
    out = load_file(args.out)["output"].double()
    result = {"kind": "compare", "ref": os.path.basename(args.ref), "out": os.path.basename(args.out),
              "tolerance": args.tolerance}
    if ref.shape != out.shape:
        result.update(passed=False, error=f"shape {list(out.shape)} vs reference {list(ref.shape)}")
    else:
        diff = float((out - ref).abs().max())
        scale = float(ref.abs().max())
        rel = diff / max(scale, 1e-30)
        nan = bool(torch.isnan(out).any() or torch.isnan(ref).any())
        result.update(max_abs=diff, max_ref=scale, rel=rel, nan=nan, passed=(not nan and rel <= args.tolerance))
    print(json.dumps(result))
    return 0 if result["passed"] else 1


def cmd_program_batch1(args):
    """Exit 0 when the program's first tensor input has batch size exactly 1 (torch.export
    specialised it), so batch-1 inputs fit; 1 when the batch is symbolic (an export at batch >= 2
    refuses 1) or the archive cannot be read."""
    import zipfile
    try:
        with zipfile.ZipFile(args.program) as z:
            name = next(n for n in z.namelist() if n.endswith("models/model.json"))
            model = json.loads(z.read(name))
        graph = model["graph_module"]["graph"]
        specs = model["graph_module"]["signature"]["input_specs"]
        first = next(s["user_input"]["arg"]["as_tensor"]["name"] for s in specs
                     if "user_input" in s and "as_tensor" in s["user_input"]["arg"])
        dim0 = graph["tensor_values"][first]["sizes"][0]
    except (OSError, KeyError, StopIteration, ValueError, zipfile.BadZipFile) as e:
        print(f"kit.py: cannot read the input sizes of {args.program}: {e!r}")
        return 1
    ok = dim0 == {"as_int": 1}
    print(f"{args.program}: {first} batch {dim0}: {'batch 1 fits' if ok else 'not batch 1'}")
    return 0 if ok else 1


# ----------------------------------------------------------------------------------------------
# One summary line per measurement (run.sh pastes them into summary.txt) and its JSON record.

def _load(path):
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return None


def _ms(x):
    return f"{x:.1f} ms" if x >= 10 else f"{x:.2f} ms"


def _gib(b):
    return f"{b / 2**30:.1f} GiB"


def _bytes(b):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.1f} {unit}"
    return f"{b} B"


def _weft_peak(report):
    """weft-run's peak GPU memory: `peak_cuda_allocated_bytes` (this weft-run: rank 0's), or the
    per-rank list an older report had."""
    report = report or {}
    peaks = report.get("peak_cuda_allocated_bytes_per_rank") or []
    if peaks:
        return max(peaks)
    return report.get("peak_cuda_allocated_bytes")


def _export_note(log):
    """What weft-run's log says of its program: exported first (and in how long), or cached."""
    try:
        text = pathlib.Path(log).read_text(errors="replace")
    except (OSError, TypeError):
        return None
    m = re.search(r"weft-run: exported in ([0-9.]+) s", text)
    if m:
        return f"program exported first in {m.group(1)} s, not timed"
    if re.search(r"weft-run: .*program .*loaded in", text):
        return "program from the cache"
    return None


def _compare_text(cmp, what):
    if cmp is None:
        return f"no {what} comparison (an output is missing)"
    if cmp.get("error"):
        return f"{what}: {cmp['error']} -> FAILED"
    verdict = "ok" if cmp["passed"] else "ABOVE"
    return (f"max|{what}| {cmp['max_abs']:.2e} = {cmp['rel']:.1e} x max|ref| {cmp['max_ref']:.3g}"
            f"{' (NaN!)' if cmp.get('nan') else ''} ({verdict} at {cmp['tolerance']:g})")


def line_env(args):
    e = _load(args.json) or {}
    if e.get("gpus"):
        gpu = f"{e['gpus']} x {e['gpu']} ({e['gpu_memory_bytes'] / 2**30:.0f} GiB)"
    else:
        gpu = "no GPU"
    return f"env: {gpu}; torch {e.get('torch')} (CUDA {e.get('cuda')});", None


def line_model(args):
    w = pathlib.Path(args.workdir)
    d, r, cmp = _load(w / "diffusers.json"), _load(w / "weft.json"), _load(w / "compare.json")
    parts, rec = [], {"kind": "model", "label": args.label, "weights": args.weights}
    dm = d["latency_ms"]["median"] if d and d.get("ok") else None
    wm = r["latency_ms"]["median"] if r else None
    parts.append(f"weft program {_ms(wm)}" if wm is not None else f"weft program FAILED (exit {args.weft_rc}; steps.log)")
    parts.append(f"diffusers eager {_ms(dm)}" if dm is not None else
                 f"diffusers eager FAILED (exit {args.diffusers_rc}; steps.log)")
    text = ", ".join(parts)
    if wm is not None and dm is not None:
        text += f" -> weft/diffusers {wm / dm:.2f}x (target <= 0.8)"
        rec["ratio"] = wm / dm
    text += "; " + _compare_text(cmp, "weft - diffusers")
    peaks = []
    if _weft_peak(r) is not None:
        peaks.append(f"weft {_gib(_weft_peak(r))}")
    if d and d.get("peak_cuda_allocated_bytes"):
        peaks.append(f"diffusers {_gib(d['peak_cuda_allocated_bytes'])}")
    if peaks:
        text += "; peak GPU " + ", ".join(peaks)
    n = (r or {}).get("latency_ms", {}).get("iters") or (d or {}).get("latency_ms", {}).get("iters")
    k = (r or {}).get("latency_ms", {}).get("warmup")
    if k is None:
        k = (d or {}).get("latency_ms", {}).get("warmup")
    text += f"; median of {n} after {k} warm-up; weights {args.weights}"
    note = _export_note(args.weft_log)
    if note:
        text += f"; {note}"
        rec["export"] = note
    rec.update(weft=r, diffusers=d, compare=cmp)
    return f"{args.label}: {text}", rec


def line_program(args):
    w = pathlib.Path(args.workdir)
    p, d, r = _load(w / "program.json"), _load(w / "diffusers.json"), _load(w / "weft.json")
    cmp = _load(w / "program_compare.json")
    rec = {"kind": "program", "label": args.label, "weights": args.weights, "program": p, "compare": cmp}
    pm = p["latency_ms"]["median"] if p and "latency_ms" in p else None
    if pm is None:
        return f"{args.label}: weft --program FAILED (exit {args.weft_rc}; steps.log)", rec
    text = f"weft --program {_ms(pm)}"
    if d and d.get("ok"):
        text += f" -> {pm / d['latency_ms']['median']:.2f}x diffusers eager"
        rec["ratio_diffusers"] = pm / d["latency_ms"]["median"]
    if r and "latency_ms" in r:
        text += f", {pm / r['latency_ms']['median']:.2f}x weft --model"
        rec["ratio_model"] = pm / r["latency_ms"]["median"]
    text += "; " + _compare_text(cmp, "program - diffusers")
    if _weft_peak(p) is not None:
        text += f"; peak GPU {_gib(_weft_peak(p))}"
    return f"{args.label}: {text}; weights {args.weights}", rec


def line_mesh(args):
    r, base = _load(args.report), _load(args.baseline)
    rec = {"kind": "mesh", "label": args.label, "report": r}
    if not r:
        return f"{args.label}: FAILED (exit {args.rc}; steps.log)", rec
    m = r["latency_ms"]["median"]
    text = f"median {_ms(m)}"
    if base and "latency_ms" in base:
        text += f" = {m / base['latency_ms']['median']:.2f}x one rank ({_ms(base['latency_ms']['median'])})"
        rec["ratio_one"] = m / base["latency_ms"]["median"]
    chk = r.get("check")
    if chk:
        text += (f"; --check {'passed' if chk['passed'] else 'FAILED'}: max rel {chk['max_rel_error']:.1e}"
                 f" (tolerance {chk['tolerance']:g})")
    else:
        text += "; no --check result -> FAILED"
    if args.rc:
        text += f"; exit {args.rc}"
    if _weft_peak(r) is not None:
        text += f"; peak GPU {_gib(_weft_peak(r))}" + ("/rank" if r.get("peak_cuda_allocated_bytes_per_rank") else " (rank 0)")
    coll = r.get("collectives_per_forward") or []
    if coll:
        text += "; " + ", ".join(f"{c['axis']} {c['op']} x{c['calls']} {_bytes(c['bytes_sent'])}" for c in coll)
    return f"{args.label}: {text}", rec


def cmd_report_check(args):
    r = _load(args.report)
    missing = []
    if not r:
        missing.append("no readable report")
    else:
        if "latency_ms" not in r:
            missing.append("no latency_ms")
        if args.want_check:
            chk = r.get("check")
            if not chk:
                missing.append("no check result")
            elif not chk.get("passed"):
                missing.append(f"check failed (max rel {chk.get('max_rel_error')}, tolerance {chk.get('tolerance')})")
    if missing:
        print(f"kit.py: {args.report}: {'; '.join(missing)}")
        return 1
    return 0


def cmd_report_program(args):
    r = _load(args.report) or {}
    program = r.get("program")
    if not program or not os.path.isfile(program):
        print(f"kit.py: {args.report} names no program file", file=sys.stderr)
        return 1
    print(program)
    return 0


def cmd_line(args):
    text, rec = {"env": line_env, "model": line_model, "program": line_program, "mesh": line_mesh}[args.kind](args)
    print(text)
    if rec is not None and args.results:
        with open(args.results, "a") as f:
            f.write(json.dumps(rec) + "\n")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("selftest")
    st.add_argument("--device", default="cpu")
    d = sub.add_parser("diffusers")
    d.add_argument("--model", choices=sorted(MODELS), required=True)
    d.add_argument("--device", default="cuda")
    d.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--workdir", required=True)
    d.add_argument("--iters", type=int, default=10)
    d.add_argument("--warmup", type=int, default=2)
    d.add_argument("--save-weights", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("--ref", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--tolerance", type=float, default=2e-2)
    pb = sub.add_parser("program-batch1")
    pb.add_argument("program")
    ln = sub.add_parser("line")
    ln.add_argument("kind", choices=["env", "model", "program", "mesh"])
    ln.add_argument("--json")
    ln.add_argument("--label", default="")
    ln.add_argument("--workdir")
    ln.add_argument("--weights", default="?")
    ln.add_argument("--diffusers-rc", type=int, default=0)
    ln.add_argument("--weft-rc", type=int, default=0)
    ln.add_argument("--report")
    ln.add_argument("--baseline")
    ln.add_argument("--rc", type=int, default=0)
    ln.add_argument("--weft-log")
    ln.add_argument("--results")
    rc = sub.add_parser("report-check")
    rc.add_argument("report")
    rc.add_argument("--want-check", action="store_true")
    rp = sub.add_parser("report-program")
    rp.add_argument("report")
    args = ap.parse_args()
    return {"selftest": cmd_selftest, "diffusers": cmd_diffusers, "compare": cmd_compare,
            "line": cmd_line, "program-batch1": cmd_program_batch1, "report-check": cmd_report_check,
            "report-program": cmd_report_program}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
