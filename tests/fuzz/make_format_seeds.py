#!/usr/bin/python3
"""Writes the seed corpora of the parsers of other tools' formats to
tests/data/fuzz/<target>/seed-*, each shaped the way the real producer
writes it: Python's tarfile (what webdataset's TarWriter and ShardWriter
use) in its three formats, pickle at protocols 2-5 (folder2lmdb), JSON
Lines and CSV manifests, a COCO instances file with crowd and keypoint-only
annotations, img2dataset's LAION layout, and Pascal VOC palette masks.

    make_format_seeds.py [TARGET...]

With targets named (fuzz_thrift, fuzz_meta_json), only their seeds are
written. Regression inputs found by fuzzing live beside the seeds as regress-* and
are kept by this script.
"""
import gzip
import io
import json
import os
import pickle
import struct
import sys
import tarfile

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "fuzz")
TARGETS = ("fuzz_tar", "fuzz_pickle", "fuzz_json", "fuzz_labels", "fuzz_sources", "fuzz_mask", "fuzz_braces",
           "fuzz_manifest", "fuzz_coco", "fuzz_webdataset", "fuzz_folder2lmdb", "fuzz_tfrecord", "fuzz_parquet", "fuzz_thrift", "fuzz_meta_json")


def put(target, name, data, kind="seed"):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, kind + "-" + name), "wb") as f:
        f.write(data)


def tiny_jpeg():
    b = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(b, "JPEG", quality=50)
    return b.getvalue()


def png(img):
    b = io.BytesIO()
    img.save(b, "PNG")
    return b.getvalue()


def shard(members, fmt):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
    return b.getvalue()


def tfrecord_seeds(jpg):
    """fuzz_tfrecord: mode byte 0 a TFRecord file (TF-slim and TFDS
    layouts, packed and unpacked lists), 1 a bare Example, 2 a DALI .idx."""
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    from tfrecord_writer import EXAMPLE, EXAMPLE_UNPACKED, example, frame
    slim = {"image/encoded": jpg, "image/format": b"JPEG", "image/class/label": 1,
            "image/class/synset": b"n01440764", "image/class/text": b"tench, Tinca tinca",
            "image/filename": b"n01440764_1.JPEG", "image/width": 8, "image/height": 8,
            "image/object/bbox/xmin": [0.1], "image/object/bbox/ymin": [0.2], "image/object/bbox/xmax": [0.5],
            "image/object/bbox/ymax": [1.0], "image/object/bbox/label": [1]}
    tfds = {"image": jpg, "label": 3}
    for name, values in (("slim", slim), ("tfds", tfds)):
        for cls, how in ((EXAMPLE, "packed"), (EXAMPLE_UNPACKED, "unpacked")):
            ex = example(values, cls)
            put("fuzz_tfrecord", "file-%s-%s" % (name, how), b"\x00" + frame(ex) + frame(example(tfds, cls)))
            put("fuzz_tfrecord", "example-%s-%s" % (name, how), b"\x01" + ex)
    put("fuzz_tfrecord", "idx", b"\x02\x00\x01" + b"0 120\n120 77\n197 16\n")  # a data file of 4096 bytes
    put("fuzz_sources", "tfrecord-slim", b"\x07" + frame(example(slim)) + frame(example(tfds)))


PARQUET_TESTING = os.path.join(HERE, "..", "..", "..", "shared", "fixtures", "parquet-testing", "data")
PARQUET_SEEDS = ("alltypes_plain.parquet", "alltypes_plain.snappy.parquet", "alltypes_dictionary.parquet",
                 "datapage_v2.snappy.parquet", "delta_binary_packed.parquet", "delta_length_byte_array.parquet",
                 "delta_byte_array.parquet", "delta_encoding_optional_column.parquet", "nulls.snappy.parquet",
                 "nullable.impala.parquet", "datapage_v1-snappy-compressed-checksum.parquet",
                 "rle-dict-snappy-checksum.parquet", "binary.parquet", "byte_stream_split.zstd.parquet",
                 "rle_boolean_encoding.parquet", "concatenated_gzip_members.parquet",
                 "datapage_v2_empty_datapage.snappy.parquet", "column_chunk_key_value_metadata.parquet",
                 "hadoop_lz4_compressed.parquet", "non_hadoop_lz4_compressed.parquet", "lz4_raw_compressed.parquet",
                 "list_columns.parquet", "nested_lists.snappy.parquet", "old_list_structure.parquet",
                 "repeated_no_annotation.parquet", "repeated_primitive_no_list.parquet", "nonnullable.impala.parquet",
                 "null_list.parquet")


def tfrecord_regress(jpg):
    """The crafted TFRecords of issue 57, kept as regress-* (rewritten, not
    removed, by this script): a label of INT64_MAX (pack_lmdb died with
    SIGSEGV), labels and box labels past int32 either way, a first record
    whose length is damaged (its shard was no longer recognised), empty
    image bytes, a file without labels, more error entries than a file's
    budget, and a DALI .idx of more lines than its data file can hold."""
    import struct
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    from tfrecord_writer import example, frame
    big, small = 2**63 - 1, -2**63

    def file(*records):
        return b"".join(frame(r) for r in records)

    box = {"image/object/bbox/xmin": [0.1], "image/object/bbox/ymin": [0.1], "image/object/bbox/xmax": [0.5],
           "image/object/bbox/ymax": [0.5], "image/width": 8, "image/height": 8}
    cases = {
        "label-int64-max": file(example({"image": jpg, "label": 0}), example({"image": jpg, "label": big}),
                                example({"image": jpg, "label": 1})),
        "slim-label-int64-min": file(example({"image/encoded": jpg, "image/class/label": small}),
                                     example({"image/encoded": jpg, "image/class/label": big})),
        "box-label-int64-min": file(example(dict(box, **{"image/encoded": jpg, "image/class/label": 1,
                                                         "image/object/bbox/label": [small]})),
                                    example(dict(box, **{"image": jpg, "label": big}))),
        "empty-image": file(example({"image/encoded": [b""], "image/class/label": 1}),
                            example({"image": [b"", b""], "label": 0})),
        "no-label": file(*[example({"image/encoded": jpg})] * 3),
        "errors-past-budget": (frame(b"")[:-4] + b"\0\0\0\0") * 1100 +
        frame(example({"image": jpg, "label": 0})),
    }
    damaged = bytearray(file(*[example({"image": jpg, "label": k}) for k in range(3)]))
    damaged[0] ^= 0x40
    cases["damaged-first-length"] = bytes(damaged)
    for name, data in cases.items():
        put("fuzz_sources", "tfrecord-" + name, b"\x07" + data, "regress")
    put("fuzz_tfrecord", "file-damaged-first-length", b"\x00" + bytes(damaged), "regress")
    put("fuzz_tfrecord", "example-label-int64-max", b"\x01" + example({"image": jpg, "label": big}), "regress")
    # a data file of 16 bytes (one record at most) and an index of 5000
    put("fuzz_tfrecord", "idx-lines-past-data-file", b"\x02" + struct.pack("<H", 1) + b"0 16\n" * 5000, "regress")


def parquet_regress(jpg):
    """The hostile parquet files of issue 57 (tests/python/hostile_parquet.py,
    which test_hostile_parquet.py runs at full size through the tools),
    scaled below 64 KB where they are larger, kept as regress-* (rewritten,
    not removed, by this script): containers nested deep in the footer and
    in a page header, a deep schema, a chunk that begins with thousands of
    3-byte page headers, row groups that share one column chunk, a 16 MiB
    dictionary entry repeated in every row, pages that state 1 GiB (zstd RLE
    blocks that make it), footers of 1-byte column chunks and of many
    columns, DELTA_BYTE_ARRAY rebuilding 800 MB, and labels past int32."""
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "python"))
    import hostile_parquet as hp
    big, small = 2**63 - 1, -2**63
    depth = {"list": 50_000, "set": 50_000, "map": 15_000, "struct": 25_000}
    cases = {}
    for kind, n in depth.items():
        cases["deep-footer-" + kind] = hp.deep_footer(jpg, kind, n)
        cases["deep-page-header-" + kind] = hp.deep_page_header(jpg, kind, n)
    cases.update({
        "deep-schema": hp.deep_schema(5_000),
        "page-header-flood-index": hp.header_flood(jpg, 15_000, hp.INDEX_PAGE),
        "page-header-flood-data": hp.header_flood(jpg, 15_000, hp.DATA_PAGE),
        "row-groups-one-chunk": hp.shared_chunk_groups(jpg, 400, fits=False),
        "row-groups-one-tiny-chunk": hp.shared_chunk_groups(jpg, 900, fits=True),
        "dictionary-16mib-every-row": hp.dictionary_bomb(),
        "gigabyte-page-snappy": hp.stated_gigabyte(hp.SNAPPY),
        "gigabyte-page-gzip": hp.stated_gigabyte(hp.GZIP),
        "gigabyte-page-zstd": hp.stated_gigabyte(hp.ZSTD),
        "gigabyte-page-zstd-rle-blocks": hp.stated_gigabyte(hp.ZSTD, bomb=True),
        "footer-of-1-byte-column-chunks": hp.chunk_flood(1, 60_000),
        "footer-of-many-columns": hp.column_flood(1, 10_000),
        "delta-byte-array-800mb": hp.delta_byte_array_bomb(),
    })
    labels = {"label-int64-max": [0, big, 1], "label-int64-min": [0, small, 1], "label-2p31": [0, 2**31, 1]}
    for name, values in labels.items():
        cases[name] = hp.odd_labels(jpg, values)
        cases["class" + name] = hp.odd_labels(jpg, values, ["cat", "dog", "fox"])
        put("fuzz_sources", "parquet-" + name, b"\x08" + cases[name], "regress")
        put("fuzz_sources", "parquet-class" + name, b"\x08" + cases["class" + name], "regress")
    for name, data in cases.items():
        assert len(data) < 64 << 10, (name, len(data))
        put("fuzz_parquet", name, b"\x00" + data, "regress")


def parquet_seeds():
    """fuzz_parquet: mode byte 0 a whole file (apache/parquet-testing's:
    parquet-mr, Impala, pyarrow writers; v1 and v2 pages, dictionaries,
    delta encodings, checksums, snappy; list columns with repetition
    levels, three-level, two-level and unannotated), 1 a page header cut
    from one, 2 level bytes."""
    for name in PARQUET_SEEDS:
        path = os.path.join(PARQUET_TESTING, name)
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read()
        put("fuzz_parquet", "file-" + name.replace(".parquet", ""), b"\x00" + data)
        if name == "alltypes_plain.parquet":
            put("fuzz_parquet", "header-" + name.replace(".parquet", ""), b"\x01" + data[4:64])
    for name in ("binary.parquet", "alltypes_plain.snappy.parquet"):
        path = os.path.join(PARQUET_TESTING, name)
        if os.path.exists(path):
            put("fuzz_sources", "parquet-" + name.replace(".parquet", ""), b"\x08" + open(path, "rb").read())
    # tests/data/hf_lists.parquet: DuckDB 1.5.6's COPY of three rows of
    # the Hugging Face layout (image struct from gray.jpg, ClassLabel
    # label, ids INTEGER[] null / empty / [1, 2, 3], emb FLOAT[], objects:
    # struct<bbox: FLOAT[][], category: BIGINT[]> with its Sequence
    # metadata), uncompressed: the source's list and boxes fields.
    hf_lists = open(os.path.join(HERE, "..", "data", "hf_lists.parquet"), "rb").read()
    put("fuzz_sources", "parquet-hf_lists", b"\x08" + hf_lists)
    put("fuzz_parquet", "file-hf_lists", b"\x00" + hf_lists)
    put("fuzz_parquet", "levels", b"\x02\x02\x0a\x03\x03\xe4\x1b")
    put("fuzz_parquet", "delta", b"\x02\x80\x01\x04\x05\x02\x01\x02\x00\x00\x00\x00")


# Thrift compact protocol: (count << 4) | element type for a list or set of
# 1 to 14 elements; a map's count as a varint, then (key << 4) | value.
T_BYTE, T_I32, T_LIST, T_SET, T_MAP, T_STRUCT = 3, 5, 9, 10, 11, 12


def nested(kind, depth):
    """A Thrift value of `kind` (list, set, map, struct, or mixed: the four
    in turn) whose containers nest `depth` deep, the innermost empty: the
    bytes after a field header (or a container's element type) of that
    kind. Each level holds one element, the next level."""
    kinds = ["list", "set", "map", "struct"] if kind == "mixed" else [kind]
    head, tails = bytearray(), []
    for i in range(depth):
        k = kinds[i % len(kinds)]
        inner = code_of(kinds[(i + 1) % len(kinds)]) if i + 1 < depth else None
        if k in ("list", "set"):
            head += bytes([0x10 | inner]) if inner else bytes([T_I32])  # one element, or none
        elif k == "map":  # one entry: a byte key, the value the next level
            head += bytes([1, T_BYTE << 4 | inner, 0]) if inner else b"\x00"
        else:  # a structure: field 1 holds the next level, then STOP
            head += bytes([0x10 | inner]) if inner else b"\x00"
            if inner:
                tails.append(0)
            continue
        tails.append(None)
    return bytes(head) + bytes(t for t in reversed(tails) if t is not None)


def thrift_seeds():
    """fuzz_thrift: mode byte 0 (a footer; bits 1-7: the file's MiB beyond
    it) or 1 (a page header), then Thrift compact bytes: real footers and
    a page header (DuckDB's hf_lists.parquet, parquet-testing's
    alltypes_plain), and containers nested 100 and 60,000 deep in an
    unknown field of each (list, set, map, structure, the four mixed).
    The regress-* inputs are issue 57's: lists, sets and maps nested 50,000
    deep in a footer and in a page header overflowed the stack."""
    files = [open(os.path.join(HERE, "..", "data", "hf_lists.parquet"), "rb").read()]
    path = os.path.join(PARQUET_TESTING, "alltypes_plain.parquet")
    if os.path.exists(path):
        files.append(open(path, "rb").read())
    for name, data in zip(("hf_lists", "alltypes_plain"), files):
        n = struct.unpack("<I", data[-8:-4])[0]
        put("fuzz_thrift", "footer-" + name, b"\x00" + data[-8 - n:-8])
        put("fuzz_thrift", "header-" + name, b"\x01" + data[4:64])
    # FileMetaData with version 1 (field 1), then an unknown field 7 (a
    # delta of 6) holding the nesting, then STOP.
    footer = lambda kind, d: b"\x00" + b"\x15\x02" + bytes([0x60 | code_of(kind)]) + nested(kind, d) + b"\x00"
    # PageHeader type 0 and sizes (fields 1-3), an unknown field 9 (delta
    # 6) holding the nesting, then STOP.
    header = lambda kind, d: b"\x01" + b"\x15\x00\x15\x02\x15\x02" + bytes([0x60 | code_of(kind)]) + \
        nested(kind, d) + b"\x00"
    # 60,000 deep: no map (3 bytes a level; the regress-* maps reach it).
    for kind in ("list", "set", "map", "struct", "mixed"):
        for d in (100, 60000):
            if d == 100 or kind != "map":
                put("fuzz_thrift", "footer-%s-%d" % (kind, d), footer(kind, d))
            if d == 100 or kind == "list":
                put("fuzz_thrift", "header-%s-%d" % (kind, d), header(kind, d))
    for kind in ("list", "set", "map"):
        put("fuzz_thrift", "footer-%ss-50000-deep" % kind, footer(kind, 50000), kind="regress")
        put("fuzz_thrift", "header-%ss-50000-deep" % kind, header(kind, 50000), kind="regress")
    # Found by fuzz_thrift: a field id written whole as 2^31 - 1 (zigzag
    # varint), then a field 1 past it: signed overflow (UBSan).
    big_id = b"\x05\xfe\xff\xff\xff\x0f\x00\x15\x00\x00"
    put("fuzz_thrift", "header-field-id-past-int", b"\x01" + big_id, kind="regress")
    put("fuzz_thrift", "footer-field-id-past-int", b"\x00" + big_id, kind="regress")


def code_of(kind):
    return {"list": T_LIST, "set": T_SET, "map": T_MAP, "struct": T_STRUCT, "mixed": T_LIST}[kind]


def deep_json(depth, leaf="0", every=2):
    """Arrays `depth` deep, every `every`-th level an object instead."""
    out = leaf
    for i in range(depth):
        out = ('{"a":%s}' % out) if i % every == 0 else ("[%s]" % out)
    return out


def meta_json_seeds():
    """fuzz_meta_json: mode byte 0 metadata (fuzz_meta's seeds; one with
    its "options" 60 deep, parsed, and 10,000 deep, refused), 1 JSON for
    ParseJsonBounded (an export.json; 64 and 65 deep), 2 two mix
    descriptions split at a NUL byte. regress-options-90000-deep is issue
    57's: a database whose metadata nests "options" 90,000 deep parsed,
    then dump() overflowed the stack."""
    meta_dir = os.path.join(OUT, "fuzz_meta")
    for f in sorted(os.listdir(meta_dir)):
        if f.startswith("seed-"):
            put("fuzz_meta_json", "meta-" + f[5:], b"\x00" + open(os.path.join(meta_dir, f), "rb").read())
    meta = json.loads(open(os.path.join(meta_dir, "seed-jpeg"), "rb").read())  # format 2: no meta_checksum
    for depth, kind in ((60, "seed"), (10000, "seed"), (90000, "regress")):
        m = dict(meta)
        m["options"] = "@"
        text = json.dumps(m, indent=1).replace('"@"', deep_json(depth, every=2 if depth < 100 else 100))
        put("fuzz_meta_json", "options-%d-deep" % depth, b"\x00" + text.encode(), kind=kind)
    export = {"format": "tfrecord", "records_per_shard": 1000, "gzip": False, "prefix": "train", "source": "a.lmdb"}
    put("fuzz_meta_json", "export", b"\x01" + json.dumps(export, indent=2).encode())
    put("fuzz_meta_json", "json-64-deep", b"\x01" + deep_json(64, '"x\\"y"').encode())
    put("fuzz_meta_json", "json-65-deep", b"\x01" + deep_json(65).encode())
    put("fuzz_meta_json", "json-10000-deep", b"\x01" + deep_json(10000, every=100).encode())
    src = lambda name, share: dict({"name": name, "identity": "0123456789abcdef", "records": 6, "samples": 6},
                                   **share)
    a = json.dumps({"mix": [src("a.lmdb", {"weight": 1.0}), src("b.blob", {"repeat": 2})]}).encode()
    b = json.dumps({"mix": [src("a.lmdb", {"weight": 2.0}), src("b.blob", {"repeat": 2})]}).encode()
    one = json.dumps({"mix": [src("a.lmdb", {"choose": 3})]}).encode()
    put("fuzz_meta_json", "mix-same", b"\x02" + a + b"\x00" + a)
    put("fuzz_meta_json", "mix-weights", b"\x02" + a + b"\x00" + b)
    put("fuzz_meta_json", "mix-sizes", b"\x02" + a + b"\x00" + one)
    put("fuzz_meta_json", "mix-one-dataset", b"\x02" + a + b"\x00")
    # Found by fuzz_meta_json: a saved mix whose source's name is no
    # string (or a source that is no object), against a mix of another
    # size: nlohmann's value() threw type_error through CompareMixes.
    put("fuzz_meta_json", "mix-name-not-a-string",
        b'\x02{"mix": [{"name": 1}]}\x00' + a, kind="regress")
    put("fuzz_meta_json", "mix-source-not-an-object",
        b'\x02{"mix": [1, 2]}\x00' + one, kind="regress")
    put("fuzz_meta_json", "mix-records-not-a-number",
        b'\x02' + a.replace(b'"records": 6', b'"records": "6"', 1) + b"\x00" + a.replace(b"0123", b"9123", 1),
        kind="regress")
    put("fuzz_meta_json", "mix-10000-deep", b"\x02" + a + b"\x00" +
        json.dumps({"mix": ["@"]}).replace('"@"', deep_json(10000, every=100)).encode())


def main():
    only = sys.argv[1:]
    if only:
        for t in only:
            d = os.path.join(OUT, t)
            for f in os.listdir(d) if os.path.isdir(d) else []:
                if f.startswith("seed-"):
                    os.remove(os.path.join(d, f))
        if "fuzz_thrift" in only:
            thrift_seeds()
        if "fuzz_meta_json" in only:
            meta_json_seeds()
        return
    for t in TARGETS:
        d = os.path.join(OUT, t)
        if os.path.isdir(d):
            for f in os.listdir(d):
                if f.startswith("seed-"):
                    os.remove(os.path.join(d, f))
    jpg = tiny_jpeg()
    voc = Image.new("P", (8, 8), 0)
    voc.putpalette([0, 0, 0, 128, 0, 0] + [0] * 762)
    voc.putpixel((1, 1), 1)
    voc.putpixel((2, 2), 255)  # VOC's "ignore" border value
    mask = png(voc)
    laion = [("000000000.jpg", jpg), ("000000000.txt", b"a red square"),
             ("000000000.json", json.dumps({"url": "https://example.org/0000.jpg", "caption": "a red square",
                                            "key": "000000000", "status": "success", "width": 8,
                                            "height": 8, "original_width": 640}).encode())]
    classic = [("n01440764/a.jpg", jpg), ("n01440764/a.cls", b"3"),
               ("b.seg.png", mask), ("b.jpg", jpg), ("b.json", b'{"label": "tench", "path": "x/b.jpg"}'),
               ("dir." + "n" * 120 + ".jpg", jpg)]
    for i, members in enumerate((laion, classic)):
        for fmt, name in ((tarfile.USTAR_FORMAT, "ustar"), (tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax")):
            try:
                data = shard(members, fmt)
            except ValueError:  # a name too long for ustar
                continue
            put("fuzz_tar", f"{name}-{i}", data)
            put("fuzz_webdataset", f"{name}-{i}", data)
            put("fuzz_sources", f"tar-{name}-{i}", b"\x00" + data)
            put("fuzz_sources", f"gz-{name}-{i}", b"\x01" + data)
            put("fuzz_sources", f"gzfile-{name}-{i}", b"\x06" + gzip.compress(data))
    for proto in (2, 3, 4, 5):
        put("fuzz_pickle", f"record-p{proto}", pickle.dumps((jpg[:64], 7), protocol=proto))
        put("fuzz_pickle", f"keys-p{proto}", pickle.dumps([b"a0", "b0", b"c0"], protocol=proto))
        put("fuzz_pickle", f"str-label-p{proto}", pickle.dumps((b"\xff\xd8", "tench", None, True), protocol=proto))
        f2l = pickle.dumps([b"a0", b"b0"], protocol=proto) + b"\n--\n" + \
            pickle.dumps((jpg, 1), protocol=proto) + b"\n--\n" + pickle.dumps((jpg, 0), protocol=proto)
        put("fuzz_sources", f"folder2lmdb-p{proto}", b"\x05" + f2l)
        put("fuzz_folder2lmdb", f"record-p{proto}", pickle.dumps((jpg[:64], 7), protocol=proto))
        put("fuzz_folder2lmdb", f"named-p{proto}", pickle.dumps((jpg[:64], "tench"), protocol=proto))
        put("fuzz_folder2lmdb", f"keys-p{proto}", pickle.dumps([b"a0", "b0", b"c0"], protocol=proto))
        put("fuzz_folder2lmdb", f"len-p{proto}", pickle.dumps(3, protocol=proto))
    shared = [b"x" * 8]
    shared = [shared, shared]
    put("fuzz_pickle", "shared-memo", pickle.dumps([shared, shared, shared], protocol=4))
    rows = [{"image": "a.jpg", "label": 3, "mask": "m/a.png", "boxes": [[1, 2, 5, 6, 0]]},
            {"image": "b.jpg", "label": "cat", "caption": "two\nlines", "score": [0.5, 1.0], "tags": [1, 2]}]
    jsonl = "\n".join(json.dumps(r) for r in rows).encode()
    put("fuzz_json", "row", json.dumps(rows[0]).encode())
    put("fuzz_json", "laion", laion[2][1])
    put("fuzz_sources", "jsonl", b"\x02" + jsonl)
    put("fuzz_manifest", "jsonl", b"\x00" + jsonl)
    csv = b'image,label,boxes\na.jpg,3,"[[1,2,5,6,0]]"\n"b,c.jpg",cat,\n'
    put("fuzz_sources", "csv", b"\x03" + csv)
    put("fuzz_manifest", "csv", b"\x01" + csv)
    coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 8, "height": 8},
                       {"id": 2, "file_name": "sub/b.jpg", "width": 8, "height": 8}],
            "categories": [{"id": 1, "name": "person", "supercategory": "person",
                            "keypoints": ["nose"], "skeleton": []}, {"id": 3, "name": "car"}],
            "annotations": [{"id": 10, "image_id": 1, "category_id": 1, "bbox": [0.5, 1, 6, 7.2], "area": 40,
                             "iscrowd": 0, "segmentation": [[0, 0, 1, 1, 2, 2]]},
                            {"id": 11, "image_id": 1, "category_id": 3, "bbox": [0, 0, 8, 8], "iscrowd": 1,
                             "segmentation": {"counts": [0, 64], "size": [8, 8]}},
                            {"id": 12, "image_id": 2, "category_id": 1, "keypoints": [1, 1, 2], "num_keypoints": 1}]}
    put("fuzz_json", "coco", json.dumps(coco).encode())
    put("fuzz_sources", "coco", b"\x04" + json.dumps(coco).encode())
    put("fuzz_coco", "instances", json.dumps(coco).encode())
    put("fuzz_labels", "indices", b"0\n3\n1\n\n2")
    put("fuzz_labels", "names", b"Ankle boot\ncat\n7\n")
    put("fuzz_labels", "fixed", b"@n01440764,n01443537\nn01443537\n1\n5\n")
    put("fuzz_braces", "range", b"train-{000000..000146}.tar")
    put("fuzz_braces", "list", b"{train,val}-{0..9}.tar.gz::extra.tar")
    put("fuzz_braces", "laion", b"laion/{00000..00010}.tar")
    put("fuzz_mask", "voc-palette", mask)
    put("fuzz_mask", "gray8", png(Image.new("L", (5, 3), 2)))
    put("fuzz_mask", "gray16", png(Image.new("I;16", (4, 4), 300)))
    put("fuzz_mask", "bits1", png(Image.new("1", (9, 2), 1)))
    tfrecord_seeds(jpg)
    tfrecord_regress(jpg)
    parquet_regress(jpg)
    parquet_seeds()
    thrift_seeds()
    meta_json_seeds()


if __name__ == "__main__":
    main()
