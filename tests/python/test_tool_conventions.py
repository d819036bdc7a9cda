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
    "shuffle_quality": (lambda d: [d["db"], "--batch", "16", "--block-mb", "1", "--window-blocks", "4"], False),
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


# Every argument is checked before any work or output (docs/USAGE.md, "Exit
# codes"): a value out of its range, or an option where it does not apply,
# is a usage error (2) naming the option, with nothing on stdout and nothing
# made. "OUT" stands for the tool's output, which must not appear.
BAD_ARGUMENTS = [
    ("pack_lmdb", ["TREE", "OUT", "--shuffle", "-5"], "--shuffle"),
    ("pack_lmdb", ["TREE", "OUT", "--stats-sample", "-1"], "--stats-sample"),
    ("pack_lmdb", ["TREE", "OUT", "--threads", "-1"], "--threads"),
    ("pack_lmdb", ["TREE", "OUT", "--max-pixels", "0"], "--max-pixels"),
    ("pack_lmdb", ["TREE", "OUT", "--depth-scale", "0"], "--depth-scale"),
    ("pack_lmdb", ["TREE", "OUT", "--box-classes", "x.txt"], "--box-classes"),
    ("verify_db", ["DB", "--max-print", "-1"], "--max-print"),
    ("verify_db", ["DB", "--threads", "-1"], "--threads"),
    ("verify_db", ["DB", "--labels", "x.txt"], "say how --against SRC was packed"),
    ("export_db", ["DB", "OUT", "--first", "-1"], "--first"),
    ("export_db", ["DB", "OUT", "--first", "5", "--last", "2"], "--last"),
    ("export_db", ["DB", "OUT", "--first", "1000"], "past the 90 records"),
    ("export_db", ["DB", "OUT", "--prefix", "a/b"], "--prefix"),
    ("export_db", ["DB", "OUT", "--prefix", ""], "--prefix"),
    ("export_db", ["DB", "OUT", "--to", "imagefolder", "--prefix", "zz"], "--prefix applies to --to webdataset"),
    ("export_db", ["DB", "OUT", "--threads", "-1"], "--threads"),
    ("inspect_db", ["DB", "--out", "OUT", "--tile", "2"], "--tile"),
    ("inspect_db", ["DB", "--out", "OUT", "--tile", "100000", "--sheet"], "--tile"),
    ("inspect_db", ["DB", "--out", "OUT", "--per-class", "0"], "--per-class"),
    ("inspect_db", ["DB", "--out", "OUT", "--grid", "--batch", "0"], "--batch"),
    ("inspect_db", ["DB", "--out", "OUT", "--grid", "--crop", "-1"], "--crop"),
    ("inspect_db", ["DB", "--out", "OUT", "--grid", "--epoch", "-1"], "--epoch"),
    ("inspect_db", ["DB", "--out", "OUT", "--duplicates", "--max-distance", "12"], "--max-distance"),
    ("inspect_db", ["DB", "--out", "OUT", "--duplicates", "--min-similarity", "2"], "--min-similarity"),
    ("inspect_db", ["DB", "--out", "OUT", "--duplicates", "--sheet-pairs", "-1"], "--sheet-pairs"),
    ("inspect_db", ["DB", "--out", "OUT", "--summary", "--threads", "-1"], "--threads"),
    ("resize_imagenet", ["TREE", "OUT", "--max-size", "16", "--threads", "-1"], "--threads"),
    ("shuffle_quality", ["DB", "--block-mb", "0"], "--block-mb"),
    ("shuffle_quality", ["DB", "--block-mb", "-1"], "--block-mb"),
    ("shuffle_quality", ["DB", "--window-blocks", "0"], "--window-blocks"),
    ("shuffle_quality", ["DB", "--epoch", "-1", "--batch", "16"], "--epoch"),
    ("shuffle_quality", ["DB", "--batch", "1000"], "--batch 1000"),
]


@pytest.mark.parametrize("name,args,says", BAD_ARGUMENTS,
                         ids=["%s %s" % (n, " ".join(x for x in a if x not in ("TREE", "DB", "OUT")))
                              for n, a, _ in BAD_ARGUMENTS])
def test_bad_values_are_usage_errors_before_any_work(name, args, says, tree, jpeg_db, tmp_path):
    out = tmp_path / "out"
    real = [{"TREE": tree, "DB": jpeg_db, "OUT": out}.get(a, a) for a in args]
    r = run(tool(name), *real, "-q")
    assert r.returncode == 2 and says in r.stderr, (name, args, r.returncode, r.stderr)
    assert r.stdout == "" and not os.path.exists(out), (name, r.stdout)


def test_files_the_options_name_are_checked_before_any_work(tree, jpeg_db, tmp_path):
    """A missing --against, or a classes or labels file that cannot be read,
    ends the run before any record is read or output made (exit 1)."""
    missing = tmp_path / "missing"
    r = run(tool("verify_db"), jpeg_db, "--against", missing, "-q")
    assert r.returncode == 1 and str(missing) in r.stderr and "records checked" not in r.stdout, (r.stdout, r.stderr)
    r = run(tool("verify_db"), jpeg_db, "--against", tree, "--classes", missing, "-q")
    assert r.returncode == 1 and "--classes %s" % missing in r.stderr and r.stdout == "", (r.stdout, r.stderr)
    for option in ("--classes", "--labels"):
        r = run(tool("pack_lmdb"), tree, tmp_path / "o.lmdb", option, tmp_path, "-q")  # a folder, not a file
        assert r.returncode == 1 and "%s %s" % (option, tmp_path) in r.stderr, (option, r.stderr)
        assert not os.path.exists(tmp_path / "o.lmdb")


def test_what_a_picture_or_a_table_cannot_show_is_said(tree, tmp_path):
    """A class of the list with no records has no row on the contact sheet:
    inspect_db names it. shuffle_quality's block rows on data smaller than
    one block cannot show anything about blocks: it says so."""
    classes = tmp_path / "classes.txt"
    classes.write_text("class0\nclass1\nclass2\nn0999\n")  # n0999: no folder
    db = tmp_path / "db.lmdb"
    r = run(tool("pack_lmdb"), tree, db, "--classes", classes, "-q")
    assert r.returncode == 0 and "n0999" in r.stderr, r.stderr
    r = run(tool("inspect_db"), db, "--out", tmp_path / "report", "--sheet", "-q")
    assert r.returncode == 0, r.stderr
    assert "contact sheet of 3 classes" in r.stdout and "1 class(es) with no records, no row: n0999" in r.stdout, r.stdout
    r = run(tool("shuffle_quality"), db, "--batch", "8")
    assert r.returncode == 0, r.stderr
    assert re.search(r"note: at --block-mb [0-9., ]+ the 90 records are one block", r.stdout), r.stdout
