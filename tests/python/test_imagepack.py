"""The Python package against the C++ loader, the pure-Python reader and
its own promises (resume, rank partition, batch lifetime, errors, memory)."""
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
import xxhash

import imagepack
from conftest import SCRIPTS, tool

spec = importlib.util.spec_from_file_location("read_db", os.path.join(SCRIPTS, "read_db.py"))
read_db = importlib.util.module_from_spec(spec)
spec.loader.exec_module(read_db)


def batches(loader, epoch=0):
    loader.set_epoch(epoch)
    return [(np.array(x), np.array(y)) for x, y in loader]


def test_import_needs_no_path_edits_once_built():
    """`import imagepack` resolves to the built package (this test runs with
    the build's python folder on the path, as the .pth that build.sh
    writes puts it)."""
    assert imagepack.__file__.endswith(os.path.join("imagepack", "__init__.py"))
    assert hasattr(imagepack, "Loader") and hasattr(imagepack, "open")


@pytest.mark.parametrize("transform,layout", [("train", "NCHW"), ("eval", "NHWC")])
def test_python_batches_are_the_cpp_loaders_batches(jpeg_db, transform, layout):
    """Same options and seed: the same bytes as bench_loader's (C++) batches
    (bench_loader shuffles in every transform, so the Python side does too)."""
    out = subprocess.run([tool("bench_loader"), jpeg_db, "--batch", "16", "--size", "32", "--transform", transform,
                          "--layout", layout.lower(), "--seed", "9", "--threads", "2", "--epochs", "2", "--digest"],
                         check=True, capture_output=True, text=True).stdout
    want = [line.split()[1:] for line in out.splitlines() if line.startswith("batch ")]
    loader = imagepack.Loader(jpeg_db, batch_size=16, size=32, transform=transform, layout=layout, seed=9,
                              shuffle=True, threads=2, as_torch=False)
    got = []
    for epoch in (0, 1):
        for b, (images, labels) in enumerate(batches(loader, epoch)):
            got.append([str(epoch), str(b), str(len(labels)), "%016x" % xxhash.xxh3_64_intdigest(images.tobytes()),
                        "%016x" % xxhash.xxh3_64_intdigest(labels.astype(np.int64).tobytes())])
    assert len(want) == 12  # 90 samples in batches of 16, 2 epochs
    assert got == want


def test_batches_are_torch_tensors_without_a_copy(jpeg_db):
    torch = pytest.importorskip("torch")
    loader = imagepack.Loader(jpeg_db, batch_size=8, size=24, threads=2)
    images, labels = next(iter(loader))
    assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
    assert tuple(images.shape) == (8, 3, 24, 24) and labels.dtype == torch.int64
    assert len(loader) == 12 and loader.classes == ["class0", "class1", "class2"]


def test_state_dict_round_trip_gives_the_same_next_batches(jpeg_db):
    opts = dict(batch_size=8, size=24, seed=4, threads=2, as_torch=False)
    full = batches(imagepack.Loader(jpeg_db, **opts), epoch=2)
    loader = imagepack.Loader(jpeg_db, **opts)
    loader.set_epoch(2)
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.state_dict()
    assert state["epoch"] == 2 and state["position"] == 40
    resumed = imagepack.Loader(jpeg_db, **opts)
    resumed.load_state_dict(state)
    assert len(resumed) == len(full) - 5
    # The restored position's batches are made from load_state_dict() on;
    # the iteration takes them (a second restore threw them away and
    # decoded them again: a flaky count when the producer was quick, now
    # certain with this wait for its first batch, however loaded the machine).
    deadline = time.time() + 120
    while resumed.stats()["images"] < 8 and time.time() < deadline:
        time.sleep(0.01)
    assert resumed.stats()["images"] >= 8
    rest = [(np.array(x), np.array(y)) for x, y in resumed]
    assert len(rest) == len(full) - 5
    for (a, la), (b, lb) in zip(rest, full[5:]):
        assert np.array_equal(a, b) and np.array_equal(la, lb)
    before = resumed.stats()["images"]
    assert before == resumed.dataset_size - 40  # each of the 50 left decoded once, nothing before position 40
    with pytest.raises(ValueError, match="seed"):
        imagepack.Loader(jpeg_db, **dict(opts, seed=5)).load_state_dict(state)
    # Elastic: the same state on 3 ranks covers the 50 samples left, once.
    left = []
    for rank in range(3):
        other = imagepack.Loader(jpeg_db, **dict(opts, rank=rank, world_size=3))
        other.load_state_dict(state)
        left += [int(v) for _, y in other for v in y]
    assert len(left) == 51  # 50 left, 17 each: one padding sample


def test_block_order_resumes_on_another_world_and_in_ram_is_one_shared_copy(jpeg_db, tmp_path, monkeypatch):
    opts = dict(batch_size=6, size=16, seed=2, threads=2, as_torch=False, order="blocks", block_mb=0.02,
                window_blocks=2)
    loader = imagepack.Loader(jpeg_db, **opts, rank=0, world_size=2)
    assert loader.order == "blocks" and imagepack.Loader(jpeg_db, **dict(opts, order="auto")).order == "random"
    loader.set_epoch(1)
    it = iter(loader)
    seen = [int(i) for _ in range(3) for i in next(it)[1]]
    state = loader.state_dict()
    assert (state["order"], state["order_world"], state["position"]) == ("blocks", 2, 36)
    # Rank 1 took its own 3 batches; one process continues the epoch.
    other = imagepack.Loader(jpeg_db, **opts, rank=1, world_size=2)
    other.set_epoch(1)
    it1 = iter(other)
    seen1 = [np.array(next(it1)[0]) for _ in range(3)]
    assert len(seen1) == 3
    rest = imagepack.Loader(jpeg_db, **dict(opts, order="random"), rank=0, world_size=1)
    rest.load_state_dict(state)
    left = sum(len(y) for _, y in rest)
    assert left == 90 - 36
    # in_ram: two loaders map one copy in the shared-memory folder; it goes with the last.
    monkeypatch.setenv("IMAGEPACK_SHM_DIR", str(tmp_path))
    a = imagepack.Loader(jpeg_db, batch_size=8, size=16, in_ram=True, as_torch=False)
    b = imagepack.Loader(jpeg_db, batch_size=8, size=16, in_ram=True, as_torch=False)
    mine = tmp_path / ("imagepack-%d" % os.geteuid())  # this user's private folder
    copies = [p for p in os.listdir(mine) if p.endswith(".db")]
    assert len(copies) == 1 and os.path.getsize(mine / copies[0]) == os.path.getsize(jpeg_db)
    assert np.array_equal(np.array(batches(a)[0][0]), np.array(batches(b)[0][0]))
    del a, b
    gc.collect()
    assert [p for p in os.listdir(mine) if p.endswith(".db")] == []


def test_ranks_partition_the_epoch(jpeg_db):
    n = 90
    seen = []
    for rank in range(2):
        loader = imagepack.Loader(jpeg_db, batch_size=8, size=16, train=False, rank=rank, world_size=2,
                                  as_torch=False)
        assert loader.samples_per_epoch == 45
        seen += list(imagepack.epoch_indices(n, False, 0, 0, rank, 2, False))
        labels = np.concatenate([y for _, y in batches(loader)])
        assert len(labels) == 45
    assert sorted(seen) == list(range(n))
    train = [imagepack.epoch_indices(n, True, 1, 3, r, 4, True) for r in range(4)]
    assert all(len(t) == 23 for t in train) and set().union(*map(set, train)) == set(range(n))


def test_a_batch_stays_valid_until_dropped(jpeg_db):
    loader = imagepack.Loader(jpeg_db, batch_size=8, size=24, threads=2, prefetch=1, as_torch=False)
    reference = batches(loader)
    loader.set_epoch(0)
    it = iter(loader)
    kept_images, kept_labels = next(it)
    copy = kept_images.copy()
    for k in (1, 2):
        images, _ = next(it)
        assert np.array_equal(images, reference[k][0])
        assert np.array_equal(kept_images, copy), "batch 0 changed after batch %d" % k
    assert np.array_equal(kept_images, reference[0][0]) and np.array_equal(kept_labels, reference[0][1])
    del it, loader
    gc.collect()
    assert np.array_equal(kept_images, copy), "batch 0 changed after the loader went"


def test_dataset_matches_read_db(jpeg_db, raw_db):
    for path in (jpeg_db, raw_db):
        ds = imagepack.open(path)
        db = read_db.open_db(path)
        assert len(ds) == db.meta["count"] == 90
        assert ds.classes == db.meta["classes"] and ds.meta["encoding"] == db.meta["encoding"]
        for i in (0, 1, 44, 89):
            rec = read_db.read_record(db, i)
            image, label = ds[i]
            assert label == rec["label"]
            assert image.dtype == np.uint8 and image.shape == (rec["height"], rec["width"], rec["channels"])
            if rec["encoding"] == "raw":
                assert np.array_equal(image, rec["payload"])
            else:  # an independent decode of the same bytes
                import io
                from PIL import Image
                ref = np.asarray(Image.open(io.BytesIO(rec["payload"])).convert("RGB"), dtype=np.int16)
                assert np.abs(ref - image).mean() < 2.0  # fast IDCT vs Pillow's accurate one: ~1.1
            assert ds.record(i)[2] == rec["path"]
        assert ds[-1][1] == ds[89][1]
        with pytest.raises(IndexError, match="record 90"):
            ds[90]


def test_options_defaults_are_the_cpp_loaders_and_each_option_arrives(jpeg_db):
    """The keyword options' defaults come from the C++ LoaderOptions (the
    extension's LoaderOptions(), not a second copy in Python), and a value
    given reaches the loader: a different seed gives other batches, the
    default one the same as leaving it out."""
    d = imagepack.Loader.options_defaults()
    o = imagepack._imagepack.LoaderOptions()
    assert d["prefetch"] == o.prefetch == 2 and d["block_mb"] == o.block_mb and d["order"] == "auto"
    assert d["scale"] == (o.scale_min, o.scale_max) and d["dct"] == "fast" and d["layout"] == "NCHW"

    def first(**kw):
        loader = imagepack.Loader(jpeg_db, batch_size=4, size=16, as_torch=False, **kw)
        return [np.asarray(a).copy() for a in next(iter(loader))[:2]]

    plain = first()
    explicit = first(**{k: v for k, v in d.items() if k not in ("scale", "ratio")}, scale=d["scale"],
                     ratio=d["ratio"])
    assert all(np.array_equal(a, b) for a, b in zip(plain, explicit))
    assert not all(np.array_equal(a, b) for a, b in zip(plain, first(seed=d["seed"] + 1)))
    assert first(layout="NHWC")[0].shape[-1] == 3


def test_errors_are_python_exceptions_naming_what(jpeg_db, tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.lmdb"):
        imagepack.Loader(str(tmp_path / "missing.lmdb"), batch_size=4, size=8)
    with pytest.raises(FileNotFoundError, match="missing.lmdb"):
        imagepack.open(str(tmp_path / "missing.lmdb"))
    with pytest.raises(ValueError, match="transform"):
        imagepack.Loader(jpeg_db, batch_size=4, size=8, transform="zoom")
    with pytest.raises(ValueError):
        imagepack.Loader(jpeg_db, batch_size=0, size=8)
    with pytest.raises(ValueError, match="rank"):
        imagepack.Loader(jpeg_db, batch_size=4, size=8, rank=3, world_size=2)
    with pytest.raises(ValueError, match="layout"):
        imagepack.Loader(jpeg_db, batch_size=4, size=8, layout="CHW")
    with pytest.raises(ValueError, match="order"):
        imagepack.Loader(jpeg_db, batch_size=4, size=8, order="spiral")
    with pytest.raises(TypeError, match="prefech"):  # a misspelt option is not ignored
        imagepack.Loader(jpeg_db, batch_size=4, size=8, prefech=4)
    garbage = tmp_path / "garbage.lmdb"
    garbage.write_bytes(b"not a database at all, really")
    with pytest.raises(imagepack.CorruptionError):
        imagepack.open(str(garbage))


def test_requests_a_machine_cannot_hold_are_errors_not_crashes(jpeg_db, tmp_path):
    """Loader(size=1e6) used to abort on bad_alloc and threads=100000 to
    segfault at exit; a FIFO as the database used to block forever."""
    with pytest.raises(ValueError, match="output size"):
        imagepack.Loader(jpeg_db, batch_size=4, size=int(1e6))
    with pytest.raises(ValueError, match="threads"):
        imagepack.Loader(jpeg_db, batch_size=4, size=8, threads=100000)
    with pytest.raises(ValueError, match="64 GiB"):
        imagepack.Loader(jpeg_db, batch_size=65536, size=4096)
    with pytest.raises(ValueError, match="prefetch"):
        imagepack.Loader(jpeg_db, batch_size=4, size=8, prefetch=10**6)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="FIFO"):
        imagepack.open(str(tmp_path / "fifo"))


def test_open_gives_the_datasets_channels_for_a_gray_jpeg(tmp_path):
    """ImageNet holds gray JPEGs; packed as they are in an RGB dataset, they
    come out of Dataset[i] with 3 channels, so default_collate stacks them."""
    from PIL import Image
    rng = np.random.default_rng(0)
    os.makedirs(tmp_path / "t" / "c")
    Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)).save(tmp_path / "t" / "c" / "a.jpg")
    gray = rng.integers(0, 255, (20, 30), dtype=np.uint8)
    Image.fromarray(gray).save(tmp_path / "t" / "c" / "b.jpg")
    subprocess.run([tool("pack_lmdb"), str(tmp_path / "t"), str(tmp_path / "d.lmdb"), "-q"], check=True)
    ds = imagepack.open(str(tmp_path / "d.lmdb"))
    shapes = [ds[i][0].shape for i in range(len(ds))]
    assert shapes == [(20, 30, 3), (20, 30, 3)], shapes
    # Pillow's own conversion of the same gray JPEG, exactly: three equal
    # channels, decoded with the accurate IDCT as Pillow does (docs/PYTHON.md).
    want = np.array(Image.open(tmp_path / "t" / "c" / "b.jpg").convert("RGB")).astype(int)
    got = [ds[i][0] for i in range(len(ds)) if ds.record(i)[2] == "c/b.jpg"][0].astype(int)
    assert (got[..., 0] == got[..., 1]).all() and (got[..., 1] == got[..., 2]).all()
    np.testing.assert_array_equal(got, want)
    import torch.utils.data
    batch = torch.utils.data.default_collate([ds[0], ds[1]])
    assert tuple(batch[0].shape) == (2, 20, 30, 3)


def test_a_corrupt_record_names_its_key_and_path(jpeg_db, tree, tmp_path):
    db = tmp_path / "bad.blob"
    subprocess.run([tool("pack_lmdb"), str(tree), str(db), "-q", "--format", "blob"], check=True)
    blob = bytearray(db.read_bytes())
    # The record of class1/img05.jpg: 40-byte header, path, JPEG (docs/FORMAT.md).
    start = blob.find(b"class1/img05.jpg") - 40
    header = read_db.HEADER.unpack_from(blob, start)
    path_len, payload_len = header[8], header[10]
    end = start + 40 + path_len + payload_len
    good = bytes(blob)

    # A bogus Huffman table under a valid checksum: the decode fails.
    dht = blob.find(b"\xff\xc4", start + 40 + path_len, end)
    blob[dht + 5:dht + 21] = b"\xff" * 16
    blob[start:start + 8] = xxhash.xxh3_64_intdigest(bytes(blob[start + 8:end])).to_bytes(8, "little")
    db.write_bytes(bytes(blob))
    ds = imagepack.open(str(db))
    index = next(i for i in range(len(ds)) if read_db.read_record(read_db.open_db(str(db)), i)["path"] ==
                 "class1/img05.jpg")
    with pytest.raises(imagepack.CorruptionError, match=r"record %010d \(class1/img05.jpg\)" % index):
        ds[index]
    loader = imagepack.Loader(str(db), batch_size=10, size=16, train=False, as_torch=False)
    with pytest.raises(imagepack.CorruptionError, match="class1/img05.jpg"):
        batches(loader)
    skipping = imagepack.Loader(str(db), batch_size=10, size=16, train=False, on_corrupt="skip", as_torch=False)
    assert sum(len(y) for _, y in batches(skipping)) == 90 and skipping.stats()["skipped"] == 1

    # Damaged bytes: the checksum names the record.
    blob = bytearray(good)
    blob[end - 100] ^= 0xFF
    db.write_bytes(bytes(blob))
    with pytest.raises(imagepack.CorruptionError, match="record %010d: checksum mismatch" % index):
        imagepack.open(str(db))[index]


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def test_no_memory_growth_over_5000_batches(raw_db):
    loader = imagepack.Loader(raw_db, batch_size=4, size=16, threads=2, as_torch=False)
    epoch, count = 0, 0
    start = None
    while count < 5000:
        loader.set_epoch(epoch)
        for images, labels in loader:
            count += 1
            if count == 500:
                gc.collect()
                start = rss_kib()
        epoch += 1
    gc.collect()
    grown = rss_kib() - start
    assert grown < 2048, "RSS grew by %d KiB over 4500 batches" % grown
