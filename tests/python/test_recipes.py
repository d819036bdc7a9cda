"""Training recipes from Python: the output size per epoch (set_output_size,
size_schedule, FFCV's resolution schedule) and mixes of datasets (weights,
repeat, choose), with exact resume (docs/PYTHON.md, "Recipes")."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import imagepack
from conftest import pack


def epoch(loader, e):
    loader.set_epoch(e)
    return [(np.array(x), np.array(y)) for x, y in loader]


def test_ffcv_configs_resolutions():
    """FFCV's six ResNet-50 configs (160 -> 192, ramps as in rn50_configs):
    the first epoch at 192 is the ramp's midpoint rounded up."""
    for epochs, start, end, first_192 in ((16, 11, 13, 12), (24, 17, 20, 19), (32, 23, 27, 25), (40, 29, 34, 32),
                                          (56, 41, 48, 45), (88, 65, 76, 71)):
        got = [imagepack.resolution(e, 160, 192, start, end) for e in range(epochs)]
        assert got == [160] * first_192 + [192] * (epochs - first_192), epochs


def test_set_output_size_between_epochs_keeps_the_loader(jpeg_db):
    opts = dict(batch_size=8, size=16, seed=3, threads=2, as_torch=False)
    loader = imagepack.Loader(jpeg_db, **opts)
    epoch(loader, 0)
    tasks = sorted(os.listdir("/proc/self/task"))
    loader.set_output_size(32)
    assert loader.output_size == 16  # the epoch in progress keeps its size
    at32 = epoch(loader, 1)
    assert loader.output_size == 32 and at32[0][0].shape == (8, 3, 32, 32)
    loader.set_output_size(16)
    assert epoch(loader, 2)[0][0].shape == (8, 3, 16, 16)
    assert sorted(os.listdir("/proc/self/task")) == tasks  # the same threads
    fresh = epoch(imagepack.Loader(jpeg_db, **dict(opts, size=32)), 1)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(at32, fresh)) and len(at32) == len(fresh)
    with pytest.raises(ValueError, match="output size"):
        loader.set_output_size(0)


def test_size_schedule_and_resume_mid_epoch(jpeg_db):
    opts = dict(batch_size=8, size=None, seed=5, threads=2, as_torch=False, size_schedule=(16, 32, 0, 2, 8))
    loader = imagepack.Loader(jpeg_db, **opts)
    sizes = []
    full = []
    for e in range(3):
        batches = epoch(loader, e)
        sizes.append(batches[0][0].shape[-1])
        full.append(batches)
    assert sizes == [imagepack.resolution(e, 16, 32, 0, 2, 8) for e in range(3)] == [16, 24, 32]
    # Cut epoch 1 (24 px) after 4 batches: a new loader continues exactly.
    cut = imagepack.Loader(jpeg_db, **opts)
    cut.set_epoch(1)
    it = iter(cut)
    for _ in range(4):
        next(it)
    state = cut.state_dict()
    assert state["size"] == 24 and state["position"] == 32
    resumed = imagepack.Loader(jpeg_db, **dict(opts, size_schedule="40,40,0,0"))  # another schedule now
    resumed.load_state_dict(state)
    rest = [(np.array(x), np.array(y)) for x, y in resumed]
    assert len(rest) == len(full[1]) - 4
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(rest, full[1][4:]))
    with pytest.raises(ValueError, match="size_schedule"):
        resumed.set_output_size(20)


@pytest.fixture(scope="module")
def mix_dbs(tree, tmp_path_factory):
    """Two packs of the test tree: all 90 images, and class 0's 30."""
    d = tmp_path_factory.mktemp("mix")
    big = pack(tree, d / "big.lmdb", "--format", "blob", "--encoding", "raw", "--max-size", "24")
    small = pack(tree / "class0", d / "small.lmdb", "--format", "blob", "--encoding", "raw", "--max-size", "24",
                 "--no-class")
    return big, small


def test_mix_by_weights_counts_order_and_resume(tree, tmp_path_factory):
    d = tmp_path_factory.mktemp("mixw")
    a = pack(tree, d / "a.lmdb", "--format", "blob", "--encoding", "raw", "--max-size", "24")
    b = pack(tree, d / "b.lmdb", "--format", "blob", "--encoding", "raw", "--max-size", "20")
    opts = dict(batch_size=10, size=8, seed=2, threads=2, as_torch=False, weights=[0.7, 0.3], epoch_size=200)
    loader = imagepack.Loader([a, [b]], **opts)
    assert loader.sources == [{"name": a, "records": 90, "samples": 140}, {"name": b, "records": 90, "samples": 60}]
    assert loader.epoch_length == 200 and loader.dataset_size == 180 and len(loader) == 20

    def global_order(world, e, state=None):
        """(position -> (record, label)) over all ranks; global batch 10."""
        out = {}
        for r in range(world):
            part = imagepack.Loader([a, [b]], **dict(opts, batch_size=10 // world, rank=r, world_size=world))
            if state:
                part.load_state_dict(state)
            else:
                part.set_epoch(e)
            start = state["position"] if state else 0
            got = [(int(label), image.tobytes()) for x, y in part for image, label in zip(x, y)]
            for j, sample in enumerate(got):  # rank r's j-th sample is position start + j * world + r
                pos = start + j * world + r
                if pos < 200:
                    out[pos] = sample
        return out

    one = global_order(1, 3)
    assert len(one) == 200
    assert global_order(2, 3) == one and global_order(5, 3) == one
    # Resume at batch 7 of 1 rank, on 2 ranks: the rest, position by position.
    cut = imagepack.Loader([a, [b]], **opts)
    cut.set_epoch(3)
    it = iter(cut)
    for _ in range(7):
        next(it)
    state = cut.state_dict()
    assert state["position"] == 70 and [s["samples"] for s in state["sources"]] == [140, 60]
    assert global_order(2, 3, state) == {p: v for p, v in one.items() if p >= 70}
    # Another weight, another dataset: refused by name.
    other = imagepack.Loader([a, [b]], **dict(opts, weights=[0.5, 0.5]))
    with pytest.raises(ValueError, match=r"source 1 \(.*a.lmdb\): weight 0.7 in the state, weight 0.5 now"):
        other.load_state_dict(state)
    single = imagepack.Loader(a, batch_size=10, size=8, as_torch=False)
    with pytest.raises(ValueError, match="this loader reads one dataset"):
        single.load_state_dict(state)


def test_mix_repeat_shows_a_small_pack_three_times(mix_dbs):
    big, small = mix_dbs
    # The eval transform (shuffled): a record's pixels name it.
    loader = imagepack.Loader([small, big], batch_size=16, size=8, as_torch=False, threads=2, repeat=[3, None],
                              classes=["class0", "class1", "class2"], transform="eval", shuffle=True)
    assert [s["samples"] for s in loader.sources] == [90, 90]
    for e in (0, 1):
        loader.set_epoch(e)
        labels, small_records = {}, {}
        for images, ys in loader:
            for image, label in zip(images, ys):
                labels[int(label)] = labels.get(int(label), 0) + 1
                if label == -1:
                    small_records[image.tobytes()] = small_records.get(image.tobytes(), 0) + 1
        # The small pack's 30 records (unlabelled) thrice each; the big one's 90 once.
        assert labels == {-1: 90, 0: 30, 1: 30, 2: 30}
        assert len(small_records) == 30 and set(small_records.values()) == {3}


def test_mix_classes_must_agree_or_be_given(mix_dbs, tree, tmp_path):
    big, small = mix_dbs
    renamed = tmp_path / "renamed"
    for c in ("class1", "class2"):
        shutil.copytree(tree / c, renamed / ("x" + c))
    odd = pack(renamed, tmp_path / "odd.lmdb", "--format", "blob", "--encoding", "raw", "--max-size", "24")
    with pytest.raises(ValueError, match="different class lists"):
        imagepack.Loader([big, odd], batch_size=4, size=8, weights=[1, 1])
    with pytest.raises(ValueError, match="'xclass1'"):
        imagepack.Loader([big, odd], batch_size=4, size=8, weights=[1, 1], classes=["class0", "class1", "class2"])
    mixed = imagepack.Loader([big, odd], batch_size=4, size=8, weights=[1, 1], as_torch=False,
                             classes=["class0", "class1", "class2", "xclass1", "xclass2"])
    assert mixed.classes[-1] == "xclass2"
    with pytest.raises(ValueError, match="one per dataset"):
        imagepack.Loader([big, odd], batch_size=4, size=8, weights=[1])
    with pytest.raises(ValueError, match="not both"):
        imagepack.Loader([big, odd], batch_size=4, size=8, weights=[1, 1], repeat=[1, 1])


RSS_PROBE = r"""
import sys, imagepack
path, sizes = sys.argv[1], [int(s) for s in sys.argv[2:]]
loader = imagepack.Loader(path, batch_size=128, size=sizes[0], threads=2, as_torch=False, seed=1)
for e, s in enumerate(sizes):
    loader.set_output_size(s)
    loader.set_epoch(e)
    for _ in loader:
        pass
print(int([l for l in open("/proc/self/status") if l.startswith("VmRSS")][0].split()[1]))
"""


def test_memory_after_160_192_160_is_a_fresh_loaders_at_192(jpeg_db):
    """Batch buffers grow to the largest size and are reused: the process's
    RSS after epochs at 160, 192, 160 is within 5% of a fresh loader's after
    three at 192 (batch 128: a batch buffer is 14 MB at 192, 10 MB at 160)."""
    def rss_kb(*sizes):
        return int(subprocess.run([sys.executable, "-c", RSS_PROBE, jpeg_db, *map(str, sizes)], check=True,
                                  capture_output=True, text=True, env=os.environ).stdout)
    fresh = rss_kb(192, 192, 192)  # as many epochs (a batch held across epochs keeps its buffer)
    cycled = rss_kb(160, 192, 160)
    assert cycled <= fresh * 1.05, (cycled, fresh)
