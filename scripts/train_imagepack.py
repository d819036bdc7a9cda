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
every --checkpoint-every steps and on SIGTERM/SIGUSR1, which then exit 75)
describe themselves: --resume auto (or a path) continues mid-epoch with
exactly the uninterrupted run's batches and needs no option repeated; an
option given again with another value is used and said, except --arch and
--task (refused). --evaluate --resume CKPT --val DB needs nothing else.

Recipes (docs/TRAINING.md, "Recipes"): --data given several times mixes
datasets (--weights 0.7,0.3, or --repeat / --choose per dataset; a comma
inside one --data still names shards of one dataset); --res-schedule
MIN,MAX,START_RAMP,END_RAMP is FFCV's progressive resolution, --val-size and
--val-resize evaluate at a size of their own (FixRes), --schedule triangular
is FFCV's lr, --blurpool blurs before the ResNets' strided convolutions.
Each epoch's row in metrics.jsonl holds its resolution (res) and each
source's samples (sources).

--arch: any torchvision.models name (resnet18, resnet50, ...) or small_cnn
(the C++ trainer's small network, for 28-px images such as Fashion-MNIST).
Small images (small_cnn, or --size <= 64) use pad-and-crop augmentation,
larger ones RandomResizedCrop + flip and the resize + centre-crop eval.
--task segmentation (a mask field) and --task restoration (a target image
field) train the C++ trainer's dense models (scripts/dense_models.py:
fcn_small, unet_small) on the loader's dict batches, reporting mIoU / PSNR.
"""
import argparse
import hashlib
import json
import math
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import imagepack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dense_models  # noqa: E402

EXIT_PREEMPTED = 75
# Options that belong to one invocation, never taken from a checkpoint.
PER_INVOCATION = ("resume", "evaluate", "stop_at_step")
# Options that define the saved model: a resumed run may not change them.
MODEL_DEFINING = ("arch", "task", "blurpool")


def make_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a = p.add_argument
    a("--data", action="append", help="training database(s), comma-separated shards of one dataset; defines the "
      "classes, channels, normalisation. Given again: datasets mixed (--weights, --repeat, --choose)")
    a("--weights", help="a mix: each --data's relative share of every epoch (0.7,0.3)")
    a("--repeat", help="a mix: each --data's records this many times per epoch (3,1; 0: its --choose)")
    a("--choose", help="a mix: each --data's samples per epoch (5000,0; 0: its --repeat, else once)")
    a("--classes", help="the class list the model learns (a file, one name per line): each --data's labels "
      "matched to it by name")
    a("--val", help="validation database(s), comma-separated shards; classes matched to --data's by name")
    a("--task", choices=["classification", "segmentation", "restoration"], default="classification")
    a("--arch", default="", help="torchvision model or small_cnn (default: resnet18; dense tasks: their model)")
    a("--epochs", type=int, default=90)
    a("--batch-size", "-b", type=int, default=64, help="per process")
    a("--lr", type=float, default=0.1)
    a("--lr-scale-batch", action="store_true", help="scale lr by global batch / 256")
    a("--schedule", choices=["step", "cosine", "onecycle", "triangular"], default="step",
      help="triangular: FFCV's, linear up to --lr-peak-epoch, linear down to 0")
    a("--lr-peak-epoch", type=float, default=2, help="--schedule triangular: where the lr peaks")
    a("--step-size", type=int, default=30, help="step schedule: epochs between decays")
    a("--warmup-epochs", "--warmup", dest="warmup_epochs", type=float, default=0, help="linear warm-up epochs")
    a("--momentum", type=float, default=0.9)
    a("--nesterov", action="store_true")
    a("--wd", type=float, default=1e-4, help="weight decay")
    a("--no-bn-wd", action="store_true", help="no weight decay on BN and bias parameters")
    a("--label-smoothing", type=float, default=0.0)
    a("--zero-init-residual", action="store_true", help="torchvision ResNets: zero-init each block's last BN")
    a("--size", type=int, default=0, help="input size (0: 28 for small_cnn, 96 for dense tasks, else 224)")
    a("--res-schedule", default="", help="progressive resolution MIN,MAX,START_RAMP,END_RAMP[,STEP]: each epoch's "
      "training size as FFCV's (160,192,11,13), rounded to STEP (32)")
    a("--val-size", type=int, default=0, help="evaluation size (0: --size)")
    a("--val-resize", type=int, default=0, help="evaluation: the shorter edge before the centre crop (0: size/0.875)")
    a("--blurpool", action="store_true", help="torchvision ResNets: a blur before each strided convolution")
    a("--amp", nargs="?", const="auto", default="", choices=["auto", "bf16", "fp16"],
      help="autocast (bf16 on a CPU with native bf16, fp32 with a notice on others; --amp=bf16 forces it)")
    a("--threads", type=int, default=0, help="loader threads per process (0: cores / local processes)")
    a("--in-ram", action="store_true", help="hold the databases in RAM, one shared copy per machine")
    a("--order", default="auto", help="training order: random, blocks or auto")
    a("--seed", type=int, default=0)
    a("--output", default="", help="folder for checkpoint.pt, metrics.jsonl and model.pt")
    a("--resume", default="", help="checkpoint to continue ('auto': OUTPUT/checkpoint.pt if present)")
    a("--evaluate", action="store_true", help="only evaluate --val with the --resume checkpoint")
    a("--no-val", action="store_true", help="skip the per-epoch evaluation")
    a("--checkpoint-every", type=int, default=0, help="also write checkpoint.pt every N steps (0: epoch ends)")
    a("--stop-at-step", type=int, default=0, help="write a checkpoint and exit 0 after global step K")
    a("--print-freq", type=int, default=100)
    a("--quiet", "-q", action="store_true", help="no per-step lines")
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
    taken from the checkpoint being resumed."""
    parser = make_parser()
    args = parser.parse_args(argv)
    given = given_options(parser, argv)
    path = args.resume
    if path == "auto":
        if not args.output:
            parser.error("--resume auto needs --output")
        path = os.path.join(args.output, "checkpoint.pt")
        path = path if os.path.exists(path) else ""
    ckpt, notes = None, []
    if path:
        if not os.path.exists(path):
            sys.exit("train_imagepack: --resume %s: no such checkpoint" % path)
        ckpt = torch.load(path, map_location="cpu")
        ckpt["path"] = path
        for key, value in ckpt["args"].items():
            if key in PER_INVOCATION or not hasattr(args, key):
                continue
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
    return args, ckpt, notes


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


TASKS = {"classification": Classification, "segmentation": Segmentation, "restoration": Restoration}


def setup_process(args):
    """(rank, world, local_world, device) after joining the process group."""
    rank, world, local_world, _ = imagepack.distributed_env()
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", 0)))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        if "MASTER_ADDR" not in os.environ:
            sys.exit("train_imagepack: MASTER_ADDR must be set for %d processes" % world)
        dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", rank=rank, world_size=world)
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    torch.manual_seed(args.seed)
    return rank, world, local_world, device


def save_atomically(obj, path):
    """torch.save to a temporary beside `path`, fsync, rename, fsync the folder."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
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


def main(argv=None):
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
        except ValueError as e:
            sys.exit("train_imagepack: %s" % e)
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
    common = dict(batch_size=args.batch_size, in_ram=args.in_ram, seed=args.seed, threads=args.threads,
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
    train = None
    if not args.evaluate:
        try:
            train = imagepack.Loader(train_data, order=args.order, **sized, **common, **train_kw, **mix_kw)
        except ValueError as e:
            sys.exit("train_imagepack: %s" % e)
    val = None
    if args.val:
        if args.task == "classification":  # the training data's classes, matched by name
            val_kw["classes"] = train if train is not None else meta["classes"]
        val = imagepack.Loader(args.val.split(","), size=val_size, **common, **val_kw)
        matched = task.match_eval(val)
        if args.task == "classification":
            matched = str(imagepack.match_classes(meta["classes"], imagepack.open(args.val.split(",")).classes))
        log("=> validation %s: %d samples, %s" % (args.val, val.dataset_size, matched))

    if args.blurpool and not arch.startswith("resnet"):
        sys.exit("train_imagepack: --blurpool: for the ResNets")
    model = make_model(arch, channels, outputs, args.zero_init_residual, args.blurpool).to(device)
    decay = [q for q in model.parameters() if not (args.no_bn_wd and q.dim() <= 1)]
    no_decay = [q for q in model.parameters() if args.no_bn_wd and q.dim() <= 1]
    groups = [{"params": decay}] + ([{"params": no_decay, "weight_decay": 0.0}] if no_decay else [])
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
            ckpt["path"], saved["arch"], saved["task"], saved["size"], saved["data"], epoch,
            ", position %d" % position if position else ""))
    net = model
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
    if args.output and rank == 0:
        os.makedirs(args.output, exist_ok=True)
    metrics = open(os.path.join(args.output, "metrics.jsonl"), "a") if args.output and rank == 0 else None

    def emit(row):
        if metrics:
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()

    def checkpoint(state_epoch):
        if args.output and rank == 0:
            save_atomically({"model": net.state_dict(), "optimizer": optimizer.state_dict(),
                             "scaler": scaler.state_dict(), "rng": torch.get_rng_state(),
                             "loader": train.state_dict(), "epoch": state_epoch, "global_step": step, "best": best,
                             "args": vars(args), "run": run}, os.path.join(args.output, "checkpoint.pt"))
        if world > 1:
            dist.barrier()

    def evaluate(at_epoch):
        model.eval()
        val.set_epoch(0)
        tally, loss_sum = None, torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for b in val:
                x, y = task.prepare(b, device, eval_batch=True)
                with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                    out = model(x)
                out = out.float()
                t = task.tally(out, x, y)
                tally = t if tally is None else tally + t
                loss_sum += torch.tensor([task.loss(out, y, training=False).item() * len(x), len(x)],
                                         dtype=torch.float64)
        if world > 1:  # every validation sample is counted once across ranks
            dist.all_reduce(tally)
            dist.all_reduce(loss_sum)
        f = task.figures(tally)
        log(" * Epoch %d  %s  Loss %.4f  (%d samples)" % (at_epoch, task.line(f), loss_sum[0] / loss_sum[1],
                                                         loss_sum[1].item()))
        emit(dict({k: v for k, v in f.items() if k != "iou"}, type="eval", epoch=at_epoch,
                  loss=(loss_sum[0] / loss_sum[1]).item(), samples=int(loss_sum[1].item())))
        return f

    if args.evaluate:
        f = evaluate(epoch)
        log("train_imagepack: " + task.result(f))
        return 0

    stop = {"signal": 0}

    def on_signal(sig, frame):
        if stop["signal"]:  # a second signal stops at once
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        stop["signal"] = sig
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)

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
            lr = learning_rate(args, base_lr, epoch + (first + i) / steps_per_epoch)
            for g in optimizer.param_groups:
                g["lr"] = lr
            x, y = task.prepare(b, device)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=amp):
                out = model(x)
            loss = task.loss(out.float(), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            step += 1
            seen += len(x)
            if (first + i) % args.print_freq == 0 and not args.quiet:
                log("Epoch: [%d][%d/%d]  Loss %.4f  LR %.5f" % (epoch, first + i, steps_per_epoch, loss.item(), lr))
            # Stop and checkpoint decisions are taken together (a signal may reach one rank).
            flags = torch.tensor([stop["signal"] != 0, 0 < args.stop_at_step <= step,
                                  args.checkpoint_every > 0 and step % args.checkpoint_every == 0], dtype=torch.float64)
            if world > 1:
                dist.all_reduce(flags)
            if flags.sum() > 0:
                checkpoint(epoch)
                if flags[0] > 0 or flags[1] > 0:
                    log("=> %s: checkpoint at epoch %d, position %d, step %d in %s" % (
                        "stop requested by a signal" if flags[0] > 0 else "--stop-at-step reached", epoch,
                        train.state_dict()["position"], step, os.path.join(args.output, "checkpoint.pt")))
                    log("final weights digest %s" % weights_digest(net))
                    return EXIT_PREEMPTED if flags[0] > 0 else 0
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
            f = evaluate(epoch)
            best = max(best, task.score(f))
        train.set_epoch(epoch + 1)
        checkpoint(epoch + 1)
    if args.output and rank == 0:
        torch.save(net.state_dict(), os.path.join(args.output, "model.pt"))
    log("final weights digest %s" % weights_digest(net))
    if f is not None:
        log("train_imagepack: %s (best %.2f)" % (task.result(f), best))
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
