"""pack_lmdb --stats-sample 0 writes no statistics: empty mean and std in
the metadata (docs/FORMAT.md), read here with python3-lmdb and the blob
layout (scripts/read_db.py), never one image's mean passed off as the
dataset's; and every reader takes such a database."""
import json
import os
import sys

import lmdb
import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, run, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402


def lmdb_meta(path):
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
    with env.begin() as txn:
        meta = json.loads(txn.get(b"__meta__"))
    env.close()
    return meta


@pytest.mark.parametrize("encoding", ["jpeg", "raw"])
@pytest.mark.parametrize("fmt", ["lmdb", "blob"])
def test_stats_sample_zero_writes_none(tree, tmp_path, fmt, encoding):
    db = tmp_path / ("none." + fmt)
    run(tool("pack_lmdb"), tree, db, "-q", "--format", fmt, "--encoding", encoding, "--stats-sample", "0")
    meta = lmdb_meta(db) if fmt == "lmdb" else read_db.open_db(str(db)).meta
    assert (meta["mean"], meta["std"], meta["stats_images"]) == ([], [], 0)
    # The default still measures the dataset: against numpy over Pillow's
    # pixels for raw records (every pixel), loosely for a JPEG sample.
    run(tool("pack_lmdb"), tree, tmp_path / ("all." + fmt), "-q", "--format", fmt, "--encoding", encoding)
    meta = read_db.open_db(str(tmp_path / ("all." + fmt))).meta
    px = np.concatenate([np.asarray(Image.open(os.path.join(d, f)).convert("RGB"), np.float64).reshape(-1, 3)
                         for d, _, fs in os.walk(tree) for f in fs])
    tol = 1e-6 if encoding == "raw" else 0.03
    assert np.allclose(meta["mean"], px.mean(0) / 255, atol=tol) and meta["stats_images"] > 0
    assert np.allclose(meta["std"], px.std(0) / 255, atol=tol * 2)


def test_readers_take_a_database_without_statistics(tree, tmp_path):
    db = tmp_path / "none.lmdb"
    run(tool("pack_lmdb"), tree, db, "-q", "--stats-sample", "0")
    r = run("/usr/bin/python3", os.path.join(SCRIPTS, "read_db.py"), db, "0")
    assert "no statistics" in r.stdout
    run(tool("verify_db"), db, "-q", "--decode")
    # Shards of one dataset: statistics only where every shard has them.
    run(tool("pack_lmdb"), tree, tmp_path / "s0.lmdb", "-q", "--shard", "0/2")
    run(tool("pack_lmdb"), tree, tmp_path / "s1.lmdb", "-q", "--shard", "1/2", "--stats-sample", "0")
    run(tool("verify_db"), tmp_path / "s0.lmdb", tmp_path / "s1.lmdb", "-q")
    try:
        import imagepack
    except ImportError:
        return  # the tools-only build: no Python package
    assert imagepack.open(str(db)).meta["mean"] == []
    both = imagepack.Loader([str(tmp_path / "s0.lmdb"), str(tmp_path / "s1.lmdb")], 4, 16, as_torch=False)
    assert (both.meta["mean"], both.meta["std"], both.meta["stats_images"]) == ([], [], 0)
    one = imagepack.Loader([str(tmp_path / "s0.lmdb")], 4, 16, as_torch=False)
    assert len(one.meta["mean"]) == 3
