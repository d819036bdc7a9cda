#!/usr/bin/python3
"""Reads an imagepack database (LMDB or blob) with python3-lmdb and numpy.

    read_db.py DB [INDEX ...]      prints metadata and the given records
    read_db.py DB --check          reads every record, checks every checksum

The layout is docs/FORMAT.md; `open_db` and `read_record` are what a Python
user needs (see docs/PYTHON.md for a PyTorch Dataset built on them).
"""
import json
import os
import struct
import sys

import numpy as np

HEADER = struct.Struct("<QIHBBiIIHHII")  # docs/FORMAT.md, "Record"


def parse_record(buf, verify=True):
    """bytes of one record -> dict(label, encoding, height, width, channels,
    path, payload); payload is JPEG bytes or an HxWxC uint8 array."""
    (checksum, magic, version, encoding, channels, label, height, width,
     path_len, _, payload_len, _) = HEADER.unpack_from(buf, 0)
    if magic != 0x524B5049 or version != 1:  # b"IPKR" little-endian
        raise ValueError("not an imagepack v1 record")
    if 40 + path_len + payload_len != len(buf):
        raise ValueError("record length mismatch")
    if verify:
        import xxhash
        if xxhash.xxh3_64_intdigest(bytes(buf[8:])) != checksum:
            raise ValueError("checksum mismatch")
    path = bytes(buf[40:40 + path_len]).decode("utf-8")
    payload = bytes(buf[40 + path_len:])
    if encoding == 1:
        payload = np.frombuffer(payload, np.uint8).reshape(height, width, channels)
    return dict(label=label, encoding="raw" if encoding else "jpeg", height=height,
                width=width, channels=channels, path=path, payload=payload)


class LmdbDB:
    def __init__(self, path):
        import lmdb
        self.env = lmdb.open(path, subdir=False, readonly=True, lock=False, readahead=False)
        with self.env.begin() as txn:
            self.meta = json.loads(txn.get(b"__meta__"))
        # Format 2: values hold records_per_value records each; format 1: one.
        self.per_value = self.meta.get("records_per_value", 0)

    def raw(self, i):
        with self.env.begin(buffers=True) as txn:
            if self.per_value == 0:
                return bytes(txn.get(b"%010d" % i))
            group, j = divmod(i, self.per_value)
            value = txn.get(b"%010d" % group)
            if value is None:
                raise KeyError("record %010d is missing (value %010d)" % (i, group))
            magic, n = struct.unpack_from("<4sI", value, 0)
            if magic != b"IPKG" or j >= n:
                raise ValueError("value %010d: bad header" % group)
            begin, end = struct.unpack_from("<QQ", value, 8 + 8 * j)
            return bytes(value[begin:end])


class BlobDB:
    def __init__(self, path):
        self.buf = np.memmap(path, np.uint8, "r")
        magic, _, _, count, index_off, meta_off, meta_len = struct.unpack_from("<8sIIQQQQ", self.buf, 0)
        if magic != b"IPKBLOB1":
            raise ValueError("not an imagepack blob")
        self.index = np.frombuffer(self.buf, np.uint64, count * 2, index_off).reshape(count, 2)
        self.meta = json.loads(bytes(self.buf[meta_off:meta_off + meta_len]))

    def raw(self, i):
        off, length = (int(x) for x in self.index[i])
        return bytes(self.buf[off:off + length])


def open_db(path):
    with open(path, "rb") as f:
        return BlobDB(path) if f.read(8) == b"IPKBLOB1" else LmdbDB(path)


def read_record(db, i, verify=True):
    return parse_record(db.raw(i), verify)


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.stderr.write(__doc__.strip() + "\n")
        sys.exit(2)
    if not os.path.exists(sys.argv[1]):
        sys.exit("read_db.py: %s: no such database" % sys.argv[1])
    db = open_db(sys.argv[1])
    meta = db.meta
    print("count %d, %d classes, encoding %s, channels %d, mean %s, std %s" % (
        meta["count"], len(meta["classes"]), meta["encoding"], meta["channels"],
        [round(x, 4) for x in meta["mean"]], [round(x, 4) for x in meta["std"]]))
    if sys.argv[2:] == ["--check"]:
        counts = [0] * len(meta["classes"])
        for i in range(meta["count"]):
            counts[read_record(db, i)["label"]] += 1
        if counts != meta["label_counts"]:
            sys.exit("label counts differ from the metadata")
        print("checked %d records: OK" % meta["count"])
        return
    for arg in sys.argv[2:]:
        r = read_record(db, int(arg))
        shape = r["payload"].shape if r["encoding"] == "raw" else "%d bytes" % len(r["payload"])
        print("%s: label %d (%s) %dx%dx%d %s %s" % (arg, r["label"], meta["classes"][r["label"]],
                                                  r["height"], r["width"], r["channels"], r["encoding"], shape))
        print("   path %s" % r["path"])


if __name__ == "__main__":
    main()
