#!/usr/bin/python3
"""Train a model from imagepack databases with PyTorch: a recipe to copy.

    scripts/launch.sh --nproc 2 -- scripts/train_imagepack.py \\
        --data train.lmdb --val val.lmdb --arch resnet50 --epochs 90 --batch-size 64 --output runs/r50

One process per rank (scripts/launch.sh, torchrun or srun set the
variables: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, or Slurm's);
DistributedDataParallel over Gloo on CPU, NCCL on CUDA. Input:
imagepack.Loader, decoding and augmenting in C++ threads (no DataLoader
worker processes); uint8 batches are normalised on the device.

The C++ trainer's recipe and options (build/trainer/train, docs/TRAINING.md),
so the two can be compared: SGD with momentum (--nesterov), step, cosine or
onecycle schedules with linear warm-up, --lr-scale-batch, --label-smoothing,
--no-bn-wd, --zero-init-residual; --amp (bf16 autocast on a CPU with native
bf16, fp32 with a notice on others; fp16 with a GradScaler on CUDA).

The data contract is the C++ trainer's: the classes, channels and
normalisation come from --data; the validation set's classes are matched to
them by name or refused naming the first that differs; with no statistics in
the training data the input is normalised with 0.5 / 0.25, and the log says
which.

Checkpoints (OUTPUT/checkpoint.pt, written atomically at each epoch's end,
every --checkpoint-every steps, on SIGTERM/SIGUSR1, which then exit 75, and
on Ctrl-C, which then exits 130 saying where the checkpoint is; a second
signal stops at once, leaving the last complete checkpoint) describe
themselves: --resume auto (or a path) continues mid-epoch with exactly the
uninterrupted run's batches and needs no option repeated; an option given
again with another value is used and said, except --arch and --task
(refused). --evaluate --resume CKPT --val DB needs nothing else; its row
goes to evaluations.jsonl (in --output, else beside the checkpoint).

Nothing is overwritten without being asked: a new run into an --output that
holds one is refused (exit 2) naming --resume auto (continue it) and
--overwrite (start it again, removing its files). Every option is checked
before any work or output: exit 2 for a usage error, 1 for an environment
that cannot serve (a missing database, an --output that cannot be written),
in one line each.

Recipes (docs/TRAINING.md, "Recipes"): --data given several times mixes
datasets (--weights 0.7,0.3, or --repeat / --choose per dataset; a comma
inside one --data still names shards of one dataset); --res-schedule
MIN,MAX,START_RAMP,END_RAMP is FFCV's progressive resolution, --val-size and
--val-resize evaluate at a size of their own (FixRes), --schedule triangular
is FFCV's lr, --blurpool blurs before the ResNets' strided convolutions.
Each epoch's row in metrics.jsonl holds its resolution (res) and each
source's samples (sources).

torchvision's reference flags (references/classification/train.py, as the
C++ trainer takes them; scripts/train_recipe.py): --auto-augment,
--ra-magnitude, --augmix-severity, --random-erase, --interpolation (the
Loader's augmentations), --mixup-alpha / --cutmix-alpha, --model-ema (its
accuracy beside the model's), --lr-warmup-epochs / -method / -decay (the
per-epoch SequentialLR), --norm-weight-decay, --clip-grad-norm,
--train-crop-size / --val-resize-size / --val-crop-size (--size /
--val-resize / --val-size), --tta-flip. --recipe NAME|FILE reads flags
from trainer/recipes/NAME.flags or FILE, one per line; the command line's
win.

--arch: any torchvision.models name (resnet18, resnet50, ...) or small_cnn
(the C++ trainer's small network, for 28-px images such as Fashion-MNIST).
Small images (small_cnn, or --size <= 64) use pad-and-crop augmentation,
larger ones RandomResizedCrop + flip and the resize + centre-crop eval.
--task segmentation (a mask field) and --task restoration (a target image
field) train the C++ trainer's dense models (scripts/dense_models.py:
fcn_small, unet_small) on the loader's dict batches, reporting mIoU / PSNR.
"""
import argparse
import gc
import hashlib
import json
import math
import os
import shlex
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import imagepack
import imagepack.options

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dense_models  # noqa: E402
import train_recipe  # noqa: E402

EXIT_PREEMPTED = 75
EXIT_INTERRUPTED = 130  # Ctrl-C, as every tool
# Options that belong to one invocation, never taken from a checkpoint.
PER_INVOCATION = ("resume", "evaluate", "stop_at_step", "overwrite", "device")
# Options that define the saved model: a resumed run may not change them.
MODEL_DEFINING = ("arch", "task", "blurpool")
# The files that make an --output hold a run (the C++ trainer's three and
# this script's final weights), and what --overwrite removes before the new
# run starts: those, --evaluate's rows and the C++ trainer's predictions.
RUN_FILES = ("checkpoint.pt", "model_best.pt", "metrics.jsonl", "model.pt", "evaluations.jsonl")
OVERWRITTEN = RUN_FILES + ("predictions_input.npy", "predictions_output.npy",
                           "predictions_target.npy")
# The models defined here, by the tasks they serve; --arch may also be any
# torchvision classification model.
OWN_MODELS = {"small_cnn": ("classification",), "fcn_small": ("segmentation", "restoration"),
              "unet_small": ("segmentation", "restoration")}
# The temporary of the checkpoint being written, for the signal handler.
SAVING = {"tmp": None}


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
    """The script's flags: the option table's rows for it (imagepack.options;
    the C++ trainer's `train` reads the same rows)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
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
    path = args.resume
    if path == "auto":
        if not args.output:
            parser.error("--resume auto needs --output")
        path = os.path.join(args.output, "checkpoint.pt")
        path = path if os.path.exists(path) else ""
    ckpt, notes = None, []
    if path:
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
    if isinstance(args.data, str):  # a checkpoint of a version with one --data
        args.data = [args.data]
    for key in (k for k in MODEL_DEFINING if k != "arch" and k != "task"):
        if ckpt and key in given and key not in ckpt["args"] and getattr(args, key):
            sys.exit("train_imagepack: --%s contradicts %s, whose model was trained without it" % (key, path))
    if args.evaluate and not ckpt:
        parser.error("--evaluate needs --resume CHECKPOINT")
    if args.evaluate and not args.val:
        parser.error("--evaluate needs --val")
    if not args.evaluate and (not args.data or not (args.val or args.no_val)):
        parser.error("--data and --val (or --no-val) are required")
    problem = usage_problem(args)
    if problem:
        usage_error(problem)
    refused = refused_output(args, path)
    if refused:
        usage_error(refused)
    problem = missing_input(args) or unwritable_output(args, path)
    if problem:
        fail(problem)
    return args, ckpt, notes


def torchvision_models():
    import torchvision
    try:
        return set(torchvision.models.list_models(module=torchvision.models))
    except AttributeError:  # torchvision before 0.14: its public builders
        return {n for n in dir(torchvision.models) if n[0].islower() and callable(getattr(torchvision.models, n))}


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
    try:
        return imagepack._imagepack.is_local(path)
    except AttributeError:
        return "://" not in path


def missing_input(args):
    """The first input that is not there, "" if all are (remote ones are
    the loader's to find)."""
    inputs = [("data", p) for d in (args.data or []) if not args.evaluate for p in d.split(",")]
    inputs += [("val", p) for p in (args.val.split(",") if args.val else [])]
    for option, p in inputs:
        if not p:
            return "--%s %s: an empty path" % (option, ",".join(args.data) if option == "data" else args.val)
        if is_local(p) and not os.path.exists(p):
            return "--%s %s: no such database" % (option, p)
    if args.classes and not os.path.isfile(args.classes):
        return "--classes %s: no such file" % args.classes
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


def cpu_has_native_bf16():
    """x86 AVX512-BF16 or AMX-BF16 (IMAGEPACK_CPU_BF16=0/1 overrides), as the C++ trainer decides."""
    forced = os.environ.get("IMAGEPACK_CPU_BF16", "")
    if forced:
        return forced != "0"
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def learning_rate(args, base_lr, progress):
    """The C++ trainer's schedules (trainer/schedule.h) at `progress` epochs."""
    t, w, total = progress, args.warmup_epochs, args.epochs
    if args.schedule == "triangular":  # FFCV's: np.interp(t, [0, peak, total], [lr / 1e4, lr, 0])
        peak, start = min(max(0.0, args.lr_peak_epoch), total), base_lr * 1e-4
        if t <= 0:
            return start
        if t < peak:
            return start + (base_lr - start) * t / peak
        return 0.0 if t >= total else base_lr * (total - t) / max(1e-9, total - peak)
    if args.schedule != "onecycle" and w > 0 and t < w:
        return base_lr * (t + 1e-3) / w
    if args.schedule == "cosine":
        f = min(1.0, max(0.0, (t - w) / max(1e-9, total - w)))
        return base_lr * 0.5 * (1 + math.cos(math.pi * f))
    if args.schedule == "onecycle":
        up, start, end = 0.3 * total, base_lr / 25.0, base_lr / 1e4
        if t < up:
            return start + (base_lr - start) * 0.5 * (1 - math.cos(math.pi * t / max(up, 1e-9)))
        f = min(1.0, (t - up) / max(1e-9, total - up))
        return end + (base_lr - end) * 0.5 * (1 + math.cos(math.pi * f))
    return base_lr * 0.1 ** math.floor(t / args.step_size)


def small_cnn(in_channels, num_classes):
    """The C++ trainer's small_cnn (trainer/models.cc), layer for layer."""
    def block(i, o):
        return [nn.Conv2d(i, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]
    return nn.Sequential(*block(in_channels, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2),
                         *block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_classes))


class Blur(nn.Module):
    """BlurPool's fixed low-pass, [1 2 1]^T [1 2 1] / 16 per channel, stride 1."""

    def __init__(self, channels):
        super().__init__()
        k = torch.tensor([1.0, 2.0, 1.0])
        self.register_buffer("blur", (k.view(3, 1) * k.view(1, 3) / 16).expand(channels, 1, 3, 3).contiguous())
        self.channels = channels

    def forward(self, x):
        return F.conv2d(x, self.blur.to(x.dtype), padding=1, groups=self.channels)


def add_blurpool(module):
    """Each strided convolution of at least 16 input channels blurred first (FFCV's rule)."""
    for name, child in module.named_children():
        if isinstance(child, nn.Conv2d) and max(child.stride) > 1 and child.in_channels >= 16:
            setattr(module, name, nn.Sequential(Blur(child.in_channels), child))
        else:
            add_blurpool(child)


def make_model(arch, in_channels, outputs, zero_init_residual, blurpool=False):
    if arch == "small_cnn":
        return small_cnn(in_channels, outputs)
    if arch == "fcn_small":
        return dense_models.fcn_small(in_channels, outputs)
    if arch == "unet_small":
        return dense_models.unet_small(in_channels, outputs)
    import torchvision
    kwargs = {"zero_init_residual": True} if zero_init_residual and arch.startswith(("resnet", "resnext", "wide")) else {}
    model = getattr(torchvision.models, arch)(num_classes=outputs, **kwargs)
    if in_channels != 3:  # gray input: the first convolution takes 1 channel
        conv = model.conv1
        model.conv1 = nn.Conv2d(in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                                bias=conv.bias is not None)
    if blurpool:
        add_blurpool(model)
    return model


class Classification:
    default_arch = "resnet18"

    def __init__(self, meta, args, normalise):
        self.classes = list(meta["classes"])
        if not self.classes:
            sys.exit("train_imagepack: classification needs training data with classes")
        self.outputs, self.normalise, self.smoothing = len(self.classes), normalise, args.label_smoothing

    def match_eval(self, val):  # the Loader maps the labels (classes=); nothing more to do
        return ""

    def prepare(self, batch, device, eval_batch=False):
        images, labels = batch
        return self.normalise(images), labels.to(device, non_blocking=True)

    def loss(self, out, y, training=True):
        return F.cross_entropy(out, y, label_smoothing=self.smoothing if training else 0.0)

    def tally(self, out, x, y):
        top = out.topk(min(5, out.size(1)), 1).indices
        hit = top.eq(y.view(-1, 1))
        return torch.tensor([hit[:, :1].sum().item(), hit.sum().item(), len(y)], dtype=torch.float64)

    def figures(self, t):
        return {"acc1": 100 * t[0].item() / t[2].item(), "acc5": 100 * t[1].item() / t[2].item()}

    def line(self, f):
        return "Acc@1 %.3f  Acc@5 %.3f" % (f["acc1"], f["acc5"])

    def score(self, f):
        return f["acc1"]

    def result(self, f):
        return "test accuracy %.2f%%" % f["acc1"]

    def step_figures(self, out, x, y):  # a logged step's row (the C++ trainer's keys)
        t = self.tally(out.detach(), x, y)
        return {"error1": 100 - 100 * t[0].item() / t[2].item(), "error5": 100 - 100 * t[1].item() / t[2].item()}


class Segmentation:
    default_arch = "fcn_small"

    def __init__(self, meta, args, normalise):
        field = next((f for f in meta.get("fields", []) if f["kind"] == "mask"), None)
        if field is None:
            sys.exit("train_imagepack: --task segmentation needs training data with a mask field")
        self.field, self.eval_field = field["name"], field["name"]
        self.names, self.ignore = list(field["classes"]), field.get("ignore", -1)
        self.outputs, self.normalise, self.lut = len(self.names), normalise, None

    def match_eval(self, val):
        """The validation mask's classes matched to the training data's by
        name; its values then mapped (values of no training class ignored)."""
        field = next((f for f in val.fields if f["kind"] == "mask"), None)
        if field is None:
            sys.exit("train_imagepack: %s has no mask field; the training data has '%s'" % (
                ",".join(val._paths), self.field))
        m = imagepack.match_classes(self.names, field["classes"], what="mask classes")
        self.eval_field = field["name"]
        if not m.identity or field.get("ignore", -1) != self.ignore:
            fill = self.ignore if self.ignore >= 0 else -100
            lut = torch.full((65536 if field.get("dtype") == "uint16" else 256,), fill, dtype=torch.long)
            lut[:len(m.to_train)] = torch.tensor(m.to_train, dtype=torch.long)
            self.lut = lut
        return "mask '%s': %s" % (field["name"], m)

    def prepare(self, b, device, eval_batch=False):
        y = b[self.eval_field if eval_batch else self.field].long()
        if eval_batch and self.lut is not None:
            y = self.lut[y]
        return self.normalise(b["image"]), y.to(device)

    def loss(self, out, y, training=True):
        return F.cross_entropy(out, y, ignore_index=self.ignore if self.ignore >= 0 else -100)

    def tally(self, out, x, y):
        c = dense_models.Confusion(self.outputs)
        c.add(out, y)
        return c.m

    def figures(self, t):
        c = dense_models.Confusion(self.outputs)
        c.m = t
        return c.figures()

    def line(self, f):
        return "mIoU %.3f  PixAcc %.3f" % (f["miou"], f["pixel_acc"])

    def score(self, f):
        return f["miou"]

    def result(self, f):
        return "test mIoU %.2f%%" % f["miou"]

    def step_figures(self, out, x, y):
        return {}


class Restoration:
    default_arch = "unet_small"

    def __init__(self, meta, args, normalise):
        field = next((f for f in meta.get("fields", []) if f["kind"] == "image"), None)
        if field is None:
            sys.exit("train_imagepack: --task restoration needs training data with a target image field")
        self.field = self.eval_field = field["name"]
        self.outputs = None  # the input's channels

    def match_eval(self, val):
        field = next((f for f in val.fields if f["kind"] == "image"), None)
        if field is None:
            sys.exit("train_imagepack: %s has no target image field" % ",".join(val._paths))
        self.eval_field = field["name"]
        return "target image '%s'" % field["name"]

    def prepare(self, b, device, eval_batch=False):
        def scaled(t):
            return t.to(device).float().div_(127.5).sub_(1)
        return scaled(b["image"]), scaled(b[self.eval_field if eval_batch else self.field])

    def loss(self, out, y, training=True):
        return F.l1_loss(out, y)

    def tally(self, out, x, y):
        return torch.tensor([dense_models.psnr_sum(out, y), dense_models.psnr_sum(x, y), len(x)],
                            dtype=torch.float64)

    def figures(self, t):
        psnr, psnr_in = t[0].item() / t[2].item(), t[1].item() / t[2].item()
        return {"psnr": psnr, "psnr_input": psnr_in, "psnr_gain": psnr - psnr_in}

    def line(self, f):
        return "PSNR %.3f  Input %.3f  Gain %.3f" % (f["psnr"], f["psnr_input"], f["psnr_gain"])

    def score(self, f):
        return f["psnr"]

    def result(self, f):
        return "test PSNR %.2f dB (input %.2f dB, gain %+.2f dB)" % (f["psnr"], f["psnr_input"], f["psnr_gain"])

    def step_figures(self, out, x, y):
        t = self.tally(out.detach(), x, y)
        return {"psnr": t[0].item() / t[2].item(), "psnr_gain": (t[0].item() - t[1].item()) / t[2].item()}


TASKS = {"classification": Classification, "segmentation": Segmentation, "restoration": Restoration}
LOADER_THREADS = 0  # the loader's share of this process's cores (setup_process)


def setup_process(args):
    """(rank, world, local_world, device) after joining the process group."""
    rank, world, local_world, _ = imagepack.distributed_env()
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", 0)))
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        if "MASTER_ADDR" not in os.environ:
            sys.exit("train_imagepack: MASTER_ADDR must be set for %d processes" % world)
        dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", rank=rank, world_size=world)
    # This process's share of the cores, split between torch's threads and
    # the loader's as the C++ trainer splits them (both at the share
    # oversubscribed a 2-core machine several times over): --loader-threads
    # and --threads (one given, the other takes what is left), else a
    # quarter for the loader on a CPU (the model is the work) and one torch
    # thread on a GPU.
    global LOADER_THREADS
    share = max(1, (os.cpu_count() or 1) // local_world)
    if args.loader_threads or args.threads:  # one given: the other takes what is left
        LOADER_THREADS = args.loader_threads or max(1, share - args.threads)
        torch.set_num_threads(args.threads or max(1, share - LOADER_THREADS))
    else:
        LOADER_THREADS = max(1, share - 1) if cuda else max(1, share // 4)
        torch.set_num_threads(1 if cuda else max(1, share - LOADER_THREADS))
    torch.manual_seed(args.seed)
    return rank, world, local_world, device


def program_words():
    """The words that started this script, as run: the interpreter with its
    options and the script ("python3 scripts/train_imagepack.py", from
    /proc/self/cmdline), else sys.executable and the script."""
    tail = sys.argv[1:]
    try:
        with open("/proc/self/cmdline", "rb") as f:
            words = [w.decode(errors="surrogateescape") for w in f.read().split(b"\0")[:-1]]
        head = words[:len(words) - len(tail)]
        if words[len(head):] == tail and head and head[-1] == sys.argv[0]:
            return head
    except OSError:
        pass
    return [sys.executable, sys.argv[0]]


def continue_command(output, world, local_world):
    """(command, note): the shell command that continues the run in
    `output` as it was started, its launcher and process count included (a
    run resumed on another number of processes takes another global batch
    and ends with other weights); note: "" or what else to do. The C++
    trainer's rules (trainer/continue_command.cc): scripts/launch.sh's
    words as run ($IMAGEPACK_LAUNCH_CMD), else torchrun's or srun's with the
    world size and ranks per node, else the script alone."""
    resume = " --resume auto --output " + shlex.quote(output)
    program = " ".join(shlex.quote(w) for w in program_words())
    local = local_world if local_world > 0 else world
    nodes = world // local if world % local == 0 else 0  # 0: ranks per node differ
    launch = os.environ.get("IMAGEPACK_LAUNCH_CMD", "")
    if launch:
        return launch + " " + program + resume, (
            "" if nodes == 1 else "on each of the %snodes, with its own --node-rank" % ("%d " % nodes if nodes else ""))
    if os.environ.get("WORLD_SIZE") and os.environ.get("TORCHELASTIC_RUN_ID"):  # torchrun runs the script itself
        return ("torchrun%s --nproc_per_node=%d %s%s" % (" --nnodes=%d" % nodes if nodes > 1 else "", local,
                                                         shlex.quote(sys.argv[0]), resume),
                "" if nodes == 1 else "on each node, with its --node_rank and the rendezvous options it was started "
                                      "with")
    if not os.environ.get("WORLD_SIZE") and os.environ.get("SLURM_NTASKS"):
        return ("srun%s --ntasks=%d %s%s" % (" --nodes=%d" % nodes if nodes > 1 else "", world, program, resume),
                "in an allocation of %d task(s), as the run had" % world)
    return program + resume, ("" if world == 1 else
                              "in each of the %d processes, started as before (RANK, WORLD_SIZE, LOCAL_RANK, "
                              "LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set as for the interrupted run)" % world)


def another_global_batch(ckpt, args, world, resume_path):
    """A line saying that this resume runs on another world size or batch
    per rank than the checkpoint's run, naming both, what it changes and
    what continues the run as it ran; None when both are the same."""
    state = ckpt.get("loader", {})
    was_world = int(ckpt.get("world_size", state.get("world_size", world)))
    was_batch = int(ckpt.get("batch_size", state.get("batch_size", args.batch_size)))
    if (was_world, was_batch) == (world, args.batch_size):
        return None
    was, now = was_world * was_batch, world * args.batch_size
    line = "=> warning: %s was saved by %d process(es) x batch %d = global batch %d; this run has %d x %d = %d. " % (
        resume_path, was_world, was_batch, was, world, args.batch_size, now)
    if was != now:
        line += ("Each step now takes %d samples instead of %d: the steps per epoch and the learning rate per sample "
                 "change%s, and the run ends with other weights than if continued as it ran" % (
                     now, was, " (--lr-scale-batch scales the learning rate to the new global batch)"
                     if args.lr_scale_batch else ""))
    else:
        line += ("The same samples per step, summed over %d process(es) instead of %d: the weights differ from those "
                 "of the run continued as it ran by rounding" % (world, was_world))
    if int(state.get("position", 0)) > 0:
        line += "; the rest of epoch %d goes to the %d process(es), every sample once" % (int(state["epoch"]), world)
    again = " ".join(shlex.quote(w) for w in program_words()) + (
        " --batch-size %d" % was_batch if was_batch != args.batch_size else "") + " --resume %s%s" % (
        "auto" if args.resume == "auto" else shlex.quote(resume_path),
        " --output " + shlex.quote(args.output) if args.output else "")
    return line + ". To continue it as it ran: " + (
        "%d processes, e.g. scripts/launch.sh --nproc %d -- %s" % (was_world, was_world, again) if was_world > 1
        else "one process, " + again)


def save_atomically(obj, path):
    """torch.save to a temporary beside `path`, fsync, rename, fsync the
    folder: `path` is the previous or the new file, whatever stops the
    process; a second signal during the save removes the temporary (SAVING)."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    SAVING["tmp"] = tmp
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        SAVING["tmp"] = None
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def weights_digest(model):
    h = hashlib.sha256()
    for t in list(model.state_dict().values()):
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def data_sources(args):
    """--data as imagepack.Loader takes it: (one dataset's shards, {}) or
    (a list of datasets, {weights= / repeat= / choose=}), and the given classes."""
    datasets = [d.split(",") for d in args.data]
    kw = {}
    for option in ("weights", "repeat", "choose"):
        text = getattr(args, option)
        if not text:
            continue
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            sys.exit("train_imagepack: --%s %s: not a list of numbers" % (option, text))
        kw[option] = values if option == "weights" else [None if v == 0 else v for v in values]
        if option == "choose":
            kw[option] = [None if v is None else int(v) for v in kw[option]]
    if args.classes:
        with open(args.classes) as f:
            kw["classes"] = [line.rstrip("\n") for line in f if line.strip()]
    if len(datasets) == 1 and not any(k in kw for k in ("weights", "repeat", "choose")):
        return datasets[0], kw
    return datasets, kw


def stop_at_once(sig, frame):
    """Before training starts (nothing to save yet) and during --evaluate
    (nothing written until its end): a signal ends the process at once."""
    os._exit(128 + sig)


def main(argv=None):
    signal.signal(signal.SIGINT, stop_at_once)  # no traceback from a Ctrl-C during the set-up
    args, ckpt, notes = parse(sys.argv[1:] if argv is None else argv)
    rank, world, local_world, device = setup_process(args)
    log = print if rank == 0 else (lambda *a, **k: None)
    for n in notes:
        log("=> %s: the option given is used" % n)
    cuda = device.type == "cuda"

    # The training data defines the classes, channels and normalisation (a
    # checkpoint keeps those it was trained with).
    saved = ckpt["run"] if ckpt else None
    if args.data:
        train_data, mix_kw = data_sources(args)
        # The data's metadata (a mix's: its classes, statistics pooled by share).
        try:
            meta = imagepack.Loader(train_data, batch_size=1, size=8, threads=1, as_torch=False, rank=0, world_size=1,
                                    **mix_kw).meta
        except Exception as e:  # not a database, damaged, unreachable: one line
            fail("--data %s: %s" % (" + ".join(args.data), e))
        if saved and list(saved["meta"]["classes"]) != list(meta["classes"]):
            sys.exit("train_imagepack: %s was trained on the classes of %s, and --data %s has others: resume with "
                     "that data, or start a new run in another --output" % (ckpt["path"], saved["data"], " + ".join(args.data)))
    else:
        meta = saved["meta"]
    channels = saved["channels"] if saved else meta["channels"]
    if saved:
        mean, std, source = saved["mean"], saved["std"], saved["normalisation"]
    elif len(meta.get("mean", [])) == channels:
        mean, std, source = meta["mean"], meta["std"], "the training data's statistics"
    else:
        mean, std = [0.5] * channels, [0.25] * channels
        source = "mean 0.5, std 0.25 (the training data holds no statistics: packed with --stats-sample 0)"
    mean_t = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1).mul(255).to(device)
    std_t = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1).mul(255).clamp_min(1e-3).to(device)

    def normalise(images):  # uint8 NCHW -> normalised float on the device
        return images.to(device, non_blocking=cuda).float().sub_(mean_t).div_(std_t)

    task = TASKS[args.task](meta, args, normalise)
    arch = args.arch or task.default_arch
    outputs = task.outputs or channels
    if args.task != "restoration":
        log("=> normalising the input with %s: mean %s, std %s" % (
            source, ", ".join("%.4f" % m for m in mean), ", ".join("%.4f" % s for s in std)))

    amp_dtype = torch.float16 if cuda else torch.bfloat16
    amp = bool(args.amp)
    if amp and not cuda and args.amp == "auto" and not cpu_has_native_bf16():
        amp = False
        log("=> --amp: this CPU has no native bf16 (AVX512-BF16 or AMX-BF16), where bf16 autocast runs several "
            "times slower than fp32: training in fp32 (--amp=bf16 forces bf16)")

    small = arch == "small_cnn" or (args.task == "classification" and 0 < args.size <= 64)
    size = args.size or (28 if arch == "small_cnn" else 96 if args.task != "classification" else 224)
    val_size = args.val_size or size
    common = dict(batch_size=args.batch_size, in_ram=args.in_ram, seed=args.seed, threads=LOADER_THREADS,
                  channels=channels)
    # --res-schedule: the loader sets each epoch's size; pad-crop (small
    # images) keeps its crop at --size and resizes it.
    sized = dict(size=None, size_schedule=args.res_schedule) if args.res_schedule else dict(size=size)
    crop = dict(crop_size=size) if args.res_schedule or args.val_size else {}
    resize = dict(eval_resize=args.val_resize) if args.val_resize else {}
    if args.task == "segmentation":  # crops of at least a third; the whole image for evaluation
        train_kw = dict(transform="train", scale=(0.35, 1.0))
        val_kw = dict(transform="eval", eval_resize=args.val_resize or val_size)
    elif args.task == "restoration":  # crops at the stored scale, both flips; the centre crop
        train_kw, val_kw = dict(transform="pad_crop", pad=0, vflip=True), dict(transform="pad_crop_eval")
    elif small:
        train_kw, val_kw = dict(transform="pad_crop", pad=2, **crop), dict(transform="pad_crop_eval", **crop)
    else:
        train_kw, val_kw = dict(transform="train"), dict(transform="eval", **resize)
    if args.task == "classification":  # torchvision's per-sample augmentations; the eval resize's filter
        train_kw.update(train_recipe.loader_options(args, mean))
        val_kw["interpolation"] = args.interpolation
    train = None
    if not args.evaluate:
        try:
            train = imagepack.Loader(train_data, order=args.order, **sized, **common, **train_kw, **mix_kw)
        except Exception as e:
            fail("--data %s: %s" % (" + ".join(args.data), e))
    val = None
    if args.val:
        if args.task == "classification":  # the training data's classes, matched by name
            val_kw["classes"] = train if train is not None else meta["classes"]
        try:
            val = imagepack.Loader(args.val.split(","), size=val_size, **common, **val_kw)
        except ValueError as e:  # classes that do not match: the message names them
            sys.exit("train_imagepack: %s" % e)
        except Exception as e:
            fail("--val %s: %s" % (args.val, e))
        val_kw = None  # the loaders are released at the end (finish)
        matched = task.match_eval(val)
        if args.task == "classification":
            matched = str(imagepack.match_classes(meta["classes"], imagepack.open(args.val.split(",")).classes))
        log("=> validation %s: %d samples, %s" % (args.val, val.dataset_size, matched))

    model = make_model(arch, channels, outputs, args.zero_init_residual, args.blurpool).to(device)
    groups = train_recipe.param_groups(model, args.wd, args.norm_weight_decay, args.no_bn_wd)
    base_lr = args.lr * args.batch_size * world / 256 if args.lr_scale_batch else args.lr
    optimizer = torch.optim.SGD(groups, lr=base_lr, momentum=args.momentum, nesterov=args.nesterov,
                                weight_decay=args.wd)
    scaler = torch.cuda.amp.GradScaler(enabled=amp and cuda)
    epoch, position, step, best = 0, 0, 0, 0.0
    if ckpt:
        model.load_state_dict(ckpt["model"])
        if not args.evaluate:
            optimizer.load_state_dict(ckpt["optimizer"])
            scaler.load_state_dict(ckpt["scaler"])
            torch.set_rng_state(ckpt["rng"])
            try:
                train.load_state_dict(ckpt["loader"])  # refuses another dataset or mix, by name
            except ValueError as e:
                sys.exit("train_imagepack: %s: %s" % (ckpt["path"], e))
            epoch, position, step, best = (ckpt["loader"]["epoch"], ckpt["loader"]["position"], ckpt["global_step"],
                                           ckpt["best"])
        log("=> resumed from %s (%s, %s, %d px, trained on %s) at epoch %d%s" % (
            ckpt["path"], saved["arch"], saved["task"], saved["size"], saved["data"],
            epoch if not args.evaluate else ckpt.get("epoch", 0), ", position %d" % position if position else ""))
        warning = None if args.evaluate else another_global_batch(ckpt, args, world, ckpt["path"])
        if warning:
            log(warning)
    net = model
    recipe = train_recipe.Recipe(args, net, world, rank, outputs)  # mixup/cutmix, clipping, EMA
    if ckpt:
        recipe.load_state_dict(ckpt.get("recipe", {}))
    if world > 1:  # buffers (BN statistics) are broadcast from rank 0 every step
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    log("=> %s (%d parameters), %s, %d output(s), %d process(es) [%s], batch %d/rank, %s%s" % (
        arch, sum(q.numel() for q in net.parameters()), args.task, outputs, world, "nccl" if cuda else "gloo",
        args.batch_size, "%d train / " % train.dataset_size if train else "",
        "%d val samples" % val.dataset_size if val else "no validation") + (
        ", AMP " + str(amp_dtype).replace("torch.", "") if amp else ""))

    run = {"arch": arch, "task": args.task, "size": val_size, "channels": channels, "mean": mean, "std": std,
           "normalisation": source, "data": " + ".join(args.data) if args.data else saved["data"], "meta": meta}
    if train is not None and len(train.sources) > 1:
        log("=> training mix, per epoch: " + "; ".join(
            "%s %d of %d records" % (s["name"], s["samples"], s["records"]) for s in train.sources))
    if args.res_schedule:
        log("=> progressive resolution %s; evaluation at %d px" % (args.res_schedule, val_size))

    # Nothing was written before every check above passed. --evaluate's
    # rows go to evaluations.jsonl, apart from the training curve; a run's
    # to OUTPUT/metrics.jsonl, after --overwrite removed the old run's files.
    rows = rows_path(args, ckpt["path"] if ckpt else "")
    if rows and rank == 0:
        try:
            os.makedirs(os.path.dirname(rows) or ".", exist_ok=True)
            if args.overwrite:
                removed = [n for n in OVERWRITTEN if os.path.exists(os.path.join(args.output, n))]
                for n in removed:
                    os.unlink(os.path.join(args.output, n))
                if removed:
                    log("=> --overwrite: the run that was in %s was removed (%s); starting again" % (
                        args.output, ", ".join(removed)))
            metrics = open(rows, "a") if not args.evaluate else None
        except OSError as e:
            fail("cannot write %s: %s" % (rows, e))
    else:
        metrics = None

    def emit(row):
        if metrics:
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()

    def checkpoint(state_epoch):
        if args.output and rank == 0:
            save_atomically({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                             "scaler": scaler.state_dict(), "rng": torch.get_rng_state(),
                             "loader": train.state_dict(), "epoch": state_epoch, "global_step": step, "best": best,
                             "args": vars(args), "run": run, "recipe": recipe.state_dict(),
                             "world_size": world, "batch_size": args.batch_size},
                            os.path.join(args.output, "checkpoint.pt"))
        if world > 1:
            dist.barrier()

    def evaluate(at_epoch, evaluated=None, label=""):
        evaluated = evaluated or model
        evaluated.eval()
        val.set_epoch(0)
        tally, loss_sum = None, torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for b in val:
                x, y = task.prepare(b, device, eval_batch=True)
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                    out = train_recipe.tta_forward(evaluated, x, args.tta_flip)
                out = out.float()
                t = task.tally(out, x, y)
                tally = t if tally is None else tally + t
                loss_sum += torch.tensor([task.loss(out, y, training=False).item() * len(x), len(x)],
                                         dtype=torch.float64)
        if world > 1:  # every validation sample is counted once across ranks
            dist.all_reduce(tally)
            dist.all_reduce(loss_sum)
        f = task.figures(tally)
        where = " * %s (the checkpoint of epoch %d)" % (args.val, at_epoch) if args.evaluate else \
            " * Epoch %d" % at_epoch
        log("%s%s  %s  Loss %.4f  (%d samples)" % (where, label, task.line(f), loss_sum[0] / loss_sum[1],
                                                 loss_sum[1].item()))
        row = dict(type="eval", epoch=at_epoch, val=args.val)
        if args.evaluate:
            row["checkpoint"] = ckpt["path"]
        row.update({k: v for k, v in f.items() if k != "iou"})
        row.update(loss=(loss_sum[0] / loss_sum[1]).item(), samples=int(loss_sum[1].item()))
        return f, row

    def evaluate_ema(at_epoch):
        """The EMA's row (eval_ema, as the C++ trainer's): rank 0's average for
        every rank, as each rank's holds its own BN statistics."""
        if world > 1:
            for t in recipe.ema.tensors(recipe.ema.module):
                dist.broadcast(t.data, 0)
        row = evaluate(at_epoch, recipe.ema.module, " EMA")[1]
        row["type"] = "eval_ema"
        return row

    def log_digests():
        log("final weights digest %s" % weights_digest(net))
        if recipe.ema is not None:
            log("final EMA weights digest %s" % weights_digest(recipe.ema.module))

    def run_evaluation():
        # The checkpoint's epoch: the epochs it completed (the C++ trainer's count).
        at = int(ckpt.get("epoch", ckpt["loader"]["epoch"]))
        f, row = evaluate(at)
        found = [row] + ([evaluate_ema(at)] if recipe.ema is not None and "ema" in ckpt.get("recipe", {}) else [])
        for r in found:
            r["global_step"] = ckpt.get("global_step", 0)
        if rank == 0:
            try:
                with open(rows, "a") as out:
                    out.write("".join(json.dumps(r) + "\n" for r in found))
            except OSError as e:
                fail("cannot write %s: %s" % (rows, e))
            log("=> evaluation row appended to %s" % rows)
        log("train_imagepack: " + task.result(f))
        return 0

    stop = {"signal": 0}

    def on_signal(sig, frame):
        if stop["signal"]:  # asked twice: now, leaving nothing half-written
            tmp = SAVING["tmp"]
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if rank == 0:
                os.write(2, b"train_imagepack: stopped at once; the last complete checkpoint is kept\n")
            os._exit(128 + sig)
        stop["signal"] = sig
        if sig == signal.SIGINT and rank == 0:
            os.write(2, b"train_imagepack: Ctrl-C: writing a checkpoint at the next step, then stopping (Ctrl-C "
                        b"again stops at once)\n" if args.output else
                     b"train_imagepack: Ctrl-C: stopping at the next step (no --output: nothing is saved; Ctrl-C "
                     b"again stops at once)\n")

    def run_training():
        nonlocal epoch, position, step, best
        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
            signal.signal(sig, on_signal)
        steps_per_epoch = math.ceil(math.ceil(train.epoch_length / world) / args.batch_size)
        f = None
        for epoch in range(epoch, args.epochs):
            model.train()
            train.set_epoch(epoch)  # keeps a restored position of this epoch
            first = position // (args.batch_size * world)
            position = 0
            t0, seen, wait = time.time(), 0, 0.0
            t_data = time.time()
            for i, b in enumerate(train):
                wait += time.time() - t_data
                lr = train_recipe.epoch_lr(args, base_lr, epoch) if args.lr_warmup_epochs else \
                    learning_rate(args, base_lr, epoch + (first + i) / steps_per_epoch)
                for g in optimizer.param_groups:
                    g["lr"] = lr
                x, y = recipe.mix(*task.prepare(b, device), epoch, first + i)  # soft targets when mixing
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                    out = model(x)
                loss = task.loss(out.float(), y)
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                recipe.clip(model, optimizer, scaler)
                scaler.step(optimizer)
                scaler.update()
                recipe.after_step(net, epoch, first + i)
                step += 1
                seen += len(x)
                if (first + i) % args.print_freq == 0:
                    if not args.quiet:
                        log("Epoch: [%d][%d/%d]  Loss %.4f  LR %.5f" % (epoch, first + i, steps_per_epoch,
                                                                      loss.item(), lr))
                    if metrics:
                        emit(dict({"type": "train", "epoch": epoch, "step": first + i, "global_step": step,
                                   "loss": loss.item(), "lr": lr},
                                  **task.step_figures(out.float(), x, y if y.dim() == 1 else y.argmax(1))))
                # Stop and checkpoint decisions are taken together (a signal may reach one rank).
                sig = stop["signal"]
                flags = torch.tensor([sig not in (0, signal.SIGINT), 0 < args.stop_at_step <= step,
                                      args.checkpoint_every > 0 and step % args.checkpoint_every == 0,
                                      sig == signal.SIGINT], dtype=torch.float64)
                if world > 1:
                    dist.all_reduce(flags)
                interrupted = flags[3] > 0  # Ctrl-C on any rank stops them all (130); else SIGTERM/SIGUSR1 (75)
                preempted = interrupted or flags[0] > 0
                if flags.sum() > 0:
                    checkpoint(epoch)
                    if preempted or flags[1] > 0:
                        # The loader's own place: after an epoch's last step it is the next epoch's start.
                        at = train.state_dict()
                        where = "checkpoint at epoch %d, position %d, step %d in %s" % (
                            at["epoch"], at["position"], step, os.path.join(args.output, "checkpoint.pt"))
                        if not args.output:
                            where = "at epoch %d, position %d, step %d; no --output, so no checkpoint was written" % (
                                at["epoch"], at["position"], step)
                        if interrupted:
                            if rank == 0:
                                # The command that continues the same run: its
                                # launcher and process count too.
                                again = ""
                                if args.output:
                                    command, note = continue_command(args.output, world, local_world)
                                    again = (" Continue the run (%d process(es), global batch %d; options not given "
                                             "are the checkpoint's run's) with:\n  %s%s" % (
                                                 world, world * args.batch_size, command,
                                                 "\n  (%s)" % note if note else ""))
                                sys.stderr.write("train_imagepack: interrupted (Ctrl-C): %s.%s\n" % (where, again))
                                sys.stderr.flush()
                        else:
                            log("=> %s: %s" % ("stop requested by a signal" if preempted else "--stop-at-step reached",
                                               where))
                        log_digests()
                        return EXIT_INTERRUPTED if interrupted else EXIT_PREEMPTED if preempted else 0
                t_data = time.time()
            elapsed = time.time() - t0
            rate = seen * world / max(elapsed, 1e-9)
            res = train.output_size
            sources = {s["name"]: s["samples"] for s in train.sources}
            log("Epoch %d: %d px, %.1f images/s, %.0f%% of the time waiting for input%s" % (
                epoch, res, rate, 100 * wait / elapsed,
                "; samples: " + ", ".join("%s %d" % kv for kv in sources.items()) if len(sources) > 1 else ""))
            emit({"type": "epoch", "epoch": epoch, "images_per_s": rate, "input_wait": wait / elapsed, "res": res,
                  "sources": sources, "seconds": elapsed})
            if val is not None and not args.no_val:
                f, row = evaluate(epoch)
                emit(row)
                if recipe.ema is not None:
                    emit(evaluate_ema(epoch))
                best = max(best, task.score(f))
            train.set_epoch(epoch + 1)
            checkpoint(epoch + 1)
        if args.output and rank == 0:
            save_atomically(net.state_dict(), os.path.join(args.output, "model.pt"))
        log_digests()
        if f is not None:
            log("train_imagepack: %s (best %.2f)" % (task.result(f), best))
        return 0

    if args.evaluate:
        signal.signal(signal.SIGTERM, stop_at_once)
        signal.signal(signal.SIGUSR1, stop_at_once)
    try:
        code = run_evaluation() if args.evaluate else run_training()
    finally:
        # The DDP model (its Reducer) and the loaders (their threads, an
        # --in-ram copy's hold) are released here, while every rank is alive.
        model = train = val = None
        gc.collect()
    if metrics:
        metrics.close()
    if world > 1:
        # Every rank is here, its collectives done. The process group is not
        # destroyed: its destructor joins Gloo threads while this thread holds
        # the GIL (torch 1.13), which can hang; finish() ends the process
        # without it. Should the barrier itself hang (a peer lost without a
        # reset connection), SIGALRM's default action ends the rank.
        signal.alarm(120)
        dist.barrier()
        signal.alarm(0)
    return code


def finish(code):
    """Ends the process with `code` without the interpreter's teardown: with
    torch 1.13, destroying a Gloo process group there can join a Gloo thread
    that waits for the GIL the main thread holds, and never return."""
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message")
        sys.stderr.write("%s\n" % code)
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(code)


if __name__ == "__main__":
    try:
        exit_code = main()
    except SystemExit as e:
        exit_code = e.code
    except BaseException:  # a bug or a lost peer: its traceback, and no teardown to hang in
        import traceback
        traceback.print_exc()
        exit_code = 1
    finish(exit_code)
