#!/usr/bin/env python3
"""One axis's bytes in a `weft-run --report json` file, measured next to predicted, for tests that
hold the cost model to what the run sent:

  collective_bytes.py REPORT AXIS
  -> [expect passed|FAILED]                                  (when the run had --expect)
     AXIS measured OP BYTES, OP BYTES ... = SUM predicted SUM

`measured` is rank 0's counters for one forward (collectives_per_forward), `predicted` the plan's
cost of that axis (predicted_per_forward)."""

import json
import sys


def main():
    report, axis = sys.argv[1], sys.argv[2]
    with open(report) as f:
        r = json.load(f)
    if "expect" in r:
        print("expect", "passed" if r["expect"]["passed"] else "FAILED")
    measured = [c for c in r["collectives_per_forward"] if c["axis"] == axis]
    predicted = sum(c["bytes_sent"] for c in r["predicted_per_forward"] if c["axis"] == axis)
    ops = ", ".join("%s %d" % (c["op"], c["bytes_sent"]) for c in measured)
    print("%s measured %s = %d predicted %d" % (axis, ops, sum(c["bytes_sent"] for c in measured), predicted))


if __name__ == "__main__":
    main()
