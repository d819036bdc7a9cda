"""export_db --to tfrecord, read by a reader no one here wrote: every
record's framing is checked with python3-crc32c (TensorFlow's masked
CRC-32C) and its bytes parsed by python3-protobuf's own runtime with the
tf.train.Example schema of tfrecord_writer.py; the database is read with
scripts/read_db.py (python3-lmdb), not with imagepack. The way back is
pack_lmdb's TFRecord import."""
import gzip
import io
import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, run, tool
from tfrecord_writer import EXAMPLE, masked

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402


def records_of(db):
    d = read_db.open_db(str(db))
    return d.meta, [read_db.read_record(d, i) for i in range(d.meta["count"])]


def read_tfrecords(data):
    """Every record of a TFRecord file's bytes, its two CRCs checked."""
    out, at = [], 0
    while at < len(data):
        assert len(data) - at >= 16
        (n,) = struct.unpack_from("<Q", data, at)
        assert struct.unpack_from("<I", data, at + 8)[0] == masked(data[at:at + 8])
        body = data[at + 12:at + 12 + n]
        assert len(body) == n
        assert struct.unpack_from("<I", data, at + 12 + n)[0] == masked(body)
        out.append(EXAMPLE.FromString(body))
        at += 12 + n + 4
    assert at == len(data)
    return out


def features(ex):
    """key -> list of values (bytes, floats or ints) of one Example."""
    out = {}
    for key, f in ex.features.feature.items():
        kind = f.WhichOneof("kind")
        out[key] = list(getattr(f, kind).value) if kind else []
    return out


def examples_in(folder, names):
    out = []
    for name in names:
        data = (folder / name).read_bytes()
        out += [features(ex) for ex in read_tfrecords(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)]
    return out


@pytest.fixture(scope="module")
def jpeg_db(tree, tmp_path_factory):
    db = tmp_path_factory.mktemp("tfx") / "a.lmdb"
    run(tool("pack_lmdb"), tree, db, "-q")
    return db


def test_files_hold_slim_examples_of_every_record(jpeg_db, tmp_path):
    out = tmp_path / "tf"
    run(tool("export_db"), jpeg_db, out, "-q", "--to", "tfrecord", "--records-per-shard", "25")
    names = ["train-%05d-of-00004" % s for s in range(4)]
    assert sorted(os.listdir(out)) == sorted(names + ["classes.txt", "export.json", "labels.txt"])
    meta, recs = records_of(jpeg_db)
    # TF-slim's dataset_utils.write_label_file, with the background class 0
    assert (out / "labels.txt").read_text() == "0:background\n" + "".join(
        "%d:%s\n" % (i + 1, c) for i, c in enumerate(meta["classes"]))
    assert json.loads((out / "export.json").read_text())["layout"] == "tfrecord"
    exs = examples_in(out, names)
    assert len(exs) == len(recs) == 90
    assert [len(examples_in(out, [n])) for n in names] == [25, 25, 25, 15]
    for f, r in zip(exs, recs):
        assert f["image/encoded"] == [bytes(r["payload"])]  # the stored JPEG, unchanged
        assert f["image/format"] == [b"JPEG"]
        assert f["image/class/label"] == [r["label"] + 1]  # TF-slim: classes from 1
        assert f["image/class/text"] == [meta["classes"][r["label"]].encode()]
        assert f["image/filename"] == [r["path"].encode()]
        im = Image.open(io.BytesIO(bytes(r["payload"])))
        assert (f["image/width"], f["image/height"]) == ([im.width], [im.height])
        assert f["image/channels"] == [3] and f["image/colorspace"] == [b"RGB"]
        assert not any(k.startswith("image/object") for k in f)


def test_imported_back_gzipped_or_not_gives_the_same_records(jpeg_db, tmp_path):
    run(tool("export_db"), jpeg_db, tmp_path / "plain", "-q", "--to", "tfrecord", "--records-per-shard", "40",
        "--prefix", "validation")
    run(tool("export_db"), jpeg_db, tmp_path / "gz", "-q", "--to", "tfrecord", "--records-per-shard", "40",
        "--prefix", "validation", "--gzip")
    names = ["validation-%05d-of-00003" % s for s in range(3)]
    for n in names:  # one gzip stream of what the plain file holds, under the same name
        z = (tmp_path / "gz" / n).read_bytes()
        assert z[:2] == b"\x1f\x8b" and gzip.decompress(z) == (tmp_path / "plain" / n).read_bytes()
    meta, before = records_of(jpeg_db)
    for src in ("plain", "gz"):
        run(tool("pack_lmdb"), tmp_path / src, tmp_path / (src + ".lmdb"), "-q")
        back_meta, after = records_of(tmp_path / (src + ".lmdb"))
        assert back_meta["classes"] == meta["classes"]
        assert [(r["path"], bytes(r["payload"]), r["label"]) for r in after] == \
            [(r["path"], bytes(r["payload"]), r["label"]) for r in before]


def test_a_rerun_keeps_the_complete_files(jpeg_db, tmp_path):
    out = tmp_path / "tf"
    args = [tool("export_db"), jpeg_db, out, "--to", "tfrecord", "--records-per-shard", "30"]
    run(*args)
    names = ["train-%05d-of-00003" % s for s in range(3)]
    first = {n: (out / n).read_bytes() for n in names}
    kept = os.stat(out / names[0]).st_ino
    os.remove(out / names[1])
    r = run(*args)
    assert "90 records" in r.stdout and "30 already there" not in r.stdout and "60 already there" in r.stdout
    assert {n: (out / n).read_bytes() for n in names} == first  # the same bytes again
    assert os.stat(out / names[0]).st_ino == kept
    assert not [n for n in os.listdir(out) if n.startswith(".")]  # no temporaries left
    r = run(*args[:-1], "20", ok=False)  # other settings: another export
    assert r.returncode != 0 and "holds another export" in r.stderr


def test_an_interrupted_export_leaves_only_complete_files(tree, tmp_path):
    """Ctrl-C mid-export: every file under its final name holds all its
    records, no temporary stays, and the re-run gives the bytes of an
    uninterrupted export."""
    big = tmp_path / "big"
    for c in sorted(os.listdir(tree)):
        os.makedirs(big / c)
        for k in range(40):
            for n in os.listdir(tree / c):
                os.link(tree / c / n, big / c / ("%d_%s" % (k, n)))
    run(tool("pack_lmdb"), big, tmp_path / "big.lmdb", "-q")
    args = [tool("export_db"), tmp_path / "big.lmdb", None, "-q", "--to", "tfrecord", "--records-per-shard", "20",
            "--gzip", "--threads", "1"]
    args[2] = tmp_path / "clean"
    run(*args)
    args[2] = tmp_path / "cut"
    files = lambda: [f for f in os.listdir(tmp_path / "cut") if f.startswith("train-")] \
        if os.path.isdir(tmp_path / "cut") else []
    p = subprocess.Popen([str(a) for a in args], start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while not files() and p.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    done = sorted(files())
    assert p.returncode == 130 and "interrupted" in out and 0 < len(done) < 180, (p.returncode, out, len(done))
    assert [len(examples_in(tmp_path / "cut", [f])) for f in done] == [20] * len(done)
    assert not [f for f in os.listdir(tmp_path / "cut") if f.startswith(".")]  # no temporaries
    r = run(*args)
    assert "3600 records" in r.stdout and "%d already there" % (20 * len(done)) in r.stdout, r.stdout
    clean = sorted(f for f in os.listdir(tmp_path / "clean") if f.startswith("train-"))
    assert sorted(files()) == clean and len(clean) == 180
    for f in clean:
        assert (tmp_path / "cut" / f).read_bytes() == (tmp_path / "clean" / f).read_bytes()


def test_raw_records_are_lossless_pngs(tree, tmp_path):
    db = tmp_path / "raw.lmdb"
    run(tool("pack_lmdb"), tree / "class1", db, "-q", "--encoding", "raw", "--no-class")
    run(tool("export_db"), db, tmp_path / "tf", "-q", "--to", "tfrecord", "--prefix", "raw")
    assert sorted(os.listdir(tmp_path / "tf")) == ["export.json", "raw-00000-of-00001"]  # no classes: no labels.txt
    _, recs = records_of(db)
    exs = examples_in(tmp_path / "tf", ["raw-00000-of-00001"])
    assert len(exs) == len(recs) == 30
    for f, r in zip(exs, recs):
        assert f["image/format"] == [b"PNG"]
        assert "image/class/label" not in f and "image/class/text" not in f  # a record without a class
        png = Image.open(io.BytesIO(f["image/encoded"][0]))
        assert png.format == "PNG" and png.mode == "RGB"
        assert np.array_equal(np.asarray(png), r["payload"])
        assert (f["image/height"], f["image/width"]) == ([r["payload"].shape[0]], [r["payload"].shape[1]])


def test_boxes_are_normalised_and_labelled_from_one(tree, tmp_path):
    rows = []
    os.makedirs(tmp_path / "img")
    for i, name in enumerate(sorted(os.listdir(tree / "class0"))[:8]):
        (tmp_path / "img" / name).write_bytes((tree / "class0" / name).read_bytes())
        w, h = Image.open(tmp_path / "img" / name).size
        boxes = [[1.25, 2.5, w - 3.75, h - 1, i % 2], [0, 0, w, h, 2]][:i % 3]
        rows.append({"image": "img/" + name, "label": i % 3, "boxes": boxes})
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "b.lmdb"
    run(tool("pack_lmdb"), "--manifest", tmp_path / "m.jsonl", db, "-q")
    run(tool("export_db"), db, tmp_path / "tf", "-q", "--to", "tfrecord")
    _, recs = records_of(db)
    exs = examples_in(tmp_path / "tf", ["train-00000-of-00001"])
    assert len(exs) == len(recs) == len(rows) == 8
    for f, r, row in zip(exs, recs, rows):
        (w,), (h,) = f["image/width"], f["image/height"]
        want = [[np.float32(b[k] / (w, h)[k % 2]) for b in row["boxes"]] for k in range(4)]
        for k, key in enumerate(("xmin", "ymin", "xmax", "ymax")):
            assert f["image/object/bbox/" + key] == want[k]
        assert f["image/object/bbox/label"] == [b[4] + 1 for b in row["boxes"]]
    run(tool("pack_lmdb"), tmp_path / "tf", tmp_path / "back.lmdb", "-q")
    _, back = records_of(tmp_path / "back.lmdb")
    assert len(back) == 8
    for a, b in zip(recs, back):
        fa = [x for x in a["fields"] if x["kind"] == "boxes"]
        fb = [x for x in b["fields"] if x["kind"] == "boxes"]
        assert (a["path"], a["label"]) == (b["path"], b["label"])
        np.testing.assert_allclose(fb[0]["value"][0], fa[0]["value"][0], atol=1e-4)  # pixels, to float rounding
        assert list(fb[0]["value"][1]) == list(fa[0]["value"][1])
