"""Writes a copy of a .pt2 program with one JSON entry edited the way a hostile or careless file
would be (issue 28's probe), for the runner's and the compiler's refusals to be tested on.

usage: edit_archive.py IN.pt2 OUT.pt2 EDIT
EDIT: huge-workload      the first workload's first tensor input made 10^6 x 10^6 x 64 (256 TB)
      negative-workload  ... with a size of -1
      negative-param     the first parameter of the weights index with a size of -3
      overflowing-param  ... with sizes 2^40 x 2^40 (2^80 elements)
      deep-guard         a guard nested 5,000 parentheses deep
"""
import json
import sys
import zipfile


def first_tensor_input(manifest):
    inputs = manifest["workloads"][0]["inputs"]
    return next(v for v in inputs.values() if "shape" in v)


def first_param(index):
    return next(iter(index["config"].values()))["tensor_meta"]["sizes"]


EDITS = {
    "huge-workload": ("extra/weft.json", lambda j: first_tensor_input(j).update(shape=[10**6, 10**6, 64])),
    "negative-workload": ("extra/weft.json", lambda j: first_tensor_input(j)["shape"].__setitem__(0, -1)),
    "negative-param": ("data/weights/model_weights_config.json", lambda j: first_param(j).__setitem__(0, {"as_int": -3})),
    "deep-guard": ("models/model.json",
                   lambda j: j["guards_code"].append("(" * 5000 + "L['hidden_states'].size()[0] == 2" + ")" * 5000)),
    "overflowing-param": ("data/weights/model_weights_config.json",
                          lambda j: first_param(j).__setitem__(slice(None), [{"as_int": 2**40}, {"as_int": 2**40}])),
}


def main():
    src, dst, edit = sys.argv[1:4]
    entry, change = EDITS[edit]
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.split("/", 1)[-1] == entry:
                doc = json.loads(data)
                change(doc)
                data = json.dumps(doc).encode()
            zout.writestr(info, data)


if __name__ == "__main__":
    main()
