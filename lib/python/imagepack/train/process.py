"""One process of imagepack.train: the process group, this process's share
of the cores between torch and the loader, bf16 on the CPU, and the ends
of the process (at once on a signal before training; finish() without the
interpreter's teardown)."""
import os
import sys

import torch
import torch.distributed as dist

import imagepack

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


def amp_setting(args, cuda, log):
    """(amp, its dtype): fp16 on CUDA, bf16 on a CPU (--amp auto: only one
    with native bf16, else fp32, said)."""
    amp_dtype = torch.float16 if cuda else torch.bfloat16
    amp = bool(args.amp)
    if amp and not cuda and args.amp == "auto" and not cpu_has_native_bf16():
        amp = False
        log("=> --amp: this CPU has no native bf16 (AVX512-BF16 or AMX-BF16), where bf16 autocast runs several "
            "times slower than fp32: training in fp32 (--amp=bf16 forces bf16)")
    return amp, amp_dtype


def stop_at_once(sig, frame):
    """Before training starts (nothing to save yet) and during --evaluate
    (nothing written until its end): a signal ends the process at once."""
    os._exit(128 + sig)


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
