"""imagepack.train's checkpoints: written atomically (save_atomically: the
previous or the new file, whatever stops the process), the weights'
digest, and the commands that continue a run as it ran (continue_command,
another_global_batch), naming the program as it was started."""
import hashlib
import os
import shlex
import sys

import torch

# The temporary of the checkpoint being written, for the signal handler.
SAVING = {"tmp": None}
# The module `python3 -m` runs for this trainer.
MODULE = "imagepack.train"


def run_as_module():
    """Whether this process runs `python3 -m imagepack.train`."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec is not None and spec.name in (MODULE, MODULE + ".__main__")


def script_words():
    """The trainer as a program's arguments name it: the script run
    (scripts/train_imagepack.py), or -m imagepack.train."""
    return ["-m", MODULE] if run_as_module() else [sys.argv[0]]


def program_words():
    """The words that started this trainer, as run: the interpreter with its
    options and the script ("python3 scripts/train_imagepack.py") or the
    module ("python3 -m imagepack.train"), from /proc/self/cmdline, else
    sys.executable and the script or module."""
    tail = sys.argv[1:]
    try:
        with open("/proc/self/cmdline", "rb") as f:
            words = [w.decode(errors="surrogateescape") for w in f.read().split(b"\0")[:-1]]
        head = words[:len(words) - len(tail)]
        if words[len(head):] == tail and head and (head[-1] == sys.argv[0] or (
                run_as_module() and head[-2:] == ["-m", MODULE])):
            return head
    except OSError:
        pass
    return [sys.executable] + script_words()


def continue_command(output, world, local_world):
    """(command, note): the shell command that continues the run in
    `output` as it was started, its launcher and process count included (a
    run resumed on another number of processes takes another global batch
    and ends with other weights); note: "" or what else to do. The C++
    trainer's rules (trainer/continue_command.cc): scripts/launch.sh's
    words as run ($IMAGEPACK_LAUNCH_CMD), else torchrun's or srun's with the
    world size and ranks per node, else the program alone."""
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
                                                         " ".join(shlex.quote(w) for w in script_words()), resume),
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
