"""The checks of imagepack.train's options that join several values, of
its inputs and of its --output, each answering the first problem as one
line ("" if none): done before any work or output (cli.parse)."""
import os

import torch

import imagepack

from . import recipe as train_recipe
from .models import OWN_MODELS, torchvision_models

# The files that make an --output hold a run (the C++ trainer's three and
# this trainer's final weights), and what --overwrite removes before the new
# run starts: those, --evaluate's rows and the C++ trainer's predictions.
RUN_FILES = ("checkpoint.pt", "model_best.pt", "metrics.jsonl", "model.pt", "evaluations.jsonl")
OVERWRITTEN = RUN_FILES + ("predictions_input.npy", "predictions_output.npy",
                           "predictions_target.npy")


def shares(option, text, datasets):
    """--weights / --repeat / --choose as numbers, one per --data; a usage
    problem as a string."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        return None, "--%s %s: not a list of numbers" % (option, text)
    if any(not v >= 0 for v in values):
        return None, "--%s %s: the numbers must be 0 or more" % (option, text)
    if len(values) != datasets:
        return None, "--%s %s has %d values for %d --data: one per dataset" % (option, text, len(values), datasets)
    return values, ""


def usage_problem(args):
    """The first problem with the options' values, "" if none (the C++
    trainer's checks, trainer/run_checks.cc, where the options are alike)
    that join several values; each value alone was checked against its row
    of the option table as parsed."""
    arch = args.arch
    if arch and arch not in OWN_MODELS and arch not in torchvision_models():
        return "unknown --arch '%s' (small_cnn, fcn_small, unet_small or a torchvision classification model such " \
               "as resnet18, resnet50)" % arch
    if arch and args.task not in OWN_MODELS.get(arch, ("classification",)):
        return "--arch %s is not a %s model (%s)" % (arch, args.task, ", ".join(
            a for a, tasks in OWN_MODELS.items() if args.task in tasks))
    if args.device == "cuda" and not torch.cuda.is_available():
        return "--device cuda: no CUDA device is available to this torch (torch.cuda.is_available() is False); " \
               "use --device cpu"
    if args.res_schedule:
        try:
            imagepack._schedule(args.res_schedule)
        except (ValueError, TypeError) as e:
            return "--res-schedule %s: %s" % (args.res_schedule, e)
    if args.blurpool and not (arch or "resnet18").startswith("resnet"):
        return "--blurpool: for the ResNets"
    if args.data and not args.evaluate:
        for option in ("weights", "repeat", "choose"):
            if getattr(args, option):
                _, problem = shares(option, getattr(args, option), len(args.data))
                if problem:
                    return problem
        if args.weights and (args.repeat or args.choose):
            return "--weights (relative shares) or --repeat/--choose (absolute counts), not both"
    return train_recipe.usage_problem(args)


def run_files_in(output):
    return [n for n in RUN_FILES if os.path.exists(os.path.join(output, n))]


def refused_output(args, resume_path):
    """Why a new run may not start in --output, "" if it may: a run there
    is never overwritten unless --overwrite asks (docs/USAGE.md)."""
    if args.evaluate or args.overwrite or not args.output:
        return ""
    files = run_files_in(args.output)
    if not files:
        return ""
    own = os.path.join(args.output, "checkpoint.pt")
    if resume_path and os.path.exists(own) and os.path.samefile(resume_path, own):
        return ""
    held = "--output %s holds a run (%s)" % (args.output, ", ".join(files))
    if args.resume == "auto":
        return held + " but no checkpoint.pt to continue from: --overwrite starts it again (its files are " \
                      "removed), or give another --output"
    if resume_path:
        return held + ", and --resume %s is another run's checkpoint: give a new --output for the run that starts " \
                      "from it, or --overwrite to replace the run in %s" % (resume_path, args.output)
    return held + ": --resume auto continues it, --overwrite starts it again (its files are removed), or give " \
                  "another --output"


def is_local(path):
    """Whether `path` names a local file (the storage's answer, as the
    package's own checks ask it; remote ones are the loader's to find)."""
    return imagepack._imagepack.is_local(path)


def missing_input(args):
    """The first input that is not there, "" if all are (remote ones are
    the loader's to find)."""
    inputs = [("data", p) for d in (args.data or []) if not args.evaluate for p in d.split(",")]
    inputs += [("val", p) for p in (args.val.split(",") if args.val else [])]
    for option, p in inputs:
        if not p:
            return "--%s %s: an empty path" % (option, ",".join(args.data) if option == "data" else args.val)
        if is_local(p) and not imagepack._imagepack.is_file_pattern(p) and not os.path.exists(p):
            return "--%s %s: no such database" % (option, p)
    if args.classes and not os.path.isfile(args.classes):
        return "--classes %s: no such file" % args.classes
    if args.val and args.data and not args.evaluate and not args.no_val:  # the C++ trainer's rule
        data = [p for d in args.data for p in d.split(",")]
        shared = imagepack._imagepack.shared_files(data, args.split or "", args.val.split(","), args.val_split or "")
        if shared:
            return "--val %s: %s" % (args.val, shared)
    return ""


def rows_path(args, resume_path):
    """Where the run's rows go: OUTPUT/metrics.jsonl; --evaluate's to
    evaluations.jsonl in --output, else beside the checkpoint."""
    if args.evaluate:
        return os.path.join(args.output or os.path.dirname(resume_path) or ".", "evaluations.jsonl")
    return os.path.join(args.output, "metrics.jsonl") if args.output else ""


def unwritable_output(args, resume_path):
    """Why the folder of the run's rows cannot be made or written, "" if it
    can: found before any work, nothing left behind by the check."""
    rows = rows_path(args, resume_path)
    if not rows:
        return ""
    folder = os.path.dirname(rows) or "."
    existing = folder
    while not os.path.exists(existing) and os.path.dirname(os.path.abspath(existing)) != os.path.abspath(existing):
        existing = os.path.dirname(os.path.abspath(existing))
    if not os.path.isdir(existing):
        return "cannot write %s: %s is not a folder" % (folder, existing)
    # A folder made and removed again: permissions (root's too), read-only
    # mounts and full inode tables answer as the run's own writes would.
    probe = os.path.join(existing, ".ipk-write-probe.%d" % os.getpid())
    try:
        os.mkdir(probe, 0o700)
        os.rmdir(probe)
    except OSError as e:
        return "cannot write %s: %s: %s" % (folder, existing, e.strerror)
    return ""
