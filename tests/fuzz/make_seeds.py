#!/usr/bin/python3
"""Writes the fuzz seed corpora to tests/data/fuzz/<target>/ from the golden
images in tests/data and small databases packed by pack_lmdb.

    make_seeds.py BINDIR      (BINDIR holds pack_lmdb, e.g. build/tools)

Regression inputs found by fuzzing live beside the seeds as crash-*/regress-*
and are kept by this script.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data")
OUT = os.path.join(DATA, "fuzz")
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import read_db  # noqa: E402

GOLDEN = ["rgb.jpg", "gray.jpg", "cmyk_adobe.jpg", "progressive.jpg", "png_named.JPEG", "rgba.png"]


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main(bindir):
    for t in ("fuzz_record", "fuzz_meta", "fuzz_decode", "fuzz_verify"):
        d = os.path.join(OUT, t)
        if os.path.isdir(d):
            for f in os.listdir(d):
                if f.startswith("seed-"):
                    os.remove(os.path.join(d, f))
    # Decode: mode byte x a few option combinations, 8 box bytes, the file.
    box = struct.pack("<4H", 100, 80, 300, 260)
    for g in GOLDEN:
        body = open(os.path.join(DATA, g), "rb").read()
        for mode in (0x00, 0x0B, 0x5E, 0x61, 0x66):
            put("fuzz_decode", "seed-%s-%02x" % (g.replace(".", "_"), mode), bytes([mode]) + box + body)

    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "tree")
        for i, g in enumerate(GOLDEN):
            d = os.path.join(tree, "class%d" % (i % 2))
            os.makedirs(d, exist_ok=True)
            shutil.copy(os.path.join(DATA, g), os.path.join(d, g))
        for enc in ("jpeg", "raw"):
            for fmt in ("blob", "lmdb"):
                db = os.path.join(tmp, "%s.%s" % (enc, fmt))
                # Two records per LMDB value: 6 images make 3 values.
                subprocess.run([os.path.join(bindir, "pack_lmdb"), tree, db, "--format", fmt,
                                "--encoding", enc, "--max-size", "12", "--records-per-value", "2",
                                "--quiet"], check=True)
                r = read_db.open_db(db)
                if fmt == "blob":
                    blob = open(db, "rb").read()
                    for mode in (0x00, 0x02, 0x06, 0x1E, 0x2A):
                        put("fuzz_verify", "seed-%s-blob-%02x" % (enc, mode), bytes([mode]) + blob)
                    meta_off, meta_len = struct.unpack_from("<QQ", blob, 32)
                    put("fuzz_meta", "seed-%s" % enc, blob[meta_off:meta_off + meta_len])
                    for i in range(3):
                        put("fuzz_record", "seed-%s-%d" % (enc, i), r.raw(i))
                else:
                    # LMDB chunks: each value under the next key, then
                    # __meta__. Format 2 as packed (grouped values), and the
                    # same records as format 1 (one bare record per value).
                    with r.env.begin() as txn:
                        values = [bytes(v) for k, v in txn.cursor() if k != b"__meta__"]
                        meta = bytes(txn.get(b"__meta__"))
                    v1_meta = json.loads(meta)
                    v1_meta["format_version"] = 1
                    v1_meta.pop("meta_checksum", None)  # format 1 has none; the text changes
                    del v1_meta["records_per_value"]
                    for tag, vals, m in (("lmdb", values, meta),
                                         ("lmdb1", [r.raw(i) for i in range(r.meta["count"])],
                                          json.dumps(v1_meta).encode())):
                        chunks = b"".join(struct.pack("<BH", 0, len(v)) + v for v in vals)
                        chunks += struct.pack("<BH", 2, len(m)) + m
                        for mode in (0x01, 0x03, 0x07, 0x1F, 0x2B):
                            put("fuzz_verify", "seed-%s-%s-%02x" % (enc, tag, mode), bytes([mode]) + chunks)
        field_seeds(bindir, tmp)
        wide_field_seeds(bindir, tmp)


def field_seeds(bindir, tmp):
    """Records with fields (mask, target image, boxes, ints, floats, text),
    packed from a manifest: records for fuzz_record, blobs and LMDB chunks
    for fuzz_verify."""
    rows = []
    for i, g in enumerate(["rgb.jpg", "gray.jpg", "progressive.jpg"]):
        rows.append({"image": os.path.join(DATA, g), "target": os.path.join(DATA, g),
                     "mask": os.path.join(tmp, "mask%d.png" % i), "boxes": [[1, 2, 5, 6, i]],
                     "tags": [i, 7], "depth": [0.5 * i], "caption": "seed %d" % i})
        subprocess.run(["convert", os.path.join(DATA, g), "-colorspace", "gray", "-threshold", "50%",
                        "-depth", "8", "-define", "png:color-type=0", rows[-1]["mask"]], check=True)
    manifest = os.path.join(tmp, "fields.jsonl")
    with open(manifest, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    for fmt in ("blob", "lmdb"):
        db = os.path.join(tmp, "fields.%s" % fmt)
        subprocess.run([os.path.join(bindir, "pack_lmdb"), "--manifest", manifest, db, "--format", fmt,
                        "--max-size", "12", "--records-per-value", "2", "--quiet"], check=True)
        r = read_db.open_db(db)
        if fmt == "blob":
            blob = open(db, "rb").read()
            for mode in (0x00, 0x02, 0x06):
                put("fuzz_verify", "seed-fields-blob-%02x" % mode, bytes([mode]) + blob)
            for i in range(r.meta["count"]):
                put("fuzz_record", "seed-fields-%d" % i, r.raw(i))
        else:
            with r.env.begin() as txn:
                values = [bytes(v) for k, v in txn.cursor() if k != b"__meta__"]
                meta = bytes(txn.get(b"__meta__"))
            chunks = b"".join(struct.pack("<BH", 0, len(v)) + v for v in values)
            chunks += struct.pack("<BH", 2, len(meta)) + meta
            for mode in (0x01, 0x03, 0x07):
                put("fuzz_verify", "seed-fields-lmdb-%02x" % mode, bytes([mode]) + chunks)


def wide_field_seeds(bindir, tmp):
    """Records with a uint16 mask and a depth map (format 5), written from
    16-bit PNGs by Pillow: records for fuzz_record, the metadata for
    fuzz_meta, the blob for fuzz_verify."""
    import numpy as np
    from PIL import Image
    rows = []
    for i, g in enumerate(["rgb.jpg", "gray.jpg"]):
        y, x = np.mgrid[0:48, 0:64]
        Image.fromarray(((x * 997 + y * 31 + i) % 60001).astype(np.uint16)).save(os.path.join(tmp, "m16-%d.png" % i))
        Image.fromarray((x * 40 + y).astype(np.uint16)).save(os.path.join(tmp, "d16-%d.png" % i))
        rows.append({"image": os.path.join(DATA, g), "mask": os.path.join(tmp, "m16-%d.png" % i),
                     "depth": os.path.join(tmp, "d16-%d.png" % i)})
    manifest = os.path.join(tmp, "wide.jsonl")
    with open(manifest, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    db = os.path.join(tmp, "wide.blob")
    subprocess.run([os.path.join(bindir, "pack_lmdb"), "--manifest", manifest, db, "--format", "blob",
                    "--max-size", "8", "--mask-dtype", "uint16", "--depth-scale", "0.001", "--quiet", "--direct-io", "off",
                    "--allow-outside-paths"], check=True)
    r = read_db.open_db(db)
    blob = open(db, "rb").read()
    magic, _, _, count, index_off, meta_off, meta_len = struct.unpack_from("<8sIIQQQQ", blob, 0)
    put("fuzz_meta", "seed-format5-fields", blob[meta_off:meta_off + meta_len])
    for mode in (0x00, 0x02, 0x06):
        put("fuzz_verify", "seed-fields16-blob-%02x" % mode, bytes([mode]) + blob)
    for i in range(r.meta["count"]):
        put("fuzz_record", "seed-fields16-%d" % i, r.raw(i))


if __name__ == "__main__":
    main(sys.argv[1])
