"""Fixtures for the Python package's tests: real databases made by the
real pack_lmdb from a tree of JPEGs written here."""
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

TOOLS = os.environ.get("IMAGEPACK_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
SCRIPTS = os.path.join(os.path.dirname(__file__), "../../scripts")


def tool(name):
    path = os.path.join(TOOLS, name)
    if not os.path.exists(path):
        pytest.fail("%s not built (set IMAGEPACK_TOOLS)" % path)
    return path


@pytest.fixture(scope="session")
def tree(tmp_path_factory):
    """3 classes x 30 JPEGs of 40-90 px, smooth and all different."""
    root = tmp_path_factory.mktemp("tree")
    rng = np.random.default_rng(3)
    for c in range(3):
        os.makedirs(root / ("class%d" % c))
        for i in range(30):
            w, h = int(rng.integers(40, 90)), int(rng.integers(40, 90))
            y, x = np.mgrid[0:h, 0:w]
            a = np.stack([(x * 255 // w + 40 * c) % 256, (y * 255 // h + 7 * i) % 256,
                          ((x + y) * 128 // (w + h) + 60 * c) % 256], -1).astype(np.uint8)
            Image.fromarray(a).save(root / ("class%d" % c) / ("img%02d.jpg" % i), quality=92)
    return root


def run(*args, ok=True):
    """Runs a command; with ok, a non-zero exit fails the test with its output."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (args[0], r.returncode, r.stdout, r.stderr))
    return r


def pack(src, dst, *args):
    subprocess.run([tool("pack_lmdb"), str(src), str(dst), "-q", "--shuffle", "1", *args], check=True)
    return str(dst)


@pytest.fixture(scope="session")
def jpeg_db(tree, tmp_path_factory):
    return pack(tree, tmp_path_factory.mktemp("db") / "train.lmdb")


@pytest.fixture(scope="session")
def raw_db(tree, tmp_path_factory):
    return pack(tree, tmp_path_factory.mktemp("db") / "raw.blob", "--format", "blob", "--encoding", "raw",
                "--max-size", "48")


def nearest_reference(src, box, size, fill):
    """A plain numpy nearest-neighbour crop of the loader's crop_box row
    (x, y, w, h, hflip, vflip): output pixel i takes source pixel
    x + floor((i + 0.5) * w / size), reversed for a flip, `fill` outside
    the source; the source's dtype (uint8 or uint16 maps)."""
    x, y, w, h, hf, vf = (int(v) for v in box)
    xs = x + ((2 * np.arange(size) + 1) * w) // (2 * size)
    ys = y + ((2 * np.arange(size) + 1) * h) // (2 * size)
    if hf:
        xs = xs[::-1]
    if vf:
        ys = ys[::-1]
    H, W = src.shape
    out = np.full((size, size), fill, src.dtype)
    inside_y, inside_x = (ys >= 0) & (ys < H), (xs >= 0) & (xs < W)
    out[np.ix_(inside_y, inside_x)] = src[np.ix_(ys[inside_y], xs[inside_x])]
    return out
