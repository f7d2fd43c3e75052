#!/usr/bin/env python3
"""One rank of diffusers' own context parallelism on CPU (gloo), for bench/flux_e2e.py.

    torchrun --nproc-per-node N bench/diffusers_cp_worker.py --config C.json --weights W.safetensors \
        --inputs I.safetensors --ulysses U --ring R --iters 3 --warmup 1 --result OUT.json [--output O.safetensors]

Builds FluxTransformer2DModel from the config, loads the weights, calls
model.enable_parallelism(config=ContextParallelConfig(ulysses_degree=U, ring_degree=R)) and times
`--iters` forwards after `--warmup` under torch.no_grad(), with the same per-rank thread count as
weft-run (cores // local ranks, at least 1). Rank 0 writes a JSON result: median latency, the
attention backend used, the CPU shims applied, or the exact error when diffusers refuses the mesh.

CPU shim: diffusers 0.42's ModelMixin._resolve_parallel_config computes
`rank % torch.accelerator.device_count()`, which is 0 on a CPU-only torch (ZeroDivisionError);
when that happens the worker records the error and retries with device_count() reported as 1
(it only names the device the config records; the model stays on CPU).
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist


def materialize(out):
    """diffusers' gather returns an AsyncCollectiveTensor; wait for it (inside the timed region)."""
    wait = getattr(out, "wait", None)
    out = wait() if callable(wait) else out
    return out.clone() if type(out) is not torch.Tensor else out


def log(msg):
    print(f"[diffusers rank {os.environ.get('RANK', '?')}] {msg}", file=sys.stderr, flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--ulysses", type=int, default=1)
    p.add_argument("--ring", type=int, default=1)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (0: cores // local ranks)")
    p.add_argument("--backends", default="native,_native_flash,flex,_native_math",
                   help="attention backends to try in order, until enable_parallelism + one forward work")
    p.add_argument("--result", required=True, help="JSON result file (rank 0)")
    p.add_argument("--output", default="", help="gathered output as safetensors (rank 0)")
    args = p.parse_args()

    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    threads = args.threads or max(1, len(os.sched_getaffinity(0)) // local_world)
    torch.set_num_threads(threads)

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    from diffusers import ContextParallelConfig, FluxTransformer2DModel
    from safetensors.torch import load_file, save_file

    with open(args.config) as f:
        config = json.load(f)
    config = {k: v for k, v in config.items() if not k.startswith("_")}
    inputs = load_file(args.inputs)
    state = load_file(args.weights)

    result = {"ranks": world, "ulysses": args.ulysses, "ring": args.ring, "threads_per_rank": threads,
              "shims": [], "attempts": []}
    ok = False
    model = None
    out = None
    for backend in [b for b in args.backends.split(",") if b]:
        model = FluxTransformer2DModel(**config).eval()
        model.load_state_dict(state, strict=True)
        attempt = {"backend": backend}
        try:
            model.set_attention_backend(backend)
            cp = ContextParallelConfig(ulysses_degree=args.ulysses, ring_degree=args.ring)
            try:
                model.enable_parallelism(config=cp)
            except ZeroDivisionError as e:
                if torch.accelerator.device_count() != 0:
                    raise
                msg = f"enable_parallelism: ZeroDivisionError: {e} (rank % torch.accelerator.device_count() == 0 on CPU)"
                if msg not in result["shims"]:
                    result["shims"].append(msg)
                torch.accelerator.device_count = lambda: 1  # see the module docstring
                model.enable_parallelism(config=cp)
            with torch.no_grad():
                out = materialize(model(**inputs, return_dict=False)[0])
            attempt["ok"] = True
            result["attempts"].append(attempt)
            result["backend"] = backend
            ok = True
            break
        except Exception as e:  # recorded per backend; the next one is tried
            attempt["ok"] = False
            first_line = (str(e).strip().splitlines() or [""])[0]
            attempt["error"] = f"{type(e).__name__}: {first_line[:240]}"
            frame = traceback.extract_tb(e.__traceback__)[-1]
            attempt["where"] = f"{frame.filename}:{frame.lineno} in {frame.name}"
            result["attempts"].append(attempt)
            log(f"backend {backend}: {attempt['error']}")
            # A failed collective can leave the group out of step; resync before the next try.
            dist.barrier()
            continue

    # All ranks must agree (an error on one rank only would deadlock the next collective).
    flag = torch.tensor([1 if ok else 0])
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    ok = bool(flag.item())

    if ok:
        with torch.no_grad():
            for _ in range(args.warmup):
                out = materialize(model(**inputs, return_dict=False)[0])
            dist.barrier()
            times = []
            for _ in range(max(1, args.iters)):
                t0 = time.perf_counter()
                out = materialize(model(**inputs, return_dict=False)[0])
                times.append((time.perf_counter() - t0) * 1e3)
        result["latency_ms"] = {"median": statistics.median(times), "min": min(times), "max": max(times),
                                "all": times, "iters": len(times), "warmup": args.warmup}
        result["output_shape"] = list(out.shape)
        if rank == 0 and args.output:
            save_file({"output": out.contiguous()}, args.output)
    result["ok"] = ok
    if rank == 0:
        with open(args.result, "w") as f:
            json.dump(result, f, indent=2)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
