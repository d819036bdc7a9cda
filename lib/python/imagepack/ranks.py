"""Where this process is among the ranks: torch.distributed, torchrun's or
Slurm's variables; the cores it may use."""
import os

from .common import _torch


def _env_int(name):
    value = os.environ.get(name, "")
    if value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError("%s=%r is not an integer" % (name, value)) from None


def distributed_env():
    """(rank, world_size, local_world_size, source) as the Loader takes them:
    from torch.distributed when it is initialised; else from torchrun's
    variables (RANK, WORLD_SIZE, LOCAL_WORLD_SIZE: scripts/launch.sh sets
    them too), else Slurm's (SLURM_PROCID, SLURM_NTASKS, and the tasks on
    this node), so that a Loader built before init_process_group is
    sharded all the same; else (0, 1, 1, "none")."""
    torch = _torch()
    local = _env_int("LOCAL_WORLD_SIZE")
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        world = torch.distributed.get_world_size()
        return torch.distributed.get_rank(), world, local or world, "torch.distributed"
    if _env_int("WORLD_SIZE") is not None:
        world = _env_int("WORLD_SIZE")
        return _env_int("RANK") or 0, world, local or world, "RANK/WORLD_SIZE"
    if _env_int("SLURM_NTASKS") is not None and _env_int("SLURM_PROCID") is not None:
        world = _env_int("SLURM_NTASKS")
        per_node = os.environ.get("SLURM_TASKS_PER_NODE", "").split("(")[0]
        local = int(per_node) if per_node.isdigit() else world
        return _env_int("SLURM_PROCID"), world, local, "SLURM_PROCID/SLURM_NTASKS"
    return 0, 1, 1, "none"


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
