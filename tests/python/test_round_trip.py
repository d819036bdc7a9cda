"""Round trips as docs/USAGE.md states them: export_db then pack_lmdb with no
option gives back the same records, byte for byte and in the same order
(encoding, channels, every field), and a database converted with no option
keeps its records; a pack under SOURCE_DATE_EPOCH is the same file twice.
Records are read with scripts/read_db.py (python3-lmdb and the layout of
docs/FORMAT.md, not the library), shard members with Python's tarfile and
Pillow."""
import filecmp
import io
import json
import os
import subprocess
import sys
import tarfile
import time

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402


def run(*args, ok=True, env=None):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                       env=None if env is None else {**os.environ, **env})
    if ok and r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (args[0], r.returncode, r.stdout, r.stderr))
    return r


def records(path):
    """(metadata, [every record's bytes in index order])"""
    db = read_db.open_db(str(path))
    return db.meta, [db.raw(i) for i in range(db.meta["count"])]


def shard_members(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".tar"):
            with tarfile.open(os.path.join(folder, name)) as t:
                out.update({m.name: t.extractfile(m).read() for m in t.getmembers()})
    return out


@pytest.fixture(scope="module")
def gray_tree(tmp_path_factory):
    """Two classes of gray JPEGs of odd sizes and gray PNGs."""
    root = tmp_path_factory.mktemp("gray")
    rng = np.random.default_rng(11)
    for c in ("a", "b"):
        os.makedirs(root / c)
        for i in range(9):
            h, w = int(rng.integers(17, 61)), int(rng.integers(17, 61))
            y, x = np.mgrid[0:h, 0:w]
            px = ((x * 7 + y * 3 + 40 * i) % 256).astype(np.uint8)
            if i % 3 == 0:
                Image.fromarray(px, "L").save(root / c / ("%d.png" % i))
            else:
                Image.fromarray(px, "L").save(root / c / ("%d.jpg" % i), quality=85)
    return root


@pytest.mark.parametrize("fmt", ["lmdb", "blob"])
def test_raw_gray_shuffled_pack_comes_back_record_for_record(gray_tree, tmp_path, fmt):
    """The finding: a raw 1-channel dataset came back as 3-channel JPEGs at
    quality 90, and a shuffled one in path order."""
    db = tmp_path / ("raw1." + fmt)
    run(tool("pack_lmdb"), gray_tree, db, "-q", "--format", fmt, "--encoding", "raw", "--channels", "1",
        "--shuffle", "7")
    meta, before = records(db)
    run(tool("export_db"), db, tmp_path / "shards", "-q", "--records-per-shard", "5")
    back = tmp_path / ("back." + fmt)
    run(tool("pack_lmdb"), tmp_path / "shards", back, "-q", "--format", fmt)
    back_meta, after = records(back)
    assert (back_meta["encoding"], back_meta["channels"]) == ("raw", 1)
    assert after == before  # every byte of every record, in the same order
    assert back_meta["classes"] == meta["classes"] and back_meta["label_counts"] == meta["label_counts"]
    assert back_meta["options"]["shuffle"] == 7  # still stored shuffled (the loader's auto order reads it)
    members = shard_members(tmp_path / "shards")
    for i, raw in enumerate(before):
        rec = read_db.parse_record(raw)
        key = rec["path"].rsplit(".", 1)[0]
        png = Image.open(io.BytesIO(members[key + ".png"]))  # raw pixels as a PNG, gray staying gray
        assert png.mode == "L"
        assert np.array_equal(np.asarray(png), rec["payload"][:, :, 0])
        assert json.loads(members[key + ".json"])["index"] == i


def test_converting_a_database_keeps_what_was_not_given(gray_tree, tmp_path):
    run(tool("pack_lmdb"), gray_tree, tmp_path / "raw1.lmdb", "-q", "--encoding", "raw", "--channels", "1",
        "--shuffle", "3")
    run(tool("pack_lmdb"), tmp_path / "raw1.lmdb", tmp_path / "raw1.blob", "-q", "--format", "blob")
    meta_a, a = records(tmp_path / "raw1.lmdb")
    meta_b, b = records(tmp_path / "raw1.blob")
    assert a == b and (meta_b["encoding"], meta_b["channels"], meta_b["options"]["shuffle"]) == ("raw", 1, 3)
    # What is given still converts.
    run(tool("pack_lmdb"), tmp_path / "raw1.lmdb", tmp_path / "rgb.lmdb", "-q", "--encoding", "jpeg",
        "--channels", "3")
    meta_c, _ = records(tmp_path / "rgb.lmdb")
    assert (meta_c["encoding"], meta_c["channels"]) == ("jpeg", 3)


@pytest.fixture(scope="module")
def field_manifest(tmp_path_factory):
    """A manifest with every kind of field: a mask, a 16-bit depth map, a
    second image, boxes, ints, floats and text; colour and gray JPEGs."""
    root = tmp_path_factory.mktemp("fields")
    os.makedirs(root / "img")
    rng = np.random.default_rng(5)
    rows = []
    for i in range(14):
        h, w = int(rng.integers(20, 48)), int(rng.integers(20, 48))
        y, x = np.mgrid[0:h, 0:w]
        rgb = np.stack([(x * 5 + i * 9) % 256, (y * 4) % 256, (x + y + i) % 256], -1).astype(np.uint8)
        img = Image.fromarray(rgb) if i % 4 else Image.fromarray(rgb[:, :, 0], "L")
        img.save(root / "img" / ("%02d.jpg" % i), quality=88)
        Image.fromarray(255 - rgb).save(root / "img" / ("%02d.t.jpg" % i), quality=80)
        Image.fromarray(((x + y + i) % 3).astype(np.uint8)).save(root / "img" / ("%02d.m.png" % i))
        Image.fromarray((x * 300 + y * 7 + i).astype(np.uint16)).save(root / "img" / ("%02d.d.png" % i))
        rows.append({"image": "img/%02d.jpg" % i, "label": i % 3, "mask": "img/%02d.m.png" % i,
                     "depth": "img/%02d.d.png" % i, "image_target": "img/%02d.t.jpg" % i,
                     "boxes": [[1.25, 2.5, w - 3.75, h - 1, i % 2]] * (i % 3),
                     "tags": [int(t) for t in rng.integers(-5, 500, 1 + i % 4)],
                     "scores": [float(v) for v in rng.uniform(-2, 2, 3)],
                     "caption": "picture %d \u00e9t\u00e9 {json-ish}" % i})
    (root / "m.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return root


@pytest.mark.parametrize("encoding", ["jpeg", "raw"])
def test_every_field_comes_back_record_for_record(field_manifest, tmp_path, encoding):
    db = tmp_path / "f.lmdb"
    run(tool("pack_lmdb"), "--manifest", field_manifest / "m.jsonl", db, "-q", "--mask-classes", "3",
        "--encoding", encoding, "--shuffle", "9")
    meta, before = records(db)
    assert sorted(f["kind"] for f in meta["fields"]) == ["boxes", "depth", "floats", "image", "ints", "mask", "text"]
    run(tool("export_db"), db, tmp_path / "w", "-q", "--records-per-shard", "4")
    run(tool("pack_lmdb"), tmp_path / "w", tmp_path / "back.lmdb", "-q")
    back_meta, after = records(tmp_path / "back.lmdb")
    assert after == before
    assert back_meta["fields"] == meta["fields"]
    assert (back_meta["format_version"], back_meta["encoding"]) == (meta["format_version"], encoding)


def test_quality_left_open_is_the_sources(gray_tree, tmp_path):
    """A re-encoding import (--max-size) uses the quality the database was
    packed with unless another is given."""
    run(tool("pack_lmdb"), gray_tree, tmp_path / "q.lmdb", "-q", "--quality", "60", "--reencode")
    run(tool("export_db"), tmp_path / "q.lmdb", tmp_path / "w", "-q")
    for name, extra in (("open", []), ("q60", ["--quality", "60"]), ("q95", ["--quality", "95"])):
        run(tool("pack_lmdb"), tmp_path / "w", tmp_path / (name + ".lmdb"), "-q", "--max-size", "12", *extra)
    assert records(tmp_path / "open.lmdb")[1] == records(tmp_path / "q60.lmdb")[1]
    assert records(tmp_path / "open.lmdb")[1] != records(tmp_path / "q95.lmdb")[1]
    assert records(tmp_path / "open.lmdb")[0]["options"]["quality"] == 60


def test_shards_written_by_tarfile_keep_their_index_order(tmp_path):
    """Shards from another writer that carry export_db's "index" come back in
    that order; when only some do, in path order, with a warning."""
    def shard(path, order, indexed):
        with tarfile.open(path, "w") as t:
            for n, i in enumerate(order):
                png = io.BytesIO()
                Image.fromarray(np.full((8, 8, 3), i * 20, np.uint8)).save(png, "PNG")
                js = {"path": "p%02d.png" % i, "label": i % 2}
                if indexed(n):
                    js["index"] = i
                for name, data in (("k%02d.png" % i, png.getvalue()), ("k%02d.json" % i, json.dumps(js).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
    order = [5, 2, 9, 0, 7, 1, 8, 3, 6, 4]
    os.makedirs(tmp_path / "all")
    shard(tmp_path / "all" / "s-0.tar", order, lambda n: True)
    run(tool("pack_lmdb"), tmp_path / "all", tmp_path / "a.lmdb", "-q")
    paths = [read_db.parse_record(r)["path"] for r in records(tmp_path / "a.lmdb")[1]]
    assert paths == ["p%02d.png" % i for i in range(10)]
    os.makedirs(tmp_path / "some")
    shard(tmp_path / "some" / "s-0.tar", order, lambda n: n % 2 == 0)
    r = run(tool("pack_lmdb"), tmp_path / "some", tmp_path / "b.lmdb", "-q")
    assert "5 of 10 samples carry an \"index\"" in r.stderr and "path order" in r.stderr
    paths = [read_db.parse_record(x)["path"] for x in records(tmp_path / "b.lmdb")[1]]
    assert paths == sorted(paths)


EPOCH = {"SOURCE_DATE_EPOCH": "1700000000"}  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize("fmt,encoding", [("lmdb", "jpeg"), ("lmdb", "raw"), ("blob", "jpeg"), ("blob", "raw")])
def test_source_date_epoch_makes_a_pack_reproducible(gray_tree, tmp_path, fmt, encoding):
    args = [gray_tree, None, "-q", "--format", fmt, "--encoding", encoding, "--shuffle", "1"]
    run(tool("pack_lmdb"), *(a if a is not None else tmp_path / "one" for a in args), "--threads", "1", env=EPOCH)
    time.sleep(1.1)  # a clock second later: only the fixed time can make them equal
    run(tool("pack_lmdb"), *(a if a is not None else tmp_path / "two" for a in args), "--threads", "2", env=EPOCH)
    assert records(tmp_path / "one")[0]["created"] == "2023-11-14T22:13:20Z"
    assert filecmp.cmp(tmp_path / "one", tmp_path / "two", shallow=False)
    # its export imported twice (from the same path: the metadata names
    # the source): the same bytes too, and the same records as the pack
    run(tool("export_db"), tmp_path / "one", tmp_path / "w", "-q", "--records-per-shard", "7")
    for n, threads in (("back1", "1"), ("back2", "2")):
        run(tool("pack_lmdb"), tmp_path / "w", tmp_path / n, "-q", "--format", fmt, "--threads", threads, env=EPOCH)
    assert filecmp.cmp(tmp_path / "back1", tmp_path / "back2", shallow=False)
    assert records(tmp_path / "back1")[1] == records(tmp_path / "one")[1]


def test_malformed_source_date_epoch_is_refused(gray_tree, tmp_path):
    r = run(tool("pack_lmdb"), gray_tree, tmp_path / "x.lmdb", "-q", env={"SOURCE_DATE_EPOCH": "17e8"}, ok=False)
    assert r.returncode == 1 and "SOURCE_DATE_EPOCH" in r.stderr
    assert not os.path.exists(tmp_path / "x.lmdb")
