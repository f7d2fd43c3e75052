#!/usr/bin/env python3
"""Tensor-parallel memory and latency of weft-run on the small Flux (issue 7 benchmark).

    .venv/bin/python bench/flux_tp.py [--ranks 1,2,4] [--iters 3] [--warmup 1] [--weft-run PATH]

Same model, seeded weights and inputs as bench/flux_e2e.py (diffusers' FluxTransformer2DModel at
weft's `small` config, 1024 image + 256 text tokens, batch 1, fp32). For tp = 1, 2, 4 it runs

    weft-run --model flux:small --mesh tp=T,ring=1,ulysses=1 --nproc T --weights W --inputs I \
             --iters N --warmup M --report R --output O

(tp=1 is the plain unsharded run on one rank; with --weights and a TP mesh every rank streams only
its slices of the planned parameters) and prints per tp: median latency, peak RSS per rank (the
report's peak_rss_bytes_per_rank: ru_maxrss, so it includes the runtime, activations and the
touched pages of the memory-mapped checkpoint), the theoretical per-rank parameter bytes
(sharded / tp + replicated, with sharded = the parameters plans/flux.weft's tensor_parallel
section splits: colwise weight + bias, rowwise weight; rowwise biases stay replicated), and the
max abs difference of the gathered output from diffusers' unsharded output.
"""
import argparse
import json
import pathlib
import re
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from flux_e2e import ROOT, default_weft_run, fmt, loadavg, make_fixture, max_abs, run, start, tail  # noqa: E402

# plans/flux.weft, tensor_parallel section (parameter names relative to the model).
COLWISE = [r"transformer_blocks\.\d+\.attn\.(to_q|to_k|to_v|add_q_proj|add_k_proj|add_v_proj)",
           r"transformer_blocks\.\d+\.(ff|ff_context)\.net\.0\.proj",
           r"single_transformer_blocks\.\d+\.attn\.(to_q|to_k|to_v)",
           r"single_transformer_blocks\.\d+\.proj_mlp"]
ROWWISE = [r"transformer_blocks\.\d+\.attn\.(to_out\.0|to_add_out)",
           r"transformer_blocks\.\d+\.(ff|ff_context)\.net\.2",
           r"single_transformer_blocks\.\d+\.proj_out"]


def param_split(weights_path):
    """(sharded bytes, replicated bytes) of the checkpoint under the Flux TP plan."""
    from safetensors import safe_open

    sharded = replicated = 0
    with safe_open(str(weights_path), "pt") as f:
        for name in f.keys():
            t = f.get_slice(name)
            shape = t.get_shape()
            n = 1
            for s in shape:
                n *= s
            nbytes = n * 4  # fp32 checkpoint
            module, _, leaf = name.rpartition(".")
            col = any(re.fullmatch(p, module) for p in COLWISE)
            row = any(re.fullmatch(p, module) for p in ROWWISE)
            if col or (row and leaf == "weight"):
                sharded += nbytes
            else:
                replicated += nbytes
    return sharded, replicated


def mib(b):
    return f"{b / 2**20:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="1,2,4", help="tp degrees (= ranks) to run")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=2024, help="same default as flux_e2e.py: the same weights")
    ap.add_argument("--weft-run", default=default_weft_run())
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads per rank (default 0: cores // tp, weft-run's own default)")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--workdir", default="", help="keep fixtures and logs here (default: a temp dir, removed)")
    ap.add_argument("--json", default="", help="also write the results as JSON to this file")
    args = ap.parse_args()

    cores, work = start(args, "weft-flux-tp-")
    paths, nparams = make_fixture(work, args.seed)
    sharded, replicated = param_split(paths["weights"])
    print(f"# flux:small, {nparams} parameters ({mib(sharded + replicated)} MiB fp32: {mib(sharded)} MiB "
          f"TP-sharded, {mib(replicated)} MiB replicated); warmup {args.warmup}, iters {args.iters}", flush=True)

    rows, loads = [], [loadavg()]
    # Baseline: the runtime's own RSS (libtorch, gloo, plan) with a negligible model (flux:tiny, 1 rank).
    base_report = work / "weft_baseline.json"
    base_cmd = [args.weft_run, "--model", "flux:tiny", "--nproc", "1", "--mesh", "tp=1,ring=1,ulysses=1",
                "--iters", "1", "--warmup", "0", "--report", str(base_report)]
    rc, _ = run(base_cmd, work / "weft_baseline.log", args.timeout)
    baseline = json.loads(base_report.read_text())["peak_rss_bytes_per_rank"][0] if rc == 0 else None
    print(f"# baseline (flux:tiny, 1 rank) peak RSS: {mib(baseline) if baseline else 'failed'} MiB", flush=True)
    for tp in [int(r) for r in args.ranks.split(",") if r]:
        threads = args.threads or max(1, cores // tp)
        report, out = work / f"weft_tp{tp}.json", work / f"weft_tp{tp}.out.safetensors"
        cmd = [args.weft_run, "--model", "flux:small", "--workload", "512x512", "--nproc", str(tp), "--mesh", f"tp={tp},ring=1,ulysses=1",
               "--weights", str(paths["weights"]), "--inputs", str(paths["inputs"]),
               "--iters", str(args.iters), "--warmup", str(args.warmup), "--threads", str(threads),
               "--report", str(report), "--output", str(out)]
        rc, wall = run(cmd, work / f"weft_tp{tp}.log", args.timeout)
        row = {"tp": tp, "threads_per_rank": threads, "cmd": " ".join(cmd), "rc": rc,
               "theory_bytes": sharded // tp + replicated}
        if rc == 0 and report.exists():
            rep = json.loads(report.read_text())
            row["ms"] = rep["latency_ms"]["median"]
            row["rss"] = rep["peak_rss_bytes_per_rank"]
            row["collectives"] = rep.get("collectives_per_forward")
        else:
            row["error"] = f"rc={rc}: " + tail(work / f"weft_tp{tp}.log")
        row["diff_ref"] = max_abs(out, paths["reference"]) if rc == 0 else None
        rows.append(row)
        loads.append(loadavg())
        print(f"# tp={tp}: rc={rc} median={fmt(row.get('ms'))} ms ({wall:.0f} s); load {loadavg()}", flush=True)

    print()
    print(f"Flux small, 1024+256 tokens, fp32, CPU (collectives over shared memory), streamed shards (--weights); median of {args.iters} "
          f"after {args.warmup} warm-up; {cores} cores")
    head = ["tp", "ranks", "thr/rank", "median ms", "peak RSS/rank MiB (max; all)", "RSS - baseline MiB",
            "param MiB/rank (theory)", "max|weft-diff1|"]
    table = []
    for r in rows:
        rss = r.get("rss")
        rss_s = f"{mib(max(rss))}; " + ",".join(mib(x) for x in rss) if rss else "-"
        over = mib(max(rss) - baseline) if (rss and baseline) else "-"
        table.append([str(r["tp"]), str(r["tp"]), str(r["threads_per_rank"]), fmt(r.get("ms")), rss_s, over,
                      mib(r["theory_bytes"]), fmt(r["diff_ref"], "{:.2e}")])
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(head)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for t in table:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(t, widths)) + " |")
    print("param MiB/rank (theory) = TP-sharded bytes / tp + replicated bytes (plans/flux.weft); "
          f"baseline = peak RSS of flux:tiny on 1 rank ({mib(baseline) if baseline else '-'} MiB: libtorch, gloo, plan)")
    for r in rows:
        if r.get("error"):
            print(f"tp={r['tp']} failed: {r['error']}")
    print(f"load average (1/5/15 min) at start, after each run: {' | '.join(loads)}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"rows": rows, "loads": loads, "baseline_rss": baseline},
                                                      indent=2, default=str))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
