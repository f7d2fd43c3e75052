#!/usr/bin/env python3
"""Single-threaded probes of the CPU levers bench/README.md sets aside for the small Flux forward.

    .venv/bin/python bench/cpu_levers.py [--reps 15] [--blis /usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4]

  siblings   one matmul for the Linears that read the same input (to_q/k/v; with proj_mlp in the
             single blocks) against one per Linear, both oneDNN on weights packed for the row
             count (weft-run's Linear); --reps interleaved repetitions, fused/separate median and range
  chunks     torch's CPU flash attention at ulysses=2's per-rank shape (1 x 4 heads x 1280 x 64)
             whole, and on query chunks small enough that its score blocks fit a 512 KB L2
  libraries  the forward's Linear shapes with oneDNN (packed), MKL (torch.nn.functional.linear) and,
             when --blis names a BLIS library (Debian: libblis4-serial), its cblas_sgemm; GFLOP/s of
             each shape's best of 7 x 5 calls, and BLIS's summed time over oneDNN's
"""
import argparse
import ctypes
import os
import statistics
import time

import torch

ROWS = 640  # tokens per rank at ulysses=2: (1024 image + 256 text) / 2


def packed_linear(rows, k, n):
    x, w = torch.randn(rows, k), torch.randn(n, k)
    wp = torch.ops.mkldnn._reorder_linear_weight(w, rows)
    return x, w, lambda: torch.ops.mkldnn._linear_pointwise(x, wp, None, "none", [], "")


def per_call(fn, n):
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def siblings(reps):
    print("siblings: fused / separate time per shape (oneDNN, packed weights)")
    for rows, k, outs in [(ROWS, 512, [512, 512, 512, 2048]), (ROWS, 512, [512, 512, 512]),
                          (512, 512, [512, 512, 512]), (128, 512, [512, 512, 512])]:
        separate = [packed_linear(rows, k, n)[2] for n in outs]
        fused = packed_linear(rows, k, sum(outs))[2]
        ratios = []
        for _ in range(reps):
            apart = sum(per_call(f, 4) for f in separate)
            ratios.append(per_call(fused, 4) / apart)
        print(f"  {rows} x {k} -> {outs}: median {statistics.median(ratios):.3f} "
              f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


def chunks(reps):
    q, k, v = (torch.randn(1, 4, 1280, 64) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    ref = sdpa(q, k, v)

    def chunked(n):
        def run():
            out = torch.empty_like(q)
            for i in range(0, q.shape[2], n):
                out[:, :, i:i + n] = sdpa(q[:, :, i:i + n], k, v)
            return out
        return run

    runs = {"whole": lambda: sdpa(q, k, v)}
    runs.update({f"{n}-row chunks": chunked(n) for n in (640, 320, 256, 160, 128)})
    for name, fn in runs.items():
        assert torch.equal(fn(), ref), name
    times = {name: [] for name in runs}
    for _ in range(max(3, reps // 2)):
        for name, fn in runs.items():
            times[name].append(per_call(fn, 1))
    print("chunks: torch's flash attention, 1 x 4 x 1280 x 64, median (min) ms")
    for name, t in times.items():
        print(f"  {name}: {statistics.median(t) * 1e3:.1f} ({min(t) * 1e3:.1f})")


def libraries(blis_path):
    blis = None
    if blis_path and os.path.exists(blis_path):
        lib = ctypes.CDLL(blis_path)
        blis = lib.cblas_sgemm
        p = ctypes.c_void_p
        blis.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, p, ctypes.c_int, p, ctypes.c_int, ctypes.c_float, p,
                                              ctypes.c_int]
    print("libraries: GFLOP/s per Linear shape (rows x in -> out), best of 7 x 5 calls"
          + ("" if blis else f" (no BLIS at {blis_path!r})"))
    totals = {"oneDNN": 0.0, "MKL": 0.0, "BLIS": 0.0}
    for rows, k, n in [(ROWS, 512, 512), (ROWS, 512, 2048), (ROWS, 2048, 512), (ROWS, 2560, 512),
                       (ROWS, 512, 1536), (128, 512, 512), (512, 512, 2048)]:
        x, w, onednn = packed_linear(rows, k, n)
        runs = {"oneDNN": onednn, "MKL": lambda: torch.nn.functional.linear(x, w)}
        if blis:
            a, b = x.numpy(), w.numpy()
            c = torch.empty(rows, n).numpy()
            runs["BLIS"] = lambda: blis(101, 111, 112, rows, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, k, 0.0,
                                        c.ctypes.data, n)
            runs["BLIS"]()
            assert torch.allclose(torch.from_numpy(c), x @ w.T, rtol=1e-4, atol=1e-3)
        best = {name: min(per_call(fn, 5) for _ in range(7)) for name, fn in runs.items()}
        gflop = 2 * rows * k * n / 1e9
        for name, t in best.items():
            totals[name] += t
        print(f"  {rows} x {k} -> {n}: " + "  ".join(f"{name} {gflop / t:.1f}" for name, t in best.items()))
    if blis:
        print(f"  summed: BLIS / oneDNN {totals['BLIS'] / totals['oneDNN']:.3f}, "
              f"BLIS / MKL {totals['BLIS'] / totals['MKL']:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--blis", default="/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"# torch {torch.__version__}, 1 thread; load average {os.getloadavg()}")
    siblings(args.reps)
    chunks(args.reps)
    libraries(args.blis)
    print(f"# load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
