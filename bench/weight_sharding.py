#!/usr/bin/env python3
"""Weights sliced over ranks (issue 26 item 2): peak memory and latency against replicated weights.

    .venv/bin/python bench/weight_sharding.py [--models flux:small,wan:small] [--meshes ulysses=2,ulysses=4]
                                              [--iters 5] [--warmup 1] [--repeat 2] [--json FILE]

For each model and mesh it runs `weft-run --model M --mesh MESH --report json` with replicated
weights and with `--shard-weights cp`, alternating them `--repeat` times (R S R S: a slow phase of
this shared machine hits both), and prints per pair: the median latency of each (pooled over the
repeats) and their ratio (the issue's target is <= 1.15x at ulysses=2 on CPU), the best
iterations' ratio, each side's peak RSS per rank (the largest rank) and parameter bytes per rank
(`parameter_bytes_per_rank`: what the rank holds for the whole run), the gather buffers
(`weight_buffer_bytes_per_rank`), the parameter bytes target (1/P of the blocks plus what stays
whole plus two blocks' worth, from the compiled plan's cost), and whether the weights' all-gather
bytes the compiler predicted equal those measured.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def weft_run(path):
    if path:
        return path
    for build in ("build-bench", "build-lead", "build"):
        candidate = ROOT / build / "executor" / "weft-run"
        if candidate.exists():
            return str(candidate)
    sys.exit("no weft-run found; build it (see bench/README.md) or pass --weft-run")


def run(binary, model, mesh, shard, iters, warmup):
    nproc = 1
    for item in mesh.split(","):
        nproc *= int(item.split("=")[1])
    cmd = [binary, "--model", model, "--mesh", mesh, "--nproc", str(nproc), "--iters", str(iters), "--warmup",
           str(warmup), "--report", "json", "--no-prefix"]
    if shard:
        cmd += ["--shard-weights", shard]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("%s: exit %d\n%s%s" % (" ".join(cmd), proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    text = proc.stdout
    report = json.loads(text[text.index("{"):])
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="flux:small,wan:small")
    parser.add_argument("--meshes", default="ulysses=2,ulysses=4")
    parser.add_argument("--shard", default="cp")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--weft-run")
    parser.add_argument("--json")
    args = parser.parse_args()
    binary = weft_run(args.weft_run)
    rows = []
    print("load average %.2f" % os.getloadavg()[0])
    for model in args.models.split(","):
        for mesh in args.meshes.split(","):
            lat = {"": [], args.shard: []}
            best = {"": [], args.shard: []}
            last = {}
            for _ in range(args.repeat):
                for shard in ("", args.shard):
                    r = run(binary, model, mesh, shard, args.iters, args.warmup)
                    lat[shard].append(r["latency_ms"]["median"])
                    best[shard].append(r["latency_ms"]["min"])
                    last[shard] = r
            rep, sh = last[""], last[args.shard]
            measured = sum(c["bytes_sent"] for c in sh["collectives_per_forward"] if c["axis"] == "weights")
            predicted = sum(c["bytes_sent"] for c in sh["predicted_per_forward"] if c["axis"] == "weights")
            row = {
                "model": model, "mesh": mesh, "shard": args.shard,
                "latency_ms": {"replicated": statistics.median(lat[""]), "sharded": statistics.median(lat[args.shard])},
                "best_ms": {"replicated": min(best[""]), "sharded": min(best[args.shard])},
                "peak_rss_bytes": {"replicated": max(rep["peak_rss_bytes_per_rank"]),
                                   "sharded": max(sh["peak_rss_bytes_per_rank"])},
                "parameter_bytes": {"replicated": max(rep["parameter_bytes_per_rank"]),
                                    "sharded": max(sh["parameter_bytes_per_rank"])},
                "weight_buffer_bytes": max(sh["weight_buffer_bytes_per_rank"]),
                "weights_bytes": {"predicted": predicted, "measured": measured},
                "gathers_ms_per_forward": sh.get("weight_gathers_ms_per_forward"),
            }
            rows.append(row)
            mb = lambda b: "%.1f MB" % (b / 1e6)
            print("%-10s %-10s latency %.1f -> %.1f ms (%.3fx, best %.3fx)  peak RSS/rank %s -> %s (%.3fx)  "
                  "params/rank %s -> %s (%.3fx) + buffers %s  weight gathers predicted %d = measured %d: %s" % (
                      model, mesh, row["latency_ms"]["replicated"], row["latency_ms"]["sharded"],
                      row["latency_ms"]["sharded"] / row["latency_ms"]["replicated"],
                      row["best_ms"]["sharded"] / row["best_ms"]["replicated"],
                      mb(row["peak_rss_bytes"]["replicated"]), mb(row["peak_rss_bytes"]["sharded"]),
                      row["peak_rss_bytes"]["sharded"] / row["peak_rss_bytes"]["replicated"],
                      mb(row["parameter_bytes"]["replicated"]), mb(row["parameter_bytes"]["sharded"]),
                      row["parameter_bytes"]["sharded"] / row["parameter_bytes"]["replicated"],
                      mb(row["weight_buffer_bytes"]), predicted, measured, predicted == measured), flush=True)
            g = row["gathers_ms_per_forward"] or {}
            print("%-21s gathers %.1f ms per forward on their thread, %.1f ms of it waited for (%.0f%% hidden)" % (
                "", g.get("gather", 0), g.get("waited", 0),
                100 * (1 - g.get("waited", 0) / g["gather"]) if g.get("gather") else 0), flush=True)
    print("load average %.2f" % os.getloadavg()[0])
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
