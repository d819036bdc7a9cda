"""torchvision's reference training flags for imagepack.train
(references/classification/train.py, its "new training recipe"): the
per-sample augmentations handed
to imagepack.Loader, mixup / cutmix on the batch, the model's exponential
moving average, the per-epoch warm-up schedule, weight decay of the
normalisation layers, gradient clipping, torchvision's names for the
sizes, and recipe files (trainer/recipes/NAME.flags) read as flags.

Every random choice of a batch (mixup or cutmix, lambda, the box) is a
function of (seed, epoch, step in the epoch, rank), so that a run repeats
bit for bit and resumes exactly.
"""
import copy
import math
import os
import random
import shlex
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import options

# torchvision's spelling -> the one this trainer (and the C++ trainer) had.
ALIASES = {"train_crop_size": "size", "val_crop_size": "val_size", "val_resize_size": "val_resize"}
# The modules whose parameters --norm-weight-decay covers (torchvision's set_weight_decay).
NORMS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.modules.instancenorm._InstanceNorm,
         nn.LocalResponseNorm)


def recipes_folder():
    """The checkout's trainer/recipes, whatever the working directory: found
    above this file (lib/python/imagepack/train, or the build's copy in
    BUILD/python/imagepack/train with BUILD in the checkout), else above
    the script run (scripts/train_imagepack.py); "" when neither is in a
    checkout (the package installed elsewhere)."""
    starts = [os.path.dirname(os.path.abspath(__file__))]
    if sys.argv and sys.argv[0] and sys.argv[0] != "-c":
        starts.append(os.path.dirname(os.path.abspath(sys.argv[0])))
    for folder in starts:
        while True:
            found = os.path.join(folder, "trainer", "recipes")
            if os.path.isdir(found):
                return found
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return ""


def recipe_path(name):
    """The file of --recipe NAME|FILE: a path as given, else
    trainer/recipes/NAME.flags ("" when no recipes folder is found)."""
    if os.sep in name or name.endswith(".flags") or os.path.isfile(name):
        return name
    folder = recipes_folder()
    return os.path.join(folder, name + ".flags") if folder else ""


def read_recipe(path):
    """The flags of a recipe file as argv words, by line: [(line number, [words])]."""
    lines = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            words = shlex.split(line, comments=True)
            if words:
                lines.append((n, words))
    return lines


def expand(parser, argv, usage_error, fail):
    """argv with --recipe's flags put first, less those the command line
    gives itself (either spelling of a size): the command line wins."""
    # The parser's own reading (--recipe=NAME, an abbreviation); --help
    # left for the real parse.
    name = parser.parse_known_args([w for w in argv if w not in ("-h", "--help")])[0].recipe
    if not name:
        return argv
    path = recipe_path(name)
    if not path:
        usage_error("--recipe %s: no recipe of that name: the named recipes are trainer/recipes/*.flags of a checkout, "
                    "and this imagepack.train (%s) is in none; give the recipe file's path" % (
                        name, os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isfile(path):
        folder = recipes_folder()
        known = sorted(f[:-6] for f in os.listdir(folder) if f.endswith(".flags")) if folder else []
        if path != name:
            usage_error("--recipe %s: no %s (recipes: %s)" % (name, path, ", ".join(known) or "none"))
        fail("--recipe %s: no such file" % name)
    actions = parser._option_string_actions

    def dest(word):
        action = actions.get(word.split("=", 1)[0])
        return ALIASES.get(action.dest, action.dest) if action else None
    given = {dest(w) for w in argv if w.startswith("-")} - {None}
    words = []
    for n, line in read_recipe(path):
        d = dest(line[0])
        if d is None or not line[0].startswith("--"):
            usage_error("--recipe %s: line %d: unknown option %s" % (path, n, line[0]))
        if d == "recipe":
            usage_error("--recipe %s: line %d: a recipe names no other recipe" % (path, n))
        if d not in given:
            words += line
    return words + argv


def resolve_aliases(args, given):
    """torchvision's size names set the trainer's own (given: the options on
    the command line, updated); both given with other values: a problem."""
    for alias, own in ALIASES.items():
        value = getattr(args, alias)
        if alias not in given:
            continue
        if own in given and getattr(args, own) != value:
            return "--%s %s and --%s %s: the same setting, two values (give one)" % (
                alias.replace("_", "-"), value, own.replace("_", "-"), getattr(args, own))
        setattr(args, own, value)
        setattr(args, alias, None)
        given.discard(alias)
        given.add(own)
    return ""


def usage_problem(args):
    """The first problem with these flags together, "" if none (each value
    alone was checked against the option table)."""
    if args.lr_warmup_epochs and args.warmup_epochs:
        return "--lr-warmup-epochs (torchvision's per-epoch warm-up) and --warmup-epochs (per-step, from 0): give one"
    if args.lr_warmup_epochs and args.schedule in ("onecycle", "triangular"):
        return "--lr-warmup-epochs: for --schedule step or cosine (%s has its own ramp)" % args.schedule
    if args.norm_weight_decay is not None and args.no_bn_wd:
        return "--norm-weight-decay and --no-bn-wd both set the normalisation layers' decay: give one"
    if args.task != "classification":
        for flag in ("mixup_alpha", "cutmix_alpha", "random_erase"):
            if getattr(args, flag):
                return "--%s: for --task classification" % flag.replace("_", "-")
        if args.auto_augment != "none":
            return "--auto-augment: for --task classification"
    return ""


def loader_options(args, mean):
    """The training Loader's augmentation keywords (torchvision's flags).
    torchvision erases after Normalize with 0, the mean: here the grey
    levels of `mean` (the input's normalisation, 0..1 per channel)."""
    # The option table's augmentation rows (those inspect_db shows too),
    # each under its Loader keyword: a new row reaches the Loader unnamed here.
    kw = {r["keyword"]: getattr(args, options.dest(r)) for r in options.rows("inspect") if r["script"] and r["loader"]}
    kw["random_erase_value"] = [int(round(255 * m)) for m in mean]
    return kw


def param_groups(model, wd, norm_wd=None, no_bn_wd=False):
    """SGD's groups: --norm-weight-decay for the normalisation layers'
    parameters, --wd for the rest (--no-bn-wd: 0 for every BN and bias,
    the C++ trainer's rule)."""
    if norm_wd is not None:
        norm = {id(q) for m in model.modules() if isinstance(m, NORMS) for q in m.parameters(recurse=False)}
        rest = [q for q in model.parameters() if id(q) not in norm]
        own = [q for q in model.parameters() if id(q) in norm]
        return [{"params": rest, "weight_decay": wd}] + ([{"params": own, "weight_decay": norm_wd}] if own else [])
    decay = [q for q in model.parameters() if not (no_bn_wd and q.dim() <= 1)]
    no_decay = [q for q in model.parameters() if no_bn_wd and q.dim() <= 1]
    return [{"params": decay, "weight_decay": wd}] + ([{"params": no_decay, "weight_decay": 0.0}] if no_decay else [])


def epoch_lr(args, base_lr, epoch):
    """torchvision's per-epoch lr with --lr-warmup-epochs E: SequentialLR of
    LinearLR(start_factor=decay, total_iters=E) or ConstantLR(factor=decay,
    total_iters=E), then the --schedule from epoch E: StepLR(step_size,
    gamma 0.1) or CosineAnnealingLR(T_max=epochs - E)."""
    e, w, decay = epoch, args.lr_warmup_epochs, args.lr_warmup_decay
    if e < w:
        factor = decay + (1 - decay) * e / w if args.lr_warmup_method == "linear" else decay
        return base_lr * factor
    t = e - w
    if args.schedule == "cosine":
        return base_lr * 0.5 * (1 + math.cos(math.pi * t / (args.epochs - w)))
    return base_lr * 0.1 ** (t // args.step_size)


def batch_rng(seed, epoch, step, rank):
    """The random source of one batch's mixing: a function of its place."""
    return random.Random("mix/%d/%d/%d/%d" % (seed, epoch, step, rank))


def draw_mix(rng, mixup_alpha, cutmix_alpha, height, width):
    """One batch's draw: {kind, beta, lam, centre, box}. mixup or cutmix
    (each with probability 1/2 when both are on), beta ~ Beta(alpha,
    alpha); mixup's lam is beta; cutmix's box (x1, y1, x2, y2) has a side
    ratio of sqrt(1 - beta) around a uniform centre, clipped, and its lam
    is the share of the image kept, 1 - box area / image area."""
    kinds = [k for k, alpha in (("mixup", mixup_alpha), ("cutmix", cutmix_alpha)) if alpha > 0]
    if not kinds:
        return {"kind": None, "lam": 1.0, "box": None}
    kind = kinds[0] if len(kinds) == 1 else kinds[rng.random() >= 0.5]
    alpha = mixup_alpha if kind == "mixup" else cutmix_alpha
    beta = rng.betavariate(alpha, alpha)
    if kind == "mixup":
        return {"kind": kind, "beta": beta, "lam": beta, "box": None}
    cx, cy = rng.randrange(width), rng.randrange(height)
    half_w, half_h = int(0.5 * math.sqrt(1 - beta) * width), int(0.5 * math.sqrt(1 - beta) * height)
    box = (max(cx - half_w, 0), max(cy - half_h, 0), min(cx + half_w, width), min(cy + half_h, height))
    return {"kind": kind, "beta": beta, "centre": (cx, cy), "box": box,
            "lam": 1 - (box[2] - box[0]) * (box[3] - box[1]) / (width * height)}


def mix_batch(x, y, classes, draw):
    """The batch paired with itself rolled by one: (images, soft targets)."""
    t = F.one_hot(y, classes).to(torch.float32)
    kind, lam, box = draw["kind"], draw["lam"], draw["box"]
    if kind is None:
        return x, t
    xr = x.roll(1, 0)
    if kind == "mixup":
        x = x * lam + xr * (1 - lam)
    else:
        x = x.clone()
        x1, y1, x2, y2 = box
        x[:, :, y1:y2, x1:x2] = xr[:, :, y1:y2, x1:x2]
    return x, t * lam + t.roll(1, 0) * (1 - lam)


class EMA:
    """torchvision's ExponentialMovingAverage of the parameters and buffers:
    avg = decay * avg + (1 - decay) * value, a copy while n_averaged is 0."""

    def __init__(self, net, decay):
        self.module = copy.deepcopy(net)
        for q in self.module.parameters():
            q.requires_grad_(False)
        self.decay, self.n_averaged = decay, 0

    @staticmethod
    def tensors(m):
        return list(m.parameters()) + list(m.buffers())

    @torch.no_grad()
    def update(self, net):
        for avg, value in zip(self.tensors(self.module), self.tensors(net)):
            value = value.detach()
            avg.copy_(value if self.n_averaged == 0 else self.decay * avg + (1 - self.decay) * value)
        self.n_averaged += 1

    def state_dict(self):
        return {"module": self.module.state_dict(), "n_averaged": self.n_averaged, "decay": self.decay}

    def load_state_dict(self, state):
        self.module.load_state_dict(state["module"])
        self.n_averaged = state["n_averaged"]


def ema_decay(args, world):
    """torchvision's adjustment: alpha = 1 - decay scaled by
    world * batch * steps / epochs, at most 1."""
    alpha = (1 - args.model_ema_decay) * world * args.batch_size * args.model_ema_steps / args.epochs
    return 1 - min(1.0, alpha)


class Recipe:
    """The training step's additions, for the training loop (loop.py): mixing before
    the forward pass, clipping before the optimizer's step, the EMA after."""

    def __init__(self, args, net, world, rank, classes):
        self.args, self.rank, self.classes = args, rank, classes
        self.mixing = args.mixup_alpha > 0 or args.cutmix_alpha > 0
        self.ema = EMA(net, ema_decay(args, world)) if args.model_ema else None

    def mix(self, x, y, epoch, index):
        """(images, targets: soft when mixing, else the labels)."""
        if not self.mixing:
            return x, y
        a = self.args
        draw = draw_mix(batch_rng(a.seed, epoch, index, self.rank), a.mixup_alpha, a.cutmix_alpha, x.shape[-2],
                        x.shape[-1])
        x, t = mix_batch(x, y, self.classes, draw)
        return x, t.to(x.device)

    def clip(self, model, optimizer, scaler):
        if self.args.clip_grad_norm:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), self.args.clip_grad_norm)

    def after_step(self, net, epoch, index):
        if self.ema is not None and index % self.args.model_ema_steps == 0:
            self.ema.update(net)
            if epoch < self.args.lr_warmup_epochs:  # torchvision: the EMA copies the weights during the warm-up
                self.ema.n_averaged = 0

    def state_dict(self):
        return {"ema": self.ema.state_dict()} if self.ema is not None else {}

    def load_state_dict(self, state):
        if self.ema is not None and "ema" in state:
            self.ema.load_state_dict(state["ema"])


def tta_forward(model, x, flip):
    """The output, averaged with the mirror's under --tta-flip (a dense
    output is mirrored back first)."""
    out = model(x)
    if not flip:
        return out
    mirrored = model(x.flip(3))
    return (out + (mirrored.flip(3) if out.dim() == 4 else mirrored)) / 2
