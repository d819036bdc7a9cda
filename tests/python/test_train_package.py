"""imagepack.train, the Python trainer as a package module: `python3 -m
imagepack.train` is the program scripts/train_imagepack.py runs (the same
--help, the continue command after Ctrl-C naming the module as run), the
recipes of trainer/recipes are found from the checkout whatever the working
directory and refused in one line where the package is installed outside
one. (Its files' sizes: test_rooms.py's rule.)"""
import os
import re
import shutil
import subprocess
import sys

import pytest

import imagepack
from conftest import SCRIPTS
from imagepack.train import checkpoint
from test_scripts_nothing_lost import SMALL, ctrl_c_after_the_first_steps, cue_databases, proc

SCRIPT = os.path.join(SCRIPTS, "train_imagepack.py")
MODULE = [sys.executable, "-m", "imagepack.train"]


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    return cue_databases(tmp_path_factory.mktemp("train_package"), tiny=False)


def test_the_script_is_a_thin_entry_to_the_module():
    with open(SCRIPT) as f:
        code = [line for line in f.read().split('"""')[-1].splitlines() if line.strip()]
    assert len(code) <= 5 and "from imagepack.train.run import entry" in code, code


def test_the_module_and_the_script_take_the_same_options():
    module = subprocess.run(MODULE + ["--help"], capture_output=True, text=True, cwd="/", timeout=120)
    script = subprocess.run([sys.executable, SCRIPT, "--help"], capture_output=True, text=True, timeout=120)
    assert module.returncode == 0 and script.returncode == 0, module.stderr + script.stderr
    assert module.stdout.startswith("usage: python3 -m imagepack.train "), module.stdout[:80]
    assert script.stdout.startswith("usage: train_imagepack.py "), script.stdout[:80]
    assert module.stdout.split("\n\n", 1)[1] == script.stdout.split("\n\n", 1)[1]  # the usage wraps apart


def test_a_named_recipe_is_found_from_any_directory(tmp_path):
    r = subprocess.run(MODULE + ["--recipe", "torchvision_resnet50", "--help"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(MODULE + ["--recipe", "no_such_recipe", "--data", "x", "--no-val"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 2 and "recipes: " in r.stderr and "torchvision_resnet50" in r.stderr, r.stderr


def test_installed_outside_a_checkout_a_named_recipe_is_refused_in_one_line(tmp_path):
    """The package copied where no trainer/recipes is above it (as pip
    installs it): --recipe NAME exits 2 saying so; a recipe file's path
    still works."""
    site = tmp_path / "site"
    shutil.copytree(os.path.dirname(imagepack.__file__), site / "imagepack",
                    ignore=shutil.ignore_patterns("__pycache__"))
    e = dict(os.environ, PYTHONPATH=str(site))
    r = subprocess.run(MODULE + ["--recipe", "torchvision_resnet50", "--data", "x", "--no-val"], capture_output=True,
                       text=True, cwd=tmp_path, env=e, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--recipe torchvision_resnet50: no recipe of that name" in lines[0], r.stderr
    assert str(site / "imagepack" / "train") in lines[0]
    flags = tmp_path / "mine.flags"
    flags.write_text("--lr 0.3\n")
    r = subprocess.run(MODULE + ["--recipe", str(flags), "--help"], capture_output=True, text=True, cwd=tmp_path,
                       env=e, timeout=120)
    assert r.returncode == 0, r.stderr


def test_the_continue_command_names_the_module_when_run_as_one(monkeypatch):
    monkeypatch.setattr(checkpoint, "run_as_module", lambda: True)
    monkeypatch.setattr(sys, "argv", ["/x/imagepack/train/__main__.py", "--data", "d"])
    for v in ("IMAGEPACK_LAUNCH_CMD", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_NTASKS"):
        monkeypatch.delenv(v, raising=False)
    assert checkpoint.continue_command("out dir", 1, 1) == (
        "%s -m imagepack.train --resume auto --output 'out dir'" % sys.executable, "")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "r")
    assert checkpoint.continue_command("o", 2, 2)[0] == "torchrun --nproc_per_node=2 -m imagepack.train " \
                                                         "--resume auto --output o"


def test_ctrl_c_under_the_module_says_the_module_command_that_continues_the_run(dbs):
    out = dbs["dir"] / "ctrl_c"
    rc, text = ctrl_c_after_the_first_steps(MODULE + [*SMALL, "--data", dbs["train"], "--val", dbs["val"],
                                                      "--epochs", "500", "--print-freq", "1", "--output", out], 90)
    assert rc == 130 and "Traceback" not in text, text
    m = re.search(r"interrupted \(Ctrl-C\): checkpoint at epoch (\d+), .* with:\n  (.*)\n", text)
    assert m and m.group(2) == "%s -m imagepack.train --resume auto --output %s" % (sys.executable, out), text
    rc, o, e = proc(MODULE + ["--resume", "auto", "--output", out, "--epochs", int(m.group(1)) + 1], timeout=180)
    assert rc == 0 and "resumed from" in o, o + e

