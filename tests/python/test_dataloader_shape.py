"""imagepack.Loader where a DataLoader was: epochs that move on by
themselves, the attributes torchvision's reference script reads, output
in the model's dtype and memory format made by the loader's threads, and
imagepack.open items in the forms torchvision's transforms take. Real
databases (conftest's JPEG tree), torchvision itself as the reference."""
import warnings

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

import imagepack

OPTS = dict(batch_size=8, size=24, seed=7)


def batches(loader):
    return [(x.clone(), y.clone()) for x, y in loader]


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, u) and torch.equal(y, v) for (x, y), (u, v) in zip(a, b))


def epoch_of(db, epoch, **kw):
    ref = imagepack.Loader(db, **dict(OPTS, **kw))
    ref.set_epoch(epoch)
    return batches(ref)


# -- epochs -------------------------------------------------------------------
def test_iterating_again_without_set_epoch_runs_the_next_epoch(jpeg_db):
    loader = imagepack.Loader(jpeg_db, **OPTS)
    first, second, third = batches(loader), batches(loader), batches(loader)
    assert loader.epoch == 2
    # other orders and other crops: not epoch 0 again
    assert [y.tolist() for _, y in first] != [y.tolist() for _, y in second]
    assert not torch.equal(torch.cat([x for x, _ in first]), torch.cat([x for x, _ in second]))
    for epoch, got in enumerate((first, second, third)):
        assert same(got, epoch_of(jpeg_db, epoch)), epoch


def test_set_epoch_still_decides(jpeg_db):
    loader = imagepack.Loader(jpeg_db, **OPTS)
    batches(loader), batches(loader)
    loader.set_epoch(0)  # back to epoch 0: a fresh loader's first epoch
    assert same(batches(loader), epoch_of(jpeg_db, 0))
    loader.set_epoch(5)
    assert same(batches(loader), epoch_of(jpeg_db, 5))
    assert same(batches(loader), epoch_of(jpeg_db, 6))  # and on from there
    fresh = imagepack.Loader(jpeg_db, **OPTS)
    fresh.sampler.set_epoch(3)  # DistributedSampler's call, as the reference makes it under DDP
    assert fresh.sampler.epoch == 3 and same(batches(fresh), epoch_of(jpeg_db, 3))


def test_an_abandoned_iteration_is_an_epoch_too(jpeg_db):
    loader = imagepack.Loader(jpeg_db, **OPTS)
    x0, _ = next(iter(loader))
    x1, _ = next(iter(loader))
    assert torch.equal(x0, epoch_of(jpeg_db, 0)[0][0]) and torch.equal(x1, epoch_of(jpeg_db, 1)[0][0])


def test_exact_resume_is_unchanged_and_then_moves_on(jpeg_db):
    straight = imagepack.Loader(jpeg_db, **OPTS)
    want = batches(straight) + batches(straight) + batches(straight)  # epochs 0, 1, 2
    per_epoch = len(straight)
    first = imagepack.Loader(jpeg_db, **OPTS)
    got = batches(first)  # epoch 0
    it = iter(first)
    got += [(x.clone(), y.clone()) for x, y in (next(it), next(it), next(it))]  # 3 batches of epoch 1
    state = first.state_dict()
    assert state["epoch"] == 1 and state["position"] == 3 * OPTS["batch_size"], state
    resumed = imagepack.Loader(jpeg_db, **OPTS)
    resumed.load_state_dict(state)
    assert len(resumed) == per_epoch - 3
    got += batches(resumed)  # the rest of epoch 1, with no set_epoch
    assert len(resumed) == per_epoch and len(resumed.sampler) == 90  # the next epoch is a whole one
    assert resumed.state_dict()["epoch"] == 2 and resumed.state_dict()["position"] == 0  # complete: the next one
    got += batches(resumed)  # epoch 2
    assert same(got, want)
    # the docs' loop (set_epoch of the state's epoch) keeps the position, as before
    again = imagepack.Loader(jpeg_db, **OPTS)
    again.load_state_dict(state)
    again.set_epoch(1)
    assert same(batches(again), want[per_epoch + 3:2 * per_epoch])
    with pytest.raises(ValueError, match=r"set_epoch\(2\) after load_state_dict\(\) restored epoch 1"):
        refused = imagepack.Loader(jpeg_db, **OPTS)
        refused.load_state_dict(state)
        refused.set_epoch(2)


# -- DataLoader-shaped ----------------------------------------------------------
def test_the_attributes_a_dataloader_caller_reads(jpeg_db):
    loader = imagepack.Loader(jpeg_db, batch_size=16, size=24, seed=1, drop_last=True)
    ds = loader.dataset
    opened = imagepack.open(jpeg_db)
    assert len(ds) == len(opened) == loader.dataset_size == 90
    image, label = ds[5]
    assert np.array_equal(image, opened[5][0]) and label == opened[5][1]
    assert ds.classes == loader.classes
    assert loader.batch_size == 16 and loader.drop_last is True and len(loader) == 90 // 16
    assert loader.num_workers == 0 and loader.pin_memory is False
    assert len(list(loader)) == len(loader)
    # the sampler lists the next epoch's records: the labels the loader hands out are theirs
    sampler = loader.sampler
    assert len(sampler) == 90 and sampler.num_replicas == 1 and sampler.rank == 0 and sampler.shuffle
    assert sampler.drop_last is False  # DistributedSampler's: no sample dropped (the batch's drop_last is the loader's)
    indices = list(sampler)
    assert sampler.epoch == 1 and sorted(indices) == list(range(90))
    labels = torch.cat([y for _, y in loader]).tolist()
    assert labels == [ds[i][1] for i in indices[:len(labels)]]


def test_the_reference_evaluate_reads_dataset_and_its_length(jpeg_db):
    """What torchvision's references/classification/train.py evaluate() does
    with its data_loader: iterate, count, then compare with
    len(data_loader.dataset) (written here, not copied)."""
    def evaluate(data_loader):
        processed = 0
        for image, target in data_loader:
            processed += image.shape[0]
        assert hasattr(data_loader.dataset, "__len__")
        return processed, len(data_loader.dataset)

    val = imagepack.Loader(jpeg_db, batch_size=16, size=24, train=False, dtype="float32", mean="imagenet")
    assert evaluate(val) == (90, 90)
    halves = [imagepack.Loader(jpeg_db, batch_size=16, size=24, train=False, rank=r, world_size=2) for r in (0, 1)]
    assert sum(evaluate(h)[0] for h in halves) == 90


def test_dataloader_keywords_and_attributes_say_what_to_use(jpeg_db):
    for name, hint in (("num_workers", r"threads=N"), ("collate_fn", r"batch_transform=f"), ("sampler", r"shuffle=, seed="),
                       ("prefetch_factor", r"prefetch=N"), ("persistent_workers", "across epochs")):
        with pytest.raises(TypeError, match=r"unexpected keyword argument %r \(a DataLoader's\): .*%s" % (name, hint)):
            imagepack.Loader(jpeg_db, 8, 24, **{name: 1})
    loader = imagepack.Loader(jpeg_db, 8, 24)
    for name in ("collate_fn", "batch_sampler", "worker_init_fn", "generator"):
        with pytest.raises(AttributeError, match=r"has no %r \(a DataLoader's\): " % name):
            getattr(loader, name)
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        loader.nonsense
    blocks = imagepack.Loader(jpeg_db, 8, 24, order="blocks")
    with pytest.raises(TypeError, match="reads in blocks order.*iterate the loader"):
        list(blocks.sampler)


# -- output as the model wants it ------------------------------------------------
def torchvision_normalised(uint8_batch, mean, std):
    """torchvision's to_tensor scaling (x / 255 in float32) and normalize."""
    return torch.stack([F.normalize(x.float().div(255), mean, std) for x in uint8_batch])


@pytest.mark.parametrize("transform", ["train", "eval"])
def test_float_outputs_are_torchvisions_normalize(jpeg_db, transform):
    plain = batches(imagepack.Loader(jpeg_db, transform=transform, **OPTS))
    mean, std = imagepack.IMAGENET_MEAN, imagepack.IMAGENET_STD
    f32 = batches(imagepack.Loader(jpeg_db, transform=transform, dtype=torch.float32, mean="imagenet", **OPTS))
    worst = 0.0
    for (u, y), (f, g) in zip(plain, f32):
        ref = torchvision_normalised(u, mean, std)
        assert f.dtype == torch.float32 and f.shape == u.shape and torch.equal(y, g)
        worst = max(worst, float((f - ref).abs().max()))
    assert worst <= 1e-6, worst
    for dtype in (torch.float16, torch.bfloat16):
        low = batches(imagepack.Loader(jpeg_db, transform=transform, dtype=dtype, mean="imagenet", **OPTS))
        for (f, _), (h, _) in zip(f32, low):
            assert h.dtype == dtype and torch.equal(h, f.to(dtype)), dtype  # torch's cast of the float32 result


def test_mean_and_std_forms(jpeg_db):
    (u, _), = [next(iter(imagepack.Loader(jpeg_db, **OPTS)))]
    meta = imagepack.open(jpeg_db).meta
    for kw, mean, std in ((dict(mean="dataset"), meta["mean"], meta["std"]),
                          (dict(mean=0.5, std=0.25), [0.5] * 3, [0.25] * 3),
                          (dict(std=[0.2, 0.3, 0.4]), [0.0] * 3, [0.2, 0.3, 0.4]),
                          (dict(dtype="float32"), [0.0] * 3, [1.0] * 3)):
        x, _ = next(iter(imagepack.Loader(jpeg_db, **dict(OPTS, **kw))))
        assert x.dtype == torch.float32, kw  # mean/std make float32 the default
        assert float((x - torchvision_normalised(u, mean, std)).abs().max()) <= 1e-6, kw
    with pytest.raises(ValueError, match="mean and std apply to float outputs"):
        imagepack.Loader(jpeg_db, dtype="uint8", mean="imagenet", **OPTS)
    with pytest.raises(ValueError, match="1 or 3 values"):
        imagepack.Loader(jpeg_db, mean=[0.5, 0.5], **OPTS)
    with pytest.raises(ValueError, match="std must be positive"):
        imagepack.Loader(jpeg_db, mean=0.5, std=0, **OPTS)
    with pytest.raises(ValueError, match="dtype must be"):
        imagepack.Loader(jpeg_db, dtype="int16", **OPTS)
    with pytest.raises(ValueError, match="bfloat16 needs torch"):
        imagepack.Loader(jpeg_db, dtype="bfloat16", as_torch=False, **OPTS)
    x, _ = next(iter(imagepack.Loader(jpeg_db, dtype=np.float16, mean="imagenet", as_torch=False, **OPTS)))
    assert isinstance(x, np.ndarray) and x.dtype == np.float16


def test_normalisation_never_hands_data_statistics_as_imagenets(jpeg_db):
    meta = imagepack.open(jpeg_db).meta
    mean, std, where = imagepack.Loader(jpeg_db, **OPTS).normalisation()
    assert mean == meta["mean"] and std == meta["std"] and "not ImageNet's" in where
    mean, std, where = imagepack.Loader(jpeg_db, mean="imagenet", **OPTS).normalisation()
    assert (tuple(mean), tuple(std)) == (imagepack.IMAGENET_MEAN, imagepack.IMAGENET_STD)
    assert where == "applied by the loader (imagenet)"


def test_channels_last_is_made_by_the_threads(jpeg_db):
    plain = batches(imagepack.Loader(jpeg_db, dtype="float32", **OPTS))
    loader = imagepack.Loader(jpeg_db, dtype="float32", memory_format=torch.channels_last, **OPTS)
    for (x, y), (c, d) in zip(plain, loader):
        assert c.shape == x.shape and c.is_contiguous(memory_format=torch.channels_last) and not c.is_contiguous()
        assert torch.equal(c, x) and torch.equal(d, y)
    with pytest.raises(ValueError, match="leave layout at NCHW"):
        imagepack.Loader(jpeg_db, memory_format="channels_last", layout="NHWC", **OPTS)
    nhwc = next(iter(imagepack.Loader(jpeg_db, memory_format="channels_last", as_torch=False, **OPTS)))[0]
    assert nhwc.shape == (8, 3, 24, 24) and nhwc.strides[1] == 1  # numpy: the same NHWC memory, NCHW axes


def test_pin_memory(jpeg_db):
    if torch.cuda.is_available():
        loader = imagepack.Loader(jpeg_db, pin_memory=True, **OPTS)
        x, _ = next(iter(loader))
        assert loader.pin_memory and x.is_pinned()
        assert torch.equal(x, epoch_of(jpeg_db, 0)[0][0])
        return
    with pytest.warns(UserWarning, match="torch sees no CUDA device: batches are not pinned"):
        loader = imagepack.Loader(jpeg_db, pin_memory=True, **OPTS)
    assert loader.pin_memory is False and same(batches(loader), epoch_of(jpeg_db, 0))


# -- imagepack.open for torchvision's transforms -----------------------------------
def test_open_gives_pil_images_and_chw_tensors(jpeg_db):
    arrays = imagepack.open(jpeg_db)
    pil = imagepack.open(jpeg_db, image="pil")
    tensors = imagepack.open(jpeg_db, image="tensor")
    for i in (0, 41, 89):
        a, label = arrays[i]
        p, lp = pil[i]
        t, lt = tensors[i]
        assert isinstance(p, Image.Image) and p.mode == "RGB" and np.array_equal(np.asarray(p), a)
        assert t.dtype == torch.uint8 and t.shape == (3,) + a.shape[:2] and t.is_contiguous()
        assert torch.equal(t, torch.from_numpy(a).permute(2, 0, 1))
        assert label == lp == lt
    with pytest.raises(ValueError, match="image must be one of numpy, pil, tensor"):
        imagepack.open(jpeg_db, image="cv2")


def test_torchvision_transforms_take_the_items(jpeg_db):
    from torchvision.transforms._presets import ImageClassification
    preset = ImageClassification(crop_size=24, resize_size=28)  # torchvision's eval preset (its weights' transforms)
    pil = imagepack.open(jpeg_db, image="pil", transform=preset)
    tensors = imagepack.open(jpeg_db, image="tensor", transform=preset)
    raw = imagepack.open(jpeg_db)
    for i in (3, 50):
        x, _ = pil[i]
        assert x.dtype == torch.float32 and x.shape == (3, 24, 24)
        assert torch.equal(x, preset(Image.fromarray(raw[i][0])))  # the same as on a PIL image made by hand
        t, _ = tensors[i]
        chw = torch.from_numpy(raw[i][0]).permute(2, 0, 1).contiguous()  # as torchvision.io.decode_jpeg gives
        assert t.shape == (3, 24, 24) and torch.equal(t, preset(chw))
    train = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.PILToTensor()])
    dl = torch.utils.data.DataLoader(imagepack.open(jpeg_db, image="pil", transform=train), batch_size=10)
    x, y = next(iter(dl))
    assert x.shape == (10, 3, 24, 24) and x.dtype == torch.uint8 and y.shape == (10,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy array would have been refused by the PIL transforms
        T.RandomResizedCrop(24)(imagepack.open(jpeg_db, image="pil")[0][0])


def test_a_mix_dataset_is_its_sources_one_after_the_other(jpeg_db, raw_db):
    mix = imagepack.Loader([jpeg_db, raw_db], weights=[0.5, 0.5], **OPTS)
    ds = mix.dataset
    first, second = imagepack.open(jpeg_db), imagepack.open(raw_db)
    assert len(ds) == len(first) + len(second) == mix.dataset_size == 180
    assert np.array_equal(ds[3][0], first[3][0]) and np.array_equal(ds[90 + 4][0], second[4][0])
    assert ds[-1][1] == second[89][1] and ds.classes == mix.classes
    with pytest.raises(IndexError):
        ds[180]
    with pytest.raises(TypeError, match="from a mix"):
        list(mix.sampler)
    with pytest.raises(ValueError, match="this is a mix"):
        imagepack.Loader([jpeg_db, raw_db], weights=[0.5, 0.5], mean="dataset", **OPTS)


def test_second_images_follow_the_output_form(tree, tmp_path):
    from conftest import pack
    db = pack(tree, tmp_path / "pairs.lmdb", "--field", "target=%s" % tree)
    plain = imagepack.Loader(db, **OPTS)
    last = imagepack.Loader(db, memory_format="channels_last", dtype="float16", mean="imagenet", **OPTS)
    for b, c in zip(plain, last):
        assert c["image"].dtype == torch.float16 and c["image"].is_contiguous(memory_format=torch.channels_last)
        assert c["target"].dtype == torch.uint8 and c["target"].shape == b["target"].shape  # fields keep their type
        assert c["target"].is_contiguous(memory_format=torch.channels_last) and torch.equal(c["target"], b["target"])
        ref = torchvision_normalised(b["image"], imagepack.IMAGENET_MEAN, imagepack.IMAGENET_STD).half()
        assert torch.equal(c["image"], ref)
    sample = imagepack.open(db, image="pil")[2]
    assert isinstance(sample["image"], Image.Image) and isinstance(sample["target"], Image.Image)
    assert np.array_equal(np.asarray(sample["target"]), imagepack.open(db)[2]["target"])


def test_normalised_batches_are_erased_with_the_mean_as_torchvision_erases_after_normalize(jpeg_db):
    """torchvision's reference applies RandomErasing after Normalize with
    value 0: the mean. Normalised batches are erased so (the mean's grey
    levels, within half a grey level of 0 once normalised); uint8 batches
    with 0 unless random_erase_value says otherwise."""
    kw = dict(batch_size=8, size=32, seed=4, dtype="float32", mean="imagenet", std="imagenet")
    plain = batches(imagepack.Loader(jpeg_db, **kw))
    erased = batches(imagepack.Loader(jpeg_db, random_erase=1.0, **kw))
    bound = 0.5 / 255 / min(imagepack.IMAGENET_STD) + 1e-6 if hasattr(imagepack, "IMAGENET_STD") else 0.0095
    changed = 0
    for (a, _), (b, _) in zip(plain, erased):
        diff = np.any(np.asarray(a) != np.asarray(b), axis=1)  # N x H x W: erased pixels
        changed += int(diff.sum())
        inside = np.asarray(b).transpose(0, 2, 3, 1)[diff]
        assert inside.size and np.abs(inside).max() <= bound, np.abs(inside).max()
    assert changed > 0
    raw = batches(imagepack.Loader(jpeg_db, batch_size=8, size=32, seed=4, random_erase=1.0))
    base = batches(imagepack.Loader(jpeg_db, batch_size=8, size=32, seed=4))
    a, b = np.asarray(base[0][0]), np.asarray(raw[0][0])
    assert (b[np.any(a != b, axis=1)[:, None, :, :].repeat(3, axis=1)] == 0).all()


def test_batch_transform_takes_each_training_batch_as_the_reference_collate_fn_does(jpeg_db):
    """The reference's mixup/cutmix sits in the DataLoader's collate_fn
    (mixupcutmix(*default_collate(batch))); batch_transform takes each
    batch the same way, here the formula of RandomMixup with lambda 0.3 and
    the batch rolled by one, checked against the plain batches."""
    def mixup(x, y):
        t = torch.nn.functional.one_hot(y, 3).float()
        return x.roll(1, 0) * 0.7 + x * 0.3, t.roll(1, 0) * 0.7 + t * 0.3
    kw = dict(batch_size=8, size=32, seed=2, dtype="float32", mean="imagenet")
    plain = batches(imagepack.Loader(jpeg_db, **kw))
    mixed = [(x.clone(), y.clone()) for x, y in imagepack.Loader(jpeg_db, batch_transform=mixup, **kw)]
    assert len(mixed) == len(plain)
    for (x, y), (mx, my) in zip(plain, mixed):
        want_x, want_y = mixup(x, y)
        assert torch.equal(mx, want_x) and torch.equal(my, want_y) and my.shape == (len(y), 3)
    with pytest.raises(TypeError, match="batch_transform must be callable"):
        imagepack.Loader(jpeg_db, batch_size=8, size=32, batch_transform=3)
