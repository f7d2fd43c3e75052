#!/bin/sh
# Stands in for the project's Python running tools/export_program.py (program_cache_test sets it as
# WEFT_PYTHON): after a second, as an export takes a while, writes the tiny Flux fixture's program of
# the asked dtype to -o. Those tests are about the cache; the real export on demand runs in
# program.auto.* and program.model_dir.*, the tool itself in tools.export_program_*.
#   fake_export.sh tools/export_program.py CONFIG --batch N --dtype D -o OUT
out="" dtype=fp32
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=$2; shift ;;
    --dtype) dtype=$2; shift ;;
  esac
  shift
done
sleep 1
program=program.pt2
[ "$dtype" = bf16 ] && program=program_bf16.pt2
exec cp "$WEFT_FAKE_EXPORT_PROGRAMS/$program" "$out"
