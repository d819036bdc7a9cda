"""imagepack.train's main: the steps of a run (options, process, data,
task, loaders, model, rows), then the loop (loop.py) or --evaluate, then
the end that every rank reaches together. entry() is the program's
(python3 -m imagepack.train, scripts/train_imagepack.py)."""
import gc
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

from . import cli, data, process
from . import recipe as train_recipe
from .checkpoint import another_global_batch
from .checks import OVERWRITTEN, rows_path
from .cli import fail
from .loop import Run
from .models import make_model
from .tasks import TASKS


def prepare_data(r):
    """The data (train.lmdb's classes, channels and normalisation, or the
    checkpoint's), the task and the Loaders."""
    args, ckpt = r.args, r.ckpt
    saved = ckpt["run"] if ckpt else None
    meta, train_data, mix_kw = data.read_metadata(args, ckpt)
    channels, mean, std, source = data.normalisation(meta, saved)
    r.task = TASKS[args.task](meta, args, data.normaliser(mean, std, r.device))
    r.arch = args.arch or r.task.default_arch
    r.outputs = r.task.outputs or channels
    if args.task != "restoration":
        r.log("=> normalising the input with %s: mean %s, std %s" % (
            source, ", ".join("%.4f" % m for m in mean), ", ".join("%.4f" % s for s in std)))
    r.amp, r.amp_dtype = process.amp_setting(args, r.device.type == "cuda", r.log)
    r.train, r.val, val_size = data.make_loaders(args, r.task, meta, r.arch, channels, mean, train_data, mix_kw,
                                                 r.log)
    r.described = {"arch": r.arch, "task": args.task, "size": val_size, "channels": channels, "mean": mean,
                   "std": std, "normalisation": source,
                   "data": " + ".join(args.data) if args.data else saved["data"], "meta": meta,
                   "pinned": data.pinned(args)}
    r.channels = channels
    if saved and not args.evaluate:
        data.check_pinned(args, ckpt, r.described["pinned"], r.log)


def resume(r):
    """The checkpoint's weights, and for a run continued its optimizer,
    scaler, random state, loader's place and count."""
    args, ckpt, saved = r.args, r.ckpt, r.ckpt["run"]
    r.net.load_state_dict(ckpt["model"])
    if not args.evaluate:
        r.optimizer.load_state_dict(ckpt["optimizer"])
        r.scaler.load_state_dict(ckpt["scaler"])
        torch.set_rng_state(ckpt["rng"])
        try:
            r.train.load_state_dict(ckpt["loader"])  # refuses another dataset or mix, by name
        except ValueError as e:
            sys.exit("train_imagepack: %s: %s" % (ckpt["path"], e))
        r.epoch, r.position, r.step, r.best = (ckpt["loader"]["epoch"], ckpt["loader"]["position"],
                                               ckpt["global_step"], ckpt["best"])
    r.log("=> resumed from %s (%s, %s, %d px, trained on %s) at epoch %d%s" % (
        ckpt["path"], saved["arch"], saved["task"], saved["size"], saved["data"],
        r.epoch if not args.evaluate else ckpt.get("epoch", 0), ", position %d" % r.position if r.position else ""))
    warning = None if args.evaluate else another_global_batch(ckpt, args, r.world, ckpt["path"])
    if warning:
        r.log(warning)


def prepare_model(r):
    """The model, its optimizer, the recipe's additions (mixup/cutmix,
    clipping, EMA), the checkpoint's state, and DDP over the ranks."""
    args, cuda = r.args, r.device.type == "cuda"
    r.net = make_model(r.arch, r.channels, r.outputs, args.zero_init_residual, args.blurpool).to(r.device)
    groups = train_recipe.param_groups(r.net, args.wd, args.norm_weight_decay, args.no_bn_wd)
    r.base_lr = args.lr * args.batch_size * r.world / 256 if args.lr_scale_batch else args.lr
    r.optimizer = torch.optim.SGD(groups, lr=r.base_lr, momentum=args.momentum, nesterov=args.nesterov,
                                  weight_decay=args.wd)
    r.scaler = torch.cuda.amp.GradScaler(enabled=r.amp and cuda)
    if r.ckpt:
        resume(r)
    r.recipe = train_recipe.Recipe(args, r.net, r.world, r.rank, r.outputs)
    if r.ckpt:
        r.recipe.load_state_dict(r.ckpt.get("recipe", {}))
    r.model = r.net
    if r.world > 1:  # buffers (BN statistics) are broadcast from rank 0 every step
        r.model = nn.parallel.DistributedDataParallel(r.net, device_ids=[r.device.index] if cuda else None)
    train, val = r.train, r.val
    r.log("=> %s (%d parameters), %s, %d output(s), %d process(es) [%s], batch %d/rank, %s%s" % (
        r.arch, sum(q.numel() for q in r.net.parameters()), args.task, r.outputs, r.world, "nccl" if cuda else "gloo",
        args.batch_size, "%d train / " % train.dataset_size if train else "",
        "%d val samples" % val.dataset_size if val else "no validation") + (
        ", AMP " + str(r.amp_dtype).replace("torch.", "") if r.amp else ""))
    if train is not None and len(train.sources) > 1:
        r.log("=> training mix, per epoch: " + "; ".join(
            "%s %d of %d records" % (s["name"], s["samples"], s["records"]) for s in train.sources))
    if args.res_schedule:
        r.log("=> progressive resolution %s; evaluation at %d px" % (args.res_schedule, r.described["size"]))


def open_rows(r):
    """The run's rows: OUTPUT/metrics.jsonl opened, after --overwrite
    removed the old run's files; --evaluate's go to evaluations.jsonl,
    apart from the training curve. Nothing was written before every check
    passed."""
    args = r.args
    r.rows = rows_path(args, r.ckpt["path"] if r.ckpt else "")
    if not r.rows or r.rank != 0:
        return
    try:
        os.makedirs(os.path.dirname(r.rows) or ".", exist_ok=True)
        if args.overwrite:
            removed = [n for n in OVERWRITTEN if os.path.exists(os.path.join(args.output, n))]
            for n in removed:
                os.unlink(os.path.join(args.output, n))
            if removed:
                r.log("=> --overwrite: the run that was in %s was removed (%s); starting again" % (
                    args.output, ", ".join(removed)))
        r.metrics = open(r.rows, "a") if not args.evaluate else None
    except OSError as e:
        fail("cannot write %s: %s" % (r.rows, e))


def run_and_release(r):
    """The training or the evaluation; then the DDP model (its Reducer)
    and the loaders (their threads, an --in-ram copy's hold) released,
    while every rank is alive."""
    if r.args.evaluate:
        signal.signal(signal.SIGTERM, process.stop_at_once)
        signal.signal(signal.SIGUSR1, process.stop_at_once)
    try:
        return r.run_evaluation() if r.args.evaluate else r.run_training()
    finally:
        r.model = r.train = r.val = None
        gc.collect()


def main(argv=None):
    signal.signal(signal.SIGINT, process.stop_at_once)  # no traceback from a Ctrl-C during the set-up
    args, ckpt, notes = cli.parse(sys.argv[1:] if argv is None else argv)
    rank, world, local_world, device = process.setup_process(args)
    log = print if rank == 0 else (lambda *a, **k: None)
    for n in notes:
        log("=> %s: the option given is used" % n)
    r = Run(args, ckpt, rank, world, local_world, device, log)
    prepare_data(r)
    prepare_model(r)
    open_rows(r)
    code = run_and_release(r)
    if r.metrics:
        r.metrics.close()
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


def entry():
    """The program: main's exit code, a bug's traceback (exit 1), and the
    end without the interpreter's teardown (process.finish)."""
    try:
        exit_code = main()
    except SystemExit as e:
        exit_code = e.code
    except BaseException:  # a bug or a lost peer: its traceback, and no teardown to hang in
        import traceback
        traceback.print_exc()
        exit_code = 1
    process.finish(exit_code)
