"""Hub datasets as they are laid out: a data/ folder of train-* and test-*
parquet shards written by DuckDB (npm @duckdb/node-api), and WebDataset
shards named by split, written by Python's tarfile. Splits are never
merged: a folder holding several is refused by name, naming each split
and --split; with --split (split= in Python) pack_lmdb, verify_db
--against, imagepack.open and the Loader read that split's files alone.
The expected rows are DuckDB's own reading of each split's files
(huggingface/datasets' naming rules: lib/src/sources/splits.h)."""
import io
import os
import tarfile

import pytest

from conftest import run, tool
from test_parquet import HF, duckdb, jpegs, records_of, write_parquet  # noqa: F401 (fixtures)


@pytest.fixture(scope="module")
def hub(duckdb, jpegs, tmp_path_factory):  # noqa: F811
    """A Hub repo's data/ folder: train in two shards, test in one, a
    README.md and .gitattributes beside them; and the rows DuckDB reads
    from each split's files (image path, bytes, label)."""
    d = tmp_path_factory.mktemp("repo") / "data"
    d.mkdir()
    all_rows = d.parent / "all.parquet"
    write_parquet(duckdb, jpegs, all_rows, "COMPRESSION zstd")
    for name, cond in (("train-00000-of-00002", "label = 0"), ("train-00001-of-00002", "label = 1"),
                       ("test-00000-of-00001", "label = 2")):
        duckdb("COPY (SELECT * FROM read_parquet('%s') WHERE %s) TO '%s' (FORMAT parquet, KV_METADATA "
               "{huggingface: '%s'})" % (all_rows, cond, d / (name + ".parquet"), HF))
    os.remove(all_rows)
    (d / "README.md").write_text("---\nlicense: mit\n---\n")
    (d / ".gitattributes").write_text("*.parquet filter=lfs\n")
    rows = {}
    for split in ("train", "test"):
        got = duckdb("SELECT image.path, label, md5(image.bytes) FROM read_parquet('%s/%s-*.parquet') ORDER BY 1"
                     % (d, split))
        rows[split] = [tuple(r) for r in got]
    assert len(rows["train"]) == 60 and len(rows["test"]) == 30, {k: len(v) for k, v in rows.items()}
    return d, rows


def md5_records(db):
    import hashlib
    _, recs = records_of(db)
    return sorted((p, label, hashlib.md5(b).hexdigest()) for p, b, label in recs)


def test_a_folder_of_two_splits_is_refused_naming_them(hub, tmp_path):
    d, _ = hub
    r = run(tool("pack_lmdb"), d, tmp_path / "x.lmdb", "-q", ok=False)
    assert r.returncode != 0
    assert "holds several splits: test (1 file), train (2 files)" in r.stderr, r.stderr
    assert "--split" in r.stderr and str(d) in r.stderr, r.stderr
    assert not (tmp_path / "x.lmdb").exists()


def test_pack_and_verify_read_the_split_given(hub, tmp_path):
    d, rows = hub
    for split in ("train", "test"):
        db = tmp_path / ("%s.lmdb" % split)
        run(tool("pack_lmdb"), d, db, "--split", split, "-q")
        assert md5_records(db) == sorted(rows[split]), split
        run(tool("verify_db"), db, "--against", d, "--split", split)
        # Against the other split: every image differs, and verify says so.
        other = "test" if split == "train" else "train"
        r = run(tool("verify_db"), db, "--against", d, "--split", other, ok=False)
        assert r.returncode != 0, r.stdout
    # A split the files do not have: named, with the ones they have.
    r = run(tool("pack_lmdb"), d, tmp_path / "v.lmdb", "--split", "val", "-q", ok=False)
    assert r.returncode != 0
    assert "holds no files of split validation (its splits: test (1 file), train (2 files))" in r.stderr, r.stderr
    r = run(tool("verify_db"), tmp_path / "train.lmdb", "--split", "train", ok=False)
    assert r.returncode == 2 and "give --against SRC" in r.stderr, r.stderr


def test_read_in_place_by_split(hub):
    import imagepack
    d, rows = hub
    with pytest.raises(Exception, match="holds several splits: test \\(1 file\\), train \\(2 files\\)"):
        imagepack.open(str(d))
    with pytest.raises(Exception, match="holds several splits"):
        imagepack.Loader(str(d), 8, 32)
    ds = imagepack.open(str(d), split="train")
    assert len(ds) == len(rows["train"])
    assert sorted(ds.classes) == ["class0", "class1", "class2"]
    loader = imagepack.Loader(str(d), 10, 32, train=False, split="test", as_torch=False)
    labels = []
    for batch in loader:  # a dict: the rows' caption column is a field
        labels += [int(x) for x in batch["label"]]
    assert sorted(labels) == sorted(label for _, label, _ in rows["test"])


def tar_shard(path, samples):
    with tarfile.open(path, "w") as t:
        for key, data in samples:
            for name, payload in ((key + ".jpg", data), (key + ".cls", b"0")):
                info = tarfile.TarInfo(name)
                info.size = len(payload)
                t.addfile(info, io.BytesIO(payload))


def test_webdataset_shards_named_by_split(jpegs, tmp_path):  # noqa: F811
    _, images = jpegs
    d = tmp_path / "shards"
    d.mkdir()
    tar_shard(d / "imagenet-train-000000.tar", [("a%d" % i, b) for i, (_, b, _) in enumerate(images[:5])])
    tar_shard(d / "imagenet-val-000000.tar", [("b%d" % i, b) for i, (_, b, _) in enumerate(images[5:8])])
    r = run(tool("pack_lmdb"), d, tmp_path / "x.lmdb", "-q", ok=False)
    assert r.returncode != 0 and "holds several splits: train (1 file), validation (1 file)" in r.stderr, r.stderr
    r = run(tool("pack_lmdb"), d, tmp_path / "v.lmdb", "--split", "val")
    assert "3 records" in r.stdout, r.stdout


def test_globs_as_the_hub_writes_them(hub, tmp_path):
    """'data/train-*.parquet' (the Hub's data_files) and '**/test-*' in
    pack_lmdb, verify_db --against and read in place; a glob that
    matches nothing is named."""
    import imagepack
    d, rows = hub
    db = tmp_path / "g.lmdb"
    run(tool("pack_lmdb"), str(d / "train-*.parquet"), db, "-q")
    assert md5_records(db) == sorted(rows["train"])
    run(tool("verify_db"), db, "--against", str(d / "train-0000[0-1]-of-00002.parquet"))
    assert len(imagepack.open(str(d.parent / "**" / "test-*.parquet"))) == len(rows["test"])
    r = run(tool("pack_lmdb"), str(d / "val-*.parquet"), tmp_path / "n.lmdb", "-q", ok=False)
    assert r.returncode != 0 and "val-*.parquet matches no file" in r.stderr, r.stderr
    with pytest.raises(FileNotFoundError, match="matches no file"):
        imagepack.open(str(d / "val-*.parquet"))


def test_both_trainers_stop_when_val_is_inside_the_training_data(hub, tmp_path):
    """--val reading files --data reads (the same split of one folder, a
    shard of a training glob) is said and stops both trainers before any
    epoch; two splits of one folder train."""
    import pathlib
    import subprocess
    import sys
    from conftest import SCRIPTS
    d, _ = hub
    train = pathlib.Path(tool("pack_lmdb")).parent.parent / "trainer" / "train"
    script = os.path.join(SCRIPTS, "train_imagepack.py")
    common = ["--arch", "small_cnn", "--size", "16", "--epochs", "1", "--batch-size", "8"]
    cases = [(["--data", str(d), "--split", "train", "--val", str(d), "--val-split", "train"], "2 of its 2 file(s)"),
             (["--data", str(d / "train-*.parquet"), "--val", str(d / "train-00001-of-00002.parquet")],
              "1 of its 1 file(s) is read for training too (%s)" % (d / "train-00001-of-00002.parquet"))]
    for n, (data, says) in enumerate(cases):
        for k, cmd in enumerate(([str(train)], [sys.executable, script, "--threads", "1"])):
            out = tmp_path / ("run%d%d" % (n, k))
            r = subprocess.run(cmd + data + common + ["--output", str(out)], capture_output=True, text=True,
                               timeout=300, start_new_session=True)
            assert r.returncode != 0 and says in r.stderr and "validation inside the training data" in r.stderr, \
                (cmd[0], r.stdout[-1500:], r.stderr[-1500:])
            assert not (out / "checkpoint.pt").exists()
