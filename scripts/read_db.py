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
FIELD = struct.Struct("<BBBBIII")        # docs/FORMAT.md, "Fields"
# The kind byte of a field entry: its name, layout and first format
# (docs/FORMAT.md, "Kinds"); the layout says how the entry is read.
# BEGIN KINDS (generated from the library's kind table: tests/python/test_kinds.py --update)
KINDS = {
    1: ("image", "picture", 3),
    2: ("mask", "map", 3),
    3: ("ints", "list", 3),
    4: ("boxes", "boxes", 3),
    5: ("floats", "list", 3),
    6: ("text", "text", 3),
    7: ("depth", "map", 5),
}
FLOAT_LISTS = {"floats"}
# END KINDS
MAP_DTYPES = {1: np.uint8, 2: np.dtype("<u2")}  # a map's encoding byte: bytes per sample


def parse_fields(buf, count):
    """The field section of a version 2 record -> list of dicts (slot,
    kind, value): image {encoding, channels, height, width, payload},
    mask and depth HxW uint8 or uint16 (as stored), ints int32, floats
    float32, boxes (N x 4 float32, N int32 classes), text str."""
    out, at = [], 0
    for _ in range(count):
        slot, kind, encoding, channels, dim0, dim1, size = FIELD.unpack_from(buf, at)
        data = bytes(buf[at + 16:at + 16 + size])
        if len(data) != size or kind not in KINDS:
            raise ValueError("bad field entry")
        at += 16 + size
        kind, layout, _ = KINDS[kind]
        if layout == "picture":
            value = dict(encoding="raw" if encoding else "jpeg", channels=channels, height=dim0, width=dim1,
                         payload=np.frombuffer(data, np.uint8).reshape(dim0, dim1, channels) if encoding else data)
        elif layout == "map":
            if encoding not in MAP_DTYPES:
                raise ValueError("bad map encoding %d" % encoding)
            value = np.frombuffer(data, MAP_DTYPES[encoding]).reshape(dim0, dim1)
        elif layout == "list":
            value = np.frombuffer(data, "<f4" if kind in FLOAT_LISTS else "<i4")
        elif layout == "boxes":
            rec = np.frombuffer(data, np.dtype([("xy", "<f4", 4), ("cls", "<i4")]))
            value = (rec["xy"].copy(), rec["cls"].copy())
        else:
            value = data.decode("utf-8")
        out.append(dict(slot=slot, kind=kind, value=value))
    if at != len(buf):
        raise ValueError("field section length mismatch")
    return out


_NO_XXHASH_SAID = []


def _xxh3():
    """xxhash's XXH3-64, or None (said once on stderr) where python3-xxhash
    is missing: checksums are then not checked, and the output says so."""
    try:
        import xxhash
        return xxhash.xxh3_64_intdigest
    except ImportError:
        if not _NO_XXHASH_SAID:
            _NO_XXHASH_SAID.append(True)
            sys.stderr.write("read_db.py: checksums not checked: python3-xxhash is not installed\n")
        return None


def parse_record(buf, verify=True):
    """bytes of one record -> dict(label, encoding, height, width, channels,
    path, payload, fields); payload is JPEG bytes or an HxWxC uint8 array;
    fields (version 2 records) as parse_fields gives them."""
    (checksum, magic, version, encoding, channels, label, height, width,
     path_len, field_count, payload_len, fields_size) = HEADER.unpack_from(buf, 0)
    if magic != 0x524B5049 or version not in (1, 2):  # b"IPKR" little-endian
        raise ValueError("not an imagepack v1/v2 record")
    if version == 1 and (field_count or fields_size):
        raise ValueError("reserved bytes set in a v1 record")
    if 40 + path_len + payload_len + fields_size != len(buf):
        raise ValueError("record length mismatch")
    xxh3 = _xxh3() if verify else None
    if xxh3 is not None and xxh3(bytes(buf[8:])) != checksum:
        raise ValueError("checksum mismatch")
    path = bytes(buf[40:40 + path_len]).decode("utf-8")
    end = 40 + path_len + payload_len
    payload = bytes(buf[40 + path_len:end])
    if encoding == 1:
        payload = np.frombuffer(payload, np.uint8).reshape(height, width, channels)
    fields = parse_fields(memoryview(buf)[end:], field_count) if version == 2 else []
    return dict(label=label, encoding="raw" if encoding else "jpeg", height=height,
                width=width, channels=channels, path=path, payload=payload, fields=fields)


def load_meta(raw):
    """Metadata JSON bytes -> dict, its meta_checksum checked where it has
    one (format 4; docs/FORMAT.md, "Metadata checksum")."""
    meta = json.loads(raw)
    if "meta_checksum" in meta:
        xxh3 = _xxh3()
        if xxh3 is None:
            return meta
        text = bytes(raw).rstrip(b" \n\r\t")
        key = b'"meta_checksum": "'
        at = text.index(key) + len(key)
        stored = int(text[at:at + 16], 16)
        if xxh3(text[:at] + b"0" * 16 + text[at + 16:]) != stored:
            raise ValueError("metadata checksum mismatch: the metadata was changed or damaged")
    elif meta.get("format_version", 0) >= 4:
        raise ValueError("format %d metadata lacks its meta_checksum" % meta["format_version"])
    return meta


class LmdbDB:
    def __init__(self, path):
        import lmdb
        self.env = lmdb.open(path, subdir=False, readonly=True, lock=False, readahead=False)
        with self.env.begin() as txn:
            self.meta = load_meta(txn.get(b"__meta__"))
        # Format 2: values hold records_per_value records each; format 1: one.
        self.per_value = self.meta.get("records_per_value", 0)

    def raw(self, i):
        with self.env.begin(buffers=True) as txn:
            if self.per_value == 0:
                value = txn.get(b"%010d" % i)
                if value is None:
                    raise KeyError("record %010d is missing" % i)
                return bytes(value)
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
        magic, layout, _, count, index_off, meta_off, meta_len = struct.unpack_from("<8sIIQQQQ", self.buf, 0)
        if magic != b"IPKBLOB1":
            raise ValueError("not an imagepack blob")
        if layout not in (1, 2):  # 2: the index checksummed per chunk; the entries are where 1 has them
            raise ValueError("blob layout version %d" % layout)
        self.index = np.frombuffer(self.buf, np.uint64, count * 2, index_off).reshape(count, 2)
        self.meta = load_meta(bytes(self.buf[meta_off:meta_off + meta_len]))

    def raw(self, i):
        off, length = (int(x) for x in self.index[i])
        return bytes(self.buf[off:off + length])


def open_db(path):
    with open(path, "rb") as f:
        return BlobDB(path) if f.read(8) == b"IPKBLOB1" else LmdbDB(path)


def read_record(db, i, verify=True):
    return parse_record(db.raw(i), verify)


def fail(code, text):
    sys.stderr.write("read_db.py: %s\n" % text)
    sys.exit(code)


def main():
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.stderr.write(__doc__.strip() + "\n")
        sys.exit(2)
    path, rest = sys.argv[1], sys.argv[2:]
    check = rest == ["--check"]
    indices = []
    for arg in ([] if check else rest):  # every argument checked before any output
        try:
            indices.append(int(arg))
        except ValueError:
            fail(2, "%s: not a record index (give numbers, or --check alone)" % arg)
    if not os.path.exists(path):
        fail(1, "%s: no such database" % path)
    try:
        db = open_db(path)
        meta = db.meta
        count = int(meta["count"])
    except Exception as e:  # lmdb.Error, OSError, a bad header or metadata: one line, no traceback
        fail(1, "%s: not an imagepack database (%s)" % (path, str(e) or type(e).__name__))
    for i in indices:
        if not 0 <= i < count:
            fail(2, "index %d out of range: %s holds %d records" % (i, path, count))
    # Empty mean and std: packed without statistics (--stats-sample 0).
    stats = ("mean %s, std %s" % ([round(x, 4) for x in meta["mean"]], [round(x, 4) for x in meta["std"]])
             if meta["mean"] else "no statistics")
    print("count %d, %d classes, encoding %s, channels %d, %s" % (
        meta["count"], len(meta["classes"]), meta["encoding"], meta["channels"], stats))
    if check:  # every record, each damaged one said with its index, then the count
        counts = [0] * len(meta["classes"])
        bad = 0
        for i in range(meta["count"]):
            try:
                label = read_record(db, i)["label"]
            except (ValueError, KeyError, TypeError) as e:
                bad += 1
                if bad <= 10:
                    sys.stderr.write("read_db.py: %s: record %d: %s\n" % (path, i, e))
                continue
            if 0 <= label < len(counts):
                counts[label] += 1
        if bad:
            fail(1, "%s: %d of %d records damaged%s" % (path, bad, meta["count"], " (the first 10 above)" if bad > 10 else ""))
        if counts != meta["label_counts"]:
            fail(1, "%s: label counts differ from the metadata" % path)
        print("checked %d records: OK" % meta["count"])
        return
    for i in indices:
        try:
            r = read_record(db, i)
        except (ValueError, KeyError, TypeError) as e:  # a damaged or missing record: said, with its index
            fail(1, "%s: record %d: %s" % (path, i, e))
        shape = r["payload"].shape if r["encoding"] == "raw" else "%d bytes" % len(r["payload"])
        name = meta["classes"][r["label"]] if r["label"] >= 0 else "no class"
        print("%d: label %d (%s) %dx%dx%d %s %s" % (i, r["label"], name,
                                                  r["height"], r["width"], r["channels"], r["encoding"], shape))
        print("   path %s" % r["path"])
        for f in r["fields"]:
            spec = meta["fields"][f["slot"]]
            v = f["value"]
            text = (v[0].shape if spec["kind"] == "boxes" else getattr(v, "shape", None)) or repr(v)[:60]
            print("   %s (%s): %s" % (spec["name"], spec["kind"], text))


if __name__ == "__main__":
    main()
