"""Fixtures for the Python package's tests: real databases made by the
real pack_lmdb from a tree of JPEGs written here."""
import fcntl
import json
import os
import shutil
import socket
import subprocess

import numpy as np
import pytest
from PIL import Image

TOOLS = os.environ.get("IMAGEPACK_TOOLS", os.path.join(os.path.dirname(__file__), "../../build/tools"))
SCRIPTS = os.path.join(os.path.dirname(__file__), "../../scripts")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Tests marked needs_root become a second user (setpriv) to attack the
# victim (test_shared_machine.py). Without root they cannot run: skipped
# with the reason, or, where IMAGEPACK_REQUIRE_ATTACKS=1 (scripts/test.sh,
# the CI command, sets it), failed, so that CI cannot pass without them.
CAN_ATTACK = os.geteuid() == 0 and shutil.which("setpriv") is not None


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_root: becomes another user with setpriv (root only)")


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_root") is None or CAN_ATTACK:
        return
    why = "this attack needs root and setpriv to become a second user"
    if os.environ.get("IMAGEPACK_REQUIRE_ATTACKS") == "1":
        pytest.fail(why + ", and IMAGEPACK_REQUIRE_ATTACKS=1 says it must run here: run the suite as root",
                    pytrace=False)
    pytest.skip(why + " (IMAGEPACK_REQUIRE_ATTACKS=1 makes this a failure)")


# The parquet tests' writers (test_parquet.py, test_https.py): npm packages
# run by node, at the versions of npm_packages.txt, found in
# IMAGEPACK_DUCKDB_NODE_MODULES (a node_modules folder holding them), else
# in build/npm/node_modules, where scripts/setup.sh installs them (and,
# failing that, the first test that needs them). Without them those tests
# are skipped with the reason, or, where IMAGEPACK_REQUIRE_DUCKDB=1
# (scripts/test.sh sets it), failed, as the attacks are.
NPM_PACKAGES = [line.strip() for line in open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "npm_packages.txt"))
                if line.strip() and not line.startswith("#")]


def npm_packages_in(folder):
    """True when `folder` (a node_modules) holds every package at its version."""
    for spec in NPM_PACKAGES:
        name, version = spec.rsplit("@", 1)
        try:
            with open(os.path.join(folder, name, "package.json")) as f:
                if json.load(f).get("version") != version:
                    return False
        except (OSError, ValueError):
            return False
    return True


def node_modules():
    """The node_modules folder holding NPM_PACKAGES; else skips the test
    (fails it where IMAGEPACK_REQUIRE_DUCKDB=1)."""
    given = os.environ.get("IMAGEPACK_DUCKDB_NODE_MODULES")
    if given:
        if npm_packages_in(given):
            return given
        why = "IMAGEPACK_DUCKDB_NODE_MODULES=%s does not hold %s" % (given, " ".join(NPM_PACKAGES))
    elif shutil.which("node") is None or shutil.which("npm") is None:
        why = "node and npm are not installed (scripts/setup.sh installs Debian's nodejs and npm)"
    else:
        local = os.path.join(ROOT, "build", "npm")
        os.makedirs(local, exist_ok=True)
        # One install at a time: ctest runs test files side by side.
        with open(os.path.join(local, ".install.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if npm_packages_in(os.path.join(local, "node_modules")):
                return os.path.join(local, "node_modules")
            r = subprocess.run(["npm", "install", "--prefix", local, "--no-audit", "--no-fund", *NPM_PACKAGES],
                               capture_output=True, text=True, timeout=600)
            if r.returncode == 0 and npm_packages_in(os.path.join(local, "node_modules")):
                return os.path.join(local, "node_modules")
        why = "npm install %s into %s failed: %s" % (" ".join(NPM_PACKAGES), local, (r.stderr or r.stdout)[-300:])
    if os.environ.get("IMAGEPACK_REQUIRE_DUCKDB") == "1":
        pytest.fail(why + ", and IMAGEPACK_REQUIRE_DUCKDB=1 says these tests must run here", pytrace=False)
    pytest.skip(why + " (IMAGEPACK_REQUIRE_DUCKDB=1 makes this a failure)")


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


def temp_name(path, pid, uid=None, host=None):
    """The name a temporary of `path` has when process `pid` of user `uid`
    (this one) on `host` (this one) and this boot writes it
    (docs/RELIABILITY.md, "Temporaries"): .NAME.ipk-tmp.UID.HOST.BOOT.PID."""
    boot = open("/proc/sys/kernel/random/boot_id").read().strip().replace("-", "")[:8]
    ns = os.stat("/proc/self/ns/pid").st_ino
    if ns != 0xEFFFFFFC:
        boot += "n%x" % ns
    host = host or socket.gethostname().replace(".", "_")
    uid = os.geteuid() if uid is None else uid
    return os.path.join(os.path.dirname(str(path)), ".%s.ipk-tmp.%d.%s.%s.%d" % (os.path.basename(str(path)), uid,
                                                                                 host, boot, pid))


def run(*args, ok=True, env=None):
    """Runs a command (in `env`, else this process's environment); with
    ok, a non-zero exit fails the test with its output."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env)
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
