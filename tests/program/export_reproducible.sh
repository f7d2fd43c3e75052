#!/bin/sh
# Re-exports flux-tiny and compares with the committed program byte for byte; on a difference,
# names the archive members that differ (and the first differing line of a JSON member), so a
# CI log says what changed without the files.
# Usage: export_reproducible.sh PYTHON SOURCE_DIR OUT
set -u
python=$1 src=$2 out=$3
want="$src/tests/fixtures/programs/flux-tiny/program.pt2"
"$python" "$src/tools/export_program.py" "$src/tools/model_configs/flux-tiny.json" --batch 2 -o "$out" || exit 1
cmp -s "$out" "$want" && { echo "PASS: $out equals $want"; exit 0; }
echo "FAIL: $out differs from $want"
"$python" - "$out" "$want" <<'PY'
import sys, zipfile
a, b = (zipfile.ZipFile(p) for p in sys.argv[1:3])
na, nb = set(a.namelist()), set(b.namelist())
for n in sorted(na ^ nb):
    print("  only in", "the new export" if n in na else "the committed program", ":", n)
for n in sorted(na & nb):
    ia, ib = a.getinfo(n), b.getinfo(n)
    da, db = a.read(n), b.read(n)
    if da != db:
        print(f"  member {n}: {len(da)} vs {len(db)} bytes")
        la, lb = da.decode("utf-8", "replace"), db.decode("utf-8", "replace")
        i = next((k for k in range(min(len(la), len(lb))) if la[k] != lb[k]), min(len(la), len(lb)))
        print("    new:      ", la[max(0, i - 120):i + 120].replace("\n", " "))
        print("    committed:", lb[max(0, i - 120):i + 120].replace("\n", " "))
    elif ia.date_time != ib.date_time or ia.compress_type != ib.compress_type or ia.external_attr != ib.external_attr:
        print(f"  member {n}: same bytes, other metadata ({ia.date_time} vs {ib.date_time})")
PY
exit 1
