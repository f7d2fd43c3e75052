#!/usr/bin/env python3
"""Self time per operator from `weft-run --profile-ops PREFIX` (LibTorch's profiler, Chrome trace).

    build/executor/weft-run --model flux:small --mesh ulysses=2 --nproc 2 --threads 1 --iters 4 --warmup 1 \\
        --profile-ops /tmp/ops
    .venv/bin/python bench/op_self_time.py /tmp/ops.rank0.json --iters 4

Self time = an event's duration minus its nested events' (aten::linear contains aten::addmm, so
only the addmm counts); printed per forward (divided by --iters), with calls per forward and the
share of the total. Collectives appear as `gloo:<op>`; their time includes waiting for peers.
"""
import argparse
import collections
import json


def self_times(events):
    events = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: (e["ts"], -e["dur"]))
    stack, own, calls = [], collections.defaultdict(float), collections.Counter()
    child = collections.defaultdict(float)
    for i, e in enumerate(events):
        while stack and events[stack[-1]]["ts"] + events[stack[-1]]["dur"] <= e["ts"]:
            stack.pop()
        if stack:
            child[stack[-1]] += e["dur"]
        stack.append(i)
    for i, e in enumerate(events):
        own[e["name"]] += e["dur"] - child[i]
        calls[e["name"]] += 1
    return own, calls


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("profile", help="PREFIX.rank<r>.json written by weft-run --profile-ops")
    ap.add_argument("--iters", type=int, default=1, help="the --iters of the run (results are per forward)")
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    with open(args.profile) as f:
        data = json.load(f)
    own, calls = self_times(data["traceEvents"] if isinstance(data, dict) else data)
    total = sum(own.values())
    print(f"total self time {total / 1000 / args.iters:.1f} ms per forward")
    for name, us in sorted(own.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{us / 1000 / args.iters:8.1f} ms {100 * us / total:5.1f}%  {calls[name] // args.iters:5d} calls  {name}")


if __name__ == "__main__":
    main()
