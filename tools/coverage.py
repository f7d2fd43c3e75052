#!/usr/bin/env python3
"""Coverage of the diffusers transformer zoo: for every transformer class of the pinned diffusers,
does weft export it, run it at parity with diffusers, plan it and run it sharded?

  .venv/bin/python tools/coverage.py [--classes A,B] [--jobs N] [--out docs/models.md] [--json S.json]

Each class runs tools/coverage/run_class.py in a process of its own with a timeout (a hanging or
crashing class is a row, not the end of the table), in a work dir under --scratch (default
~/.cache/weft/coverage/<class>) that caches every step: a re-run redoes what changed (a class's
config or inputs in tools/coverage/classes.py, the export tool, a rebuilt weft or weft-run) and
the steps that were not available before (`weft suggest`). Prints one line per class as it
finishes, then writes the table (--out) and, with --json, a JSON summary of every step.

Columns: exported (tools/export_program.py, and `weft program` reads it), unsharded (weft-run vs
diffusers' eager fp32 output, <= 1e-4 x max|ref|), plan (`weft suggest`, then `weft check` at
ulysses=2), u2 / r2 / tp2 (weft-run on 2 local ranks with the suggested plan at ulysses=2, ring=2 p2p,
tp=2 when the plan has tensor_parallel rules, each against the same diffusers output).
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "coverage"))

COLUMNS = ["export", "unsharded", "plan", "u2", "r2", "tp2"]
HEADERS = ["exported", "unsharded", "plan", "u2", "r2", "tp2"]
MARK = {"ok": "✔", "fail": "✘", "skip": "–", "n/a": "n/a", None: "?"}


def run_one(cls, scratch, timeout, force):
    work = os.path.join(scratch, cls)
    os.makedirs(work, exist_ok=True)
    cmd = [sys.executable, os.path.join(HERE, "coverage", "run_class.py"), cls, work] + (["--force"] if force else [])
    start = time.time()
    crash = None
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, cwd=ROOT, text=True,
                           errors="replace")
        if p.returncode != 0:
            lines = [l for l in p.stdout.splitlines() if l.strip()]
            crash = "run_class exited %d: %s" % (p.returncode, lines[-1][:200] if lines else "")
    except subprocess.TimeoutExpired:
        crash = "timed out after %d s" % timeout
    result = {"class": cls, "steps": {}}
    try:
        with open(os.path.join(work, "result.json")) as f:
            result = json.load(f)
    except (OSError, ValueError):
        pass
    if crash:
        result["crash"] = crash
    result["seconds"] = round(time.time() - start, 1)
    return result


def cell(result, col):
    s = result["steps"].get(col)
    return MARK[s["status"] if s else None]


def first_problem(result):
    """The reason of the first step that is not ok (prepare included), as `step: reason`."""
    for step in ["prepare"] + COLUMNS:
        s = result["steps"].get(step)
        if s is None:
            return result.get("crash", "%s: not run" % step)
        if s["status"] in ("fail", "n/a"):
            return "%s: %s" % (step, s["reason"])
    bits = ["%s: %s" % (k, s["reason"]) for k, s in result["steps"].items() if s["status"] == "skip" and s["reason"]]
    if result.get("tolerance"):
        bits.append("sharded runs at tolerance " + result["tolerance"])
    return "; ".join(bits)


def short(reason, cls):
    """A reason as the table shows it: tool prefixes and the work dir's paths dropped."""
    reason = re.sub(r"(/root|~)?/[^ :]*/coverage/%s/" % re.escape(cls), "", reason)
    for prefix in ("export_program: ", "weft suggest: ", "weft-run: error: ", "weft-run: "):
        reason = reason.replace(prefix, "")
    return reason


def md_escape(text):
    return text.replace("|", "\\|").replace("\n", " ")


def write_table(results, out, elapsed):
    import diffusers
    import torch
    counts = {c: sum(1 for r in results if r["steps"].get(c, {}).get("status") == "ok") for c in COLUMNS}
    lines = [
        "# The diffusers transformer zoo in weft",
        "",
        "Every transformer class of diffusers %s (torch %s) at a tiny config with seeded weights, as"
        % (diffusers.__version__, torch.__version__.split("+")[0]),
        "`tools/coverage.py` runs it (configs and inputs: `tools/coverage/classes.py`; one class's steps:",
        "`tools/coverage/run_class.py`). Re-run: `.venv/bin/python tools/coverage.py [--classes A,B] [--jobs 2]`.",
        "",
        "- exported: `tools/export_program.py --model-dir --inputs` wrote a program and `weft program` reads it",
        "- unsharded: `weft-run --program` matches diffusers' eager fp32 output, <= 1e-4 x max|ref|",
        "- plan: `weft suggest` proposed a plan and `weft check` accepts it at ulysses=2",
        "- u2, r2, tp2: `weft-run --nproc 2` with that plan at ulysses=2, ring=2 (p2p), tp=2 (when the plan has",
        "  tensor_parallel rules) matches the same diffusers output; u2 and r2 count only where some attention",
        "  runs context-parallel under the plan's splits (`weft compile` at ulysses=2 says so); a class that",
        "  computes in lower precision on purpose is held to a tolerance its row states (tools/coverage/classes.py)",
        "",
        "✔ passed, ✘ failed (reason: the first step that did not pass), – not run (a step before it failed, or",
        "nothing to run), n/a the tool is not there yet.",
        "",
        "%d classes: %s." % (len(results), ", ".join("%s %d" % (h, counts[c]) for h, c in zip(HEADERS, COLUMNS))),
        "",
        "| class | " + " | ".join(HEADERS) + " | reason |",
        "|---|" + "---|" * len(HEADERS) + "---|",
    ]
    for r in sorted(results, key=lambda r: r["class"]):
        lines.append("| %s | %s | %s |" % (r["class"], " | ".join(cell(r, c) for c in COLUMNS),
                                          md_escape(short(first_problem(r), r["class"]))))
    lines += ["", "Generated in %.0f s (cached steps are not re-run)." % elapsed, ""]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write("\n".join(lines))
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--classes", help="comma-separated class names (default: every transformer class)")
    ap.add_argument("--jobs", type=int, default=2, help="classes run at once (default 2)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "models.md"), help="the table (default docs/models.md)")
    ap.add_argument("--json", help="also write a JSON summary of every class and step here")
    ap.add_argument("--scratch", default=os.path.expanduser("~/.cache/weft/coverage"), help="work dirs (cached)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds one class may take (default 900)")
    ap.add_argument("--force", action="store_true", help="redo every step, ignoring the cache")
    args = ap.parse_args()

    import classes
    every = classes.all_classes()
    chosen = every if not args.classes else [c.strip() for c in args.classes.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in every]
    if unknown:
        raise SystemExit("coverage: not transformer classes of this diffusers: %s" % ", ".join(unknown))
    start = time.time()
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_one, c, args.scratch, args.timeout, args.force): c for c in chosen}
        for fut in concurrent.futures.as_completed(futures):
            r = fut.result()
            results[r["class"]] = r
            print("%-42s %s  %5.0fs  %s" % (r["class"], " ".join("%s=%s" % (h, cell(r, c)) for h, c in zip(HEADERS, COLUMNS)),
                                            r["seconds"], first_problem(r)[:150]), flush=True)
    # A partial run (--classes) keeps the other rows of the table from their cached results.
    for c in every:
        if c not in results:
            try:
                with open(os.path.join(args.scratch, c, "result.json")) as f:
                    results[c] = json.load(f)
            except (OSError, ValueError):
                results[c] = {"class": c, "steps": {}, "crash": "not run yet"}
    rows = [results[c] for c in every]
    counts = write_table(rows, args.out, time.time() - start)
    print("coverage: %d classes; %s; table %s" % (len(rows), ", ".join("%s %d" % (h, counts[c]) for h, c in zip(HEADERS, COLUMNS)),
                                                 os.path.relpath(args.out, ROOT)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": dict(zip(HEADERS, (counts[c] for c in COLUMNS))), "classes": rows}, f, indent=1)


if __name__ == "__main__":
    main()
