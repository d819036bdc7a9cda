"""Parquet files and TFRecords read in place by the loader, Python and the
C++ trainer, without a pack. The files come from writers no one here
wrote: DuckDB (the npm package @duckdb/node-api, see test_parquet.py) for
parquet in the Hugging Face layout, Debian's python3-protobuf with
python3-crc32c for TFRecords (tfrecord_writer.py). The reference is the
same files imported by pack_lmdb: read in place, every batch of two
epochs, in random and block order, equals the batch read from the import,
and an exact resume from a position inside an epoch gives the rest."""
import os
import pathlib
import sys
import subprocess

import numpy as np
import pytest
from PIL import Image

from conftest import run, tool
from test_parquet import duckdb, jpegs, write_parquet  # noqa: F401 (fixtures)
from tfrecord_writer import EXAMPLE, example, write

imagepack = pytest.importorskip("imagepack")


def pair(b):
    """(images, labels) of a batch: a tuple, or a dict when records hold fields."""
    x, y = (b["image"], b["label"]) if isinstance(b, dict) else (b[0], b[1])
    return x.numpy().copy(), y.numpy().copy()


def batches(path, epochs=2, **kw):
    loader = imagepack.Loader(path, batch_size=8, size=32, train=True, seed=3, **kw)
    out = []
    for _ in range(epochs):
        out.extend(pair(b) for b in loader)
    return out


def same(a, b):
    assert len(a) == len(b) and len(a) > 0
    for k, ((xa, ya), (xb, yb)) in enumerate(zip(a, b)):
        assert np.array_equal(ya, yb), "batch %d: labels differ" % k
        assert np.array_equal(xa, xb), "batch %d: pixels differ" % k


@pytest.fixture(scope="module")
def tfrecords(tree, tmp_path_factory):
    """Two TF-slim shards (labels counted from 1) and their gzipped twins."""
    d = tmp_path_factory.mktemp("tfr")
    recs = []
    for c in range(3):
        for n in sorted(os.listdir(tree / ("class%d" % c)))[:12]:
            recs.append(example({"image/encoded": (tree / ("class%d" % c) / n).read_bytes(),
                                 "image/class/label": c + 1}, EXAMPLE))
    for s in range(2):
        write(d / ("train-%05d-of-00002" % s), recs[s::2])
        (d / "gz").mkdir(exist_ok=True)
        write(d / "gz" / ("train-%05d-of-00002" % s), recs[s::2], compress=True)
    return d


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("order", ["random", "blocks"])
def test_tfrecords_in_place_give_the_imports_batches(tfrecords, tmp_path, gz, order):
    src = str((tfrecords / "gz" if gz else tfrecords) / "train-{00000..00001}-of-00002")
    run(tool("pack_lmdb"), src, tmp_path / "t.lmdb", "-q")
    same(batches(str(tmp_path / "t.lmdb"), order=order), batches(src, order=order))


@pytest.mark.parametrize("name,options", [("snappy", "COMPRESSION snappy, ROW_GROUP_SIZE 100"),
                                          ("uncompressed", "COMPRESSION uncompressed, ROW_GROUP_SIZE 100")])
def test_parquet_in_place_gives_the_imports_batches_and_resumes(duckdb, jpegs, tmp_path, name, options):  # noqa: F811
    src = tmp_path / ("train-00000-of-00001-%s.parquet" % name)
    write_parquet(duckdb, jpegs, src, options)
    run(tool("pack_lmdb"), src, tmp_path / "p.lmdb", "-q")
    db, here = imagepack.Loader(str(tmp_path / "p.lmdb"), 8, 32), imagepack.Loader(str(src), 8, 32)
    assert here.classes == db.classes == ["class0", "class1", "class2"]
    same(batches(str(tmp_path / "p.lmdb")), batches(str(src)))
    # exact resume inside an epoch: the state of the third batch continues
    # with the fourth, as the uninterrupted run does
    whole = batches(str(src), epochs=1)
    loader = imagepack.Loader(str(src), batch_size=8, size=32, train=True, seed=3)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = loader.state_dict()
    again = imagepack.Loader(str(src), batch_size=8, size=32, train=True, seed=3)
    again.load_state_dict(state)
    same(whole[3:], [pair(b) for b in again])


def test_a_damaged_record_fails_the_open_naming_it(tfrecords, tmp_path):
    """The import skips a record whose CRC does not match and lists it; read
    in place, the open fails naming it (no record is left out in silence)."""
    data = bytearray((tfrecords / "train-00000-of-00002").read_bytes())
    data[200] ^= 0xFF
    bad = tmp_path / "bad-00000"
    bad.write_bytes(bytes(data))
    with pytest.raises(Exception) as e:
        imagepack.Loader(str(bad), 8, 32)
    assert str(bad) in str(e.value) and "cannot be read in place" in str(e.value), str(e.value)
    # on_corrupt="skip": the import's records (the damaged one left out, as
    # pack_lmdb leaves it out), the same batches, and a warning on stderr.
    db = tmp_path / "bad.lmdb"
    r = run(tool("pack_lmdb"), bad, db, "-q", ok=False)
    assert r.returncode == 3 and "1 skipped" in r.stdout + r.stderr, r.stdout + r.stderr  # done, with skips
    v = run(tool("verify_db"), db, "--against", bad)  # what pack skips is not expected
    assert "1 records of %s that pack_lmdb skips not expected" % bad in v.stdout + v.stderr, v.stdout + v.stderr
    packed = imagepack.open(str(db))
    in_place = imagepack.Loader(str(bad), 8, 32, on_corrupt="skip")
    assert in_place.dataset_size == len(packed) > 0
    same(batches(str(db), epochs=1), batches(str(bad), epochs=1, on_corrupt="skip"))
    warned = subprocess.run([sys.executable, "-c", "import imagepack, sys; imagepack.Loader(sys.argv[1], 8, 32, "
                             "on_corrupt='skip')", str(bad)], capture_output=True, text=True)
    assert warned.returncode == 0 and "cannot be read in place" in warned.stderr and "on_corrupt=skip" in \
        warned.stderr, warned.stderr


def test_png_rows_read_as_exact_pixels(duckdb, tmp_path):  # noqa: F811
    """Lossless images are not re-encoded as JPEG: read in place they are
    their decoded pixels, as Pillow decodes them."""
    d = tmp_path / "png"
    d.mkdir()
    rng = np.random.default_rng(5)
    arrays = []
    for i in range(6):
        a = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
        Image.fromarray(a).save(d / ("img%d.png" % i))
        arrays.append(a)
    src = tmp_path / "png.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, 0::BIGINT AS label "
           "FROM read_blob('%s/*.png') ORDER BY filename) TO '%s' (FORMAT parquet)" % (d, src))
    dataset = imagepack.open(str(src))
    assert len(dataset) == 6
    for k in range(6):
        image = dataset[k][0]
        assert np.array_equal(np.asarray(image), np.asarray(Image.open(d / ("img%d.png" % k)).convert("RGB"))), k


def test_the_trainer_trains_on_tfrecords_in_place(tfrecords, tmp_path):
    """build/trainer/train --data PATTERN: one epoch on the shards as they
    are, the log naming them as read in place."""
    train = pathlib.Path(tool("pack_lmdb")).parent.parent / "trainer" / "train"
    if not train.exists():
        pytest.skip("the C++ trainer is not built")
    src = str(tfrecords / "train-{00000..00001}-of-00002")
    r = subprocess.run([str(train), "--data", src, "--no-val", "--arch", "small_cnn", "--size", "16",
                        "--epochs", "1", "--batch-size", "8", "--output", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=300, start_new_session=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "final weights digest" in r.stdout + r.stderr


def test_webdataset_shards_written_by_tarfile_in_place_give_the_imports_batches(tree, tmp_path):
    """WebDataset shards as Python's tarfile writes them (KEY.jpg, KEY.cls)."""
    import io
    import tarfile
    files = [(c, n) for c in range(3) for n in sorted(os.listdir(tree / ("class%d" % c)))[:10]]
    for s in range(2):
        with tarfile.open(tmp_path / ("shard-%d.tar" % s), "w") as t:
            for k, (c, n) in enumerate(files[s::2]):
                for ext, data in (("jpg", (tree / ("class%d" % c) / n).read_bytes()), ("cls", b"%d" % c)):
                    info = tarfile.TarInfo("s%d_%04d.%s" % (s, k, ext))
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))
    src = str(tmp_path / "shard-{0..1}.tar")
    run(tool("pack_lmdb"), src, tmp_path / "w.lmdb", "-q")
    same(batches(str(tmp_path / "w.lmdb"), order="blocks"), batches(src, order="blocks"))


# ---- hostile TFRecords read in place (issue 57): refused naming what is
# wrong, or read; never a crash, a hang or an index read whole ----

def test_hostile_tfrecords_in_place_are_refused_by_name_or_read(tfrecords, tmp_path):
    import shutil
    good = [(tfrecords / ("train-%05d-of-00002" % s)).read_bytes() for s in range(2)]
    # a label past int32 (TFDS layout): refused naming the record and why
    img = b"\xff\xd8 any bytes: the open refuses before decoding"
    big = tmp_path / "big.tfrecord"
    write(big, [example({"image": img, "label": 0}), example({"image": img, "label": 2**63 - 1})])
    for opener in (lambda p: imagepack.Loader(p, 8, 32), imagepack.open):
        with pytest.raises(Exception) as e:
            opener(str(big))
        assert str(big) + ":record 1" in str(e.value) and "past any class" in str(e.value), str(e.value)
    # no label anywhere: one reason, naming --no-class
    nolabel = tmp_path / "nolabel.tfrecord"
    write(nolabel, [example({"image": img})] * 3)
    with pytest.raises(Exception) as e:
        imagepack.open(str(nolabel))
    assert "no label in any of its 3 records" in str(e.value) and "--no-class" in str(e.value), str(e.value)
    # shards: one damaged at its first record (refused, naming it), one
    # empty (nothing): still TFRecords, not "not a .tar shard"
    d = tmp_path / "shards"
    d.mkdir()
    (d / "train-00000-of-00003").write_bytes(good[0])
    (d / "train-00001-of-00003").write_bytes(b"")
    (d / "train-00002-of-00003").write_bytes(good[1])
    pattern = str(d / "train-{00000..00002}-of-00003")
    n = len(imagepack.open(str(tfrecords / "train-{00000..00001}-of-00002")))
    assert len(imagepack.open(pattern)) == n
    assert len(imagepack.open(str(d))) == n
    damaged = bytearray(good[0])
    damaged[0] ^= 0x40
    (d / "train-00000-of-00003").write_bytes(bytes(damaged))
    for src in (pattern, str(d)):
        with pytest.raises(Exception) as e:
            imagepack.Loader(src, 8, 32)
        assert str(d / "train-00000-of-00003") + ":record 0" in str(e.value), str(e.value)
        assert "not a .tar" not in str(e.value) and "class folders" not in str(e.value)
    # an index of millions of lines beside a good file: not used, not read whole
    shutil.copy(tfrecords / "train-00001-of-00002", tmp_path / "x.tfrecord")
    (tmp_path / "x.tfrecord.idx").write_bytes(b"0 16\n" * 3_000_000)
    assert len(imagepack.open(str(tmp_path / "x.tfrecord"))) == len(imagepack.open(str(tfrecords / "train-00001-of-00002")))
