"""The per-sample augmentations (imagepack/augment.h, through the small
binding imagepack._augment) against Debian's torchvision on uint8 CHW
tensors, operation by operation, on real JPEGs (tests/data) and odd sizes:
the same parameters give pixels at most one grey level apart, and the
geometric operations (a nearest or bilinear sampling grid) too. The
policies' draws are held to torchvision's augmentation spaces and tables,
and their output to torchvision's operations applied with the logged
choices (measured bounds in docs/LOADER.md, "Augmentations")."""
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
from torchvision.transforms import functional as F  # noqa: E402
from torchvision.transforms.autoaugment import _apply_op  # noqa: E402
from torchvision.transforms import InterpolationMode  # noqa: E402

aug = pytest.importorskip("imagepack._augment")
from PIL import Image  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def _images():
    out = []
    for name in ("rgb.jpg", "progressive.jpg", "gray.jpg"):
        im = Image.open(os.path.join(DATA, name))
        im = im.convert("L" if im.mode == "L" else "RGB")
        a = np.asarray(im)
        out.append((name, a[:, :, None] if a.ndim == 2 else a))
    rng = np.random.default_rng(5)
    # A smooth gradient with noise, an odd size, and the degenerate ones.
    y, x = np.mgrid[0:37, 0:53]
    smooth = np.stack([x * 4, y * 6, (x + y) * 2], -1) + rng.integers(0, 30, (37, 53, 3))
    out.append(("smooth37x53", np.clip(smooth, 0, 255).astype(np.uint8)))
    for h, w, c in ((1, 1, 3), (1, 7, 3), (7, 1, 1), (3, 5, 3), (2, 9, 1)):
        out.append(("%dx%dx%d" % (h, w, c), rng.integers(0, 256, (h, w, c), dtype=np.uint8)))
    return out


IMAGES = _images()


def chw(a):
    return torch.from_numpy(np.array(a.transpose(2, 0, 1)))


def hwc(t):
    return t.numpy().transpose(1, 2, 0)


def diff(a, b):
    return np.abs(a.astype(np.int16) - b.astype(np.int16))


# op: magnitudes as the policies pass them (signed where they are).
COLOR_OPS = {
    "Identity": [0.0],
    "Brightness": [-0.99, -0.9, -0.5, -0.1, 0.0, 0.3, 0.61, 0.99],
    "Color": [-0.99, -0.6, -0.2, 0.0, 0.45, 0.99],
    "Contrast": [-0.99, -0.6, -0.2, 0.0, 0.33, 0.99],
    "Sharpness": [-0.99, -0.5, 0.0, 0.5, 0.99],
    "Posterize": [0, 1, 2, 4, 5, 6, 7, 8],
    "Solarize": [0.0, 8.5, 76.5, 127.5, 204.0, 255.0],
    "AutoContrast": [0.0],
    "Equalize": [0.0],
    "Invert": [0.0],
}
GEOMETRIC_OPS = {
    "ShearX": [-0.99, -0.3, -0.1, 0.0, 0.2, 0.66],
    "ShearY": [-0.99, -0.3, 0.0, 0.1, 0.3, 0.66],
    "TranslateX": [-32.0, -10.7, 0.0, 3.0, 14.0, 32.0],
    "TranslateY": [-32.0, -5.0, 0.0, 9.6, 22.0],
    "Rotate": [-135.0, -30.0, -9.0, 0.0, 4.5, 13.5, 30.0, 90.0, 135.0],
}

# The worst difference measured per operation (printed with -s; docs/LOADER.md).
MEASURED = {}


def record(name, d, frac=0.0):
    m, f = MEASURED.get(name, (0, 0.0))
    MEASURED[name] = (max(m, int(d.max()) if d.size else 0), max(f, frac))


@pytest.mark.parametrize("op", sorted(COLOR_OPS))
def test_color_ops_within_one_grey_level(op):
    for name, a in IMAGES:
        for mag in COLOR_OPS[op]:
            ours = aug.apply_op(op, a, mag)
            ref = hwc(_apply_op(chw(a), op, mag, InterpolationMode.NEAREST, None))
            d = diff(ours, ref)
            record(op, d)
            assert d.max() <= 1, "%s(%s) on %s: %d grey levels off" % (op, mag, name, d.max())


@pytest.mark.parametrize("interp", ["nearest", "bilinear"])
@pytest.mark.parametrize("op", sorted(GEOMETRIC_OPS))
@pytest.mark.parametrize("fill", [None, [0, 0, 0], [128, 64, 255]])
def test_geometric_ops_match(op, interp, fill):
    mode = InterpolationMode.NEAREST if interp == "nearest" else InterpolationMode.BILINEAR
    for name, a in IMAGES:
        for mag in GEOMETRIC_OPS[op]:
            f = None if fill is None else fill[: a.shape[2]]
            ours = aug.apply_op(op, a, mag, interp, f)
            tfill = None if f is None else [float(v) for v in f]
            ref = hwc(_apply_op(chw(a), op, mag, mode, tfill))
            d = diff(ours, ref)
            record("%s/%s" % (op, interp), d, np.any(d > 1, axis=2).mean())
            # The grid is computed as torchvision's (float32, the same
            # centre and linspace), so even nearest samples agree.
            assert d.max() <= 1, "%s(%s, %s, fill=%s) on %s: %d pixels off by up to %d" % (
                op, mag, interp, fill, name, np.any(d > 1, axis=2).sum(), d.max())


@pytest.mark.parametrize("hue", [-0.5, -0.31, -0.1, 0.0, 0.05, 0.25, 0.5])
def test_hue_within_one_grey_level(hue):
    for name, a in IMAGES:
        ours = aug.adjust("hue", a, hue)
        ref = hwc(F.adjust_hue(chw(a), hue))
        d = diff(ours, ref)
        record("adjust_hue", d)
        assert d.max() <= 1, "hue %s on %s: %d off" % (hue, name, d.max())


@pytest.mark.parametrize("fn", ["brightness", "contrast", "saturation", "sharpness"])
def test_adjust_factors(fn):
    ref_fn = getattr(F, "adjust_" + fn)
    for name, a in IMAGES:
        for factor in (0.0, 0.2, 0.6, 1.0, 1.4, 2.0, 3.7):
            d = diff(aug.adjust(fn, a, factor), hwc(ref_fn(chw(a), factor)))
            record("adjust_" + fn, d)
            assert d.max() <= 1, "%s %s on %s: %d off" % (fn, factor, name, d.max())


def test_color_jitter_is_torchvisions_ops_in_the_drawn_order():
    name, a = IMAGES[0]
    seen_orders = set()
    for seed in range(40):
        ours, order, (b, c, s, h) = aug.color_jitter(a, 0.4, 0.4, 0.4, 0.1, seed)
        seen_orders.add(tuple(order))
        assert 0.6 <= b <= 1.4 and 0.6 <= c <= 1.4 and 0.6 <= s <= 1.4 and -0.1 <= h <= 0.1
        t = chw(a)
        for k in order:
            t = [lambda t: F.adjust_brightness(t, b), lambda t: F.adjust_contrast(t, c),
                 lambda t: F.adjust_saturation(t, s), lambda t: F.adjust_hue(t, h)][k](t)
        d = diff(ours, hwc(t))
        record("ColorJitter", d)
        # One grey level per step can add up over the four steps.
        assert d.max() <= 2, "seed %d order %s: %d off" % (seed, order, d.max())
    assert len(seen_orders) > 5


def test_random_erasing_box_and_value():
    name, a = IMAGES[0]
    H, W = a.shape[:2]
    erased = 0
    areas = []
    for seed in range(200):
        ours, (i, j, h, w) = aug.erase(a, 0.5, (0.02, 0.33), (0.3, 3.3), False, [0], seed)
        if w == 0:
            assert np.array_equal(ours, a)
            continue
        erased += 1
        assert 0 <= i and i + h <= H and 0 <= j and j + w <= W and h < H and w < W
        areas.append(h * w / (H * W))
        ref = hwc(F.erase(chw(a), i, j, h, w, torch.tensor(0, dtype=torch.uint8)))
        assert np.array_equal(ours, ref)
    assert 70 <= erased <= 130  # p = 0.5
    assert 0.0 < min(areas) and max(areas) < 0.45
    # value="random": per-pixel values around the given mean.
    ours, (i, j, h, w) = aug.erase(a, 1.0, (0.3, 0.33), (1.0, 1.0), True, [0], 3)
    patch = ours[i:i + h, j:j + w].astype(float)
    assert h > 0 and patch.std() > 20 and 80 < patch.mean() < 160


def test_bounded_on_any_magnitude_and_size():
    """No magnitude reads or writes outside the image (ASan builds run this
    too); the degenerate ones give an image of the same shape."""
    for name, a in IMAGES[4:]:
        for op in list(COLOR_OPS) + list(GEOMETRIC_OPS):
            for mag in (-1e30, -300.0, -1.0, 0.0, 0.5, 300.0, 1e30, float("nan"), float("inf")):
                for interp in ("nearest", "bilinear"):
                    out = aug.apply_op(op, a, mag, interp, [7, 7, 7][: a.shape[2]])
                    assert out.shape == a.shape
        for fn in ("hue", "brightness", "contrast", "saturation", "sharpness", "posterize", "solarize"):
            for v in (-1e9, -3.0, 0.0, 0.5, 9.0, 1e9, float("nan")):
                assert aug.adjust(fn, a, v).shape == a.shape
        out, _ = aug.erase(a, 1.0, (0.0, 1.0), (0.01, 100.0), True, [1], 1)
        assert out.shape == a.shape


POLICY_KW = {"ta_wide": {}, "ra": {"num_ops": 2, "magnitude": 9}, "imagenet": {}, "cifar10": {},
             "svhn": {}, "augmix": {"severity": 3}}


def _space(policy, h, w):
    """torchvision's own augmentation space of a policy: {op: (bins, signed)}."""
    from torchvision.transforms import autoaugment as A
    if policy == "ta_wide":
        sp = A.TrivialAugmentWide()._augmentation_space(31)
    elif policy == "ra":
        sp = A.RandAugment()._augmentation_space(31, (h, w))
    elif policy == "augmix":
        sp = A.AugMix()._augmentation_space(10, (h, w))
    else:
        sp = A.AutoAugment()._augmentation_space(10, (h, w))
    return {k: ([float(x) for x in v.reshape(-1).tolist()], signed) for k, (v, signed) in sp.items()}


@pytest.mark.parametrize("interp", ["nearest", "bilinear"])
@pytest.mark.parametrize("policy", sorted(POLICY_KW))
def test_policy_is_torchvisions_ops_with_the_logged_choices(policy, interp):
    mode = InterpolationMode.NEAREST if interp == "nearest" else InterpolationMode.BILINEAR
    for name, a in IMAGES[:5]:
        h, w = a.shape[:2]
        space = _space(policy, h, w)
        for seed in range(12):
            ours, steps, chain_end, w0, weights = aug.auto_augment(a, policy, seed, interpolation=interp,
                                                                   **POLICY_KW[policy])
            for op, mag in steps:
                assert op in space or (op == "Invert" and policy in ("imagenet", "cifar10", "svhn")), op
                bins, signed = space.get(op, ([0.0], False))
                allowed = {abs(b) for b in bins} | {0.0}
                assert min(abs(abs(mag) - b) for b in allowed) < 1e-6, (op, mag)
                assert signed or mag >= 0
            if policy == "augmix":
                t = chw(a).unsqueeze(0)
                mix = w0 * t
                start = 0
                for end, wi in zip(chain_end, weights):
                    x = chw(a)
                    for op, mag in steps[start:end]:
                        x = _apply_op(x, op, mag, mode, None)
                    mix.add_(wi * x.unsqueeze(0))
                    start = end
                ref = hwc(mix[0].to(torch.uint8))
                assert abs(w0 + sum(weights) - 1) < 1e-5
            else:
                x = chw(a)
                for op, mag in steps:
                    x = _apply_op(x, op, mag, mode, None)
                ref = hwc(x)
            d = diff(ours, ref)
            record("policy %s/%s" % (policy, interp), d)
            assert d.max() <= 1, "%s seed %d on %s (%s): %d off" % (policy, seed, name, steps, d.max())


def test_policy_choice_distribution():
    a = IMAGES[3][1]
    counts = {}
    for seed in range(2800):
        _, steps, *_ = aug.auto_augment(a, "ta_wide", seed)
        assert len(steps) == 1
        counts[steps[0][0]] = counts.get(steps[0][0], 0) + 1
    # 14 operations, 200 expected each: within 5 standard deviations.
    assert set(counts) == set(_space("ta_wide", 37, 53)), counts
    assert all(130 <= c <= 270 for c in counts.values()), counts
    # RandAugment: num_ops operations, each at the one magnitude bin.
    for seed in range(50):
        _, steps, *_ = aug.auto_augment(a, "ra", seed, num_ops=3, magnitude=5)
        assert len(steps) == 3
    # AutoAugment: both operations of a sub-policy of the table, each applied
    # with its probability: over many draws every table pair shows up.
    from torchvision.transforms import autoaugment as A
    table = A.AutoAugment(A.AutoAugmentPolicy.IMAGENET).policies
    pairs = {(p[0][0], p[1][0]) for p in table}
    singles = {p[0][0] for p in table} | {p[1][0] for p in table}
    for seed in range(300):
        _, steps, *_ = aug.auto_augment(a, "imagenet", seed)
        names = tuple(s[0] for s in steps)
        assert len(names) <= 2
        assert (len(names) < 2 or names in pairs) and set(names) <= singles, names
    # AugMix: width chains of 1 to 3 operations.
    depths = set()
    for seed in range(100):
        _, steps, chain_end, w0, weights = aug.auto_augment(a, "augmix", seed, width=3)
        assert len(chain_end) == 3 and len(weights) == 3
        ends = [0] + chain_end
        depths |= {ends[i + 1] - ends[i] for i in range(3)}
    assert depths == {1, 2, 3}


def test_policy_is_a_function_of_the_seed():
    a = IMAGES[0][1]
    for policy in POLICY_KW:
        r1 = aug.auto_augment(a, policy, 77)
        r2 = aug.auto_augment(a, policy, 77)
        assert np.array_equal(r1[0], r2[0]) and r1[1] == r2[1]
    with pytest.raises(ValueError, match="magnitude"):
        aug.auto_augment(a, "ra", 1, magnitude=31)
    with pytest.raises(ValueError, match="severity"):
        aug.auto_augment(a, "augmix", 1, severity=11)


M64 = (1 << 64) - 1


def _splitmix_next(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _sample_stream(seed, epoch, position):
    """The seed of a sample's augmentation stream (sample_render.cc)."""
    base = seed ^ ((epoch << 40) & M64) ^ ((position * 0xD1B54A32D192ED03) & M64) ^ 0x6A09E667F3BCC909
    return _splitmix_next(base & M64)


def _epoch(loader, epoch):
    loader.set_epoch(epoch)
    return [(np.array(x), np.array(y)) for x, y in loader]


def test_loader_applies_the_policy_after_crop_and_flip(jpeg_db):
    """The loader's sample = the plain crop+flip sample put through the
    policy with the sample's own stream of (seed, epoch, position): the
    crops stay as they were, the choices are a function of the position."""
    import imagepack
    opts = dict(batch_size=8, size=32, seed=11, threads=1, layout="NHWC", as_torch=False)
    plain = imagepack.Loader(jpeg_db, **opts)
    augmented = imagepack.Loader(jpeg_db, auto_augment="ta_wide", **opts)
    changed = 0
    for epoch in (0, 3):
        ref, got = _epoch(plain, epoch), _epoch(augmented, epoch)
        for b, ((x, y), (xa, ya)) in enumerate(zip(ref, got)):
            assert np.array_equal(y, ya)
            for i in range(len(y)):
                want, steps, *_ = aug.auto_augment(x[i], "ta_wide", _sample_stream(11, epoch, b * 8 + i),
                                                   interpolation="bilinear")
                assert np.array_equal(xa[i], want), (epoch, b, i, steps)
                changed += not np.array_equal(xa[i], x[i])
    assert changed > 100


@pytest.mark.parametrize("policy", ["ta_wide", "ra", "imagenet", "augmix"])
def test_loader_augmentation_is_the_same_on_any_thread_count(jpeg_db, policy):
    import imagepack
    opts = dict(batch_size=8, size=32, seed=5, auto_augment=policy, random_erase=0.5, as_torch=False)
    one = _epoch(imagepack.Loader(jpeg_db, threads=1, **opts), 2)
    two = _epoch(imagepack.Loader(jpeg_db, threads=2, **opts), 2)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(one, two))
    other_epoch = _epoch(imagepack.Loader(jpeg_db, threads=2, **opts), 3)
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(one, other_epoch))


def test_bench_loader_flags_give_the_python_loaders_batches(jpeg_db):
    """bench_loader --auto-augment/--random-erase/--interpolation (the
    benchmark in docs/LOADER.md) make the Python Loader's bytes."""
    import subprocess
    import xxhash
    from conftest import tool
    out = subprocess.run([tool("bench_loader"), jpeg_db, "--batch", "16", "--size", "32", "--seed", "9", "--threads",
                          "2", "--digest", "--auto-augment", "ra", "--ra-magnitude", "12", "--random-erase", "0.3",
                          "--interpolation", "bicubic"], check=True, capture_output=True, text=True).stdout
    want = [line.split()[4] for line in out.splitlines() if line.startswith("batch ")]
    import imagepack
    loader = imagepack.Loader(jpeg_db, batch_size=16, size=32, seed=9, shuffle=True, threads=2, as_torch=False,
                              auto_augment="ra", ra_magnitude=12, random_erase=0.3, interpolation="bicubic")
    got = ["%016x" % xxhash.xxh3_64_intdigest(np.array(x).tobytes()) for x, _ in _epoch(loader, 0)]
    assert len(want) == 6 and got == want


@pytest.mark.parametrize("channels,layout", [(1, "NCHW"), (3, "NHWC"), (1, "NHWC")])
def test_loader_augments_gray_and_nhwc_as_the_binding(jpeg_db, channels, layout):
    """Gray outputs and NHWC: the sample is the plain one through the policy."""
    import imagepack
    opts = dict(batch_size=8, size=24, seed=4, threads=2, layout=layout, channels=channels, as_torch=False)
    plain = _epoch(imagepack.Loader(jpeg_db, **opts), 1)
    augmented = _epoch(imagepack.Loader(jpeg_db, auto_augment="augmix", **opts), 1)
    for b, ((x, _), (xa, _)) in enumerate(zip(plain, augmented)):
        for i in range(len(x)):
            hwc_in = x[i] if layout == "NHWC" else x[i].transpose(1, 2, 0)
            want, *_ = aug.auto_augment(np.ascontiguousarray(hwc_in), "augmix", _sample_stream(4, 1, b * 8 + i),
                                        interpolation="bilinear")
            got = xa[i] if layout == "NHWC" else xa[i].transpose(1, 2, 0)
            assert np.array_equal(got, want), (b, i)


def test_loader_keywords_are_checked(jpeg_db):
    import imagepack
    with pytest.raises(ValueError, match="auto_augment"):
        imagepack.Loader(jpeg_db, batch_size=8, size=32, auto_augment="autoaugment")
    with pytest.raises(ValueError, match="magnitude"):
        imagepack.Loader(jpeg_db, batch_size=8, size=32, auto_augment="ra", ra_magnitude=40)
    with pytest.raises(ValueError, match="p must be"):
        imagepack.Loader(jpeg_db, batch_size=8, size=32, random_erase=1.5)
    with pytest.raises(ValueError, match="interpolation"):
        imagepack.Loader(jpeg_db, batch_size=8, size=32, interpolation="nearest")
    # The reference parser's default, --auto-augment None, is no policy.
    assert _epoch(imagepack.Loader(jpeg_db, batch_size=8, size=32, seed=1, threads=1, as_torch=False,
                                   auto_augment=None), 0)[0][0].shape == (8, 3, 32, 32)
    with pytest.raises(ValueError, match="grey levels"):
        imagepack.Loader(jpeg_db, batch_size=8, size=32, random_erase_value=[300, 0, 0])
    # The erased box holds the value given (an int, a list, or "random").
    for value, want in ((7, (7, 7, 7)), ([124, 116, 104], (124, 116, 104))):
        x = _epoch(imagepack.Loader(jpeg_db, batch_size=8, size=32, seed=2, threads=1, as_torch=False,
                                    layout="NHWC", random_erase=1.0, random_erase_value=value), 0)[0][0]
        hits = [(img.reshape(-1, 3) == want).all(axis=1).sum() for img in x]
        assert sum(h >= 8 for h in hits) >= 6, hits
    imagepack.Loader(jpeg_db, batch_size=8, size=32, random_erase=0.5, random_erase_value="random")
    # bicubic crops differ from bilinear ones; eval transforms are never augmented.
    kw = dict(batch_size=8, size=32, seed=1, threads=1, as_torch=False)
    bil = _epoch(imagepack.Loader(jpeg_db, **kw), 0)[0][0]
    bic = _epoch(imagepack.Loader(jpeg_db, interpolation="bicubic", **kw), 0)[0][0]
    assert not np.array_equal(bil, bic)
    ev = _epoch(imagepack.Loader(jpeg_db, train=False, **kw), 0)[0][0]
    ev_aug = _epoch(imagepack.Loader(jpeg_db, train=False, auto_augment="augmix", random_erase=1.0, **kw), 0)[0][0]
    assert np.array_equal(ev, ev_aug)


def _trainer_run(db, out, *flags):
    import re
    import signal
    import subprocess
    from conftest import TOOLS
    train = os.path.join(TOOLS, "..", "trainer", "train")
    if not os.path.exists(train):
        pytest.skip("the C++ trainer is not built")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_JOB_ID"):
        env.pop(v, None)
    val = str(db) + ".val"  # a copy: the trainers refuse validation files that training reads
    if not os.path.exists(val):
        import shutil
        (shutil.copytree if os.path.isdir(db) else shutil.copy2)(str(db), val)
    argv = [train, "--data", db, "--val", val, "--arch", "resnet18", "--size", "32", "--batch-size", "16", "--seed",
            "3", "--threads", "1", "--loader-threads", "2", "--print-freq", "1000", "--epochs", "1", "--max-steps",
            "2", "--output", str(out), *flags]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        o, e = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    digest = re.findall(r"final weights digest ([0-9a-f]{16})", o)
    return p.returncode, digest[-1] if digest else None, o + e


def test_trainer_flags_train_the_same_weights_every_run(jpeg_db, tmp_path):
    """--auto-augment, --ra-magnitude, --augmix-severity, --random-erase,
    --interpolation reach the training loader: the same flags give the same
    final weights run after run, and other weights than without them."""
    rc, plain, out = _trainer_run(jpeg_db, tmp_path / "plain")
    assert rc == 0, out
    for k, flags in enumerate((["--auto-augment", "ta_wide", "--random-erase", "0.25"],
                               ["--auto-augment", "ra", "--ra-magnitude", "14", "--interpolation", "bicubic"],
                               ["--auto-augment", "augmix", "--augmix-severity", "5"])):
        rc, first, out = _trainer_run(jpeg_db, tmp_path / ("a%d" % k), *flags)
        assert rc == 0, out
        rc, second, out = _trainer_run(jpeg_db, tmp_path / ("b%d" % k), *flags)
        assert rc == 0, out
        assert first == second and first != plain, (flags, first, second, plain)
    for flags, message in ((["--auto-augment", "autoaugment"], "--auto-augment autoaugment: must be"),
                           (["--ra-magnitude", "31"], "--ra-magnitude 31"),
                           (["--augmix-severity", "0"], "--augmix-severity 0"),
                           (["--random-erase", "2"], "--random-erase 2"),
                           (["--interpolation", "nearest"], "--interpolation nearest")):
        rc, _, out = _trainer_run(jpeg_db, tmp_path / "bad", *flags)
        assert rc == 2 and message in out, (flags, rc, out)


def test_zz_report_measured_bounds():
    """Prints the measured differences (run with -s) for docs/LOADER.md."""
    for k in sorted(MEASURED):
        m, f = MEASURED[k]
        print("MEASURED %-24s max %3d grey levels, %.4f%% pixels > 1 off" % (k, m, 100 * f))
