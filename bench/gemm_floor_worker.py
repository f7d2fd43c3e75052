#!/usr/bin/env python3
"""One rank of the GEMM floor of a context-parallel Flux forward, for bench/flux_e2e.py --floor.

    torchrun --nproc-per-node N bench/gemm_floor_worker.py --config C.json --inputs I.safetensors \
        --ulysses U --ring R --result OUT.json [--threads T] [--repeat 3]

What no implementation of the forward can avoid: every Linear's matrix product and the two
products of every attention (scores = q k^T, then probabilities x v), in fp32, at this machine's
GEMM speed. The worker runs one unsharded forward of FluxTransformer2DModel under the profiler to
read each Linear's (rows, in, out) and each attention's (batch, heads, queries, keys, head dim),
scales them to one rank of the mesh (context parallelism splits the tokens over ulysses x ring
ranks: a Linear sees rows / (U R); Ulysses gives a rank heads / U over all queries, ring its
queries / R over all keys), and times exactly those products on this rank with LibTorch's CPU GEMM
(MKL, and oneDNN for the Linears), each Linear with its own weight as the model has it:

  linear_ms     every Linear of the forward, x (rows/(UR), in) @ W^T + b, with the faster of
                torch.nn.functional.linear (MKL) and oneDNN on a weight packed for its row count
                (mkldnn::_linear_pointwise, what weft-run's Linears call); both are in the JSON
  attention_ms  per attention, per head and block of 256 queries (the block torch's CPU flash
                kernel uses at these lengths), scores = q_blk k^T and out_blk = scores v
  exp_ms        one exp per attention score, over the same blocks (softmax's least work), of logits in
                [-10, 0] as softmax sees them after subtracting the row maximum

All ranks run at once (a barrier before each repetition), as the ranks of a real forward share the
machine; the JSON holds each rank's samples (total_ms = the three together, per repetition) and
their medians over --repeat repetitions of the whole list.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist

QUERY_BLOCK = 256


def record_shapes(model, inputs):
    """(linear calls, attention calls) of one unsharded forward: [(module, rows)], [(B, H, Sq, Skv, D)]."""
    rows = []
    hooks = [m.register_forward_pre_hook(lambda mod, a: rows.append((mod, a[0].numel() // a[0].shape[-1])))
             for m in model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                 record_shapes=True) as prof:
        model(**inputs, return_dict=False)
    for h in hooks:
        h.remove()
    attention = []
    for e in prof.events():
        if e.name == "aten::scaled_dot_product_attention":
            (b, h, sq, d), (_, _, skv, _) = e.input_shapes[0], e.input_shapes[1]
            attention.append((b, h, sq, skv, d))
    return rows, attention


def timed(fn):
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--ulysses", type=int, default=1)
    p.add_argument("--ring", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="intra-op threads per rank (0: cores // local ranks)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--result", required=True, help="JSON file; rank r writes <result>.rank<r>")
    args = p.parse_args()

    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    torch.set_num_threads(args.threads or max(1, len(os.sched_getaffinity(0)) // local_world))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cp = args.ulysses * args.ring

    from diffusers import FluxTransformer2DModel
    from safetensors.torch import load_file

    with open(args.config) as f:
        config = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    model = FluxTransformer2DModel(**config).eval()
    linears, attention = record_shapes(model, load_file(args.inputs))

    gen = torch.Generator().manual_seed(rank)
    # Token-wise layers see rows / cp each; layers on the pooled/time embedding (one row) stay whole.
    calls = [(mod, torch.randn(max(1, r // cp) if r > 1 else 1, mod.in_features, generator=gen)) for mod, r in linears]
    blocks = []
    for b, h, sq, skv, d in attention:
        assert h % args.ulysses == 0 and sq % args.ring == 0, (h, sq, args.ulysses, args.ring)
        heads, queries = b * h // args.ulysses, sq // args.ring
        q = torch.randn(heads, queries, d, generator=gen)
        kt = torch.randn(heads, d, skv, generator=gen)
        v = torch.randn(heads, skv, d, generator=gen)
        blocks.append((q, kt, v, torch.empty(QUERY_BLOCK, skv), torch.empty(heads, queries, d),
                       torch.rand(QUERY_BLOCK, skv, generator=gen) * -10))

    packed = [(torch.ops.mkldnn._reorder_linear_weight(mod.weight.detach(), x.shape[0]), mod.bias, x)
              for mod, x in calls]

    def run_linears():
        with torch.no_grad():
            for mod, x in calls:
                mod(x)

    def run_onednn_linears():
        with torch.no_grad():
            for w, b, x in packed:
                torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")

    def run_attention():
        for q, kt, v, scores, out, _ in blocks:
            for h in range(q.shape[0]):
                for q0 in range(0, q.shape[1], QUERY_BLOCK):
                    n = min(QUERY_BLOCK, q.shape[1] - q0)
                    s = scores[:n]
                    torch.mm(q[h, q0:q0 + n], kt[h], out=s)
                    torch.mm(s, v[h], out=out[h, q0:q0 + n])

    def run_exp():
        for q, _, _, scores, _, logits in blocks:
            for h in range(q.shape[0]):
                for q0 in range(0, q.shape[1], QUERY_BLOCK):
                    n = min(QUERY_BLOCK, q.shape[1] - q0)
                    torch.exp(logits[:n], out=scores[:n])

    run_linears(), run_onednn_linears(), run_attention(), run_exp()  # warm-up: packing buffers, pages
    samples = {"linear_ms": [], "mkl_linear_ms": [], "onednn_linear_ms": [], "attention_ms": [], "exp_ms": [],
               "total_ms": []}
    for _ in range(args.repeat):
        dist.barrier()
        samples["mkl_linear_ms"].append(timed(run_linears))
        samples["onednn_linear_ms"].append(timed(run_onednn_linears))
        samples["linear_ms"].append(min(samples["mkl_linear_ms"][-1], samples["onednn_linear_ms"][-1]))
        samples["attention_ms"].append(timed(run_attention))
        samples["exp_ms"].append(timed(run_exp))
        samples["total_ms"].append(samples["linear_ms"][-1] + samples["attention_ms"][-1] + samples["exp_ms"][-1])
    result = {k: statistics.median(v) for k, v in samples.items()}
    result.update(samples={k: v for k, v in samples.items()}, rank=rank, ulysses=args.ulysses, ring=args.ring,
                  threads=torch.get_num_threads(), linear_calls=len(calls), attention_calls=len(blocks),
                  linear_gflop=sum(2 * x.shape[0] * m.in_features * m.out_features for m, x in calls) / 1e9,
                  attention_gflop=sum(4 * q.shape[0] * q.shape[1] * q.shape[2] * kt.shape[2]
                                      for q, kt, *_ in blocks) / 1e9)
    with open(f"{args.result}.rank{rank}", "w") as f:
        json.dump(result, f, indent=2)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
