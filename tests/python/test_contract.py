"""One dataset contract for train and validation, and a Loader that does
not trap a PyTorch user: classes matched by name (or refused by name),
rank and world size from torchrun's variables before init_process_group,
threads per local rank, and the documented resume loop resuming exactly."""
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

import imagepack
from conftest import pack


def make_tree(root, classes, per_class=6, seed=0):
    """Small JPEGs in one folder per class; the class is in the pixels too."""
    rng = np.random.default_rng(seed)
    for c in classes:
        os.makedirs(root / c, exist_ok=True)
        for i in range(per_class):
            a = rng.integers(0, 256, (24, 28, 3), dtype=np.uint8)
            Image.fromarray(a).save(root / c / ("%s_%d.jpg" % (c, i)), quality=90)
    return root


def folder_of(ds, index):
    return ds.record(index)[2].split("/")[0]


def test_a_validation_loader_hands_out_the_training_classes(jpeg_db, tmp_path):
    """Packed apart with two of the three classes: its own labels are 0 and
    1; given the training loader's classes, each label is the training
    data's index of the sample's class name."""
    val = pack(make_tree(tmp_path / "val", ["class2", "class0"]), tmp_path / "val.lmdb")
    train = imagepack.Loader(jpeg_db, batch_size=4, size=16)
    own = imagepack.open(val)
    assert own.classes == ["class0", "class2"]
    loader = imagepack.Loader(val, batch_size=5, size=16, train=False, classes=train, as_torch=False)
    assert loader.classes == train.classes == ["class0", "class1", "class2"]
    labels = np.concatenate([y for _, y in loader])
    want = [train.classes.index(folder_of(own, i)) for i in range(len(own))]
    assert labels.tolist() == want and set(want) == {0, 2}
    m = imagepack.match_classes(train, val)
    assert m.to_train == [0, 2] and m.absent == ["class1"] and not m.identity
    assert str(m) == "2 of the 3 classes, matched by name; absent: 'class1'"
    assert m.remap(np.array([1, 0, -1])).tolist() == [2, 0, -1]
    assert imagepack.match_classes(train, jpeg_db).identity


def test_a_class_the_training_data_lacks_is_refused_by_name(jpeg_db, tmp_path):
    val = pack(make_tree(tmp_path / "val", ["class0", "zebra"]), tmp_path / "val.lmdb")
    train = imagepack.Loader(jpeg_db, batch_size=4, size=16)
    with pytest.raises(ValueError, match=r"'zebra' \(label 1 of 2\) is not among the 3 classes of .*train.lmdb"):
        imagepack.Loader(val, batch_size=4, size=16, train=False, classes=train)
    with pytest.raises(ValueError, match="'zebra'"):
        imagepack.match_classes(train, val)


def test_rank_and_world_come_from_torchruns_variables_before_init(jpeg_db, monkeypatch, capfd):
    """A Loader built before init_process_group under torchrun (or
    launch.sh) is sharded as the ranks are, and says so once."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    loader = imagepack.Loader(jpeg_db, batch_size=8, size=16)
    assert (loader.rank, loader.world_size) == (0, 2)
    assert loader.samples_per_epoch == 45  # 90 records over 2 ranks
    cores = len(os.sched_getaffinity(0))
    assert loader.threads == max(1, cores // 2)
    err = capfd.readouterr().err
    assert "rank 0 of 2 (from RANK/WORLD_SIZE)" in err
    monkeypatch.setenv("RANK", "1")
    other = imagepack.Loader(jpeg_db, batch_size=8, size=16)
    assert other.rank == 1 and capfd.readouterr().err == ""  # one line, from rank 0
    first = set(np.concatenate([np.asarray(y) for _, y in loader]).tolist())
    assert imagepack.distributed_env()[:3] == (1, 2, 2)
    # Explicit arguments win.
    assert imagepack.Loader(jpeg_db, batch_size=8, size=16, rank=0, world_size=1).samples_per_epoch == 90
    assert first  # the shard held samples


def test_the_documented_resume_loop_resumes_exactly(jpeg_db):
    """load_state_dict, then the loop of docs/PYTHON.md (set_epoch(epoch)
    for each epoch from the state's): the uninterrupted run's batches;
    set_epoch of another epoch over a restored position is refused."""
    def loader():
        return imagepack.Loader(jpeg_db, batch_size=8, size=16, seed=5, as_torch=False)

    straight = loader()
    want = []
    for epoch in range(2):
        straight.set_epoch(epoch)
        want += [y.tolist() for _, y in straight]
    first = loader()
    first.set_epoch(0)
    it = iter(first)
    got = [next(it)[1].tolist() for _ in range(5)]
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    for epoch in range(state["epoch"], 2):
        resumed.set_epoch(epoch)  # the docs' loop calls it: the position stays
        got += [y.tolist() for _, y in resumed]
    assert got == want
    again = loader()
    again.load_state_dict(state)
    with pytest.raises(ValueError, match=r"set_epoch\(1\) after load_state_dict\(\) restored epoch 0 at position 40"):
        again.set_epoch(1)
