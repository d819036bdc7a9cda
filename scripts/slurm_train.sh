#!/usr/bin/env bash
# Slurm job: DDP training on 1..N nodes, one task per device, that survives
# preemption and time limits by itself. Submit from the imagepack folder:
#   sbatch --nodes=2 --ntasks-per-node=4 scripts/slurm_train.sh --data ... --val ... --output runs/x
# Every task is build/trainer/train under srun. It reads its rank, the world
# and its node's share from Slurm's variables (SLURM_PROCID, SLURM_NTASKS,
# SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE, SLURM_CPUS_PER_TASK) and meets
# the others at the step's first node (SLURM_STEP_NODELIST) on port
# 20000 + job id % 20000; export MASTER_ADDR / MASTER_PORT to choose
# (docs/TRAINING.md, "Slurm").
#
# Two minutes before the time limit (and when the job is preempted) Slurm
# sends SIGUSR1 to the training tasks; the trainer finishes its step, writes
# OUTPUT/checkpoint.pt and exits 75. The job then requeues itself, and the
# requeued job continues mid-epoch (--resume auto). A second signal stops
# the trainer at once. Slurm starts a requeued job again after the
# cluster's credential lifetime (AuthInfo cred_expire, 120 s by default).
#SBATCH --job-name=imagepack-train
#SBATCH --output=train-%j.out
#SBATCH --open-mode=append
#SBATCH --signal=USR1@120
#SBATCH --requeue
set -uo pipefail
# sbatch runs a copy of this file: the project is where it was submitted.
cd "${SLURM_SUBMIT_DIR:-.}" || exit 1
case ${IMAGEPACK_BUILD_DIR:-build} in
  /*) TRAIN=$IMAGEPACK_BUILD_DIR/trainer/train;;
  *) TRAIN=${IMAGEPACK_BUILD_DIR:-build}/trainer/train;;
esac
[ -x "$TRAIN" ] || { echo "slurm_train.sh: no $TRAIN in $PWD: submit from the imagepack folder, after scripts/build.sh" >&2; exit 1; }
echo "slurm_train.sh: job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}), $SLURM_NTASKS task(s) on $SLURM_JOB_NODELIST"
srun "$TRAIN" --resume auto --checkpoint-minutes 30 "$@"
rc=$?
if [ "$rc" -eq 75 ]; then  # stopped on a signal with a checkpoint: continue in a new allocation
  echo "slurm_train.sh: preempted with a checkpoint; requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
  exit 0
fi
exit "$rc"
