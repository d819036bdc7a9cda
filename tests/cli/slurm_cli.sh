#!/usr/bin/env bash
# The project's Slurm scripts, submitted with sbatch from the project root
# as a user submits them, to a real one-node Slurm (slurmctld, slurmd,
# munged from Debian's packages) that this test starts and stops
# (scripts/slurm_cluster.sh):
#  - preparation arrays 1-3, 0-4:2 and 0-3%2 each prepare shards 0..N-1
#    once, which verify together against the source, with the final check
#    as a job that depends on the array (afterok);
#  - a task run again after success changes nothing;
#  - a deleted shard, a damaged one and a task killed mid-way: the check
#    (a plain script) names them and prints the command that prepares just
#    those again, which, run, completes the dataset;
#  - the training command the check prints (shards for --data and --val)
#    trains;
#  - DDP training (sbatch -n 2 scripts/slurm_train.sh) preempted with
#    scancel --signal=USR1: it checkpoints, requeues itself, continues and
#    ends with the uninterrupted job's final weights.
# Usage: slurm_cli.sh BINDIR DATADIR SCRIPTSDIR. Exit 77: skipped (named reason).
BIN=$(cd "$1" && pwd)
SCRIPTS=$(cd "$3" && pwd)
ROOT=$(cd "$SCRIPTS/.." && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: a Slurm node needs root (slurmd starts jobs as their users, munged runs as user munge)"
  exit 77
fi
for b in slurmctld slurmd munged sbatch; do
  command -v "$b" >/dev/null || { echo "SKIP: $b is not installed (scripts/setup.sh installs slurm-wlm and munge)"; exit 77; }
done
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/tiny_data.sh"
CLUSTER=$(mktemp -d /tmp/imagepack-slurm-XXXXXX)
cleanup() {
  "$SCRIPTS/slurm_cluster.sh" stop "$CLUSTER" >/dev/null 2>&1
  rm -rf "$CLUSTER" "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Two free ports on the loopback: slurmctld's and slurmd's.
PORT=$($PY - <<'PYEOF'
import socket
for base in range(26817, 40000, 7):
    socks = []
    try:
        for p in (base, base + 1):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
PYEOF
)

# wait_jobs SECONDS JOB...: until none of the jobs is pending or running.
wait_jobs() {
  local end=$((SECONDS + $1)) ids
  shift
  ids=$(IFS=,; echo "$*")
  while [ $SECONDS -lt $end ]; do
    [ -z "$(squeue -h -j "$ids" -o %i 2>/dev/null)" ] && return 0
    sleep 0.3
  done
  bad "jobs $ids still queued after the time allowed: $(squeue -j "$ids" 2>&1 | tr '\n' '|')"
  return 1
}
# job_states JOB: "N STATE" lines for the job (every task of an array).
job_states() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | awk '{print $1, $2}'; }
# wait_for SECONDS DESCRIPTION COMMAND...
wait_for() {
  local end=$((SECONDS + $1)) what=$2
  shift 2
  while [ $SECONDS -lt $end ]; do
    "$@" && return 0
    sleep 0.1
  done
  bad "$what: not within the time allowed"
  return 1
}
digest() { sed -n 's/.*final weights digest \([0-9a-f]*\).*/\1/p' "$1" | tail -n 1; }

T0=$SECONDS
run start "$SCRIPTS/slurm_cluster.sh" start "$CLUSTER" "$PORT"
expect_rc 0 "the cluster starts" start
[ "$RC" -eq 0 ] || { cat "$WORK/start.err" >&2; finish; exit 1; }
source "$CLUSTER/env"
run sinfo sinfo -h -N -o "%T %c %m"
expect_in sinfo.out "idle $(slurmd -C | sed -n 's/.*CPUs=\([0-9]*\).*/\1/p') "
echo "slurm_cli: cluster up in $((SECONDS - T0)) s"

# sbatch from the project root, as users do; the scripts find the build here.
cd "$ROOT" || exit 1
IMAGEPACK_BUILD_DIR=$(cd "$BIN/.." && pwd)
export IMAGEPACK_BUILD_DIR

# An ImageNet-shaped source: 3 classes x 8 train images, 9 val images.
S=$WORK/imagenet
tiny_imagenet "$S"

# --- Arrays of three forms, each with its final check as a dependent job.
T1=$SECONDS
declare -A ARRAY CHECK
specs=("1-3" "0-4:2" "0-3%2")
counts=(3 3 4)
for k in 0 1 2; do
  ARRAY[$k]=$(sbatch --parsable --array="${specs[$k]}" -o "$WORK/a$k-%A_%a.out" \
    scripts/slurm_prepare.sbatch "$S" "$WORK/o$k" --max-size 32)
  CHECK[$k]=$(sbatch --parsable --kill-on-invalid-dep=yes --dependency=afterok:"${ARRAY[$k]}" -o "$WORK/c$k.out" \
    scripts/slurm_prepare_check.sh "$S" "$WORK/o$k" --max-size 32)
done
wait_jobs 120 "${ARRAY[@]}" "${CHECK[@]}"
for k in 0 1 2; do
  n=${counts[$k]}
  spec=${specs[$k]}
  expect_true "[ \"$(job_states "${ARRAY[$k]}")\" = \"$n JobState=COMPLETED\" ]" \
    "array $spec: $n tasks completed ($(job_states "${ARRAY[$k]}" | tr '\n' ' '))"
  # Each task says which shard it prepared: 0..n-1, each once.
  got=$(cat "$WORK"/a$k-*.out | sed -n 's/.*prepares shard \([0-9]*\) of \([0-9]*\) .*/\1 of \2/p' | sort -n | tr '\n' ',')
  want=$(for ((i = 0; i < n; i++)); do echo "$i of $n"; done | tr '\n' ',')
  expect_true "[ '$got' = '$want' ]" "array $spec: shards prepared '$got', expected '$want'"
  shards=("$WORK/o$k"/train-*.lmdb)
  expect_true "[ ${#shards[@]} -eq $n ]" "array $spec: ${#shards[@]} train shards, expected $n"
  # Verified here too, not only by the check job.
  mapfile -t train < <(for ((i = 0; i < n; i++)); do echo "$WORK/o$k/train-$i-of-$n.lmdb"; done)
  run v$k "$BIN/verify_db" "${train[@]}" --against "$S/train" -q
  expect_rc 0 "array $spec: the train shards together are the source" v$k
  expect_in v$k.out "24 of 24 records checked"
  mapfile -t val < <(for ((i = 0; i < n; i++)); do echo "$WORK/o$k/val-$i-of-$n.lmdb"; done)
  run vv$k "$BIN/verify_db" "${val[@]}" --against "$S/val" -q
  expect_rc 0 "array $spec: the val shards together are the source" vv$k
  expect_true "scontrol -o show job ${CHECK[$k]} | grep -q 'JobState=COMPLETED .*ExitCode=0:0'" \
    "array $spec: the check job succeeded"
  expect_in c$k.out "all $n shard(s) verify together against $S"
done
echo "slurm_cli: 3 arrays (10 tasks) and 3 checks in $((SECONDS - T1)) s"
# The training command the check prints takes the shards as they are
# (--val too: all 9 validation images, from 3 shards).
cmd=$(sed -n 's/^  \(train --data .*\) \.\.\.$/\1/p' "$WORK/c0.out")
read -ra cmd <<<"$cmd"  # train --data A,B,C --val D,E,F: no spaces in these paths
run trainshards "$IMAGEPACK_BUILD_DIR/trainer/${cmd[0]}" "${cmd[@]:1}" --arch small_cnn --epochs 1 --batch-size 8 --threads 1 \
  --print-freq 1000 --output "$WORK/shardrun"
expect_rc 0 "train with the check's command" trainshards
expect_in trainshards.out "(9 samples)"

# --- A task run again after success changes nothing.
T2=$SECONDS
snapshot() { find "$WORK/o0" -type f ! -name 'prepare-*.log' -printf '%P %s %T@\n' | sort; }
snapshot >"$WORK/before.txt"
cat "$WORK"/o0/*.lmdb | sha256sum >"$WORK/before.sha"
R=$(sbatch --parsable --array=1 -o "$WORK/r-%A_%a.out" scripts/slurm_prepare.sbatch --shards 3 "$S" "$WORK/o0" --max-size 32)
wait_jobs 60 "$R"
expect_true "[ \"$(job_states "$R")\" = '1 JobState=COMPLETED' ]" "the re-run task completed"
expect_in "r-${R}_1.out" "prepares shard 1 of 3"
expect_in "r-${R}_1.out" "== shard 1/3 already complete"
snapshot >"$WORK/after.txt"
expect_true "cmp -s '$WORK/before.txt' '$WORK/after.txt'" "a re-run after success changed files: $(diff "$WORK/before.txt" "$WORK/after.txt" | head -5)"
expect_true "[ \"$(cat "$WORK"/o0/*.lmdb | sha256sum)\" = \"$(cat "$WORK/before.sha")\" ]" "the databases' bytes are unchanged"

# --- A deleted shard, and a task killed mid-way.
# A source whose train split takes a while to resize (450 PNGs, hard links
# of one), so that a task can be killed while it works.
B=$WORK/big
$PY - "$B" <<'PYEOF'
import sys, os
from PIL import Image
root = sys.argv[1]
os.makedirs(f"{root}/val")
img = Image.effect_noise((500, 375), 50).convert("RGB")
img.save(f"{root}/one.png")
for c in ("n01", "n02", "n03"):
    os.makedirs(f"{root}/train/{c}")
    for i in range(150):
        os.link(f"{root}/one.png", f"{root}/train/{c}/{c}_{i}.png")
with open(f"{root}/val_labels.txt", "w") as f:
    for i, c in enumerate(("n01", "n02", "n03")):
        img.rotate(i).save(f"{root}/val/v{i}.JPEG", quality=90)
        f.write(f"v{i}.JPEG {c}\n")
PYEOF
K=$(sbatch --parsable --array=0-1 -o "$WORK/k-%A_%a.out" scripts/slurm_prepare.sbatch "$B" "$WORK/ok" --max-size 32)
started() { grep -ls '^classes:' "$WORK"/ok/prepare-*-of-2.log 2>/dev/null | head -n 1 | grep -q .; }
wait_for 60 "a task of the array to start" started
log=$(grep -ls '^classes:' "$WORK"/ok/prepare-*-of-2.log | head -n 1)
killed=$(basename "$log" | sed 's/prepare-\([0-9]*\)-of-2.log/\1/')
scancel --signal=KILL "${K}_$killed"
wait_jobs 60 "$K"
expect_not_in "ok/prepare-$killed-of-2.log" "== done"  # it was killed mid-way
expect_true "! scontrol -o show job ${K}_$killed | grep -q JobState=COMPLETED" "the killed task is not completed"

# Shard 1 deleted, shard 2 damaged (a byte of a JPEG record flipped).
rm "$WORK/o1/train-1-of-3.lmdb"
$PY - "$WORK/o1/val-2-of-3.lmdb" <<'PYEOF'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[b.index(b"\xff\xd8\xff") + 200] ^= 0x55
open(sys.argv[1], "wb").write(b)
PYEOF
run cd1 "$SCRIPTS/slurm_prepare_check.sh" "$S" "$WORK/o1" --max-size 32
expect_rc 1 "the check finds the deleted and the damaged shard" cd1
expect_in cd1.out "shard 1: train-1-of-3.lmdb missing"
expect_in cd1.out "shard 2: val-2-of-3.lmdb fails verify_db: PROBLEM"
expect_in cd1.out "checksum mismatch"
expect_in cd1.out "2 of 3 shard(s) missing or failed: 1 2"
expect_in cd1.out "  sbatch --array=1,2 scripts/slurm_prepare.sbatch --shards 3 $S $WORK/o1 --max-size 32"
run ck1 "$SCRIPTS/slurm_prepare_check.sh" "$B" "$WORK/ok" --max-size 32
expect_rc 1 "the check finds the killed task's shard" ck1
expect_in ck1.out "shard $killed: train-$killed-of-2.lmdb missing"
expect_in ck1.out "  sbatch --array=$killed scripts/slurm_prepare.sbatch --shards 2 $B $WORK/ok --max-size 32"
# The printed commands, run as printed (with an output file of the test's).
again=()
for f in cd1 ck1; do
  cmd=$(sed -n 's/^  \(sbatch --array=.*\)$/\1/p' "$WORK/$f.out")
  again+=("$(eval "${cmd/sbatch /sbatch --parsable -o $WORK/$f-%A_%a.out }")")
done
wait_jobs 60 "${again[@]}"
run cd2 "$SCRIPTS/slurm_prepare_check.sh" "$S" "$WORK/o1" --max-size 32
expect_rc 0 "the deleted and the damaged shard prepared again: complete" cd2
expect_in cd2.out "all 3 shard(s) verify together against $S"
run ck2 "$SCRIPTS/slurm_prepare_check.sh" "$B" "$WORK/ok" --max-size 32
expect_rc 0 "the killed task run again: complete" ck2
expect_in ck2.out "train: verify_db: OK: 450 of 450 records checked"
expect_in ck2.out "train --data $WORK/ok/train-0-of-2.lmdb,$WORK/ok/train-1-of-2.lmdb --val $WORK/ok/val-0-of-2.lmdb,$WORK/ok/val-1-of-2.lmdb"
echo "slurm_cli: re-run, deleted shard and killed task in $((SECONDS - T2)) s"

# --- Training under srun: an uninterrupted job, and one preempted once.
T3=$SECONDS
tiny_classes "$WORK/tiny" "$BIN"
DB=$WORK/tiny/tiny.lmdb
rm -rf "$WORK/tiny/val.lmdb" && cp -a "$DB" "$WORK/tiny/val.lmdb"  # the trainers refuse --val inside --data
TR=(--data "$DB" --val "$WORK/tiny/val.lmdb" --arch small_cnn --size 8 --lr 0.05 --seed 3 --threads 1 --loader-threads 1
    --batch-size 8 --epochs 4 --print-freq 1000)
J1=$(sbatch --parsable -n 2 -o "$WORK/t1.out" scripts/slurm_train.sh "${TR[@]}" --output "$WORK/t1" \
  --log-samples "$WORK/t1.samples")
J2=$(sbatch --parsable -n 2 -o "$WORK/t2.out" scripts/slurm_train.sh "${TR[@]}" --output "$WORK/t2" \
  --log-samples "$WORK/t2.samples")
lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }
wait_for 90 "the second training job to take 10 steps" lines "$WORK/t2.samples.rank0" 10
scancel --signal=USR1 "$J2"
# The job requeues itself; Slurm would start it again after the
# credential lifetime (2 min): released at once here.
requeued() { local j; j=$(scontrol -o show job "$J2"); [[ $j == *JobState=PENDING* && $j == *Restarts=1* ]]; }
wait_for 60 "the preempted job to requeue itself" requeued
scontrol update JobId="$J2" StartTime=now
wait_jobs 90 "$J1" "$J2"
expect_true "scontrol -o show job $J1 | grep -q 'JobState=COMPLETED .*Restarts=0 .*ExitCode=0:0'" \
  "the uninterrupted job completed: $(scontrol -o show job "$J1" | grep -o 'JobState=[A-Z]*\|Restarts=[0-9]*\|ExitCode=[0-9:]*' | tr '\n' ' ')"
expect_true "scontrol -o show job $J2 | grep -q 'JobState=COMPLETED .*Restarts=1 .*ExitCode=0:0'" \
  "the preempted job completed after one requeue: $(scontrol -o show job "$J2" | grep -o 'JobState=[A-Z]*\|Restarts=[0-9]*\|ExitCode=[0-9:]*' | tr '\n' ' ')"
expect_in t1.out "2 process(es) [gloo, slurm]"
expect_in t2.out "slurm_train.sh: preempted with a checkpoint; requeueing job $J2"
expect_in t2.out "(restart 1)"
expect_in t2.out "=> resumed from"
d1=$(digest "$WORK/t1.out")
d2=$(digest "$WORK/t2.out")
expect_true "[ ${#d1} -eq 16 ] && [ '$d1' = '$d2' ]" "final weights: preempted and requeued $d2, uninterrupted $d1"
# Every step ran once over both runs of the preempted job, as in the other.
for r in rank0 rank1; do
  expect_true "cmp -s '$WORK/t1.samples.$r' '$WORK/t2.samples.$r'" "the steps of $r differ from the uninterrupted job's"
done
echo "slurm_cli: training, preempted and requeued, in $((SECONDS - T3)) s"

# --- Stopped: no daemon and no job step of this cluster is left.
run stop "$SCRIPTS/slurm_cluster.sh" stop "$CLUSTER"
expect_rc 0 "the cluster stops" stop
left=""
for p in /proc/[0-9]*; do
  { mapfile -d '' -t env <"$p/environ"; } 2>/dev/null || continue
  ours=0 job=0
  for e in "${env[@]}"; do
    [ "$e" = "SLURM_CONF=$CLUSTER/slurm.conf" ] && ours=1
    [[ $e == SLURM_JOB_ID=* ]] && job=1
  done
  [ $ours = 1 ] || continue
  { read -r comm <"$p/comm"; } 2>/dev/null || continue
  case $comm in slurmctld | slurmd | slurmstepd | slurmscriptd | munged) left+="$comm ";; *) [ $job = 1 ] && left+="$comm ";; esac
done
expect_true "[ -z '$left' ]" "processes of the cluster left after stop: $left"
run status "$SCRIPTS/slurm_cluster.sh" status "$CLUSTER"
expect_rc 1 "status says the cluster is down" status
echo "slurm_cli: $((SECONDS - T0)) s in all"
finish
