"""Pixels that are stored are the reference decoder's: raw records (and
what verify and the loader's accurate mode decode) against Pillow's
`Image.open(f).convert(...)`, byte for byte, for baseline and progressive
JPEGs of every chroma subsampling, gray, with and without restart
markers, at several qualities. Pillow and cjpeg (libjpeg-turbo-progs)
write the files; Pillow decodes them with libjpeg's accurate integer
IDCT, as torchvision and OpenCV do."""
import io
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402  (independent reader: python3-lmdb + numpy)


def picture(seed, w=75, h=61):
    """Smooth gradients with texture and a few hard edges: every DCT
    coefficient band in use, odd sizes (partial MCUs at both edges)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // w), (y * 255 // h), ((x + y) * 127 // (w + h) + 60)], -1).astype(np.float64)
    base += rng.normal(0, 18, (h, w, 3))
    base[h // 3:h // 2, w // 4:w // 2] = [230, 20, 40]
    return np.clip(base, 0, 255).astype(np.uint8)


# (name, how): Pillow's save options, or cjpeg's arguments.
CASES = []
for q in (50, 75, 95):
    for sub, name in ((0, "444"), (1, "422"), (2, "420")):
        CASES.append(("pil-%s-q%d" % (name, q), dict(quality=q, subsampling=sub)))
        CASES.append(("pil-%s-q%d-progressive" % (name, q), dict(quality=q, subsampling=sub, progressive=True)))
    CASES.append(("pil-gray-q%d" % q, dict(quality=q, gray=True)))
    CASES.append(("pil-gray-q%d-progressive" % q, dict(quality=q, gray=True, progressive=True)))
for q in (60, 90):
    for sample, name in (("1x2", "440"), ("4x1", "411"), ("2x2", "420"), ("1x1", "444")):
        CASES.append(("cjpeg-%s-q%d" % (name, q), ["-quality", str(q), "-sample", sample]))
        CASES.append(("cjpeg-%s-q%d-restart" % (name, q), ["-quality", str(q), "-sample", sample, "-restart", "1"]))
        CASES.append(("cjpeg-%s-q%d-progressive-restart" % (name, q),
                      ["-quality", str(q), "-sample", sample, "-progressive", "-restart", "2"]))
    CASES.append(("cjpeg-gray-q%d-restart" % q, ["-quality", str(q), "-grayscale", "-restart", "1"]))


@pytest.fixture(scope="module")
def jpeg_tree(tmp_path_factory):
    if not shutil.which("cjpeg"):
        pytest.fail("cjpeg not found (libjpeg-turbo-progs; scripts/setup.sh installs it)")
    root = tmp_path_factory.mktemp("dct")
    os.makedirs(root / "all" / "x")  # one class folder
    for i, (name, how) in enumerate(CASES):
        a = picture(i)
        out = root / "all" / "x" / (name + ".jpg")
        if isinstance(how, dict):
            how = dict(how)
            im = Image.fromarray(a).convert("L") if how.pop("gray", False) else Image.fromarray(a)
            im.save(out, **how)
        else:
            ppm = root / (name + ".ppm")
            Image.fromarray(a).save(ppm)
            with open(out, "wb") as f:
                subprocess.run(["cjpeg"] + how + [str(ppm)], stdout=f, check=True)
            os.remove(ppm)
    return root


def pillow(path, mode):
    with Image.open(path) as im:
        return np.asarray(im.convert(mode))


def raw_pack(tree, dst, *args):
    subprocess.run([tool("pack_lmdb"), str(tree), str(dst), "-q", "--encoding", "raw", "--format", "blob", *args],
                   check=True)
    db = read_db.open_db(str(dst))
    return db, {read_db.read_record(db, i)["path"]: read_db.read_record(db, i)["payload"]
                for i in range(db.meta["count"])}


def test_raw_records_are_pillows_pixels(jpeg_tree, tmp_path):
    db, records = raw_pack(jpeg_tree / "all", tmp_path / "raw.blob")
    assert db.meta["options"]["dct"] == "accurate"
    assert len(records) == len(CASES)
    differing = []
    for name, _ in CASES:
        want = pillow(jpeg_tree / "all" / "x" / (name + ".jpg"), "RGB")
        got = records["x/" + name + ".jpg"]
        if got.shape != want.shape or not np.array_equal(got, want):
            differing.append("%s: %d values differ" % (name, int((got != want).sum())))
    assert not differing, differing


def test_cmyk_records_are_pillows_rgb(tmp_path):
    """An Adobe CMYK JPEG (inverted samples): the same RGB as Pillow's
    convert("RGB")."""
    os.makedirs(tmp_path / "t" / "a")
    shutil.copy(os.path.join(os.path.dirname(__file__), "..", "data", "cmyk_adobe.jpg"), tmp_path / "t" / "a")
    _, records = raw_pack(tmp_path / "t", tmp_path / "c.blob")
    want = pillow(tmp_path / "t" / "a" / "cmyk_adobe.jpg", "RGB")
    np.testing.assert_array_equal(records["a/cmyk_adobe.jpg"], want)


def test_gray_records_of_gray_jpegs_are_pillows_L(jpeg_tree, tmp_path):
    gray = tmp_path / "gray"
    os.makedirs(gray / "g")
    for name, _ in CASES:
        if "gray" in name:
            shutil.copy(jpeg_tree / "all" / "x" / (name + ".jpg"), gray / "g")
    db, records = raw_pack(gray, tmp_path / "gray.blob", "--channels", "1")
    assert len(records) == sum("gray" in n for n, _ in CASES)
    for path, got in records.items():
        want = pillow(gray / path, "L")
        np.testing.assert_array_equal(got.reshape(want.shape), want, err_msg=path)


def test_the_fast_idct_is_not_pillows(jpeg_tree, tmp_path):
    """--dct fast (the old default) gives other pixels: this file's tests
    fail if it comes back as the default."""
    db, records = raw_pack(jpeg_tree / "all", tmp_path / "fast.blob", "--dct", "fast")
    assert db.meta["options"]["dct"] == "fast"
    differ = sum(not np.array_equal(records["x/" + n + ".jpg"], pillow(jpeg_tree / "all" / "x" / (n + ".jpg"), "RGB"))
                 for n, _ in CASES)
    assert differ > len(CASES) // 2, "%d of %d differ" % (differ, len(CASES))


def stored_jpegs(dst):
    """{path: Pillow's RGB decode of the JPEG bytes as stored} (pack keeps
    baseline files as they are and re-encodes the rest)."""
    db = read_db.open_db(str(dst))
    out = {}
    for i in range(db.meta["count"]):
        r = read_db.read_record(db, i)
        with Image.open(io.BytesIO(r["payload"])) as im:
            out[r["path"]] = np.asarray(im.convert("RGB"))
    return out


def test_verify_stats_are_of_pillows_pixels(jpeg_tree, tmp_path):
    """verify_db --decode --stats on a JPEG pack: the mean of the decoded
    pixels is the mean of Pillow's decodes of the stored JPEGs."""
    dst = tmp_path / "jpeg.lmdb"
    subprocess.run([tool("pack_lmdb"), str(jpeg_tree / "all"), str(dst), "-q"], check=True)
    r = subprocess.run([tool("verify_db"), str(dst), "--decode", "--stats"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("pixel mean:")][0]
    got = [float(x) for x in line.split(":")[1].split("std")[0].split()]
    pixels = np.concatenate([a.reshape(-1, 3) for a in stored_jpegs(dst).values()]).astype(np.float64)
    np.testing.assert_allclose(got, pixels.mean(0) / 255, atol=6e-5, err_msg=line)


def test_loader_accurate_mode_is_pillows_pixels(jpeg_tree, tmp_path):
    """The loader with dct="accurate", evaluating at the images' own
    shorter edge (a centre crop, no resize), hands out Pillow's pixels of
    the stored JPEGs; the default fast mode does not."""
    imagepack = pytest.importorskip("imagepack")
    # Landscape files as written; portrait ones (turned losslessly by
    # jpegtran) so that the crop cuts rows too.
    tree = tmp_path / "tree"
    shutil.copytree(jpeg_tree / "all", tree)
    for name, _ in CASES:
        src = str(tree / "x" / (name + ".jpg"))
        with open(str(tree / "x" / (name + "-portrait.jpg")), "wb") as f:
            subprocess.run(["jpegtran", "-transpose", src], stdout=f, check=True)
    dst = tmp_path / "one.lmdb"
    subprocess.run([tool("pack_lmdb"), str(tree), str(dst), "-q"], check=True)
    want = stored_jpegs(dst)
    ds = imagepack.open(str(dst))
    paths = [ds.record(i)[2] for i in range(len(ds))]
    for dct, equal in (("accurate", True), ("fast", False)):
        loader = imagepack.Loader(str(dst), batch_size=len(paths), size=61, transform="eval", eval_resize=61,
                                  shuffle=False, threads=1, layout="NHWC", as_torch=False, dct=dct)
        images, _ = next(iter(loader))
        differ = []
        for i, p in enumerate(paths):
            h, w = want[p].shape[:2]
            y0, x0 = (h - 61) // 2, (w - 61) // 2
            if not np.array_equal(np.asarray(images[i]), want[p][y0:y0 + 61, x0:x0 + 61]):
                differ.append(p)
        if equal:
            assert not differ, differ
        else:
            assert len(differ) > len(paths) // 2, "%d of %d differ" % (len(differ), len(paths))
