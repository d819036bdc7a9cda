#!/usr/bin/env bash
# Example Slurm job: DDP training on 1..N nodes, one task per device, that
# survives preemption and time limits by itself.
#   sbatch --nodes=2 --ntasks-per-node=4 scripts/slurm_train.sh --data ... --val ... --output runs/x
# The trainer reads SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID; the
# rendezvous address is the job's first node.
#
# Two minutes before the time limit (and when the job is preempted) Slurm
# sends SIGUSR1 to the training tasks; the trainer finishes its step, writes
# OUTPUT/checkpoint.pt and exits 75. The job then requeues itself, and the
# requeued job continues mid-epoch (--resume auto). A second signal stops
# the trainer at once.
#SBATCH --job-name=imagepack-train
#SBATCH --time=48:00:00
#SBATCH --output=train-%j.out
#SBATCH --open-mode=append
#SBATCH --signal=USR1@120
#SBATCH --requeue
set -uo pipefail
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=${MASTER_PORT:-29500}
cd "${SLURM_SUBMIT_DIR:-.}"
srun build/trainer/train --resume auto --checkpoint-minutes 30 "$@"
rc=$?
if [ "$rc" -eq 75 ]; then  # stopped on a signal with a checkpoint: continue in a new allocation
  echo "slurm_train.sh: preempted with a checkpoint; requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
fi
exit "$rc"
