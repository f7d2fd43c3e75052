"""Writes a copy of a compiled weft.plan/1 file with its first program edit of one kind removed
and its content hash recomputed, as a hostile user would: the hash then holds, and only the
runner's re-derivation (compiler/rederive.h) can tell.

usage: tamper_plan.py IN.plan.json OUT.plan.json EDIT_KIND
       tamper_plan.py IN.plan.json OUT.plan.json weights   (the first sliced block's first two
                                                             parameters swap places in its layout)
       tamper_plan.py IN.plan.json OUT.plan.json pair_mask (every attention's mask over (query,
                                                             key) pairs taken for a key mask)
       tamper_plan.py IN.plan.json OUT.plan.json mask_parts (every attention's pair mask over a
                                                              joint sequence left in the mask's
                                                              own order: its parts dropped)
       tamper_plan.py IN.plan.json OUT.plan.json whole_parts (every attention over a joint sequence
                                                              with streams every rank holds whole
                                                              left without them: whole keys
                                                              attended once per rank)
"""
import hashlib
import json
import sys


def content_hash(doc):
    # compiler/plan/plan_json.h CanonicalPlanJson: the document without content_hash, compact,
    # keys sorted.
    body = {k: v for k, v in doc.items() if k != "content_hash"}
    text = json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def main():
    src, dst, kind = sys.argv[1:4]
    doc = json.load(open(src))
    if content_hash(doc) != doc["content_hash"]:
        sys.exit("tamper_plan.py: cannot reproduce the content hash of %s" % src)
    if kind == "pair_mask":
        def strip(o):
            if isinstance(o, dict):
                o.pop("pair_mask", None)
                for v in o.values():
                    strip(v)
            elif isinstance(o, list):
                for v in o:
                    strip(v)
        if '"pair_mask"' not in json.dumps(doc):
            sys.exit("tamper_plan.py: %s has no attention with a pair mask" % src)
        strip(doc)
    elif kind in ("mask_parts", "whole_parts"):
        key = "parts" if kind == "mask_parts" else "whole_parts"
        attentions = [e for e in doc["program"]["edits"] if e["kind"] == "attention" and e.get(key)]
        if not attentions:
            sys.exit("tamper_plan.py: %s has no attention with `%s`" % (src, key))
        for e in attentions:
            del e[key]
    elif kind == "weights":
        block = doc["weights"]["blocks"][0]
        for key in ("params", "shapes", "dtypes"):
            block[key][0], block[key][1] = block[key][1], block[key][0]
    else:
        edits = doc["program"]["edits"]
        index = next((i for i, e in enumerate(edits) if e["kind"] == kind), None)
        if index is None:
            sys.exit("tamper_plan.py: %s has no %s edit" % (src, kind))
        del edits[index]
    doc["content_hash"] = content_hash(doc)
    with open(dst, "w") as out:
        json.dump(doc, out, indent=1)


if __name__ == "__main__":
    main()
