#!/usr/bin/env python3
"""weft-run against diffusers' own context parallelism on a small Flux, CPU ranks (issue 6 benchmark).

    .venv/bin/python bench/flux_e2e.py [--ranks 2,4] [--iters 3] [--warmup 1] [--repeat 2] [--weft-run PATH]
                                       [--program]

With --floor each repeat also runs bench/gemm_floor_worker.py on the same ranks: the fp32 matrix
products every implementation of the forward must do (each Linear, both attention products) plus
one exp per attention score, timed alone with LibTorch's GEMM on this machine -- the floor a
weft/diffusers ratio can reach here, in the same run.

weft's side is always a torch.export program with plans/flux.weft compiled into it: with
--program one exported here from the same config and inputs, else the program `weft-run --model
flux:small` takes from its program cache (the hand-written Flux this bench once ran is gone,
issue 24).

One run: builds diffusers' FluxTransformer2DModel at weft's `small` config (2 double + 4 single
blocks, hidden 512 = 8 heads x 64; tools/model_configs/flux-small.json) with seeded random
weights, saves weights and inputs (32x32 = 1024 image tokens, 256 text tokens, batch 1) as
safetensors in a temp dir, computes diffusers' unsharded output once, then for every mesh on
the requested rank counts runs

  (a) weft-run --model flux:small --weights W --inputs I --mesh M --nproc N --iters --warmup --report R
      --cpu-transport T, for each T of --weft-transports (default shm,gloo: weft's shared-memory
      collectives, and Gloo as diffusers uses it, so the table separates the two)
  (b) torchrun --nproc-per-node N bench/diffusers_cp_worker.py  (gloo on CPU,
      model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=U, ring_degree=R)))

with the same weights, inputs, iteration counts and threads per rank (cores // N), alternating
weft and diffusers --repeat times per mesh, and prints: mesh, ranks, weft median ms (first
transport), diffusers median ms, weft/diffusers, the same with weft on Gloo, max|weft - diffusers CP|, max|weft - diffusers unsharded|, and each
run's own median. The issue's target is weft/diffusers <= 0.8. Where diffusers cannot run a mesh
on CPU, the row carries its exact error. Latencies are rank 0's wall time per forward (each
forward ends in the output gather); the median pools every timed iteration of every repeat
(each run does --warmup untimed forwards first).
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
MESHES = {2: [("ulysses=2", 2, 1), ("ring=2", 1, 2)],
          4: [("ulysses=4", 4, 1), ("ring=2,ulysses=2", 2, 2)]}


def default_weft_run():
    for cand in ("build-bench", "build-lead", "build"):
        path = ROOT / cand / "executor" / "weft-run"
        if path.exists():
            return str(path)
    return str(ROOT / "build-bench" / "executor" / "weft-run")


def loadavg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def start(args, prefix):
    """Cores, the work directory (args.workdir or a new temp dir) and the run's header lines."""
    cores = len(os.sched_getaffinity(0)) or os.cpu_count() or 1
    work = pathlib.Path(args.workdir) if args.workdir else pathlib.Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    print(f"# weft {args.weft_run}", flush=True)
    print(f"# {cores} cores; load average at start: {loadavg()}; workdir {work}", flush=True)
    return cores, work


def make_fixture(out_dir, seed):
    import torch
    from diffusers import FluxTransformer2DModel
    from safetensors.torch import save_file

    spec = json.loads((ROOT / "tools" / "model_configs" / "flux-small.json").read_text())
    config = {k: v for k, v in spec["config"].items() if not k.startswith("_")}
    model = FluxTransformer2DModel(**config).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # as tools/make_fixtures.py: random values everywhere, no exact-1 norms
        for _, p in sorted(model.named_parameters()):
            scale = 0.5 if p.dim() == 1 else 1.0 / max(1, p.shape[-1]) ** 0.5
            p.copy_(torch.randn(p.shape, generator=gen) * scale)
    gen = torch.Generator().manual_seed(seed + 1)
    height = width = 32
    text = 256
    rows, cols = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    inputs = {
        "hidden_states": torch.randn(1, height * width, config["in_channels"], generator=gen),
        "encoder_hidden_states": torch.randn(1, text, config["joint_attention_dim"], generator=gen),
        "pooled_projections": torch.randn(1, config["pooled_projection_dim"], generator=gen),
        "timestep": torch.tensor([0.5]),
        "img_ids": torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3).float(),
        "txt_ids": torch.zeros(text, 3),
        "guidance": torch.tensor([3.5]),
    }
    paths = {"config": out_dir / "config.json", "weights": out_dir / "weights.safetensors",
             "inputs": out_dir / "inputs.safetensors", "reference": out_dir / "reference.safetensors"}
    paths["config"].write_text(json.dumps(dict(config, _class_name="FluxTransformer2DModel"), indent=2))
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(paths["weights"]))
    save_file(inputs, str(paths["inputs"]))
    with torch.no_grad():
        ref = model(**inputs, return_dict=False)[0]
    save_file({"output": ref.contiguous()}, str(paths["reference"]))
    nparams = sum(p.numel() for p in model.parameters())
    return paths, nparams


def max_abs(a_path, b_path):
    from safetensors.torch import load_file

    if not (a_path and b_path and os.path.exists(a_path) and os.path.exists(b_path)):
        return None
    a, b = load_file(str(a_path))["output"].double(), load_file(str(b_path))["output"].double()
    if a.shape != b.shape:
        return f"shape {list(a.shape)} vs {list(b.shape)}"
    return float((a - b).abs().max())


def run(cmd, log_path, timeout, env=None):
    t0 = time.time()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, env=env)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return rc, time.time() - t0


def tail(path, n=6):
    try:
        return "".join(open(path).readlines()[-n:]).rstrip()
    except OSError:
        return ""


def last(values):
    return values[-1] if values else None


def fmt(x, spec="{:.1f}"):
    if x is None:
        return "-"
    return spec.format(x) if isinstance(x, (int, float)) else str(x)


ITER_RE = re.compile(r"weft-run: iteration \d+/\d+: ([0-9.]+) ms")


def run_weft(args, paths, work, tag, n, mesh, row, transport):
    tag = f"{tag}_{transport}"
    report, wout, log = work / f"weft_{tag}.json", work / f"weft_{tag}.out.safetensors", work / f"weft_{tag}.log"
    side = row["weft"].setdefault(transport, {"samples": [], "medians": []})
    model = (["--program", str(paths["program"])] if paths.get("program") else
             ["--model", "flux:small", "--workload", "512x512"])
    cmd = [args.weft_run, "--cpu-transport", transport] + model + ["--nproc", str(n), "--mesh", mesh,
           "--weights", str(paths["weights"]), "--inputs", str(paths["inputs"]),
           "--iters", str(args.iters), "--warmup", str(args.warmup),
           "--threads", str(row["threads_per_rank"]), "--report", str(report), "--output", str(wout)]
    rc, _ = run(cmd, log, args.timeout)
    side["cmd"] = " ".join(cmd)
    if rc == 0 and report.exists():
        rep = json.loads(report.read_text())
        side["medians"].append(rep["latency_ms"]["median"])
        # Every timed iteration from rank 0's progress lines (printed when --iters > 1).
        samples = [float(x) for x in ITER_RE.findall(log.read_text())]
        side["samples"] += samples or [rep["latency_ms"]["median"]]
        side["collectives"] = rep.get("collectives_per_forward")
        side["cpu_transport"] = rep.get("cpu_transport")
        side["peak_rss"] = rep.get("peak_rss_bytes_per_rank")
    else:
        side["error"] = f"rc={rc}: " + tail(log)


def run_diffusers(args, paths, work, tag, n, ulysses, ring, row):
    result, dout, log = (work / f"diffusers_{tag}.json", work / f"diffusers_{tag}.out.safetensors",
                         work / f"diffusers_{tag}.log")
    torchrun = [args.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n)]
    cmd = torchrun + [str(ROOT / "bench" / "diffusers_cp_worker.py"), "--config", str(paths["config"]),
                      "--weights", str(paths["weights"]), "--inputs", str(paths["inputs"]),
                      "--ulysses", str(ulysses), "--ring", str(ring), "--iters", str(args.iters),
                      "--warmup", str(args.warmup), "--threads", str(row["threads_per_rank"]),
                      "--result", str(result), "--output", str(dout)]
    rc, _ = run(cmd, log, args.timeout, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    row["diffusers_cmd"] = " ".join(cmd)
    if result.exists():
        res = json.loads(result.read_text())
        row["diffusers_result"] = res
        if res.get("ok"):
            row["diffusers_medians"].append(res["latency_ms"]["median"])
            row["diffusers_samples"] += res["latency_ms"]["all"]
            row["diffusers_backend"] = res.get("backend")
        else:
            row["diffusers_error"] = "; ".join(f"{a['backend']}: {a.get('error')}" for a in res["attempts"])
    else:
        row["diffusers_error"] = f"rc={rc}: " + tail(log)


def run_floor(args, paths, work, tag, n, ulysses, ring, row):
    """bench/gemm_floor_worker.py on n ranks; per repetition the slowest rank's total (a forward waits for it)."""
    result, log = work / f"floor_{tag}.json", work / f"floor_{tag}.log"
    torchrun = [args.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n)]
    cmd = torchrun + [str(ROOT / "bench" / "gemm_floor_worker.py"), "--config", str(paths["config"]),
                      "--inputs", str(paths["inputs"]), "--ulysses", str(ulysses), "--ring", str(ring),
                      "--threads", str(row["threads_per_rank"]), "--repeat", str(args.iters),
                      "--result", str(result)]
    rc, _ = run(cmd, log, args.timeout, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    ranks = [json.loads(pathlib.Path(f"{result}.rank{r}").read_text())
             for r in range(n) if pathlib.Path(f"{result}.rank{r}").exists()]
    if rc != 0 or len(ranks) != n:
        row["floor_error"] = f"rc={rc}: " + tail(log)
        return
    totals = [max(r["samples"]["total_ms"][i] for r in ranks) for i in range(args.iters)]
    row["floor_samples"] += totals
    row["floor_medians"].append(statistics.median(totals))
    row["floor_parts"] = {k: ranks[0][k] for k in ("linear_ms", "mkl_linear_ms", "onednn_linear_ms", "attention_ms",
                                                     "exp_ms", "linear_gflop",
                                                     "attention_gflop", "linear_calls", "attention_calls")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", default="2,4", help="comma-separated rank counts (2 and/or 4)")
    ap.add_argument("--meshes", default="", help="only these meshes, separated by ';' (e.g. 'ulysses=2;ring=2,ulysses=2')")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=2,
                    help="alternate weft and diffusers this many times per mesh; medians pool all timed iterations")
    ap.add_argument("--weft-transports", default="shm,gloo",
                    help="weft-run --cpu-transport values to run, comma-separated; the first is the headline")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--program", action="store_true",
                    help="weft runs the model as a torch.export program (tools/export_program.py, exported once "
                         "here) with plans/flux.weft compiled in, instead of its built-in Flux")
    ap.add_argument("--floor", action="store_true",
                    help="also time the forward's fp32 GEMMs + attention exps alone (bench/gemm_floor_worker.py)")
    ap.add_argument("--weft-run", default=default_weft_run())
    ap.add_argument("--python", default=sys.executable, help="python with torch + diffusers for torchrun")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--workdir", default="", help="keep fixtures and logs here (default: a temp dir, removed)")
    ap.add_argument("--json", default="", help="also write all results as JSON to this file")
    args = ap.parse_args()

    ranks = [int(r) for r in args.ranks.split(",") if r]
    transports = [t for t in args.weft_transports.split(",") if t]
    main_t = transports[0]
    only = set(m for m in args.meshes.split(";") if m)
    cores, work = start(args, "weft-flux-e2e-")
    paths, nparams = make_fixture(work, args.seed)
    print(f"# flux:small, {nparams} parameters, 1024 image + 256 text tokens, batch 1, fp32; "
          f"warmup {args.warmup}, iters {args.iters}", flush=True)
    if args.program:
        paths["program"] = work / "flux-small.pt2"
        cmd = [sys.executable, str(ROOT / "tools" / "export_program.py"), str(ROOT / "tools" / "model_configs" /
               "flux-small.json"), "--inputs", str(paths["inputs"]), "-o", str(paths["program"])]
        rc, _ = run(cmd, work / "export.log", args.timeout)
        if rc != 0:
            print("export failed:\n" + tail(work / "export.log", 20))
            return 1
        print(f"# weft side: the program {paths['program']} ({os.path.getsize(paths['program'])} bytes)", flush=True)

    rows = []
    loads = [loadavg()]
    for n in ranks:
        for mesh, ulysses, ring in MESHES[n]:
            if only and mesh not in only:
                continue
            tag = f"{mesh.replace('=', '').replace(',', '_')}_n{n}"
            row = {"mesh": mesh, "ranks": n, "threads_per_rank": max(1, cores // n), "weft": {},
                   "diffusers_samples": [], "diffusers_medians": [], "floor_samples": [], "floor_medians": []}
            # weft and diffusers alternate (W D W D ...) so slow phases of a shared machine hit both.
            for rep in range(args.repeat):
                for t in transports:
                    if row["weft"].get(t, {}).get("error"):
                        continue
                    run_weft(args, paths, work, f"{tag}_r{rep}", n, mesh, row, t)
                    print(f"# weft ({t}) {mesh} x{n} [{rep + 1}/{args.repeat}]: "
                          f"median={fmt(last(row['weft'][t]['medians']))} ms; load {loadavg()}", flush=True)
                    loads.append(loadavg())
                if not row.get("diffusers_error"):
                    run_diffusers(args, paths, work, f"{tag}_r{rep}", n, ulysses, ring, row)
                    print(f"# diffusers {mesh} x{n} [{rep + 1}/{args.repeat}]: median="
                          f"{fmt(last(row['diffusers_medians']))} ms"
                          f"; load {loadavg()}", flush=True)
                    loads.append(loadavg())
                if args.floor and not row.get("floor_error"):
                    run_floor(args, paths, work, f"{tag}_r{rep}", n, ulysses, ring, row)
                    print(f"# GEMM floor {mesh} x{n} [{rep + 1}/{args.repeat}]: median="
                          f"{fmt(last(row['floor_medians']))} ms; load {loadavg()}", flush=True)
                    loads.append(loadavg())
            # Pooled median of every timed iteration of every repeat.
            for side in row["weft"].values():
                if side["samples"]:
                    side["ms"] = statistics.median(side["samples"])
            if row["diffusers_samples"]:
                row["diffusers_ms"] = statistics.median(row["diffusers_samples"])
            if row["floor_samples"]:
                row["floor_ms"] = statistics.median(row["floor_samples"])
            wout = work / f"weft_{tag}_r0_{main_t}.out.safetensors"
            dout = work / f"diffusers_{tag}_r0.out.safetensors"
            row["diff_cp"] = max_abs(wout, dout) if row.get("diffusers_ms") is not None else None
            row["diff_ref"] = max_abs(wout, paths["reference"])
            rows.append(row)

    print()
    print(f"Flux small (2+4 blocks, hidden 512), 1024+256 tokens, fp32, CPU; weft "
          f"{'program (torch.export, plans/flux.weft compiled in)' if args.program else 'built-in Flux'} over {' and '.join(transports)}, "
          f"diffusers over gloo; median of {args.repeat} x {args.iters} iterations (each run after {args.warmup} "
          f"warm-up; weft/diffusers alternating); {cores} cores")
    # The best iteration of each side as well: on a shared machine a neighbour's load lands on
    # random iterations and moves medians by +-10% between runs; the minimum is what each side
    # costs when nothing interferes.
    def ratio(a, b):
        return f"{a / b:.2f}" if (a is not None and b) else "-"

    head = ["mesh", "ranks", "thr/rank", f"weft ms ({main_t})", "diffusers ms", "weft/diffusers",
            f"weft min ({main_t})", "diffusers min", "min ratio"]
    for t in transports[1:]:
        head += [f"weft ms ({t})", f"({t})/diffusers"]
    if args.floor:
        head += ["GEMM floor ms", "floor/diffusers", "floor min", "min floor/diffusers"]
    head += ["max|weft-diffCP|", "max|weft-diff1|", "weft per-run", "diffusers per-run"]
    table = []
    for r in rows:
        main = r["weft"].get(main_t, {"samples": [], "medians": []})
        w, d = main.get("ms"), r.get("diffusers_ms")
        wmin = min(main["samples"]) if main["samples"] else None
        dmin = min(r["diffusers_samples"]) if r["diffusers_samples"] else None
        line = [r["mesh"], str(r["ranks"]), str(r["threads_per_rank"]), fmt(w),
                fmt(d) if d is not None else "n/a (error)", ratio(w, d), fmt(wmin), fmt(dmin), ratio(wmin, dmin)]
        for t in transports[1:]:
            other = r["weft"].get(t, {}).get("ms")
            line += [fmt(other), ratio(other, d)]
        if args.floor:
            f = r.get("floor_ms")
            fmin = min(r["floor_samples"]) if r["floor_samples"] else None
            line += [fmt(f), ratio(f, d), fmt(fmin), ratio(fmin, dmin)]
        line += [fmt(r["diff_cp"], "{:.2e}"), fmt(r["diff_ref"], "{:.2e}"),
                 "/".join(f"{x:.0f}" for x in main["medians"]) or "-",
                 "/".join(f"{x:.0f}" for x in r["diffusers_medians"]) or "-"]
        table.append(line)
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(head)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for t in table:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(t, widths)) + " |")
    print("target: weft/diffusers <= 0.80; max|weft-diff1| is against diffusers' unsharded output")
    for r in rows:
        parts = r.get("floor_parts")
        if parts:
            print(f"GEMM floor {r['mesh']} (rank 0, last run): {parts['linear_calls']} linears "
                  f"{parts['linear_gflop']:.2f} GFLOP {parts['linear_ms']:.1f} ms (MKL {parts['mkl_linear_ms']:.1f}, oneDNN "
                  f"{parts['onednn_linear_ms']:.1f}), {parts['attention_calls']} attentions "
                  f"{parts['attention_gflop']:.2f} GFLOP {parts['attention_ms']:.1f} ms, exps {parts['exp_ms']:.1f} ms")
        if r.get("floor_error"):
            print(f"GEMM floor {r['mesh']} x{r['ranks']} failed: {r['floor_error']}")
    for r in rows:
        for t, side in r["weft"].items():
            if side.get("error"):
                print(f"weft ({t}) {r['mesh']} x{r['ranks']} failed: {side['error']}")
        if r.get("diffusers_error"):
            print(f"diffusers {r['mesh']} x{r['ranks']} failed: {r['diffusers_error']}")
    shims = sorted({s for r in rows for s in r.get("diffusers_result", {}).get("shims", [])})
    for s in shims:
        print(f"diffusers CPU shim applied after: {s}")
    print(f"load average (1/5/15 min) at start, after each run: {' | '.join(loads)}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"rows": rows, "loads": loads}, indent=2, default=str))
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
