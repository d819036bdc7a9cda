"""imagepack.train's data, the C++ trainer's contract: the training data
defines the classes, channels and normalisation (a checkpoint keeps those
it was trained with); the validation set's classes are matched to them by
name. The Loaders with the augmentations of the task and image size."""
import sys

import torch

import imagepack

from . import process
from . import recipe as train_recipe
from .cli import fail


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


def data_options(args, split):
    """The Loader's keywords for files read in place: the split, the
    parquet columns."""
    return dict(split=split or "", image_column=args.image_column or "", label_column=args.label_column or "")


def read_metadata(args, ckpt):
    """(meta, the training data as the Loader takes it, its mix keywords):
    the data's metadata (a mix's: its classes, statistics pooled by
    share), or the checkpoint's under --evaluate."""
    saved = ckpt["run"] if ckpt else None
    if not args.data:
        return saved["meta"], None, {}
    train_data, mix_kw = data_sources(args)
    try:
        meta = imagepack.Loader(train_data, batch_size=1, size=8, threads=1, as_torch=False, rank=0, world_size=1,
                                **data_options(args, args.split), **mix_kw).meta
    except Exception as e:  # not a database, damaged, unreachable: one line
        fail("--data %s: %s" % (" + ".join(args.data), e))
    if saved and list(saved["meta"]["classes"]) != list(meta["classes"]):
        sys.exit("train_imagepack: %s was trained on the classes of %s, and --data %s has others: resume with "
                 "that data, or start a new run in another --output" % (ckpt["path"], saved["data"], " + ".join(args.data)))
    return meta, train_data, mix_kw


def pinned(args):
    """The --data sources that name a revision (hf://), at the commit
    this process reads: the checkpoint records them."""
    out = []
    for d in args.data or []:
        for path in d.split(","):
            try:
                at = imagepack._imagepack.pinned_url(path)
            except Exception as e:  # noqa: BLE001 - unreachable, refused: one line
                fail("--data %s: %s" % (path, e))
            if at:
                out.append(at)
    return out


def check_pinned(args, ckpt, now, log):
    """A resume whose hf:// --data reads other commits than the
    checkpoint's stops naming both, unless --resume-other-commit."""
    was = ckpt["run"].get("pinned") or []
    if not was or was == now:
        return
    now_text = ", ".join(now) if now else "no hf:// data"
    if args.resume_other_commit:
        log("=> --resume-other-commit: %s was trained on %s; this run reads %s" % (ckpt["path"], ", ".join(was),
                                                                                  now_text))
        return
    sys.exit("train_imagepack: checkpoint %s was trained on %s, but --data now reads %s (a revision moved): resume "
             "on the commit it trained on (--data with @COMMIT), or give --resume-other-commit to go on with the new "
             "files" % (ckpt["path"], ", ".join(was), now_text))


def normalisation(meta, saved):
    """(channels, mean, std, what they are): the checkpoint's, else the
    training data's statistics, else 0.5 / 0.25."""
    channels = saved["channels"] if saved else meta["channels"]
    if saved:
        mean, std, source = saved["mean"], saved["std"], saved["normalisation"]
    elif len(meta.get("mean", [])) == channels:
        mean, std, source = meta["mean"], meta["std"], "the training data's statistics"
    else:
        mean, std = [0.5] * channels, [0.25] * channels
        source = "mean 0.5, std 0.25 (the training data holds no statistics: packed with --stats-sample 0)"
    return channels, mean, std, source


def normaliser(mean, std, device):
    """uint8 NCHW -> normalised float on the device."""
    mean_t = torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1).mul(255).to(device)
    std_t = torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1).mul(255).clamp_min(1e-3).to(device)
    cuda = device.type == "cuda"

    def normalise(images):
        return images.to(device, non_blocking=cuda).float().sub_(mean_t).div_(std_t)
    return normalise


def sizes(args, arch):
    """(small, size, val_size): small images (small_cnn, or --size <= 64)
    take pad-and-crop augmentation."""
    small = arch == "small_cnn" or (args.task == "classification" and 0 < args.size <= 64)
    size = args.size or (28 if arch == "small_cnn" else 96 if args.task != "classification" else 224)
    return small, size, args.val_size or size


def augmentations(args, small, size, val_size, mean):
    """(training Loader's keywords, validation Loader's) of the task."""
    # --res-schedule: the loader sets each epoch's size; pad-crop (small
    # images) keeps its crop at --size and resizes it.
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
    return train_kw, val_kw


def make_loaders(args, task, meta, arch, channels, mean, train_data, mix_kw, log):
    """(training Loader or None under --evaluate, validation Loader or None,
    the evaluation's size)."""
    small, size, val_size = sizes(args, arch)
    common = dict(batch_size=args.batch_size, in_ram=args.in_ram, seed=args.seed, threads=process.LOADER_THREADS,
                  channels=channels)
    sized = dict(size=None, size_schedule=args.res_schedule) if args.res_schedule else dict(size=size)
    train_kw, val_kw = augmentations(args, small, size, val_size, mean)
    train = None
    if not args.evaluate:
        try:
            train = imagepack.Loader(train_data, order=args.order, **data_options(args, args.split), **sized,
                                     **common, **train_kw, **mix_kw)
        except Exception as e:
            fail("--data %s: %s" % (" + ".join(args.data), e))
    val = None
    if args.val:
        if args.task == "classification":  # the training data's classes, matched by name
            val_kw["classes"] = train if train is not None else meta["classes"]
        try:
            val = imagepack.Loader(args.val.split(","), size=val_size, **data_options(args, args.val_split),
                                   **common, **val_kw)
        except ValueError as e:  # classes that do not match: the message names them
            sys.exit("train_imagepack: %s" % e)
        except Exception as e:
            fail("--val %s: %s" % (args.val, e))
        val_kw = None  # the loaders are released at the end (run.main)
        matched = task.match_eval(val)
        if args.task == "classification":
            val_classes = imagepack.open(args.val.split(","), **data_options(args, args.val_split)).classes
            matched = str(imagepack.match_classes(meta["classes"], val_classes))
        log("=> validation %s: %d samples, %s" % (args.val, val.dataset_size, matched))
    return train, val, val_size
