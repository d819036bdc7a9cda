"""Import and export: folder2lmdb-style pickled LMDB and WebDataset shards in
(pack_lmdb), WebDataset shards and ImageFolder trees out (export_db).
Round trips are checked against the original files and labels with
Python's own tarfile, pickle and lmdb, and the check is shown to fail on
format-shaped mutants."""
import gzip
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import tarfile

import lmdb
import numpy as np
import pytest

from conftest import SCRIPTS, run, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402  (independent reader: python3-lmdb + numpy)

CLASSES = ["class0", "class1", "class2"]


def originals(tree):
    """key (folder2lmdb index) -> (bytes, class name), in folder2lmdb's order."""
    out = []
    for c in CLASSES:
        for n in sorted(os.listdir(tree / c)):
            out.append((open(tree / c / n, "rb").read(), c))
    return out


def write_folder2lmdb(path, samples, protocol=None, extra=()):
    """The Efficient-PyTorch layout: str(index) -> pickle((bytes, label)),
    __keys__, __len__."""
    env = lmdb.open(str(path), subdir=False, map_size=1 << 30, lock=False)
    with env.begin(write=True) as txn:
        for i, (data, label) in enumerate(samples):
            txn.put(str(i).encode(), pickle.dumps((data, label), protocol=protocol))
        for k, v in extra:
            txn.put(k, v)
        keys = [str(i).encode() for i in range(len(samples))] + [k for k, _ in extra]
        txn.put(b"__keys__", pickle.dumps(keys))
        txn.put(b"__len__", pickle.dumps(len(keys)))
    env.close()


def db_records(path):
    db = read_db.open_db(str(path))
    meta = db.meta
    out = []
    for i in range(meta["count"]):
        r = read_db.read_record(db, i)
        out.append((r["path"], bytes(r["payload"]) if r["encoding"] == "jpeg" else r["payload"],
                    meta["classes"][r["label"]] if r["label"] >= 0 else None))
    return out


def imagefolder_files(root):
    """class -> sorted list of file bytes, read by walking the tree."""
    out = {}
    for c in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, c)):
            out[c] = sorted(open(os.path.join(root, c, n), "rb").read() for n in os.listdir(os.path.join(root, c)))
    return out


def differences(expected, root):
    """What differs between `expected` [(bytes, class)] and an ImageFolder
    tree: counts per class and the bytes of each file."""
    want = {}
    for data, c in expected:
        want.setdefault(c, []).append(data)
    got = imagefolder_files(root)
    diffs = []
    for c in sorted(set(want) | set(got)):
        w, g = sorted(want.get(c, [])), got.get(c, [])
        if len(w) != len(g):
            diffs.append("%s: %d files, expected %d" % (c, len(g), len(w)))
        elif w != g:
            diffs.append("%s: %d files differ" % (c, sum(a != b for a, b in zip(w, g))))
    return diffs


def classes_file(tmp_path):
    p = tmp_path / "classes.txt"
    p.write_text("\n".join(CLASSES) + "\n")
    return p


@pytest.fixture(scope="module")
def chain(tree, tmp_path_factory):
    """folder2lmdb LMDB -> ours -> WebDataset (gzipped) -> ours -> ImageFolder."""
    d = tmp_path_factory.mktemp("chain")
    samples = [(data, CLASSES.index(c)) for data, c in originals(tree)]
    write_folder2lmdb(d / "f2l.lmdb", samples)
    run(tool("pack_lmdb"), d / "f2l.lmdb", d / "a.lmdb", "-q", "--classes", classes_file(d))
    run(tool("export_db"), d / "a.lmdb", d / "wds", "-q", "--records-per-shard", "17", "--gzip")
    run(tool("pack_lmdb"), d / "wds", d / "b.lmdb", "-q")
    run(tool("export_db"), d / "b.lmdb", d / "folder", "-q", "--to", "imagefolder")
    return d


def test_round_trip_keeps_every_byte_and_label(tree, chain):
    expected = originals(tree)
    a = db_records(chain / "a.lmdb")
    # folder2lmdb's record i is the i-th file; its key is the record's path
    assert [(p, d, c) for p, d, c in a] == [(str(i), d, c) for i, (d, c) in enumerate(expected)]
    # the shards: every sample has .jpg (the same bytes), .cls and .json
    shards = sorted(f for f in os.listdir(chain / "wds") if f.endswith(".tar.gz"))
    assert len(shards) == (len(expected) + 16) // 17
    samples = {}
    for s in shards:
        with tarfile.open(chain / "wds" / s) as t:
            for m in t.getmembers():
                key, ext = m.name.split(".", 1)
                samples.setdefault(key, {})[ext] = t.extractfile(m).read()
    assert len(samples) == len(expected)
    for i, (data, c) in enumerate(expected):
        s = samples[str(i)]
        assert s["jpg"] == data and int(s["cls"]) == CLASSES.index(c)
        assert json.loads(s["json"]) == {"path": str(i), "index": i, "label": CLASSES.index(c), "class": c}
    assert (chain / "wds" / "classes.txt").read_text().split() == CLASSES
    # back in: the same records (classes from classes.txt beside the shards)
    assert db_records(chain / "b.lmdb") == a  # in the same order: the shards carry each record's index
    assert differences(expected, chain / "folder") == []
    # the ImageFolder tree is what torchvision reads
    names = sorted(os.listdir(chain / "folder" / "class1"))
    assert all(n.endswith(".jpg") for n in names) and len(names) == 30


def rewrite_shards(src, dst, mutate):
    """Copies gzipped shards to plain ones, passing members through mutate
    (name, bytes) -> (name, bytes) or None to drop."""
    os.makedirs(dst)
    shutil.copy(src / "classes.txt", dst / "classes.txt")
    for s in sorted(f for f in os.listdir(src) if f.endswith(".tar.gz")):
        with tarfile.open(src / s) as t, tarfile.open(dst / s.replace(".tar.gz", ".tar"), "w") as out:
            for m in t.getmembers():
                r = mutate(m.name, t.extractfile(m).read())
                if r is None:
                    continue
                info = tarfile.TarInfo(r[0])
                info.size = len(r[1])
                out.addfile(info, io.BytesIO(r[1]))


@pytest.mark.parametrize("mutant", ["drop_image", "drop_label", "wrong_label", "swap_bytes"])
def test_mutated_shards_fail_the_round_trip_check(tree, chain, tmp_path, mutant):
    def mutate(name, data):
        if mutant == "drop_image" and name == "5.jpg":
            return None
        if mutant == "drop_label" and name in ("40.cls", "40.json"):
            return None
        if mutant == "wrong_label" and name == "40.cls":
            return name, b"2"
        if mutant == "swap_bytes" and name == "7.jpg":
            return name, open(tree / "class0" / "img08.jpg", "rb").read()
        return name, data

    rewrite_shards(chain / "wds", tmp_path / "wds", mutate)
    # an unmutated copy passes the same check: the check itself is sound
    r = run(tool("pack_lmdb"), tmp_path / "wds", tmp_path / "b.lmdb", "-q", ok=False)
    assert r.returncode in (0, 3), r.stderr
    if mutant == "drop_image":
        assert "shard-000000.tar:5: no image member" in r.stdout + r.stderr
    if mutant == "drop_label":
        assert ".tar:40: no label" in r.stdout + r.stderr
    run(tool("export_db"), tmp_path / "b.lmdb", tmp_path / "folder", "-q", "--to", "imagefolder")
    diffs = differences(originals(tree), tmp_path / "folder")
    assert diffs, "the mutant %s went unnoticed" % mutant


def test_unmutated_rewrite_passes(tree, chain, tmp_path):
    rewrite_shards(chain / "wds", tmp_path / "wds", lambda n, d: (n, d))
    run(tool("pack_lmdb"), tmp_path / "wds", tmp_path / "b.lmdb", "-q")
    run(tool("export_db"), tmp_path / "b.lmdb", tmp_path / "folder", "-q", "--to", "imagefolder")
    assert differences(originals(tree), tmp_path / "folder") == []


def test_webdataset_written_by_python_tarfile(tree, tmp_path):
    """Shards as a user's own tarfile writer makes them: PAX headers, long
    names, class names in .cls, a brace pattern naming two shards."""
    expected = originals(tree)
    long_dir = "d" * 120
    for s in range(2):
        with tarfile.open(tmp_path / ("train-%03d.tar" % s), "w", format=tarfile.PAX_FORMAT) as t:
            for i, (data, c) in enumerate(expected[s::2]):
                key = "%s/%s_%d_%d" % (long_dir, c, s, i)
                for ext, b in (("jpg", data), ("cls", c.encode())):
                    info = tarfile.TarInfo(key + "." + ext)
                    info.size = len(b)
                    t.addfile(info, io.BytesIO(b))
    r = run(tool("pack_lmdb"), str(tmp_path / "train-{000..001}.tar"), tmp_path / "x.lmdb", "-q")
    assert "90 records in 3 classes" in r.stdout
    recs = db_records(tmp_path / "x.lmdb")
    assert all(p.startswith(long_dir + "/") for p, _, _ in recs)
    want = sorted((d, c) for d, c in expected)
    assert sorted((d, c) for _, d, c in recs) == want


def test_gzip_and_plain_shards_give_the_same_database(chain, tmp_path):
    plain = tmp_path / "plain"
    os.makedirs(plain)
    for f in os.listdir(chain / "wds"):
        if f.endswith(".tar.gz"):
            (plain / f.replace(".tar.gz", ".tar")).write_bytes(gzip.decompress((chain / "wds" / f).read_bytes()))
    shutil.copy(chain / "wds" / "classes.txt", plain)
    run(tool("pack_lmdb"), plain, tmp_path / "p.lmdb", "-q")
    assert db_records(tmp_path / "p.lmdb") == db_records(chain / "b.lmdb")
    # no inflated scratch files are left beside the destination
    assert not [f for f in os.listdir(chain) if f.startswith(".imagepack-gunzip")]


def test_damaged_shard_names_the_shard(chain, tmp_path):
    data = gzip.decompress((chain / "wds" / "shard-000001.tar.gz").read_bytes())
    os.makedirs(tmp_path / "w")
    (tmp_path / "w" / "shard-000001.tar").write_bytes(data[:len(data) // 2])
    r = run(tool("pack_lmdb"), tmp_path / "w", tmp_path / "x.lmdb", "-q", ok=False)
    assert r.returncode == 1 and "shard-000001.tar" in r.stderr and "truncated" in r.stderr
    assert not os.path.exists(tmp_path / "x.lmdb")


class Evil:
    def __reduce__(self):
        return (os.system, ("touch %s" % os.environ["EVIL_MARK"],))


def test_pickles_that_call_code_are_refused(tree, tmp_path, monkeypatch):
    mark = tmp_path / "pwned"
    monkeypatch.setenv("EVIL_MARK", str(mark))
    data = originals(tree)[0][0]
    env = lmdb.open(str(tmp_path / "f.lmdb"), subdir=False, lock=False)
    with env.begin(write=True) as txn:
        txn.put(b"0", pickle.dumps((data, 1)))
        txn.put(b"1", pickle.dumps(Evil()))
        txn.put(b"2", pickle.dumps((data, np.int64(2))))
        txn.put(b"3", pickle.dumps((data, 0), protocol=5))
        txn.put(b"4", pickle.dumps((data, 2), protocol=3))
        txn.put(b"5", pickle.dumps({"image": data}))
    env.close()
    r = run(tool("pack_lmdb"), tmp_path / "f.lmdb", tmp_path / "o.lmdb", "-q", ok=False)
    out = r.stdout + r.stderr
    assert r.returncode == 3, out  # some inputs skipped
    assert "3 records" in out
    assert "f.lmdb:1" in out and "refusing to call code" in out
    assert "f.lmdb:2" in out and "numpy" in out
    assert "f.lmdb:5" in out and "outside the accepted subset" in out
    assert not mark.exists()
    labels = [c for _, _, c in db_records(tmp_path / "o.lmdb")]
    assert labels == ["1", "0", "2"]


def test_lmdb_folder_without_keys_list(tree, tmp_path):
    """An LMDB folder (data.mdb) without __keys__: records in key order."""
    expected = originals(tree)[:5]
    env = lmdb.open(str(tmp_path / "dir"), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i, (data, c) in enumerate(expected):
            txn.put(("k%02d" % i).encode(), pickle.dumps((data, c)))
    env.close()
    run(tool("pack_lmdb"), tmp_path / "dir", tmp_path / "o.lmdb", "-q", "--classes", classes_file(tmp_path))
    assert db_records(tmp_path / "o.lmdb") == [("k%02d" % i, d, c) for i, (d, c) in enumerate(expected)]


def test_raw_records_export_losslessly(raw_db, tmp_path):
    run(tool("export_db"), raw_db, tmp_path / "w", "-q", "--records-per-shard", "40")
    run(tool("pack_lmdb"), tmp_path / "w", tmp_path / "back.blob", "-q", "--format", "blob", "--encoding", "raw")
    before = {p: (a, c) for p, a, c in db_records(raw_db)}
    after = db_records(tmp_path / "back.blob")
    assert len(after) == len(before) == 90
    for p, a, c in after:
        assert np.array_equal(a, before[p][0]) and c == before[p][1]


def test_export_resumes_and_refuses_another_export(jpeg_db, tmp_path):
    out = tmp_path / "w"
    run(tool("export_db"), jpeg_db, out, "-q", "--records-per-shard", "20")
    shards = sorted(f for f in os.listdir(out) if f.endswith(".tar"))
    first = {f: (out / f).read_bytes() for f in shards}
    os.remove(out / shards[2])
    r = run(tool("export_db"), jpeg_db, out, "-q", "--records-per-shard", "20")
    assert "1 files" in r.stdout and "70 already there" in r.stdout
    assert {f: (out / f).read_bytes() for f in shards} == first  # byte-identical
    r = run(tool("export_db"), jpeg_db, out, "-q", "--records-per-shard", "30", ok=False)
    assert r.returncode == 1 and "holds another export" in r.stderr
    assert not [f for f in os.listdir(out) if "ipk-tmp" in f]


def test_imagefolder_export_needs_classes(tmp_path, tree):
    run(tool("pack_lmdb"), tree, tmp_path / "n.lmdb", "-q", "--no-class")
    r = run(tool("export_db"), tmp_path / "n.lmdb", tmp_path / "f", "-q", "--to", "imagefolder", ok=False)
    assert r.returncode == 1 and "has no class" in r.stderr


def test_fields_export_as_members(tmp_path):
    """Masks as KEY.mask.png (the stored values), boxes and lists in the
    .json, second images as KEY.NAME.jpg (the stored bytes); importing the
    shards gives the same records, fields included."""
    from PIL import Image
    root = tmp_path / "src"
    os.makedirs(root / "img")
    rows = []
    rng = np.random.default_rng(0)
    for i in range(6):
        Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(root / "img" / ("%d.jpg" % i))
        Image.fromarray(rng.integers(0, 3, (24, 32), dtype=np.uint8)).save(root / "img" / ("%d.mask.png" % i))
        Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(root / "img" / ("%d.t.jpg" % i))
        rows.append({"image": "img/%d.jpg" % i, "mask": "img/%d.mask.png" % i, "target": "img/%d.t.jpg" % i,
                     "label": i % 2, "boxes": [[1, 2, 10, 12, 0]], "ids": [i, 7]})
    (root / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(tool("pack_lmdb"), "--manifest", root / "m.jsonl", tmp_path / "f.lmdb", "-q", "--mask-classes", "3",
        "--field", "target:image")  # "target" is not named as an image: declared
    run(tool("export_db"), tmp_path / "f.lmdb", tmp_path / "w", "-q")
    db = read_db.open_db(str(tmp_path / "f.lmdb"))
    with tarfile.open(tmp_path / "w" / "shard-000000.tar") as t:
        members = {m.name: t.extractfile(m).read() for m in t.getmembers()}
    assert len(members) == 6 * 5  # jpg, cls, json, mask.png, target.jpg
    for i in range(6):
        rec = read_db.read_record(db, i)
        key = rec["path"].rsplit(".", 1)[0]
        assert members[key + ".jpg"] == rec["payload"]
        fields = {db.meta["fields"][f["slot"]]["name"]: f["value"] for f in rec["fields"]}
        mask = np.asarray(Image.open(io.BytesIO(members[key + ".mask.png"])))
        np.testing.assert_array_equal(mask, fields["mask"])
        assert members[key + ".target.jpg"] == fields["target"]["payload"]
        meta = json.loads(members[key + ".json"])
        assert meta["ids"] == list(fields["ids"]) and meta["label"] == rec["label"]
        assert meta["boxes"] == [[1.0, 2.0, 10.0, 12.0, 0]]
    # and back in: the same records, fields included
    run(tool("pack_lmdb"), tmp_path / "w", tmp_path / "back.lmdb", "-q")  # fields, classes: meta.json
    back = read_db.open_db(str(tmp_path / "back.lmdb"))
    assert [f["name"] for f in back.meta["fields"]] == [f["name"] for f in db.meta["fields"]]
    assert [f["kind"] for f in back.meta["fields"]] == [f["kind"] for f in db.meta["fields"]]
    for i in range(6):
        a, b = read_db.read_record(db, i), read_db.read_record(back, i)
        assert (a["path"], a["label"], a["payload"]) == (b["path"], b["label"], b["payload"])
        for fa, fb in zip(a["fields"], b["fields"]):
            va, vb = fa["value"], fb["value"]
            if isinstance(va, dict):
                assert va["payload"] == vb["payload"]
            elif isinstance(va, tuple):
                assert all(np.array_equal(x, y) for x, y in zip(va, vb))
            else:
                assert np.array_equal(va, vb), fa


def test_shards_of_one_dataset_export_as_one(tree, tmp_path):
    for i in range(2):
        run(tool("pack_lmdb"), tree, tmp_path / ("s%d.lmdb" % i), "-q", "--shard", "%d/2" % i)
    run(tool("export_db"), tmp_path / "s0.lmdb", tmp_path / "s1.lmdb", tmp_path / "f", "-q", "--to", "imagefolder")
    assert differences(originals(tree), tmp_path / "f") == []


def test_killed_export_leaves_complete_shards_and_resumes(tree, tmp_path):
    """SIGKILL mid-export: every shard under its final name is complete,
    and the re-run gives the same bytes as an uninterrupted export."""
    import signal
    import time
    big = tmp_path / "big"
    for c in CLASSES:
        os.makedirs(big / c)
        for k in range(100):
            for n in os.listdir(tree / c):
                os.link(tree / c / n, big / c / ("%d_%s" % (k, n)))
    run(tool("pack_lmdb"), big, tmp_path / "big.lmdb", "-q")
    args = [tool("export_db"), tmp_path / "big.lmdb", None, "-q", "--records-per-shard", "20", "--gzip",
            "--threads", "1"]
    args[2] = tmp_path / "clean"
    run(*args)
    args[2] = tmp_path / "killed"
    p = subprocess.Popen([str(a) for a in args])
    shards = lambda: [f for f in os.listdir(tmp_path / "killed") if f.endswith(".tar.gz")] \
        if os.path.isdir(tmp_path / "killed") else []
    deadline = time.time() + 120  # generous: a loaded machine
    while not shards() and p.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    p.send_signal(signal.SIGKILL)
    p.wait()
    done = sorted(shards())
    assert 0 < len(done) < 450  # killed mid-way (9,000 records, 20 per shard)
    for f in done:  # complete: gzip and tar read to the end
        with tarfile.open(tmp_path / "killed" / f) as t:
            assert len(t.getmembers()) == 60
    run(*args)
    clean = sorted(f for f in os.listdir(tmp_path / "clean") if f.endswith(".tar.gz"))
    assert sorted(f for f in os.listdir(tmp_path / "killed") if f.endswith(".tar.gz")) == clean
    for f in clean:
        assert (tmp_path / "killed" / f).read_bytes() == (tmp_path / "clean" / f).read_bytes()
    assert not [f for f in os.listdir(tmp_path / "killed") if "ipk-tmp" in f]


def test_verify_against_exported_shards(jpeg_db, tmp_path):
    """verify_db --against reads WebDataset shards as pack_lmdb does: the
    shards export_db wrote hold every record once with its class."""
    run(tool("export_db"), jpeg_db, tmp_path / "shards", "-q")
    r = run(tool("verify_db"), jpeg_db, "--against", tmp_path / "shards")
    assert r.returncode == 0, r.stdout + r.stderr
    first = sorted(f for f in os.listdir(tmp_path / "shards") if f.endswith(".tar"))[0]
    os.remove(tmp_path / "shards" / first)
    r = run(tool("verify_db"), jpeg_db, "--against", tmp_path / "shards", ok=False)
    assert r.returncode == 1 and "not in the source tree" in r.stdout + r.stderr, r.stdout + r.stderr
