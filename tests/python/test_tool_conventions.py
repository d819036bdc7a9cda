"""What README.md and docs/USAGE.md promise of every tool: --help on stdout
(exit 0), --version, a bad option is a usage error on stderr (exit 2),
-q silences the progress line (drawn on a terminal: the tools run here on
a pseudo-terminal), and exit codes 0 / 1 as documented. Every program
tools/CMakeLists.txt builds is covered; and the transforms have one name
everywhere (the library's table), the old "padcrop" still read."""
import json
import os
import pty
import re
import subprocess
import threading

import numpy as np
import pytest
from PIL import Image

from conftest import TOOLS, tool

ROOT = os.path.join(os.path.dirname(__file__), "../..")


def built_programs():
    text = open(os.path.join(ROOT, "tools", "CMakeLists.txt")).read()
    names = re.findall(r"add_executable\((\w+)", text)
    for loop in re.findall(r"foreach\(tool ([^)]*)\)", text):
        names += loop.split()
    return sorted(set(n for n in names if n != "${tool}"))


def built(name):
    """False for a benchmark in a build without them (IMAGEPACK_BUILD_BENCH=OFF,
    the TSan preset); every other program must be there."""
    return not name.startswith("bench_") or os.path.exists(os.path.join(TOOLS, name))


def program(name):
    if not built(name):
        pytest.skip("%s not built (IMAGEPACK_BUILD_BENCH=OFF)" % name)
    return tool(name)


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def on_terminal(*args):
    """Runs with stderr on a pseudo-terminal; (exit code, what it drew)."""
    master, slave = pty.openpty()
    drawn = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            drawn.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    p = subprocess.run([str(a) for a in args], stdout=subprocess.DEVNULL, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    return p.returncode, b"".join(drawn).decode("utf-8", "replace")


def test_every_built_program_is_listed_here():
    assert built_programs() == sorted(RUNS), "a tool without a case in RUNS below"


@pytest.mark.parametrize("name", sorted(["resize_imagenet", "pack_lmdb", "verify_db", "export_db", "inspect_db",
                                         "shuffle_quality", "bench_loader", "bench_jpeg_ceiling", "bench_scale"]))
def test_help_version_and_usage_errors(name):
    r = run(program(name), "--help")
    assert r.returncode == 0 and r.stdout.startswith("Usage: %s " % name) and r.stderr == "", r.stderr
    assert "-q [ --quiet ]" in r.stdout and "--version" in r.stdout
    r = run(tool(name), "--version")
    assert r.returncode == 0 and r.stdout.startswith("%s (imagepack) " % name)
    r = run(tool(name), "--no-such-option", "-q")
    assert r.returncode == 2 and r.stdout == "" and "Usage: %s" % name in r.stderr


# Per program: a small real run (arguments after the data fixture's paths)
# and whether it draws a progress line.
RUNS = {
    "resize_imagenet": (lambda d: [d["tree"], d["tmp"] / "small", "--max-size", "24"], True),
    "pack_lmdb": (lambda d: [d["tree"], d["tmp"] / "p.lmdb"], True),
    "verify_db": (lambda d: [d["db"], "--decode"], True),
    "export_db": (lambda d: [d["db"], d["tmp"] / "w"], True),
    "inspect_db": (lambda d: [d["db"], "--out", d["tmp"] / "r", "--duplicates"], True),
    "shuffle_quality": (lambda d: [d["db"], "--block-mb", "1", "--window-blocks", "4"], False),
    "bench_loader": (lambda d: [d["db"], "--batches", "2", "--batch", "4", "--size", "16"], False),
    "bench_jpeg_ceiling": (lambda d: [d["tree"], "--max-size", "24"], False),
    "bench_scale": (lambda d: [d["tmp"] / "s.blob", "--records", "10", "--shards", "2"], False),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_quiet_silences_the_progress_line(name, tree, jpeg_db, tmp_path):
    make, draws = RUNS[name]
    for quiet in (False, True):
        d = {"tree": tree, "db": jpeg_db, "tmp": tmp_path / ("q" if quiet else "loud")}
        os.makedirs(d["tmp"])
        rc, drawn = on_terminal(program(name), *make(d), *(["-q"] if quiet else []))
        assert rc == 0, (name, quiet, drawn)
        if quiet:
            assert drawn == "", (name, drawn)
        elif draws:
            assert "[" in drawn and "%" in drawn, (name, drawn)  # "label [####....] done/total  pct ..."


def test_fatal_is_one_and_usage_is_two(tmp_path, jpeg_db):
    missing = tmp_path / "missing.lmdb"
    for name, args in (("verify_db", [missing]), ("export_db", [missing, tmp_path / "w"]),
                       ("shuffle_quality", [missing]), ("bench_loader", [missing, "--batches", "1"]),
                       ("inspect_db", [missing, "--out", tmp_path / "r", "--summary"]),
                       ("pack_lmdb", [missing, tmp_path / "o.lmdb"])):
        if not built(name):
            continue
        r = run(tool(name), *args, "-q")
        assert r.returncode == 1 and str(missing) in r.stdout + r.stderr, (name, r.returncode, r.stderr)
    for name, args in (("verify_db", []), ("export_db", [jpeg_db]), ("pack_lmdb", [jpeg_db])):
        assert run(tool(name), *args, "-q").returncode == 2, name


def test_transform_names_are_one_table(jpeg_db, tmp_path):
    names = "train, eval, pad_crop, pad_crop_eval"
    grids = {}
    for augment in ("pad_crop", "padcrop"):  # the old spelling, still read
        out = tmp_path / augment
        r = run(tool("inspect_db"), jpeg_db, "--out", out, "--grid", "--augment", augment, "--crop", "24", "-q")
        assert r.returncode == 0, r.stderr
        grids[augment] = np.asarray(Image.open(out / "grid.png"))
        assert json.loads((out / "grid.json").read_text())["augment"] == "pad_crop"
    assert np.array_equal(grids["pad_crop"], grids["padcrop"])
    r = run(tool("inspect_db"), jpeg_db, "--out", tmp_path / "x", "--grid", "--augment", "crop", "-q")
    assert r.returncode == 2 and names in r.stderr
    assert names in " ".join(run(tool("inspect_db"), "--help").stdout.split())  # wrapped by the help layout
    for transform in ("train", "eval", "pad_crop", "pad_crop_eval", "padcrop"):
        if not built("bench_loader"):
            break
        r = run(tool("bench_loader"), jpeg_db, "--transform", transform, "--batches", "1", "--batch", "4", "--size",
                "16", "-q")
        assert r.returncode == 0, (transform, r.stderr)
    if built("bench_loader"):
        r = run(tool("bench_loader"), jpeg_db, "--transform", "crop", "-q")
        assert r.returncode == 2 and names in r.stderr
        assert names in " ".join(run(tool("bench_loader"), "--help").stdout.split())
    try:
        import imagepack
    except ImportError:
        return
    assert imagepack.TRANSFORMS == tuple(names.split(", "))  # the library's table, not a copy
    for transform in imagepack.TRANSFORMS:
        loader = imagepack.Loader(jpeg_db, 4, 16, transform=transform, as_torch=False)
        assert loader._shuffle == (transform in ("train", "pad_crop"))  # training transforms shuffle by default
    with pytest.raises(ValueError):
        imagepack.Loader(jpeg_db, 4, 16, transform="crop", as_torch=False)
