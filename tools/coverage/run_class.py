#!/usr/bin/env python3
"""One class of the coverage table (tools/coverage.py): every step for one diffusers transformer,
each cached in its work dir, the outcome written to WORK/result.json.

  .venv/bin/python tools/coverage/run_class.py CLASS WORK [--force]

Steps, each skipped when its inputs are unchanged and its outputs exist:
  prepare    tiny config (tools/coverage/configs.json or tools/model_configs/*-tiny.json), seeded
             weights saved by save_pretrained into WORK/model, inputs (tools/coverage/inputs.py) into
             WORK/inputs.safetensors, diffusers' eager fp32 output into WORK/reference.safetensors
  export     tools/export_program.py --model-dir WORK/model --inputs ... -o WORK/program.pt2
  unsharded  weft-run --program ... --expect reference (fp32: <= 1e-4 x max|ref|)
  plan       weft suggest --program ... -o WORK/plan.weft, then weft check at ulysses=2
  u2, r2, tp2  weft-run --nproc 2 with the suggested plan at ulysses=2, ring=2 (p2p) and tp=2 (only
             when the plan has tensor_parallel rules), each against the same diffusers reference

A step's status is "ok", "fail" (with the first line of the reason), "skip" (a step before it
failed, or nothing to do) or "n/a" (the tool that runs it does not exist yet). Every status is
kept with a fingerprint of what it depended on, so a re-run redoes only what changed: a rebuilt
weft-run or weft re-runs the steps that use it.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
sys.path.insert(0, HERE)

PYTHON = sys.executable
WEFT = os.path.join(ROOT, "build", "compiler", "driver", "weft")
WEFT_RUN = os.path.join(ROOT, "build", "executor", "weft-run")
EXPORT = os.path.join(TOOLS, "export_program.py")
STEP_TIMEOUT_S = 300
# Uneven lengths (a tiny config's 11 audio or 33 music tokens) are a mode of the run, as weft
# suggest checks them; on even lengths the flags change nothing.
MESHES = {"u2": ["--mesh", "ulysses=2", "--ulysses-anything"], "r2": ["--mesh", "ring=2", "--rotate", "p2p", "--ring-anything"],
          "tp2": ["--mesh", "tp=2"]}


# ----------------------------------------------------------------------------------------------
# Fingerprints and the result file

def file_id(path):
    """What a step's output depends on in a file: its size and modification time (cheap, enough
    to notice a rebuild or a rewritten input)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return "%d:%d" % (st.st_size, int(st.st_mtime))


def content_id(*paths):
    """A hash of the files' bytes (the inputs and the config a program is exported from)."""
    h = hashlib.sha256()
    for p in paths:
        try:
            with open(p, "rb") as f:
                h.update(f.read())
        except OSError:
            h.update(b"-")
    return h.hexdigest()[:16]


def fingerprint(*parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def first_reason(text):
    """The line of a tool's output that says why it failed: an `error:` diagnostic, the last
    exception line of a Python traceback, or a tool's own message; never the traceback."""
    lines = [re.sub(r"^\[ranks? [\d-]+\] ", "", l.rstrip()) for l in text.splitlines() if l.strip()]
    # weft suggest's notes: why no attention runs context-parallel says more than a TP note.
    for pat in (r"error: ", r"^export_program: ", r"^weft-run: .*(FAILED|error|cannot|refus)",
                r"^\s*attention rule `[^`]*` left to the binder: ", r"^\s*no context.parallel"):
        hits = [i for i, l in enumerate(lines) if re.search(pat, l)]
        if hits:
            i = hits[0]
            line = lines[i]
            if line.endswith(":"):  # a heading whose detail is on the next lines ("checkpoint does not match X:")
                line += " " + " ".join(l.strip() for l in lines[i + 1:i + 3])
            elif i + 1 < len(lines) and lines[i + 1].startswith("  at "):  # export_program: where in diffusers
                line += " (" + lines[i + 1].strip() + ")"
            return clean(line)
    exc = [l for l in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|Exit)\b", l)]
    if exc:
        return clean(exc[-1])
    return clean(lines[-1]) if lines else "no output"


def clean(line):
    line = line.replace(ROOT + "/", "").replace(os.path.expanduser("~"), "~")
    return line[:400]


def run_tool(cmd, log, timeout=STEP_TIMEOUT_S, env=None):
    """(returncode, combined output) of `cmd`, the output also written to `log`."""
    start = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, cwd=ROOT,
                           env=env, text=True, errors="replace")
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = 124, (e.stdout or "") if isinstance(e.stdout, str) else ""
        out += "\ntimed out after %d s" % timeout
    with open(log, "w") as f:
        f.write("$ %s\n%s\n[rc %d, %.1f s]\n" % (" ".join(cmd), out, rc, time.time() - start))
    return rc, out


class Result:
    """WORK/result.json: per step its status, reason, seconds and the fingerprint it was made at."""

    def __init__(self, work, cls):
        self.path = os.path.join(work, "result.json")
        self.data = {"class": cls, "steps": {}}
        if os.path.exists(self.path):
            try:
                with open(self.path) as f:
                    old = json.load(f)
                if old.get("class") == cls:
                    self.data = old
            except ValueError:
                pass

    def cached(self, step, fp):
        s = self.data["steps"].get(step)
        return s if s and s.get("fingerprint") == fp and s["status"] != "n/a" else None

    def set(self, step, fp, status, reason="", seconds=0.0, **extra):
        self.data["steps"][step] = dict(status=status, reason=reason, seconds=round(seconds, 1), fingerprint=fp, **extra)
        self.save()

    def status(self, step):
        return self.data["steps"].get(step, {}).get("status")

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(tmp, self.path)


# ----------------------------------------------------------------------------------------------
# Steps

def step_prepare(cls, work):
    """Config, weights, inputs and reference output, in this process (diffusers imported here)."""
    import torch
    import diffusers
    import classes as class_inputs
    from diffusers_models import seeded_weights
    from export_program import write_inputs_file
    spec = class_inputs.spec_of(cls)
    model_dir = os.path.join(work, "model")
    cls_obj = getattr(diffusers, cls)
    torch.manual_seed(0)
    model = cls_obj.from_config(dict(spec["config"])).eval()
    seeded_weights(model, 0)
    model.save_pretrained(model_dir, safe_serialization=True)
    kwargs = spec["inputs"]()
    write_inputs_file(os.path.join(work, "inputs.safetensors"), kwargs)
    with torch.no_grad():
        out = model(**kwargs, return_dict=False)
    flat = []

    def collect(v):
        if isinstance(v, torch.Tensor):
            flat.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                collect(x)
        elif isinstance(v, dict):
            for x in v.values():
                collect(x)
    collect(out)
    if not flat:
        raise SystemExit("the forward returned no tensor")
    from safetensors.torch import save_file
    save_file({("output" if i == 0 else "output_%d" % i): t.detach().float().contiguous() for i, t in enumerate(flat)},
              os.path.join(work, "reference.safetensors"))
    params = sum(p.numel() for p in model.parameters())
    return dict(params=params, outputs=[list(t.shape) for t in flat],
                inputs={k: list(v.shape) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()
                        if not isinstance(v, torch.Tensor) or True})


def context_parallel_attention(plan, program):
    """How many attention steps of `plan` run context-parallel on `program` at ulysses=2 (None when
    weft cannot compile it there)."""
    p = subprocess.run([WEFT, "compile", plan, "--program", program, "--mesh", "ulysses=2", "--ulysses-anything"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if p.returncode != 0:
        return None
    steps = json.loads(p.stdout).get("steps", [])
    return sum(1 for s in steps if (s.get("attention") or {}).get("mode", "local") != "local")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cls")
    ap.add_argument("work")
    ap.add_argument("--force", action="store_true", help="redo every step")
    ap.add_argument("--prepare-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    cls, work = args.cls, os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)

    if args.prepare_only:  # the prepare step runs in a process of its own (see below)
        info = step_prepare(cls, work)
        with open(os.path.join(work, "prepare.json"), "w") as f:
            json.dump(info, f, indent=1, default=str)
        return

    res = Result(work, cls)
    if args.force:
        res.data["steps"] = {}
    import classes as class_inputs
    model_dir = os.path.join(work, "model")
    inputs = os.path.join(work, "inputs.safetensors")
    ref = os.path.join(work, "reference.safetensors")
    program = os.path.join(work, "program.pt2")
    plan = os.path.join(work, "plan.weft")

    # prepare: in a child process so that a crash in diffusers is a reason, not a dead job
    fp = fingerprint("prepare", class_inputs.source_of(cls), file_id(os.path.join(TOOLS, "diffusers_models.py")))
    if not res.cached("prepare", fp) or not all(os.path.exists(p) for p in (inputs, ref, model_dir)):
        t = time.time()
        rc, out = run_tool([PYTHON, os.path.abspath(__file__), cls, work, "--prepare-only"],
                           os.path.join(work, "prepare.log"))
        if rc == 0:
            with open(os.path.join(work, "prepare.json")) as f:
                info = json.load(f)
            res.set("prepare", fp, "ok", "", time.time() - t, **info)
        else:
            res.set("prepare", fp, "fail", first_reason(out), time.time() - t)
    prepared = res.status("prepare") == "ok"

    def tool_step(step, fp, cmd, ok_if=None, needs=True):
        """Runs `cmd` unless cached; records ok/fail (fail with the reason) or skip when not `needs`."""
        if not needs:
            res.set(step, fp, "skip", "")
            return False
        if res.cached(step, fp):
            return res.status(step) == "ok"
        t = time.time()
        rc, out = run_tool(cmd, os.path.join(work, step + ".log"))
        good = rc == 0 and (ok_if is None or ok_if(out))
        res.set(step, fp, "ok" if good else "fail", "" if good else first_reason(out), time.time() - t)
        return good

    # export, then the program must load in weft's reader
    # The export depends on the inputs, the config and the export tool; on weft only where weft's
    # reader refused the program (a rebuilt weft may read it now). A program exported before is
    # read again by `weft program` when weft changes (cheap), so a rebuild does not re-export all.
    base_fp = content_id(inputs, os.path.join(model_dir, "config.json"))
    last = res.data["steps"].get("export", {})
    read_failure = "weft cannot read" in last.get("reason", "")
    fp = fingerprint("export", base_fp, file_id(EXPORT), file_id(os.path.join(TOOLS, "diffusers_models.py")),
                     file_id(WEFT) if read_failure else None)
    if not prepared:
        res.set("export", fp, "skip")
        exported = False
    elif res.cached("export", fp) and (os.path.exists(program) or res.status("export") != "ok"):
        exported = res.status("export") == "ok"
        if exported and last.get("read_by") != file_id(WEFT):
            rc, out = run_tool([WEFT, "program", program], os.path.join(work, "read.log"))
            exported = rc == 0
            res.set("export", fp, "ok" if exported else "fail",
                    "" if exported else "weft cannot read the program it exported: " + first_reason(out),
                    last.get("seconds", 0.0), read_by=file_id(WEFT))
    else:
        t = time.time()
        if os.path.exists(program):
            os.remove(program)
        rc, out = run_tool([PYTHON, EXPORT, "--model-dir", model_dir, "--inputs", inputs, "-o", program],
                           os.path.join(work, "export.log"))
        exported = rc == 0 and os.path.exists(program)
        res.set("export", fp, "ok" if exported else "fail", "" if exported else first_reason(out), time.time() - t,
                read_by=file_id(WEFT))
    prog_fp = file_id(program) if exported else None

    run_base = [WEFT_RUN, "--program", program, "--model-dir", model_dir, "--inputs", inputs, "--expect", ref,
                "--timeout", "120"]
    fp = fingerprint("unsharded", prog_fp, file_id(WEFT_RUN), file_id(ref))
    tool_step("unsharded", fp, run_base + ["--nproc", "1", "--mesh", "ulysses=1"], needs=exported)

    # plan: weft suggest (when it exists), then weft check at ulysses=2
    have_suggest = os.path.exists(WEFT) and subprocess.run([WEFT, "suggest", "--help"], stdout=subprocess.DEVNULL,
                                                           stderr=subprocess.DEVNULL).returncode == 0
    fp = fingerprint("plan", prog_fp, file_id(WEFT))
    if exported and not have_suggest:
        res.set("plan", fp, "n/a", "suggest: not available")
        planned = False
    elif not res.cached("plan", fp) or not os.path.exists(plan):
        t = time.time()
        if os.path.exists(plan):
            os.remove(plan)
        planned = tool_step("plan", fp + "-suggest", [WEFT, "suggest", "--program", program, "-o", plan], needs=exported)
        if planned:
            rc, out = run_tool([WEFT, "check", plan, "--program", program, "--mesh", "ulysses=2", "--ulysses-anything"],
                               os.path.join(work, "check.log"))
            planned = rc == 0
            res.set("plan", fp, "ok" if planned else "fail", "" if planned else "check: " + first_reason(out),
                    time.time() - t)
        else:
            s = res.data["steps"]["plan"]
            res.set("plan", fp, s["status"], ("suggest: " + s["reason"]) if s["reason"] else "", time.time() - t)
    else:
        planned = res.status("plan") == "ok"

    has_tp = has_cp = False
    cp_why = ""
    if planned:
        with open(plan) as f:
            text = f.read()
        has_tp = "\ntensor_parallel {" in text
        has_cp = "\ncontext_parallel {" in text
        # The plan's header says why the checks left no split (its first note).
        notes = [ln[2:] for ln in text.splitlines() if ln.startswith("# ")][2:]
        cp_why = notes[0][:160] + " ..." if notes else ""
        # Token counts the forward fixed (weft suggest names the first size and the line): that line.
        fixed = re.search(r"the forward fixed (`[^`]+` = \d+ at \S+ in \S+ \(`[^`]*`\))", " ".join(notes))
        if fixed:
            cp_why = "the forward fixed its token counts at export: " + fixed.group(1)
        if has_cp:
            # Splits count only where an attention runs context-parallel under them (a split and
            # gather around one Linear pass at parity and shard nothing).
            cp_sites = context_parallel_attention(plan, program)
            if cp_sites == 0:
                has_cp = False
                cp_why = "no attention runs context-parallel under its splits (weft compile at ulysses=2)"
    plan_fp = file_id(plan) if planned else None
    tolerance = class_inputs.spec_of(cls).get("tolerance")
    tol_args = ["--tolerance", repr(tolerance[0])] if tolerance else []
    for step, mesh in MESHES.items():
        fp = fingerprint(step, prog_fp, plan_fp, file_id(WEFT_RUN), file_id(ref), tol_args)
        if step == "tp2" and planned and not has_tp:
            res.set(step, fp, "skip", "the plan has no tensor_parallel rules")
            continue
        # Without context-parallel attention a ulysses or ring run is the unsharded one: not a pass.
        if step in ("u2", "r2") and planned and not has_cp:
            why = "the plan has no context_parallel rules" if "\ncontext_parallel {" not in text else "the plan shards no attention"
            res.set(step, fp, "skip", why + (" (" + cp_why + ")" if cp_why else ""))
            continue
        tool_step(step, fp, run_base + ["--plan", plan, "--nproc", "2"] + mesh + tol_args, needs=planned)
    res.data["tolerance"] = ("%g: %s" % tolerance) if tolerance else None
    res.data["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    res.save()


if __name__ == "__main__":
    main()
