"""imagepack.train's loop: the epochs and their steps, the evaluation
(--evaluate's row, each epoch's), the rows of metrics.jsonl, and the
signals: SIGTERM/SIGUSR1 checkpoint at the next step and exit 75, Ctrl-C
checkpoints and exits 130 saying the command that continues the run, a
second signal stops at once leaving the last complete checkpoint."""
import json
import math
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from . import checkpoint as ckpts
from . import recipe as train_recipe
from .cli import fail

EXIT_PREEMPTED = 75
EXIT_INTERRUPTED = 130  # Ctrl-C, as every tool


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


class Run:
    """One process's run, its parts set by run.main's steps: args, ckpt (or
    None), rank, world, local_world, device, log; task, amp, amp_dtype;
    train, val (Loaders or None); net (the model), model (net or its DDP),
    optimizer, scaler, recipe, base_lr; described (the run's description a
    checkpoint keeps); rows, metrics (the open metrics.jsonl or None);
    epoch, position, step, best (where the run is)."""

    def __init__(self, args, ckpt, rank, world, local_world, device, log):
        self.args, self.ckpt, self.rank, self.world, self.local_world = args, ckpt, rank, world, local_world
        self.device, self.log = device, log
        self.epoch, self.position, self.step, self.best = 0, 0, 0, 0.0
        self.metrics, self.rows = None, ""
        self.stop = {"signal": 0}

    def emit(self, row):
        if self.metrics:
            self.metrics.write(json.dumps(row) + "\n")
            self.metrics.flush()

    def checkpoint(self, state_epoch):
        args = self.args
        if args.output and self.rank == 0:
            ckpts.save_atomically({"model": self.net.state_dict(), "optimizer": self.optimizer.state_dict(),
                                   "scaler": self.scaler.state_dict(), "rng": torch.get_rng_state(),
                                   "loader": self.train.state_dict(), "epoch": state_epoch,
                                   "global_step": self.step, "best": self.best, "args": vars(args),
                                   "run": self.described, "recipe": self.recipe.state_dict(),
                                   "world_size": self.world, "batch_size": args.batch_size},
                                  os.path.join(args.output, "checkpoint.pt"))
        if self.world > 1:
            dist.barrier()

    def evaluate(self, at_epoch, evaluated=None, label=""):
        """(figures, row) of the validation set, every sample counted once
        across ranks."""
        args, task, device = self.args, self.task, self.device
        evaluated = evaluated or self.model
        evaluated.eval()
        self.val.set_epoch(0)
        tally, loss_sum = None, torch.zeros(2, dtype=torch.float64)
        with torch.no_grad():
            for b in self.val:
                x, y = task.prepare(b, device, eval_batch=True)
                with torch.autocast(device.type, dtype=self.amp_dtype, enabled=self.amp):
                    out = train_recipe.tta_forward(evaluated, x, args.tta_flip)
                out = out.float()
                t = task.tally(out, x, y)
                tally = t if tally is None else tally + t
                loss_sum += torch.tensor([task.loss(out, y, training=False).item() * len(x), len(x)],
                                         dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(tally)
            dist.all_reduce(loss_sum)
        f = task.figures(tally)
        where = " * %s (the checkpoint of epoch %d)" % (args.val, at_epoch) if args.evaluate else \
            " * Epoch %d" % at_epoch
        self.log("%s%s  %s  Loss %.4f  (%d samples)" % (where, label, task.line(f), loss_sum[0] / loss_sum[1],
                                                      loss_sum[1].item()))
        row = dict(type="eval", epoch=at_epoch, val=args.val)
        if args.evaluate:
            row["checkpoint"] = self.ckpt["path"]
        row.update({k: v for k, v in f.items() if k != "iou"})
        row.update(loss=(loss_sum[0] / loss_sum[1]).item(), samples=int(loss_sum[1].item()))
        return f, row

    def evaluate_ema(self, at_epoch):
        """The EMA's row (eval_ema, as the C++ trainer's): rank 0's average for
        every rank, as each rank's holds its own BN statistics."""
        ema = self.recipe.ema
        if self.world > 1:
            for t in ema.tensors(ema.module):
                dist.broadcast(t.data, 0)
        row = self.evaluate(at_epoch, ema.module, " EMA")[1]
        row["type"] = "eval_ema"
        return row

    def log_digests(self):
        self.log("final weights digest %s" % ckpts.weights_digest(self.net))
        if self.recipe.ema is not None:
            self.log("final EMA weights digest %s" % ckpts.weights_digest(self.recipe.ema.module))

    def run_evaluation(self):
        """--evaluate: the checkpoint's rows appended to evaluations.jsonl."""
        ckpt = self.ckpt
        # The checkpoint's epoch: the epochs it completed (the C++ trainer's count).
        at = int(ckpt.get("epoch", ckpt["loader"]["epoch"]))
        f, row = self.evaluate(at)
        found = [row] + ([self.evaluate_ema(at)] if self.recipe.ema is not None and "ema" in ckpt.get("recipe", {})
                         else [])
        for r in found:
            r["global_step"] = ckpt.get("global_step", 0)
        if self.rank == 0:
            try:
                with open(self.rows, "a") as out:
                    out.write("".join(json.dumps(r) + "\n" for r in found))
            except OSError as e:
                fail("cannot write %s: %s" % (self.rows, e))
            self.log("=> evaluation row appended to %s" % self.rows)
        self.log("train_imagepack: " + self.task.result(f))
        return 0

    def on_signal(self, sig, frame):
        if self.stop["signal"]:  # asked twice: now, leaving nothing half-written
            tmp = ckpts.SAVING["tmp"]
            if tmp:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            if self.rank == 0:
                os.write(2, b"train_imagepack: stopped at once; the last complete checkpoint is kept\n")
            os._exit(128 + sig)
        self.stop["signal"] = sig
        if sig == signal.SIGINT and self.rank == 0:
            os.write(2, b"train_imagepack: Ctrl-C: writing a checkpoint at the next step, then stopping (Ctrl-C "
                        b"again stops at once)\n" if self.args.output else
                     b"train_imagepack: Ctrl-C: stopping at the next step (no --output: nothing is saved; Ctrl-C "
                     b"again stops at once)\n")

    def run_training(self):
        """The epochs from the run's place; the exit code."""
        args = self.args
        for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT):
            signal.signal(sig, self.on_signal)
        steps_per_epoch = math.ceil(math.ceil(self.train.epoch_length / self.world) / args.batch_size)
        f = None
        for self.epoch in range(self.epoch, args.epochs):
            code = self.train_epoch(steps_per_epoch)
            if code is not None:
                return code
            f = self.end_epoch() or f
        if args.output and self.rank == 0:
            ckpts.save_atomically(self.net.state_dict(), os.path.join(args.output, "model.pt"))
        self.log_digests()
        if f is not None:
            self.log("train_imagepack: %s (best %.2f)" % (self.task.result(f), self.best))
        return 0

    def train_epoch(self, steps_per_epoch):
        """One epoch's steps from the run's position; an exit code when a
        signal or --stop-at-step stops the run, else None."""
        args, epoch = self.args, self.epoch
        self.model.train()
        self.train.set_epoch(epoch)  # keeps a restored position of this epoch
        first = self.position // (args.batch_size * self.world)
        self.position = 0
        self.t0, self.seen, self.wait = time.time(), 0, 0.0
        t_data = time.time()
        for i, b in enumerate(self.train):
            self.wait += time.time() - t_data
            self.train_step(b, first + i, steps_per_epoch)
            code = self.stop_point()
            if code is not None:
                return code
            t_data = time.time()
        return None

    def train_step(self, b, index, steps_per_epoch):
        """One step: the batch `index` of the epoch, its row when logged."""
        args, epoch, task = self.args, self.epoch, self.task
        lr = train_recipe.epoch_lr(args, self.base_lr, epoch) if args.lr_warmup_epochs else \
            learning_rate(args, self.base_lr, epoch + index / steps_per_epoch)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        x, y = self.recipe.mix(*task.prepare(b, self.device), epoch, index)  # soft targets when mixing
        with torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp):
            out = self.model(x)
        loss = task.loss(out.float(), y)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.recipe.clip(self.model, self.optimizer, self.scaler)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.recipe.after_step(self.net, epoch, index)
        self.step += 1
        self.seen += len(x)
        if index % args.print_freq == 0:
            if not args.quiet:
                self.log("Epoch: [%d][%d/%d]  Loss %.4f  LR %.5f" % (epoch, index, steps_per_epoch, loss.item(), lr))
            if self.metrics:
                self.emit(dict({"type": "train", "epoch": epoch, "step": index, "global_step": self.step,
                                "loss": loss.item(), "lr": lr},
                               **task.step_figures(out.float(), x, y if y.dim() == 1 else y.argmax(1))))

    def stop_point(self):
        """After a step: the checkpoint of --checkpoint-every, a signal or
        --stop-at-step, decided by every rank together (a signal may reach
        one); the exit code when the run stops here, else None."""
        args, sig = self.args, self.stop["signal"]
        flags = torch.tensor([sig not in (0, signal.SIGINT), 0 < args.stop_at_step <= self.step,
                              args.checkpoint_every > 0 and self.step % args.checkpoint_every == 0,
                              sig == signal.SIGINT], dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(flags)
        interrupted = flags[3] > 0  # Ctrl-C on any rank stops them all (130); else SIGTERM/SIGUSR1 (75)
        preempted = interrupted or flags[0] > 0
        if flags.sum() == 0:
            return None
        self.checkpoint(self.epoch)
        if not (preempted or flags[1] > 0):
            return None
        # The loader's own place: after an epoch's last step it is the next epoch's start.
        at = self.train.state_dict()
        where = "checkpoint at epoch %d, position %d, step %d in %s" % (
            at["epoch"], at["position"], self.step, os.path.join(args.output or "", "checkpoint.pt"))
        if not args.output:
            where = "at epoch %d, position %d, step %d; no --output, so no checkpoint was written" % (
                at["epoch"], at["position"], self.step)
        if interrupted:
            self.say_interrupted(where)
        else:
            self.log("=> %s: %s" % ("stop requested by a signal" if preempted else "--stop-at-step reached", where))
        self.log_digests()
        return EXIT_INTERRUPTED if interrupted else EXIT_PREEMPTED if preempted else 0

    def say_interrupted(self, where):
        """Ctrl-C's line (rank 0): where the run stopped and the command that
        continues the same run, its launcher and process count too."""
        if self.rank != 0:
            return
        args, world = self.args, self.world
        again = ""
        if args.output:
            command, note = ckpts.continue_command(args.output, world, self.local_world)
            again = (" Continue the run (%d process(es), global batch %d; options not given "
                     "are the checkpoint's run's) with:\n  %s%s" % (
                         world, world * args.batch_size, command, "\n  (%s)" % note if note else ""))
        sys.stderr.write("train_imagepack: interrupted (Ctrl-C): %s.%s\n" % (where, again))
        sys.stderr.flush()

    def end_epoch(self):
        """An epoch's end: its row, the evaluation, the checkpoint; the
        evaluation's figures (None without one)."""
        epoch, train = self.epoch, self.train
        elapsed = time.time() - self.t0
        rate = self.seen * self.world / max(elapsed, 1e-9)
        res = train.output_size
        sources = {s["name"]: s["samples"] for s in train.sources}
        self.log("Epoch %d: %d px, %.1f images/s, %.0f%% of the time waiting for input%s" % (
            epoch, res, rate, 100 * self.wait / elapsed,
            "; samples: " + ", ".join("%s %d" % kv for kv in sources.items()) if len(sources) > 1 else ""))
        self.emit({"type": "epoch", "epoch": epoch, "images_per_s": rate, "input_wait": self.wait / elapsed,
                   "res": res, "sources": sources, "seconds": elapsed})
        f = None
        if self.val is not None and not self.args.no_val:
            f, row = self.evaluate(epoch)
            self.emit(row)
            if self.recipe.ema is not None:
                self.emit(self.evaluate_ema(epoch))
            self.best = max(self.best, self.task.score(f))
        train.set_epoch(epoch + 1)
        self.checkpoint(epoch + 1)
        return f
