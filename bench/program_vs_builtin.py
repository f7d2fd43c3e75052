#!/usr/bin/env python3
"""A torch.export program run by weft's interpreter against weft's hand-written Flux or Wan
(issues 13, 24).

    .venv/bin/python bench/program_vs_builtin.py [--model flux|wan] [--mesh M] [--iters 5] [--warmup 1] [--repeat 3] [--flux-dev]

--model wan: diffusers' WanTransformer3DModel at weft's `small` config (tools/model_configs/
wan-small.json: 2 blocks, 8 heads x 64), 9 frames at 256x256 (3 x 16 x 16 = 768 video tokens),
256 text tokens, the same seeded weights scheme; the built-in side runs `--model wan:small`.

Same model, seeded weights and inputs as bench/flux_e2e.py (diffusers' FluxTransformer2DModel at
weft's `small` config, 1024 image + 256 text tokens, batch 1, fp32, CPU, one rank). It exports the
program once (tools/export_program.py --inputs, export time reported), then alternates --repeat
times

    weft-run --model flux:small --nproc 1 --mesh ulysses=1 --weights W --inputs I ...   (built-in)
    weft-run --program P --weights W --inputs I ...                                     (program)

and prints, per side, the median and best latency over every timed iteration of every repeat,
peak RSS (ru_maxrss: runtime, weights, packed weight copies, activations), and the max abs
difference of each output from diffusers' own output; then the ratios program / built-in (issue
13's targets: latency <= 1.10x, peak RSS <= 1.10x). With --flux-dev it also exports Flux.1-dev's
program (bf16, 1024x1024) and times how long weft takes to make it runnable without weights
(bench/program_bench/program_load_bench; target <= 2 s).
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from flux_e2e import ROOT, default_weft_run, fmt, loadavg, make_fixture, max_abs, run, start, tail  # noqa: E402


def export(config, out, log, timeout, extra):
    cmd = [sys.executable, str(ROOT / "tools" / "export_program.py"), str(config), "-o", str(out)] + extra
    t0 = time.time()
    rc, _ = run(cmd, log, timeout)
    return rc, time.time() - t0


def make_wan_fixture(out_dir, seed):
    """diffusers' Wan at tools/model_configs/wan-small.json, weights as flux_e2e.make_fixture seeds them."""
    import torch
    from diffusers import WanTransformer3DModel
    from safetensors.torch import save_file
    sys.path.insert(0, str(ROOT / "tools"))
    from diffusers_models import RandomFactory, make_inputs
    spec = json.loads((ROOT / "tools" / "model_configs" / "wan-small.json").read_text())
    config = {k: v for k, v in spec["config"].items() if not k.startswith("_")}
    model = WanTransformer3DModel(**config).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):
            scale = 0.5 if p.dim() == 1 else 1.0 / max(1, p.shape[-1]) ** 0.5
            p.copy_(torch.randn(p.shape, generator=gen) * scale)
    inputs = make_inputs("WanTransformer3DModel", spec["config"], dict(spec["workloads"][0], batch=1),
                         RandomFactory(torch.float32, seed + 1))
    paths = {"weights": out_dir / "weights.safetensors", "inputs": out_dir / "inputs.safetensors",
             "reference": out_dir / "reference.safetensors"}
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(paths["weights"]))
    save_file({k: v.contiguous() for k, v in inputs.items()}, str(paths["inputs"]))
    with torch.no_grad():
        ref = model(**inputs, return_dict=False)[0]
    save_file({"output": ref.contiguous()}, str(paths["reference"]))
    return paths, sum(p.numel() for p in model.parameters())


def load_bench(weft_run, program, log, timeout):
    bench = pathlib.Path(weft_run).resolve().parent.parent / "bench" / "program_bench" / "program_load_bench"
    if not bench.exists():
        return None
    rc, _ = run([str(bench), str(program), "--iters", "3"], log, timeout)
    if rc != 0:
        return None
    for line in open(log):
        if line.startswith("{"):
            return json.loads(line)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=2024, help="same default as flux_e2e.py: the same weights")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (default: cores / ranks)")
    ap.add_argument("--mesh", default="", help="run both sides on this mesh (e.g. ulysses=2; the program with "
                    "the class's plan compiled in), default one rank")
    ap.add_argument("--model", choices=["flux", "wan"], default="flux")
    ap.add_argument("--flux-dev", action="store_true", help="also export Flux.1-dev's program and time its load")
    ap.add_argument("--weft-run", default=default_weft_run())
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--workdir", default="", help="keep fixtures and logs here (default: a temp dir, removed)")
    ap.add_argument("--json", default="", help="also write the results as JSON to this file")
    args = ap.parse_args()

    cores, work = start(args, "weft-program-bench-")
    ranks = 1
    for axis in filter(None, args.mesh.split(",")):
        ranks *= int(axis.split("=")[1])
    threads = args.threads or max(1, cores // ranks)
    paths, nparams = make_fixture(work, args.seed) if args.model == "flux" else make_wan_fixture(work, args.seed)
    program = work / f"{args.model}-small.pt2"
    rc, export_s = export(ROOT / "tools" / "model_configs" / f"{args.model}-small.json", program, work / "export.log",
                          args.timeout, ["--inputs", str(paths["inputs"])])
    if rc != 0:
        print("export failed:\n" + tail(work / "export.log", 20))
        return 1
    print(f"# {args.model}:small, {nparams} parameters; program exported in {export_s:.1f} s "
          f"({os.path.getsize(program)} bytes); load {loadavg()}", flush=True)
    common = ["--weights", str(paths["weights"]), "--inputs", str(paths["inputs"]), "--iters", str(args.iters),
              "--warmup", str(args.warmup), "--threads", str(threads)]
    mesh = args.mesh or "ulysses=1"
    sides = {
        "built-in": [args.weft_run, "--model", f"{args.model}:small"] +
                    (["--graph", "graphs/flux-small.graph.json", "--workload", "512x512"] if args.model == "flux"
                     else ["--workload", "256x256x9"]) + ["--nproc", str(ranks), "--mesh", mesh] + common,
        "program": [args.weft_run, "--program", str(program)] + (["--mesh", args.mesh] if args.mesh else []) + common,
    }
    results = {name: {"rss": [], "medians": [], "diff": None, "errors": []} for name in sides}
    loads = [loadavg()]
    for rep in range(args.repeat):
        for name, cmd in sides.items():
            report, out = work / f"{name}_{rep}.json", work / f"{name}_{rep}.out.safetensors"
            full = cmd + ["--report", str(report), "--output", str(out)]
            rc, wall = run(full, work / f"{name}_{rep}.log", args.timeout)
            r = results[name]
            if rc != 0 or not report.exists():
                r["errors"].append(f"rc={rc}: " + tail(work / f"{name}_{rep}.log"))
                continue
            rep_json = json.loads(report.read_text())
            lat = rep_json["latency_ms"]
            r["medians"].append(lat["median"])
            r["min"] = min(r.get("min", 1e30), lat["min"])
            r["rss"].append(rep_json.get("peak_rss_bytes") or max(rep_json["peak_rss_bytes_per_rank"]))
            r["diff"] = max_abs(out, paths["reference"])
            r["cmd"] = " ".join(full)
            loads.append(loadavg())
            print(f"# {name} run {rep + 1}/{args.repeat}: median {lat['median']:.1f} ms, min {lat['min']:.1f} ms, "
                  f"peak RSS {r['rss'][-1] / 2**20:.0f} MiB ({wall:.0f} s); load {loadavg()}", flush=True)

    flux_dev = None
    if args.flux_dev:
        dev = work / "flux1-dev.pt2"
        rc, dev_s = export(ROOT / "tools" / "model_configs" / "flux1-dev.json", dev, work / "export_dev.log",
                           args.timeout, ["--workload", "1024x1024", "--dtype", "bf16"])
        flux_dev = {"export_s": dev_s, "rc": rc}
        if rc == 0:
            flux_dev["bytes"] = os.path.getsize(dev)
            flux_dev["load"] = load_bench(args.weft_run, dev, work / "load_dev.log", args.timeout)

    print()
    what = "Flux small, 1024+256 tokens" if args.model == "flux" else "Wan small, 768 video + 256 text tokens"
    print(f"{what}, fp32, CPU, {ranks} rank(s) ({mesh}), {threads} threads each; median of {args.iters} after "
          f"{args.warmup} warm-up, {args.repeat} alternating runs per side")
    head = ["side", "median ms (runs)", "best ms", "peak RSS MiB", "max|out - diffusers|"]
    rows = []
    for name, r in results.items():
        med = statistics.median(r["medians"]) if r["medians"] else None
        rows.append([name, (fmt(med) + " (" + ", ".join(f"{m:.0f}" for m in r["medians"]) + ")") if med else "-",
                     fmt(r.get("min")), f"{max(r['rss']) / 2**20:.0f}" if r["rss"] else "-", fmt(r["diff"], "{:.2e}")])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
    b, p = results["built-in"], results["program"]
    ratios = {}
    if b["medians"] and p["medians"]:
        ratios["latency_median"] = statistics.median(p["medians"]) / statistics.median(b["medians"])
        ratios["latency_best"] = p["min"] / b["min"]
        ratios["peak_rss"] = max(p["rss"]) / max(b["rss"])
        print(f"program / built-in: median latency {ratios['latency_median']:.3f}x, best {ratios['latency_best']:.3f}x, "
              f"peak RSS {ratios['peak_rss']:.3f}x (targets <= 1.10x)")
    if flux_dev:
        load = flux_dev.get("load") or {}
        print(f"Flux.1-dev program (bf16, 1024x1024): exported in {flux_dev['export_s']:.1f} s, "
              f"{flux_dev.get('bytes', 0)} bytes; runnable without weights in {fmt(load.get('runnable_ms'))} ms "
              f"(read {fmt(load.get('read_ms'))}, interpreter {fmt(load.get('interpreter_load_ms'))}; target <= 2000)")
    for name, r in results.items():
        for e in r["errors"]:
            print(f"{name} failed: {e}")
    print(f"load average (1/5/15 min) at start, after each run: {' | '.join(loads)}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"results": results, "ratios": ratios, "flux_dev": flux_dev,
                                                       "export_s": export_s, "loads": loads}, indent=2, default=str))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
