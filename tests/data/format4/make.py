#!/usr/bin/python3
"""Writes this folder's databases and expected.json with the pack_lmdb at
$IMAGEPACK_TOOLS (or build/tools). Run once, by the build that wrote the
format; the files are then kept as they are (README.md)."""
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import read_db  # noqa: E402

TOOLS = os.environ.get("IMAGEPACK_TOOLS", os.path.join(ROOT, "build", "tools"))


def samples(tmp):
    rng = np.random.default_rng(4)
    os.makedirs(os.path.join(tmp, "img"))
    os.makedirs(os.path.join(tmp, "tgt"))
    os.makedirs(os.path.join(tmp, "mask"))
    rows = []
    for i in range(5):
        pic = rng.integers(0, 256, (32, 40, 3), np.uint8)
        Image.fromarray(pic).save(os.path.join(tmp, "img", "%d.jpg" % i), quality=90)
        Image.fromarray(255 - pic).save(os.path.join(tmp, "tgt", "%d.jpg" % i), quality=90)
        mask = rng.integers(0, 3, (32, 40), np.uint8)
        mask[0] = 255
        Image.fromarray(mask).save(os.path.join(tmp, "mask", "%d.png" % i))
        boxes = [] if i == 3 else [[1.5, 2, 20, 30.25, i % 2], [0, 0, 40, 32, 1]]
        rows.append({"image": "img/%d.jpg" % i, "label": ["cat", "dog"][i % 2], "target": "tgt/%d.jpg" % i,
                     "mask": "mask/%d.png" % i, "boxes": boxes, "tags": [i, 7 * i],
                     "vec": [0.5 * i, -1.25], "caption": "sample %d \u00e9" % i})
    with open(os.path.join(tmp, "samples.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return os.path.join(tmp, "samples.jsonl")


def expected(path):
    db = read_db.open_db(path)
    meta = db.meta
    out = {"classes": meta["classes"], "fields": meta["fields"], "format_version": meta["format_version"],
           "records": []}
    for i in range(meta["count"]):
        raw = db.raw(i)
        rec = read_db.parse_record(raw)
        out["records"].append({"path": rec["path"], "label": rec["label"], "encoding": rec["encoding"],
                               "height": rec["height"], "width": rec["width"], "channels": rec["channels"],
                               "fields": [f["kind"] for f in rec["fields"]],
                               "record_sha256": hashlib.sha256(raw).hexdigest(),
                               "mask_sha256": [hashlib.sha256(f["value"].tobytes()).hexdigest()
                                               for f in rec["fields"] if f["kind"] == "mask"]})
    return out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        manifest = samples(tmp)
        want = {}
        for name, extra in (("fields.lmdb", ["--records-per-value", "2"]),
                            ("fields.blob", ["--format", "blob", "--encoding", "raw"])):
            out = os.path.join(HERE, name)
            if os.path.exists(out):
                os.remove(out)
            subprocess.run([os.path.join(TOOLS, "pack_lmdb"), "--manifest", manifest, out, "-q",
                            "--mask-classes", "3"] + extra, check=True)
            want[name] = expected(out)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(want, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
