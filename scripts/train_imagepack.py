#!/usr/bin/python3
"""Train a torchvision model from imagepack databases: a recipe to copy.

    scripts/launch.sh --nproc 2 -- scripts/train_imagepack.py \\
        --data train.lmdb --val val.lmdb --arch resnet50 --epochs 90 --batch-size 64

One process per rank (scripts/launch.sh, or torchrun, sets RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT); DistributedDataParallel over Gloo on
CPU, NCCL on CUDA. Input: imagepack.Loader, decoding and augmenting in C++
threads (no DataLoader worker processes); uint8 batches are normalised on
the device with the database's mean/std. --amp: bf16 autocast on CPU, fp16
with a GradScaler on CUDA. SGD with momentum, cosine or step schedule,
optionally no weight decay on BN and bias parameters: the C++ trainer's
recipe (build/trainer/train), so the two can be compared.

--arch: any torchvision.models name (resnet18, resnet50, ...) or small_cnn
(the C++ trainer's small network, for 28-px images such as Fashion-MNIST).
Small images (small_cnn, or --size <= 64) use pad-and-crop augmentation,
larger ones RandomResizedCrop + flip and the resize + centre-crop eval.

--task segmentation (a dataset with a mask field) and --task restoration (a
dataset with a target image field) train the C++ trainer's dense models
(scripts/dense_models.py: fcn_small, unet_small) on imagepack.Loader's dict
batches with its recipe: cross entropy skipping the ignore value and mIoU,
or L1 on [-1, 1] and PSNR against the target and the input.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import imagepack

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dense_models  # noqa: E402


def small_cnn(in_channels, num_classes):
    """The C++ trainer's small_cnn (trainer/models.cc), layer for layer."""
    def block(i, o):
        return [nn.Conv2d(i, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]
    return nn.Sequential(*block(in_channels, 32), nn.MaxPool2d(2), *block(32, 64), nn.MaxPool2d(2),
                         *block(64, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, num_classes))


def make_model(arch, in_channels, num_classes):
    if arch == "small_cnn":
        return small_cnn(in_channels, num_classes)
    import torchvision
    model = getattr(torchvision.models, arch)(num_classes=num_classes)
    if in_channels != 3:  # gray input: the first convolution takes 1 channel
        conv = model.conv1
        model.conv1 = nn.Conv2d(in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                                bias=conv.bias is not None)
    return model


def learning_rate(args, progress):
    """The C++ trainer's schedules (trainer/schedule.h) at `progress` epochs."""
    if args.warmup > 0 and progress < args.warmup:
        return args.lr * (progress + 1e-3) / args.warmup
    if args.schedule == "cosine":
        f = min(1.0, max(0.0, (progress - args.warmup) / max(1e-9, args.epochs - args.warmup)))
        return args.lr * 0.5 * (1 + math.cos(math.pi * f))
    return args.lr * 0.1 ** math.floor(progress / args.step_size)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="training database(s), comma-separated shards")
    p.add_argument("--val", required=True, help="validation database")
    p.add_argument("--arch", default="resnet18")
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("--batch-size", type=int, default=64, help="per process")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", type=float, default=1e-4)
    p.add_argument("--no-bn-wd", action="store_true", help="no weight decay on BN and bias parameters")
    p.add_argument("--schedule", choices=["cosine", "step"], default="step")
    p.add_argument("--step-size", type=int, default=30)
    p.add_argument("--warmup", type=float, default=0)
    p.add_argument("--size", type=int, default=0, help="input size (0: 28 for small_cnn, else 224)")
    p.add_argument("--amp", action="store_true")
    p.add_argument("--threads", type=int, default=0, help="loader threads per process (0: cores / processes)")
    p.add_argument("--in-ram", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="", help="folder for metrics.jsonl and the final weights")
    p.add_argument("--print-freq", type=int, default=100)
    p.add_argument("--task", choices=["classification", "segmentation", "restoration"], default="classification")
    args = p.parse_args()
    if args.task != "classification":
        return train_dense(args)

    rank, world, device, cuda, cores = setup_process(args)
    local_rank = device.index if cuda else 0
    log = print if rank == 0 else (lambda *a, **k: None)

    small = args.arch == "small_cnn" or 0 < args.size <= 64
    size = args.size or (28 if args.arch == "small_cnn" else 224)
    common = dict(batch_size=args.batch_size, size=size, in_ram=args.in_ram, seed=args.seed,
                  threads=args.threads or cores, pad=2)
    train = imagepack.Loader(args.data.split(","), transform="pad_crop" if small else "train", **common)
    val = imagepack.Loader(args.val, transform="pad_crop_eval" if small else "eval", **common)
    meta = val.meta
    C = val.channels
    mean = torch.tensor(meta["mean"] if len(meta["mean"]) == C else [0.5] * C).view(1, C, 1, 1).mul(255)
    std = torch.tensor(meta["std"] if len(meta["std"]) == C else [0.25] * C).view(1, C, 1, 1).mul(255)
    mean, std = mean.to(device), std.clamp_min(1e-3).to(device)

    def to_input(images):  # uint8 NCHW -> normalised float on the device
        return images.to(device, non_blocking=cuda).float().sub_(mean).div_(std)

    model = make_model(args.arch, C, len(meta["classes"])).to(device)
    decay = [q for q in model.parameters() if not (args.no_bn_wd and q.dim() <= 1)]
    no_decay = [q for q in model.parameters() if args.no_bn_wd and q.dim() <= 1]
    groups = [{"params": decay}] + ([{"params": no_decay, "weight_decay": 0.0}] if no_decay else [])
    optimizer = torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, weight_decay=args.wd)
    if world > 1:  # buffers (BN statistics) are broadcast from rank 0 every step
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    amp_dtype = torch.float16 if cuda else torch.bfloat16
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp and cuda)
    log("=> %s, %d classes, %d process(es) [%s], batch %d/rank, %d train / %d val samples%s" % (
        args.arch, len(meta["classes"]), world, "nccl" if cuda else "gloo", args.batch_size, train.dataset_size,
        val.dataset_size, ", AMP " + str(amp_dtype).replace("torch.", "") if args.amp else ""))

    if args.output and rank == 0:
        os.makedirs(args.output, exist_ok=True)
    metrics = open(os.path.join(args.output, "metrics.jsonl"), "a") if args.output and rank == 0 else None
    steps = len(train)
    best = 0.0
    for epoch in range(args.epochs):
        model.train()
        train.set_epoch(epoch)
        t0, seen, wait = time.time(), 0, 0.0
        t_data = time.time()
        for step, (images, labels) in enumerate(train):
            wait += time.time() - t_data
            lr = learning_rate(args, epoch + step / steps)
            for g in optimizer.param_groups:
                g["lr"] = lr
            x, y = to_input(images), labels.to(device, non_blocking=cuda)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=args.amp):
                out = model(x)
            loss = F.cross_entropy(out.float(), y)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            seen += len(labels)
            if step % args.print_freq == 0 or step + 1 == steps:
                log("Epoch: [%d][%d/%d]  Loss %.4f  LR %.5f" % (epoch, step, steps, loss.item(), lr))
            t_data = time.time()
        elapsed = time.time() - t0
        rate = seen * world / elapsed

        model.eval()
        val.set_epoch(0)
        correct = torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for images, labels in val:
                with torch.autocast(device.type, dtype=amp_dtype, enabled=args.amp):
                    out = model(to_input(images))
                correct[0] += (out.float().argmax(1).cpu() == labels).sum().item()
                correct[1] += len(labels)
        if world > 1:  # every validation sample is counted once across ranks
            dist.all_reduce(correct)
        acc = 100.0 * correct[0].item() / correct[1].item()
        best = max(best, acc)
        log(" * Epoch %d  Acc@1 %.3f  (%d samples)  %.1f images/s, %.0f%% of the time waiting for input" % (
            epoch, acc, correct[1].item(), rate, 100 * wait / elapsed))
        if metrics:
            metrics.write(json.dumps({"type": "eval", "epoch": epoch, "acc1": acc, "images_per_s": rate,
                                      "input_wait": wait / elapsed}) + "\n")
            metrics.flush()
    if args.output and rank == 0:
        net = model.module if world > 1 else model
        torch.save(net.state_dict(), os.path.join(args.output, "model.pt"))
    log("train_imagepack: test accuracy %.2f%% (best %.2f%%)" % (acc, best))
    if world > 1:
        dist.destroy_process_group()


def setup_process(args):
    """(rank, world, device, cuda, cores) after joining the process group."""
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", rank=rank, world_size=world)
    cores = max(1, (os.cpu_count() or 1) // local_world)
    torch.set_num_threads(cores)
    torch.manual_seed(args.seed)
    return rank, world, device, cuda, cores


def train_dense(args):
    """Segmentation or restoration: the C++ trainer's task (trainer/task.cc)
    and model, fed by imagepack.Loader's dict batches."""
    rank, world, device, cuda, cores = setup_process(args)
    log = print if rank == 0 else (lambda *a, **k: None)
    seg = args.task == "segmentation"
    size = args.size or 96
    common = dict(batch_size=args.batch_size, size=size, in_ram=args.in_ram, seed=args.seed,
                  threads=args.threads or cores)
    if seg:  # the C++ trainer's crops: RandomResizedCrop(scale 0.35-1) + flip; whole image for evaluation
        train = imagepack.Loader(args.data.split(","), transform="train", scale=(0.35, 1.0), **common)
        val = imagepack.Loader(args.val, transform="eval", eval_resize=size, **common)
    else:  # crops at the stored scale, both flips; the centre crop for evaluation
        train = imagepack.Loader(args.data.split(","), transform="pad_crop", pad=0, vflip=True, **common)
        val = imagepack.Loader(args.val, transform="pad_crop_eval", **common)
    meta, C = val.meta, val.channels
    kind = "mask" if seg else "image"
    field = next((f for f in meta.get("fields", []) if f["kind"] == kind), None)
    if field is None:
        sys.exit("train_imagepack: --task %s needs a dataset with a %s field" % (args.task, kind))
    name = field["name"]
    if seg:
        classes, ignore = len(field["classes"]), field.get("ignore", -1)
        mean = torch.tensor(meta["mean"] if len(meta["mean"]) == C else [0.5] * C).view(1, C, 1, 1).mul(255)
        std = torch.tensor(meta["std"] if len(meta["std"]) == C else [0.25] * C).view(1, C, 1, 1).mul(255)
        mean, std = mean.to(device), std.clamp_min(1e-3).to(device)
        model = dense_models.fcn_small(C, classes).to(device)

        def prepare(b):
            x = b["image"].to(device).float().sub_(mean).div_(std)
            return x, b[name].to(device).long()

        def loss_of(out, y):
            return F.cross_entropy(out, y, ignore_index=ignore if ignore >= 0 else -100)
    else:
        model = dense_models.unet_small(C, C).to(device)

        def prepare(b):
            return b["image"].to(device).float().div_(127.5).sub_(1), b[name].to(device).float().div_(127.5).sub_(1)

        def loss_of(out, y):
            return F.l1_loss(out, y)
    arch = "fcn_small" if seg else "unet_small"
    decay = [q for q in model.parameters() if not (args.no_bn_wd and q.dim() <= 1)]
    no_decay = [q for q in model.parameters() if args.no_bn_wd and q.dim() <= 1]
    groups = [{"params": decay}] + ([{"params": no_decay, "weight_decay": 0.0}] if no_decay else [])
    optimizer = torch.optim.SGD(groups, lr=args.lr, momentum=args.momentum, weight_decay=args.wd)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if cuda else None)
    log("=> %s (%d parameters), %s, %d process(es), batch %d/rank, %d train / %d val samples" % (
        arch, sum(q.numel() for q in model.parameters()), args.task, world, args.batch_size, train.dataset_size,
        val.dataset_size))
    if args.output and rank == 0:
        os.makedirs(args.output, exist_ok=True)
    metrics = open(os.path.join(args.output, "metrics.jsonl"), "a") if args.output and rank == 0 else None
    steps = len(train)
    for epoch in range(args.epochs):
        model.train()
        train.set_epoch(epoch)
        t0, seen = time.time(), 0
        for step, b in enumerate(train):
            lr = learning_rate(args, epoch + step / steps)
            for g in optimizer.param_groups:
                g["lr"] = lr
            x, y = prepare(b)
            loss = loss_of(model(x).float(), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen += len(x)
            if step % args.print_freq == 0 or step + 1 == steps:
                log("Epoch: [%d][%d/%d]  Loss %.4f  LR %.5f" % (epoch, step, steps, loss.item(), lr))
        rate = seen * world / (time.time() - t0)
        model.eval()
        val.set_epoch(0)
        conf = dense_models.Confusion(classes) if seg else None
        sums = torch.zeros(3, dtype=torch.float64)  # restoration: PSNR output, PSNR input, images
        with torch.no_grad():
            for b in val:
                x, y = prepare(b)
                out = model(x).float()
                if seg:
                    conf.add(out, y)
                else:
                    sums += torch.tensor([dense_models.psnr_sum(out, y), dense_models.psnr_sum(x, y), len(x)],
                                         dtype=torch.float64)
        if world > 1:
            dist.all_reduce(conf.m if seg else sums)
        if seg:
            fig = conf.figures()
            log(" * Epoch %d  mIoU %.3f  PixAcc %.3f  %.1f images/s" % (epoch, fig["miou"], fig["pixel_acc"], rate))
            row = {"type": "eval", "epoch": epoch, "miou": fig["miou"], "pixel_acc": fig["pixel_acc"]}
        else:
            psnr, psnr_in = sums[0].item() / sums[2].item(), sums[1].item() / sums[2].item()
            log(" * Epoch %d  PSNR %.3f  Input %.3f  Gain %.3f  %.1f images/s" % (epoch, psnr, psnr_in, psnr - psnr_in,
                                                                            rate))
            row = {"type": "eval", "epoch": epoch, "psnr": psnr, "psnr_input": psnr_in, "psnr_gain": psnr - psnr_in}
        if metrics:
            metrics.write(json.dumps(dict(row, images_per_s=rate)) + "\n")
            metrics.flush()
    log("train_imagepack: " + ("test mIoU %.2f%%" % row["miou"] if seg else
                               "test PSNR %.2f dB (input %.2f dB, gain %+.2f dB)" % (
                                   row["psnr"], row["psnr_input"], row["psnr_gain"])))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
