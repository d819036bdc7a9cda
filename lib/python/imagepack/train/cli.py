"""imagepack.train's command line: the option table's flags
(imagepack.options), --recipe's expanded, the options a resumed run does
not repeat taken from its checkpoint, and every option checked before any
work or output (checks.py): exit 2 for a usage error, 1 for an input or
output the environment cannot serve, in one line each."""
import argparse
import os
import sys

import torch

import imagepack
import imagepack.options

from . import checkpoint, checks
from . import recipe as train_recipe

# Options that belong to one invocation, never taken from a checkpoint.
PER_INVOCATION = ("resume", "evaluate", "stop_at_step", "overwrite", "resume_other_commit", "device")
# Options that define the saved model: a resumed run may not change them.
MODEL_DEFINING = ("arch", "task", "blurpool")
DESCRIPTION = "Train a model from imagepack databases with PyTorch: a recipe to copy."


def usage_error(text):
    """A usage error: one line, exit 2, before any work."""
    sys.stderr.write("train_imagepack: %s\n" % text)
    sys.exit(2)


def fail(text):
    """The environment cannot serve (a missing file, a folder that cannot be
    written): one line, exit 1."""
    sys.stderr.write("train_imagepack: %s\n" % text)
    sys.exit(1)


def make_parser():
    """The trainer's flags: the option table's rows for it (imagepack.options;
    the C++ trainer's `train` reads the same rows)."""
    prog = "python3 -m " + checkpoint.MODULE if checkpoint.run_as_module() else None  # not "__main__.py"
    p = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    imagepack.options.add_arguments(p, "script")
    return p


def given_options(parser, argv):
    """The dests of the options present on the command line."""
    given = set()
    for action in parser._actions:
        for s in action.option_strings:
            if any(w == s or (s.startswith("--") and w.startswith(s + "=")) for w in argv):
                given.add(action.dest)
    return given


def resume_path(parser, args):
    """The checkpoint to resume: --resume PATH, OUTPUT/checkpoint.pt for
    --resume auto when there is one, else ""."""
    path = args.resume
    if path == "auto":
        if not args.output:
            parser.error("--resume auto needs --output")
        path = os.path.join(args.output, "checkpoint.pt")
        path = path if os.path.exists(path) else ""
    return path


def load_checkpoint(path):
    """The checkpoint at `path`, its "path" set; exit 1 when it is none of
    this trainer's."""
    if not os.path.isfile(path):
        fail("--resume %s: no such checkpoint" % path)
    try:
        ckpt = torch.load(path, map_location="cpu")
        if not isinstance(ckpt, dict) or not {"args", "run", "model"} <= set(ckpt):
            raise ValueError("it holds no run")
    except Exception as e:  # a damaged file, or another program's
        fail("--resume %s: not a checkpoint of train_imagepack.py (%s)" % (path, str(e).splitlines()[0] if str(e)
                                                                         else type(e).__name__))
    ckpt["path"] = path
    return ckpt


def merge_checkpoint(args, ckpt, given):
    """The checkpoint's options for those not given; the notes of those
    given with another value (a model-defining one: refused)."""
    notes, path = [], ckpt["path"]
    for key, value in ckpt["args"].items():
        if key in PER_INVOCATION or not hasattr(args, key) or (key == "output" and args.evaluate):
            continue  # --evaluate writes in --output if given, else beside the checkpoint it reads
        if key not in given:
            setattr(args, key, value)
        elif getattr(args, key) != value:
            if key in MODEL_DEFINING:
                sys.exit("train_imagepack: --%s %s contradicts %s, whose model was trained with --%s %s: leave "
                         "--%s out to resume or evaluate it, or start a new run in another --output" % (
                             key, getattr(args, key), path, key, value, key))
            notes.append("--%s %s (the checkpoint's run: %s)" % (key.replace("_", "-"), getattr(args, key), value))
    for key in (k for k in MODEL_DEFINING if k != "arch" and k != "task"):
        if key in given and key not in ckpt["args"] and getattr(args, key):
            sys.exit("train_imagepack: --%s contradicts %s, whose model was trained without it" % (key, path))
    return notes


def parse(argv):
    """(args, checkpoint or None, notes): the options, with those not given
    taken from the checkpoint being resumed, every one checked (exit 2 for
    a usage error, 1 for an input or output the environment cannot serve)
    before anything is done or written."""
    parser = make_parser()
    argv = train_recipe.expand(parser, list(argv), usage_error, fail)
    args = parser.parse_args(argv)
    # Each value against its row of the option table, as the C++ trainer
    # checks it (torchvision's size names before they become ours).
    problem = imagepack.options.problem(args, "script", skip=("epochs",) if args.evaluate else ())
    if problem:
        usage_error(problem)
    given = given_options(parser, argv)
    problem = train_recipe.resolve_aliases(args, given)
    if problem:
        usage_error(problem)
    if args.overwrite and args.resume == "auto":
        usage_error("--overwrite starts the run in --output again, --resume auto continues it: give one")
    if args.overwrite and args.evaluate:
        usage_error("--overwrite: --evaluate writes no run (its rows go to evaluations.jsonl)")
    path = resume_path(parser, args)
    ckpt, notes = (load_checkpoint(path), None) if path else (None, [])
    if ckpt:
        notes = merge_checkpoint(args, ckpt, given)
    if isinstance(args.data, str):  # a checkpoint of a version with one --data
        args.data = [args.data]
    if args.evaluate and not ckpt:
        parser.error("--evaluate needs --resume CHECKPOINT")
    if args.evaluate and not args.val:
        parser.error("--evaluate needs --val")
    if not args.evaluate and (not args.data or not (args.val or args.no_val)):
        parser.error("--data and --val (or --no-val) are required")
    problem = checks.usage_problem(args)
    if problem:
        usage_error(problem)
    refused = checks.refused_output(args, path)
    if refused:
        usage_error(refused)
    problem = checks.missing_input(args) or checks.unwritable_output(args, path)
    if problem:
        fail(problem)
    return args, ckpt, notes
