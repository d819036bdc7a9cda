#!/usr/bin/env bash
# Example Slurm job: DDP training on 1..N nodes, one task per device.
#   sbatch --nodes=2 --ntasks-per-node=4 scripts/slurm_train.sh --data ... --val ... --output runs/x
# The trainer reads SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID; the
# rendezvous address is the job's first node.
#SBATCH --job-name=imagepack-train
#SBATCH --time=48:00:00
#SBATCH --output=train-%j.out
set -euo pipefail
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=${MASTER_PORT:-29500}
cd "${SLURM_SUBMIT_DIR:-.}"
srun build/trainer/train "$@"
