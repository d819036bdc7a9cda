"""TFRecord imports (pack_lmdb), from files a writer no one here wrote:
every tf.train.Example below is built and serialized by Debian's
python3-protobuf (its own runtime, from the Example schema declared with
protobuf's descriptor API, the schema of tensorflow/core/example/
example.proto and feature.proto), and framed with the CRC-32C of
python3-crc32c, as tf.io.TFRecordWriter frames it. The records follow the
TF-slim / Inception ImageNet layout (build_imagenet_data.py: image/encoded,
image/class/label counted from 1, synset and text, normalised boxes) and
TFDS's (image, label). The database is read back with scripts/read_db.py
(python3-lmdb), not with imagepack."""
import os
import struct
import sys

import pytest

from conftest import SCRIPTS, run, tool
from tfrecord_writer import EXAMPLE, EXAMPLE_UNPACKED, example, frame, write

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402

SYNSETS = ["n01440764", "n01443537", "n01484850"]
TEXTS = ["tench, Tinca tinca", "goldfish, Carassius auratus", "great white shark"]


def jpegs(tree):
    """(bytes, class index 0..2, file name as ImageNet's: SYNSET_N.jpg) of
    the tree's JPEGs."""
    out = []
    for c in range(3):
        d = tree / ("class%d" % c)
        for n in sorted(os.listdir(d))[:10]:
            out.append(((d / n).read_bytes(), c, "%s_%s" % (SYNSETS[c], n)))
    return out


def slim_record(data, label, name, cls=EXAMPLE, boxes=None, size=None):
    """build_imagenet_data.py's _convert_to_example: label counted from 1."""
    v = {"image/encoded": data, "image/format": b"JPEG", "image/class/label": label + 1,
         "image/class/synset": SYNSETS[label].encode(), "image/class/text": TEXTS[label].encode(),
         "image/filename": name.encode(), "image/colorspace": b"RGB", "image/channels": 3}
    if size:
        v["image/width"], v["image/height"] = size
    if boxes is not None:
        for k, key in enumerate(("xmin", "ymin", "xmax", "ymax")):
            v["image/object/bbox/" + key] = [float(b[k]) for b in boxes]
        v["image/object/bbox/label"] = [label + 1] * len(boxes)
    return example(v, cls)


def records_of(db):
    d = read_db.open_db(str(db))
    out = []
    for i in range(d.meta["count"]):
        r = read_db.read_record(d, i)
        out.append((r["path"], bytes(r["payload"]), r["label"], r))
    return d.meta, out


def pack(src, dst, *args, code=0):
    r = run(tool("pack_lmdb"), *src, dst, "-q", *args, ok=False) if isinstance(src, list) else \
        run(tool("pack_lmdb"), src, dst, "-q", *args, ok=False)
    assert r.returncode == code, r.stdout + r.stderr
    return r


def test_slim_imagenet_shards_import_byte_exact(tree, tmp_path):
    """Four shards named as build_imagenet_data.py names them, read by a
    brace pattern and by a shell glob (several arguments); the image bytes
    are the JPEG files' own, labels 1..3 become 0..2, classes the synsets."""
    items = jpegs(tree)
    d = tmp_path / "slim"
    d.mkdir()
    for s in range(4):
        write(d / ("train-%05d-of-00004" % s), [slim_record(b, c, n) for b, c, n in items[s::4]])
    for src in (str(d / "train-{00000..00003}-of-00004"), sorted(str(p) for p in d.iterdir())):
        out = tmp_path / ("a%d.lmdb" % len(src))
        r = pack(src, out)
        assert "30 records in 3 classes" in r.stdout, r.stdout
        meta, recs = records_of(out)
        assert meta["classes"] == SYNSETS
        assert sorted((p, b, l) for p, b, l, _ in recs) == sorted((n, b, c) for b, c, n in items)


def test_tfds_layout_with_its_label_file(tree, tmp_path):
    """TFDS's features (image, label counted from 0) and label.labels.txt
    beside the files; no file name: records are FILE/NNNNNNNN.jpg."""
    items = jpegs(tree)
    d = tmp_path / "tfds"
    d.mkdir()
    write(d / "beans-train.tfrecord-00000-of-00001", [example({"image": b, "label": c}) for b, c, _ in items])
    (d / "label.labels.txt").write_text("angular\nbean_rust\nhealthy\n")
    (d / "dataset_info.json").write_text("{}")
    pack(d, tmp_path / "t.lmdb")
    meta, recs = records_of(tmp_path / "t.lmdb")
    assert meta["classes"] == ["angular", "bean_rust", "healthy"]
    assert [(b, l) for _, b, l, _ in recs] == [(b, c) for b, c, _ in items]
    assert recs[0][0] == "beans-train.tfrecord-00000-of-00001/00000000.jpg"


def test_gzipped_and_unpacked_lists_give_the_same_records(tree, tmp_path):
    """TFRecordWriter with GZIP compression, and Examples whose Int64Lists
    protobuf wrote unpacked (one field per value)."""
    items = jpegs(tree)
    plain, other = tmp_path / "plain", tmp_path / "other"
    plain.mkdir()
    other.mkdir()
    write(plain / "a.tfrecord", [slim_record(b, c, n, boxes=[(0.0, 0.0, 1.0, 1.0)], size=(9, 9)) for b, c, n in items])
    write(other / "a.tfrecord.gz", [slim_record(b, c, n, EXAMPLE_UNPACKED, boxes=[(0.0, 0.0, 1.0, 1.0)], size=(9, 9))
                                     for b, c, n in items], compress=True)
    # the two schemas really write the lists two ways: tag 0x0a (packed) or 0x08 / 0x0d per value
    assert example({"l": [1, 2]}) != example({"l": [1, 2]}, EXAMPLE_UNPACKED)
    assert b"\x08\x01\x08\x02" in example({"l": [1, 2]}, EXAMPLE_UNPACKED)
    assert b"\x0d\x00\x00\x80\x3f" in example({"f": [1.0, 2.0]}, EXAMPLE_UNPACKED)
    pack(plain, tmp_path / "p.lmdb")
    pack(other / "a.tfrecord.gz", tmp_path / "g.lmdb")
    def comparable(db):
        return [(p, b, l, [(f["value"][0].tolist(), f["value"][1].tolist()) for f in r["fields"]])
                for p, b, l, r in records_of(db)[1]]

    assert comparable(tmp_path / "p.lmdb") == comparable(tmp_path / "g.lmdb")
    assert comparable(tmp_path / "g.lmdb")[0][3] == [([[0, 0, 9, 9]], [0])]
    assert not [f for f in os.listdir(tmp_path) if "gunzip" in f]


def test_damaged_records_are_skipped_and_named(tree, tmp_path):
    """A flipped byte in one record's image, in another's length, a record
    without an image, a background label and a file cut short: each is
    listed as FILE:record N with its reason (exit 3); the rest imports."""
    items = jpegs(tree)[:8]
    recs = [slim_record(b, c, n) for b, c, n in items]
    recs.insert(3, example({"image/class/label": 1}))               # record 3: no image
    recs.insert(5, example({"image/encoded": items[0][0], "image/class/label": 0}))  # record 5: background
    d = tmp_path / "bad"
    d.mkdir()
    body = bytearray(write(d / "a.tfrecord", recs))
    offsets = []
    at = 0
    while at < len(body):
        offsets.append(at)
        at += 16 + struct.unpack("<Q", body[at:at + 8])[0]
    body[offsets[1] + 12 + 100] ^= 0x01    # data of record 1
    (d / "a.tfrecord").write_bytes(bytes(body))
    cut = frame(slim_record(*items[0]))
    write(d / "b.tfrecord", [slim_record(*items[1])])
    (d / "b.tfrecord").write_bytes((d / "b.tfrecord").read_bytes() + cut[:len(cut) // 2])
    r = pack(d, tmp_path / "x.lmdb", "--errors", tmp_path / "err.txt", code=3)
    errors = (tmp_path / "err.txt").read_text()
    a = str(d / "a.tfrecord")
    assert a + ":record 1" in errors and "data's CRC does not match" in errors, errors
    assert a + ":record 3" in errors and "no image" in errors
    assert a + ":record 5" in errors and "background" in errors
    assert str(d / "b.tfrecord") + ":record 1" in errors and "truncated" in errors
    meta, got = records_of(tmp_path / "x.lmdb")
    assert len(got) == 7 + 1, r.stdout
    # a flipped length ends the file there, naming the record...
    good = bytes(body)
    body[offsets[6]] ^= 0x40
    (d / "a.tfrecord").write_bytes(bytes(body))
    pack(d / "a.tfrecord", tmp_path / "y.lmdb", "--errors", tmp_path / "err2.txt", code=3)
    errors = (tmp_path / "err2.txt").read_text()
    assert a + ":record 6" in errors and "length's CRC does not match" in errors and "rest of the file" in errors
    assert len(records_of(tmp_path / "y.lmdb")[1]) == 3
    # ...unless DALI's tfrecord2idx index says where the next one starts
    (d / "a.tfrecord.idx").write_text("".join("%d %d\n" % (o, 16 + struct.unpack("<Q", good[o:o + 8])[0])
                                              for o in offsets))
    pack(d / "a.tfrecord", tmp_path / "z.lmdb", "--errors", tmp_path / "err3.txt", code=3)
    assert "going on at the next record" in (tmp_path / "err3.txt").read_text()
    errors = (tmp_path / "err3.txt").read_text()
    assert a + ":record 6" in errors and a + ":record 7" not in errors
    assert len(records_of(tmp_path / "z.lmdb")[1]) == 3 + 3


def test_boxes_are_scaled_to_pixels_and_labelled(tree, tmp_path):
    from PIL import Image
    items = jpegs(tree)[:4]
    recs = []
    for b, c, n in items:
        w, h = Image.open(tree / ("class%d" % c) / n.split("_", 1)[1]).size
        recs.append(slim_record(b, c, n, boxes=[(0.1, 0.2, 0.5, 1.0)], size=(w, h)))
    write(tmp_path / "boxes.tfrecord", recs)
    pack(tmp_path / "boxes.tfrecord", tmp_path / "b.lmdb")
    meta, got = records_of(tmp_path / "b.lmdb")
    assert [f["name"] for f in meta["fields"]] == ["boxes"]
    for (b, c, n), (_, _, label, r) in zip(items, got):
        w, h = Image.open(tree / ("class%d" % c) / n.split("_", 1)[1]).size
        (field,) = r["fields"]
        xy, k = field["value"]
        assert label == c and list(k) == [c]
        assert tuple(xy[0]) == pytest.approx((0.1 * w, 0.2 * h, 0.5 * w, 1.0 * h), rel=1e-6)


def test_classes_option_relabels_by_the_records_names(tree, tmp_path):
    items = jpegs(tree)
    write(tmp_path / "a.tfrecord", [slim_record(b, c, n) for b, c, n in items])
    (tmp_path / "order.txt").write_text("\n".join(reversed(SYNSETS)) + "\n")
    pack(tmp_path / "a.tfrecord", tmp_path / "c.lmdb", "--classes", tmp_path / "order.txt")
    meta, got = records_of(tmp_path / "c.lmdb")
    assert meta["classes"] == list(reversed(SYNSETS))
    assert [l for _, _, l, _ in got] == [2 - c for _, c, _ in items]


@pytest.mark.parametrize("first", ["background", "daisy"])
def test_slim_labels_file_says_where_labels_start(tree, tmp_path, first):
    """TF-slim's labels.txt (dataset_utils.write_label_file: "N:name"):
    flowers' starts at 0:daisy, so its labels count from 0; one that
    starts at 0:background counts from 1. Its names are the classes, over
    the records' own image/class/text."""
    items = jpegs(tree)
    base = 1 if first == "background" else 0
    names = ["daisy", "dandelion", "roses"]
    lines = (["0:background"] if base else []) + ["%d:%s" % (i + base, n) for i, n in enumerate(names)]
    (tmp_path / "labels.txt").write_text("\n".join(lines) + "\n")
    write(tmp_path / "flowers_train_00000-of-00001.tfrecord",
          [example({"image/encoded": b, "image/format": b"jpg", "image/class/label": c + base,
                    "image/class/text": TEXTS[c].encode()}) for b, c, _ in items])
    pack(tmp_path / "flowers_train_00000-of-00001.tfrecord", tmp_path / "f.lmdb")
    meta, got = records_of(tmp_path / "f.lmdb")
    assert meta["classes"] == names
    assert [(b, l) for _, b, l, _ in got] == [(b, c) for b, c, _ in items]


def test_class_text_names_the_classes_without_a_synset(tree, tmp_path):
    items = jpegs(tree)
    write(tmp_path / "t.tfrecord", [example({"image/encoded": b, "image/class/label": c + 1,
                                             "image/class/text": TEXTS[c].encode()}) for b, c, _ in items])
    pack(tmp_path / "t.tfrecord", tmp_path / "t.lmdb")
    assert records_of(tmp_path / "t.lmdb")[0]["classes"] == TEXTS


def test_verify_against_the_tfrecords(tree, tmp_path):
    """verify_db --against reads the files as pack did: every record
    there once with its label; a database of other labels is named."""
    items = jpegs(tree)
    d = tmp_path / "tf"
    d.mkdir()
    write(d / "a.tfrecord", [slim_record(b, c, n) for b, c, n in items])
    pack(d, tmp_path / "a.lmdb")
    r = run(tool("verify_db"), tmp_path / "a.lmdb", "--against", d)
    assert r.returncode == 0, r.stdout + r.stderr
    # the same images, classes shifted by one: each record's class is wrong
    write(d / "a.tfrecord", [slim_record(b, (c + 1) % 3, n) for b, c, n in items])
    r = run(tool("verify_db"), tmp_path / "a.lmdb", "--against", d, ok=False)
    assert r.returncode == 1 and "gives class 'n01443537' (label 1)" in r.stdout + r.stderr, r.stdout + r.stderr


def test_verify_against_a_brace_pattern_of_shards(tree, tmp_path):
    """--against takes the brace pattern pack took; a shard it names that
    is missing is a problem naming that file."""
    items = jpegs(tree)
    d = tmp_path / "tf"
    d.mkdir()
    for s in range(2):
        write(d / ("train-%05d-of-00002" % s), [slim_record(b, c, n) for b, c, n in items[s::2]])
    pattern = str(d / "train-{00000..00001}-of-00002")
    pack(pattern, tmp_path / "p.lmdb")
    r = run(tool("verify_db"), tmp_path / "p.lmdb", "--against", pattern)
    assert r.returncode == 0 and "0 problems" in r.stdout, r.stdout + r.stderr
    r = run(tool("verify_db"), tmp_path / "p.lmdb", "--against", str(d / "train-{00000..00002}-of-00002"), ok=False)
    assert r.returncode == 1 and str(d / "train-00002-of-00002") in r.stdout + r.stderr, r.stdout + r.stderr
