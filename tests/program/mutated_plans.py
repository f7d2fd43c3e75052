"""Every plan in plans/ with one rule dropped, checked against its class's program.

For each plan that has a fixture program, each rule (a split or gather item, an attention
rule, a tensor-parallel rule; a split block with all its items) is dropped in turn, and
`weft check --program` runs the copy on ulysses=2 (context-parallel rules), tp=2
(tensor-parallel rules) or cfg=2 (guidance-parallel rules). The diagnostic kinds each copy gets are compared with
tests/program/mutated_plans.expected, one line per mutation:

    flux.weft:6 split "" hidden_states -> SplitMixedWithWhole

`clean` marks a rule whose absence the checks accept: a rule that states the default, or one
whose work the compiler does anyway (a RoPE table left whole is sliced where it meets the split
tokens). The unmutated plans must be clean.

With `--run WEFT_RUN`, every clean copy also runs on 2 ranks at its mesh against diffusers'
output for the fixture (fp32, <= 1e-4 x max|reference|): a plan the checks accept computes what
one device does, or the test fails naming the mutation.

    python tests/program/mutated_plans.py WEFT SOURCE_DIR [--update] [--run WEFT_RUN]
"""

import json
import os
import re
import subprocess
import sys
import tempfile

PROGRAMS = {
    "flux.weft": ("flux-tiny", "64x96"),
    "flux2.weft": ("flux2-tiny", "128x96"),
    "qwenimage.weft": ("qwen-image-tiny", "128x96"),
    "wan.weft": ("wan-tiny-i2v", "64x48x5"),
    "ltx.weft": ("ltx-video-tiny", "128x96x17"),
    "ltx2.weft": ("ltx-2-tiny", "128x96x17"),
    "chronoedit.weft": ("chronoedit-tiny", "64x48x5"),
    "helios.weft": ("helios-tiny", "128x128-chunk3"),
    "minimax_h3.weft": ("minimax-h3-tiny", "96x64-lat3"),
    "hunyuanvideo.weft": ("hunyuanvideo-tiny", "64x48x9"),
}

SECTION = re.compile(r"^(context_parallel|tensor_parallel|guidance_parallel)\s*\{")
BLOCK = re.compile(r'^\s*(split|gather)\s+("[^"]*")\s*\{')
RULE = re.compile(r'^\s*(split|gather|attention|colwise|rowwise|replicate)\s+("[^"]*")(.*)$')
ITEM = re.compile(r"^\s*(output\s+\d+|[A-Za-z_][A-Za-z0-9_]*)\s+.*$")


def mutations(lines):
    """(first line, last line, label, section) of every rule, 0-based inclusive."""
    out = []
    section = None
    block = None  # (start, label)
    for i, line in enumerate(lines):
        text = line.split("#", 1)[0].rstrip()
        if not text.strip():
            continue
        m = SECTION.match(text)
        if m:
            section = m.group(1)
            continue
        if block is not None:
            if text.strip() == "}":
                out.append((block[0], i, block[1], section))
                block = None
                continue
            item = ITEM.match(text)
            if item:
                out.append((i, i, f"{block[2]} {block[3]} {item.group(1)}", section))
            continue
        if text.strip() == "}":
            section = None
            continue
        m = BLOCK.match(text)
        if m:
            block = (i, f"{m.group(1)} {m.group(2)} {{...}}", m.group(1), m.group(2))
            continue
        m = RULE.match(text)
        if m and section:
            rest = m.group(3).split()
            keep = rest[:2] if rest[:1] == ["output"] else rest[:1]  # the argument or `output N`
            out.append((i, i, " ".join([m.group(1), m.group(2)] + (keep if m.group(1) != "attention" else [])),
                        section))
    return out


def kinds(weft, plan, program, workload, mesh):
    """The error kinds `weft check --format json` reports, in order, each once."""
    proc = subprocess.run([weft, "check", plan, "--program", program, "--mesh", mesh, "--workload", workload,
                           "--format", "json"], capture_output=True, text=True)
    try:
        diagnostics = json.loads(proc.stdout)["diagnostics"]
    except (json.JSONDecodeError, KeyError):
        raise SystemExit(f"weft check {plan} --mesh {mesh}: exit {proc.returncode}, no JSON report\n"
                         f"{proc.stdout}\n{proc.stderr}")
    found = []
    for d in diagnostics:
        if d.get("level") == "error" and d["kind"] not in found:
            found.append(d["kind"])
    if proc.returncode not in (0, 1) or (proc.returncode == 1) != bool(found):
        raise SystemExit(f"weft check {plan} --mesh {mesh}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return found


def parity(weft_run, plan, program_dir, workload, mesh):
    """None when `plan` run at `mesh` matches the fixture's reference, else what weft-run said."""
    proc = subprocess.run([weft_run, "--no-prefix", "--seed", "20260201", "--program", os.path.join(program_dir, "program.pt2"),
                           "--plan", plan, "--inputs", os.path.join(program_dir, f"inputs_{workload}.safetensors"),
                           "--expect", os.path.join(program_dir, f"outputs_{workload}.safetensors"), "--mesh", mesh],
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    if proc.returncode == 0 and re.search(r"output against .* passed", out):
        return None
    return next((line for line in out.splitlines() if "FAILED" in line or "error" in line), f"exit {proc.returncode}")


def main():
    weft, source = sys.argv[1], sys.argv[2]
    update = "--update" in sys.argv[3:]
    weft_run = sys.argv[sys.argv.index("--run") + 1] if "--run" in sys.argv else None
    wrong = []
    expected_file = os.path.join(source, "tests/program/mutated_plans.expected")
    result = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (program_dir, workload) in PROGRAMS.items():
            path = os.path.join(source, "plans", name)
            program = os.path.join(source, "tests/fixtures/programs", program_dir, "program.pt2")
            with open(path) as f:
                lines = f.read().split("\n")
            for mesh in ("ulysses=2", "tp=2") + (("cfg=2",) if "guidance_parallel" in "\n".join(lines) else ()):
                base = kinds(weft, path, program, workload, mesh)
                if base:
                    raise SystemExit(f"{name} itself is not clean on {program_dir} at {mesh}: {base}")
            for first, last, label, section in mutations(lines):
                mutated = lines[:first] + lines[last + 1:]
                copy = os.path.join(tmp, name)
                with open(copy, "w") as f:
                    f.write("\n".join(mutated))
                mesh = {"tensor_parallel": "tp=2", "guidance_parallel": "cfg=2"}.get(section, "ulysses=2")
                found = kinds(weft, copy, program, workload, mesh)
                result.append(f"{name}:{first + 1} {label} on {mesh} -> {' '.join(found) if found else 'clean'}")
                if weft_run and not found:
                    why = parity(weft_run, copy, os.path.dirname(program), workload, mesh)
                    if why:
                        wrong.append(f"{name}:{first + 1} {label} on {mesh}: {why}")
    text = "\n".join(result) + "\n"
    if update:
        with open(expected_file, "w") as f:
            f.write(text)
        print(f"wrote {expected_file}: {len(result)} mutations")
        return
    with open(expected_file) as f:
        want = f.read()
    if want != text:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(want.splitlines(True), text.splitlines(True), "expected", "now"))
        raise SystemExit("mutated plans differ from tests/program/mutated_plans.expected (--update rewrites it)")
    if wrong:
        raise SystemExit("plans the checks accept but that compute something else:\n  " + "\n  ".join(wrong))
    failing = sum(1 for r in result if not r.endswith("clean"))
    print(f"{len(result)} mutations of {len(PROGRAMS)} plans: {failing} refused as expected, "
          f"{len(result) - failing} accepted" + (" and at parity" if weft_run else ""))


if __name__ == "__main__":
    main()
