"""The option table (imagepack/option_table.h) is the one declaration of
each trainer and Loader option: both trainers' --help show its rows' help
and defaults, both refuse the same bad values with the same words, and
help(imagepack.Loader) lists every keyword the Loader takes, with the C++
LoaderOptions' defaults."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import imagepack
from imagepack import options

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(os.environ["IMAGEPACK_TOOLS"], "..", "trainer", "train")
SCRIPT = os.path.join(ROOT, "scripts", "train_imagepack.py")

# One value out of range or choice for rows both trainers take, with the
# words both must use. A row added with a range is covered by
# test_every_ranged_row_has_a_bad_value.
BAD = [
    ("epochs", "0", "at least 1"), ("batch-size", "0", "at least 1"), ("lr", "-0.5", "0 or more"),
    ("momentum", "1", "in [0, 1)"), ("wd", "-1", "0 or more"), ("label-smoothing", "1", "in [0, 1)"),
    ("ra-magnitude", "31", "0 to 30"), ("augmix-severity", "0", "1 to 10"), ("random-erase", "1.5", "in [0, 1]"),
    ("warmup-epochs", "-1", "0 or more"), ("step-size", "0", "at least 1"), ("lr-peak-epoch", "-2", "0 or more"),
    ("size", "16385", "0 (the default) to 16384"), ("val-size", "-1", "0 (--size) to 16384"),
    ("val-resize", "20000", "0 (automatic) to 16384"), ("threads", "-1", "0 (automatic) or more"),
    ("loader-threads", "-3", "0 (automatic) or more"), ("checkpoint-every", "-1", "0 (off) or more"),
    ("stop-at-step", "-1", "0 (off) or more"), ("print-freq", "0", "at least 1"), ("seed", "-1", "0 or more"),
    ("mixup-alpha", "-0.1", "0 (off) or more"), ("cutmix-alpha", "-1", "0 (off) or more"),
    ("model-ema-steps", "0", "at least 1"), ("model-ema-decay", "1", "in (0, 1)"),
    ("lr-warmup-epochs", "-1", "0 (off) or more"), ("lr-warmup-decay", "0", "in (0, 1]"),
    ("norm-weight-decay", "-1", "0 or more"), ("clip-grad-norm", "-1", "0 (off) or more"),
    ("train-crop-size", "-1", "0 (the default) to 16384"), ("val-crop-size", "99999", "0 (--size) to 16384"),
    ("val-resize-size", "-5", "0 (automatic) to 16384"),
    ("interpolation", "nearest", "bilinear or bicubic"), ("hflip", "1.5", "in [0, 1]"),
    ("order", "sideways", "random, blocks, auto or sequential"),
    ("task", "detection", "classification, segmentation or restoration"),
    ("schedule", "linear", "step, cosine, onecycle or triangular"), ("lr-warmup-method", "exp", "constant or linear"),
    ("auto-augment", "autoaug", "ta_wide, ra, imagenet, cifar10, svhn, augmix or none"),
    ("device", "tpu", "auto, cpu or cuda"),
]


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def refusal(cmd):
    r = run(cmd)
    assert r.returncode == 2, (cmd, r.returncode, r.stderr)
    return r.stderr.strip().splitlines()[0].split(": ", 1)[1]


def test_every_ranged_row_has_a_bad_value():
    both = {r["name"] for r in options.TABLE if r["train"] and r["script"] and (r["range"] or r["choices"])}
    listed = {name for name, _, _ in BAD}
    assert both - {"amp"} <= listed, "rows of both trainers with a range and no bad value here: %s" % (
        sorted(both - listed - {"amp"}))


def script_refusal(capsys, args):
    """The script's parse() (imagepack.train.cli's) on args in this process
    (its module imported once: a process a value would import torch forty
    times)."""
    from imagepack.train import cli
    with pytest.raises(SystemExit) as e:
        cli.parse(args)
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1].split(": ", 1)[1]


@pytest.mark.parametrize("name,value,says", BAD, ids=[b[0] for b in BAD])
def test_both_trainers_refuse_a_bad_value_in_the_same_words(tmp_path, capsys, name, value, says):
    args = ["--data", str(tmp_path / "d"), "--val", str(tmp_path / "v"), "--output", str(tmp_path / "o"),
            "--" + name, value]
    expected = "--%s %s: must be %s" % (name, value, says)
    assert refusal([TRAIN] + args) == expected
    assert script_refusal(capsys, args) == expected
    assert not (tmp_path / "o").exists()


def test_the_script_as_a_process_refuses_as_parse_does(tmp_path):
    args = ["--data", str(tmp_path / "d"), "--val", str(tmp_path / "v"), "--output", str(tmp_path / "o"),
            "--ra-magnitude", "31"]
    assert refusal([sys.executable, SCRIPT] + args) == "--ra-magnitude 31: must be 0 to 30"


def help_entries(text):
    """--help text as {flag: help text joined to one line}."""
    entries, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"  (?:-\w, |-\w \[ )?--([a-z0-9-]+)", line)  # continuations sit deeper
        if m:
            cur = m.group(1)
            entries[cur] = line
        elif cur and line.startswith("  "):
            entries[cur] += " " + line.strip()
    return {k: " ".join(v.split()) for k, v in entries.items()}


def test_both_helps_show_each_rows_help_and_default():
    cpp = help_entries(run([TRAIN, "--help"]).stdout)
    py = help_entries(run([sys.executable, SCRIPT, "--help"]).stdout)
    for row in options.TABLE:
        words = " ".join(row["help"].split())
        for surface, shown in (("train", cpp), ("script", py)):
            if not row[surface]:
                assert row["name"] not in shown, (surface, row["name"])
                continue
            assert row["name"] in shown, (surface, row["name"])
            # argparse and program_options wrap lines at spaces: compare words
            assert words in shown[row["name"]], (surface, row["name"], shown[row["name"]])
            if row["kind"] not in ("switch", "list") and row["default"]:
                said = "(=%s)" % row["default"] if surface == "train" else "default %s" % row["default"]
                assert said in shown[row["name"]], (surface, row["name"], shown[row["name"]])


def test_the_loader_takes_every_keyword_row_with_the_cpp_default_and_lists_it():
    defaults = imagepack.Loader.options_defaults()
    doc = imagepack.Loader.__doc__
    rows = options.rows("loader")
    assert len(rows) >= 30
    for row in rows:
        key = row["keyword"]
        assert defaults[key] == options.default(row), (key, defaults[key], row["default"])
        assert "%s=%r: %s" % (key, options.default(row), row["help"]) in doc, key
    with pytest.raises(TypeError, match="unexpected keyword"):
        imagepack.Loader("x.lmdb", 1, 8, no_such_option=1)


def test_a_row_refused_by_the_table_check_is_named():
    with pytest.raises(ValueError, match="no option"):
        imagepack._imagepack.option_problem("no-such-option", 1)
    assert imagepack._imagepack.option_problem("ra-magnitude", 30) == ""
    assert imagepack._imagepack.option_problem("ra-magnitude", float("nan")) == "--ra-magnitude nan: must be 0 to 30"


def _epoch(db, **kw):
    loader = imagepack.Loader(db, batch_size=30, size=32, threads=1, seed=5, rank=0, world_size=1, as_torch=False,
                              scale=(1, 1), ratio=(1, 1), **kw)
    images = np.concatenate([x for x, _ in loader])
    return images.astype(np.int16)


def test_hflip_added_as_one_row_flips_with_its_probability(raw_db):
    """hflip came in as a row of the table (plus its use): 0 never flips, 1
    always does (each sample the mirror of its unflipped crop), 0.3 flips
    about 30% of the samples, and 0.5 is the loader's draw before the
    option existed (the default's batches unchanged)."""
    never, always = _epoch(raw_db, hflip=0.0), _epoch(raw_db, hflip=1.0)
    mirrored = never[..., ::-1]
    # a one-pixel shift where the centred box's margin is odd: compare crops
    assert np.abs(always[..., 2:-2] - mirrored[..., 2:-2]).mean() < 2.0
    assert np.abs(always - never).mean() > 10  # the images are not symmetric

    def flipped(images):
        return [bool(np.abs(a - m).mean() < np.abs(a - n).mean()) for a, n, m in zip(images, never, mirrored)]
    some = flipped(_epoch(raw_db, hflip=0.3))
    assert 12 <= sum(some) <= 42, sum(some)  # 90 samples, Binomial(90, 0.3): mean 27, sd 4.3
    default = _epoch(raw_db)
    assert np.array_equal(default, _epoch(raw_db, hflip=0.5))
    assert 30 <= sum(flipped(default)) <= 60
    with pytest.raises(ValueError, match="hflip must be in"):
        imagepack.Loader(raw_db, batch_size=2, size=8, hflip=1.5)


def test_the_script_hands_every_augmentation_row_to_its_loader(jpeg_db):
    """The Python trainer's Loader keywords come from the table's
    augmentation rows: --hflip 0 and --random-erase 0.2 arrive as hflip=0
    and random_erase=0.2, each row under its Loader keyword."""
    from imagepack.train import cli, recipe
    args = cli.parse(["--data", jpeg_db, "--no-val", "--hflip", "0", "--random-erase", "0.2",
                      "--auto-augment", "ra", "--ra-magnitude", "4"])[0]
    kw = recipe.loader_options(args, [0.5, 0.5, 0.5])
    assert (kw["hflip"], kw["random_erase"], kw["auto_augment"], kw["ra_magnitude"]) == (0.0, 0.2, "ra", 4)
    rows = {r["keyword"] for r in options.rows("inspect") if r["script"] and r["loader"]}
    assert rows <= set(kw) and {"hflip", "interpolation", "augmix_severity"} <= rows


def test_the_loaders_docstring_names_every_argument_and_keyword():
    import inspect
    doc = imagepack.Loader.__doc__
    arguments = [p for p in inspect.signature(imagepack.Loader.__init__).parameters if p not in ("self", "options")]
    assert [p for p in arguments if not re.search(r"\b%s\b" % p, doc)] == []
    assert [k for k in options.loader_keywords() if k + "=" not in doc] == []
