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
    # a flipped length: the walk goes on at the next byte where a header's
    # CRC matches (the next record), naming the damaged one...
    good = bytes(body)
    body[offsets[6]] ^= 0x40
    (d / "a.tfrecord").write_bytes(bytes(body))
    pack(d / "a.tfrecord", tmp_path / "y.lmdb", "--errors", tmp_path / "err2.txt", code=3)
    errors = (tmp_path / "err2.txt").read_text()
    assert a + ":record 6" in errors and "length's CRC does not match" in errors, errors
    assert "going on at byte %d, the next record header" % offsets[7] in errors, errors
    assert len(records_of(tmp_path / "y.lmdb")[1]) == 3 + 3
    # ...and a cut file ends there
    (d / "a.tfrecord").write_bytes(good[:offsets[6] + 20])
    pack(d / "a.tfrecord", tmp_path / "y2.lmdb", "--errors", tmp_path / "err4.txt", code=3)
    errors = (tmp_path / "err4.txt").read_text()
    assert a + ":record 6" in errors and "truncated" in errors and "rest of the file" in errors, errors
    assert len(records_of(tmp_path / "y2.lmdb")[1]) == 3
    (d / "a.tfrecord").write_bytes(bytes(body))
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


# ---- hostile TFRecords (docs/RELIABILITY.md, "Hostile input"; issue 57) ----
# Each runs the real tools under test_outside_input.budgeted: a time and a
# peak-RSS budget, no signal, an exit code of 0, 1 or 3.

from test_outside_input import UNDER_ASAN, budgeted  # noqa: E402

INT64_MAX, INT64_MIN = 2**63 - 1, -2**63


def tfds(items, labels):
    return [example({"image": b, "label": l}) for (b, _, _), l in zip(items, labels)]


def errors_of(path):
    return dict(line.split("\t", 1) for line in path.read_text().splitlines())


def test_labels_past_int32_are_named_skips_in_every_tool(tree, tmp_path):
    """A TFDS label of INT64_MAX, an image/class/label of INT64_MAX and of
    INT64_MIN, a box label of INT64_MAX: each record is skipped naming its
    label (exit 3); verify_db --against, inspect_db and export_db (which
    read the files in place) name them too, none crashes."""
    items = jpegs(tree)[:9]
    d = tmp_path / "tf"
    d.mkdir()
    write(d / "a.tfrecord", tfds(items[:4], [0, 1, INT64_MAX, 2]))
    write(d / "b.tfrecord", [slim_record(*items[4]),
                             example({"image/encoded": items[5][0], "image/class/label": INT64_MAX}),
                             example({"image/encoded": items[6][0], "image/class/label": INT64_MIN}),
                             slim_record(*items[7], boxes=[(0.1, 0.1, 0.5, 0.5)], size=(9, 9)),
                             example({"image/encoded": items[8][0], "image/class/label": 1,
                                      "image/object/bbox/xmin": [0.1], "image/object/bbox/ymin": [0.1],
                                      "image/object/bbox/xmax": [0.5], "image/object/bbox/ymax": [0.5],
                                      "image/object/bbox/label": [INT64_MAX], "image/width": 9,
                                      "image/height": 9})])
    for f in ("a.tfrecord", "b.tfrecord"):
        rc, out, err, _ = budgeted(tool("pack_lmdb"), d / f, tmp_path / (f + ".lmdb"), "-q",
                                   "--errors", tmp_path / (f + ".txt"))
        assert rc == 3, err
    a, b = errors_of(tmp_path / "a.tfrecord.txt"), errors_of(tmp_path / "b.tfrecord.txt")
    assert "past any class" in a[str(d / "a.tfrecord") + ":record 2"], a
    assert str(INT64_MAX) in a[str(d / "a.tfrecord") + ":record 2"], a
    assert "label %d is past any class" % INT64_MAX in b[str(d / "b.tfrecord") + ":record 1"], b
    assert "label %d is negative" % INT64_MIN in b[str(d / "b.tfrecord") + ":record 2"], b
    assert "image/object/bbox/label %d is past any class" % INT64_MAX in b[str(d / "b.tfrecord") + ":record 4"], b
    assert len(records_of(tmp_path / "a.tfrecord.lmdb")[1]) == 3
    assert len(records_of(tmp_path / "b.tfrecord.lmdb")[1]) == 2
    # read in place by the tools: refused naming the record, no crash
    for args in ([tool("verify_db"), tmp_path / "a.tfrecord.lmdb", "--against", d / "a.tfrecord"],
                 [tool("inspect_db"), d / "a.tfrecord", "--out", tmp_path / "report"],
                 [tool("export_db"), d / "a.tfrecord", tmp_path / "exported"],
                 [tool("verify_db"), d / "b.tfrecord"]):
        rc, out, err, _ = budgeted(*args, "-q")
        assert rc in (0, 1), (args, out, err)
        if args[0] != tool("verify_db") or len(args) == 2:
            assert rc == 1 and "record" in out + err and "past any class" in out + err, (args, out, err)


def empty_bytes_list(key):
    """An Example whose `key` is a BytesList with no value (and a label)."""
    ex = EXAMPLE()
    ex.features.feature[key].bytes_list.SetInParent()
    ex.features.feature["image/class/label"].int64_list.value.append(1)
    return ex.SerializeToString()


def test_empty_image_bytes_say_what_is_wrong(tree, tmp_path):
    """An image/encoded of one empty value, of no value, of two values, or
    of integers: each skip says which (it said "holds 1 values")."""
    items = jpegs(tree)[:2]
    recs = [slim_record(*items[0]), example({"image/encoded": [b""], "image/class/label": 1}),
            empty_bytes_list("image/encoded"),
            example({"image": [b"", b""], "label": 1}),
            example({"image/encoded": [1, 2], "image/class/label": 1})]
    write(tmp_path / "e.tfrecord", recs)
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "e.tfrecord", tmp_path / "e.lmdb", "-q",
                             "--errors", tmp_path / "e.txt")
    assert rc == 3, err
    e = errors_of(tmp_path / "e.txt")
    w = str(tmp_path / "e.tfrecord") + ":record "
    assert e[w + "1"] == "empty image bytes: image/encoded holds 0 bytes", e
    assert e[w + "2"] == "no image: image/encoded is an empty list", e
    assert e[w + "3"] == "image holds 2 images (one is read a record)", e
    assert e[w + "4"] == "no image: image/encoded is a list of integers, not image bytes", e
    assert not any("holds 1 values" in v for v in e.values())


def test_a_file_without_labels_is_one_entry_naming_no_class(tree, tmp_path):
    """A file none of whose 30 records has a label: one entry for the file
    naming --no-class, the summary still counting 30 skipped; --no-class
    packs them. Another file's labelled records are packed beside it."""
    items = jpegs(tree)
    d = tmp_path / "nl"
    d.mkdir()
    write(d / "a.tfrecord", [example({"image/encoded": b}) for b, _, _ in items])
    write(d / "b.tfrecord", [slim_record(*items[0])])
    rc, out, err, _ = budgeted(tool("pack_lmdb"), d, tmp_path / "x.lmdb", "--errors", tmp_path / "e.txt")
    assert rc == 3, err
    e = errors_of(tmp_path / "e.txt")
    assert list(e) == [str(d / "a.tfrecord")], e
    assert "no label in any of its 30 records" in e[str(d / "a.tfrecord")] and "--no-class" in e[str(d / "a.tfrecord")]
    assert "1 records in 1 classes" in out and "30 skipped" in out, out
    assert err.count("skipped " + str(d / "a.tfrecord")) == 1, err
    rc, out, err, _ = budgeted(tool("pack_lmdb"), d / "a.tfrecord", tmp_path / "y.lmdb", "--no-class")
    assert rc == 0 and "30 records" in out, out + err
    # alone, nothing to pack: exit 1, the one entry says why
    rc, out, err, _ = budgeted(tool("pack_lmdb"), d / "a.tfrecord", tmp_path / "z.lmdb")
    assert rc == 1 and "--no-class" in err and err.count("skipped ") == 1, err


def damage_first_length(path):
    data = bytearray(path.read_bytes())
    data[0] ^= 0x40  # the first record's length: its CRC no longer matches
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["folder", "pattern", "gzip-folder"])
def test_a_damaged_or_empty_shard_is_still_tfrecords(tree, tmp_path, how):
    """train-{00000..00003}-of-00004 with shard 0 damaged at its first
    record and shard 2 empty: still TFRecords (by their names; before:
    "no class folders", "not a .tar shard"), shard 0's first record named
    and skipped, the rest of it read from the next header, shard 2
    nothing (exit 3). Files without telling names are recognised by a
    later record's CRC."""
    items = jpegs(tree)
    d = tmp_path / "s"
    d.mkdir()
    for s in range(4):
        write(d / ("train-%05d-of-00004" % s), [slim_record(b, c, n) for b, c, n in items[s::4]],
              compress=how == "gzip-folder")
    if how == "gzip-folder":
        import gzip
        body = bytearray(gzip.decompress((d / "train-00000-of-00004").read_bytes()))
        body[0] ^= 0x40
        (d / "train-00000-of-00004").write_bytes(gzip.compress(bytes(body)))
    else:
        damage_first_length(d / "train-00000-of-00004")
    (d / "train-00002-of-00004").write_bytes(b"")
    (d / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")  # hidden: no TFRecord, no error
    src = d if how != "pattern" else str(d / "train-{00000..00003}-of-00004")
    rc, out, err, _ = budgeted(tool("pack_lmdb"), src, tmp_path / "o.lmdb", "--errors", tmp_path / "e.txt")
    assert rc == 3, out + err
    e = errors_of(tmp_path / "e.txt")
    assert list(e) == [str(d / "train-00000-of-00004") + ":record 0"], e
    assert "length's CRC does not match" in e[str(d / "train-00000-of-00004") + ":record 0"]
    assert "going on at byte" in e[str(d / "train-00000-of-00004") + ":record 0"]
    got = sorted(p for p, _, _, _ in records_of(tmp_path / "o.lmdb")[1])
    assert got == sorted([n for s in (1, 3) for _, _, n in items[s::4]] + [n for _, _, n in items[0::4][1:]])
    # verify_db --against takes the same source
    rc, out, err, _ = budgeted(tool("verify_db"), tmp_path / "o.lmdb", "--against", src)
    assert rc == 0, out + err
    if how == "folder":
        # names that say nothing: the first record damaged, the second found by its CRC
        plain = tmp_path / "plain"
        plain.mkdir()
        write(plain / "data", [slim_record(b, c, n) for b, c, n in items[:4]])
        damage_first_length(plain / "data")
        write(plain / "more", [slim_record(b, c, n) for b, c, n in items[4:8]])
        for src, n in ((plain / "data", 3), (plain, 7)):
            rc, out, err, _ = budgeted(tool("pack_lmdb"), src, tmp_path / "p.lmdb", "--overwrite")
            assert rc == 3 and "length's CRC does not match" in err and "next record header" in err, out + err
            assert "%d records in" % n in out, out


def test_a_dali_index_of_millions_of_lines_is_bounded(tree, tmp_path):
    """An .idx of 5 million lines beside a file of 3 records: refused by
    its size against the data file's (which holds at most size/16
    records) before it is read; the records pack. One whose lines are
    short enough but list more records than fit is refused at that line."""
    items = jpegs(tree)[:3]
    data = tmp_path / "a.tfrecord"
    body = write(data, [slim_record(*i) for i in items])
    (tmp_path / "a.tfrecord.idx").write_bytes(b"0 16\n" * 5_000_000)
    rc, out, err, peak = budgeted(tool("pack_lmdb"), data, tmp_path / "o.lmdb", "-q")
    assert rc == 0 and "a.tfrecord.idx: an index of 25000000 bytes for a data file of %d bytes" % len(body) in err, err
    assert "index not used" in err
    assert peak < 200 or UNDER_ASAN, peak
    n = len(body) // 16 + 1
    (tmp_path / "a.tfrecord.idx").write_text("".join("%d 16\n" % (16 * k) for k in range(n)))
    rc, out, err, _ = budgeted(tool("pack_lmdb"), data, tmp_path / "o2.lmdb", "-q")
    assert rc == 0 and "a.tfrecord.idx:%d: more than %d records" % (n, n - 1) in err, err


def test_records_and_error_entries_per_file_are_bounded(tree, tmp_path):
    """200,000 empty records whose data CRC is wrong (3.2 MB) and one good
    one: 1000 entries name records, one more counts the other 199,000; the
    summary counts all 200,000; memory stays small. Read in place, the
    open is refused naming the count."""
    items = jpegs(tree)[:1]
    bad = frame(b"")[:-4] + b"\0\0\0\0"
    data = tmp_path / "many.tfrecord"
    data.write_bytes(bad * 200_000 + frame(slim_record(*items[0])))
    rc, out, err, peak = budgeted(tool("pack_lmdb"), data, tmp_path / "o.lmdb", "--errors", tmp_path / "e.txt")
    assert rc == 3 and "1 records in" in out and "200000 skipped" in out, out + err
    lines = (tmp_path / "e.txt").read_text().splitlines()
    assert len(lines) == 1001, len(lines)
    assert sum(ln.startswith(str(data) + ":record ") for ln in lines) == 1000
    assert [ln for ln in lines if ln.startswith(str(data) + "\t")][0].startswith(
        str(data) + "\t199000 more records skipped"), lines[0]
    assert peak < 300 or UNDER_ASAN, peak
    rc, out, err, _ = budgeted(tool("verify_db"), data, "-q")
    assert rc == 1 and "200000 records cannot be read in place" in out + err, out + err


def test_millions_of_tiny_records_take_memory_in_proportion(tmp_path):
    """A file of 400,000 of about the smallest records that hold an image
    and a label (50 bytes each, 20 MB): each is an item, in memory bounded
    by the stated multiple of the file's size (docs/RELIABILITY.md: 20 x
    plus 256 MiB; 2M such records peaked at 1.5 GB before, 635 MB now)."""
    rec = frame(example({"image": b"x", "label": 0}))
    data = tmp_path / "tiny.tfrecord"
    data.write_bytes(rec * 400_000)
    rc, out, err, peak = budgeted(tool("pack_lmdb"), data, tmp_path / "o.lmdb", "-q", "--errors",
                                  tmp_path / "e.txt", "--shard", "1/1000")
    assert rc in (1, 3), out + err
    assert peak < (20 * data.stat().st_size >> 20) + 256 or UNDER_ASAN, peak
