#!/usr/bin/env bash
# The final check of a preparation array (scripts/slurm_prepare.sbatch):
# every shard of OUT present and intact, and all of them together holding
# every image of SRC exactly once, with its class. Run it as a job that
# follows the array, or by hand anywhere the files are (no Slurm needed):
#   sbatch --dependency=afterany:ARRAY_JOB scripts/slurm_prepare_check.sh SRC OUT [options]
#   scripts/slurm_prepare_check.sh SRC OUT [options]
# (afterany: the check runs even when tasks failed, and says which;
# afterok runs it only when all succeeded.) Options are the array's
# (prepare_imagenet.sh options, and --shards N); N is otherwise read from
# the names in OUT (train-I-of-N.*).
#
# Missing or failed shards are named by index, followed by the one command
# that prepares just those again (an array of shard indices, --shards N).
# Exit: 0 all shards verify together against SRC (the training command is
# printed); 1 shards missing or failed, or SRC and the shards disagree;
# 3 complete, but some source images were skipped as unreadable (listed in
# OUT/errors-*.tsv); 2 usage.
#SBATCH --job-name=imagepack-prepare-check
#SBATCH --output=prepare-check-%j.out
set -uo pipefail
usage() { echo "usage: slurm_prepare_check.sh [--shards N] SRC OUT [prepare_imagenet.sh options]" >&2; exit 2; }
SHARDS=""
if [ "${1:-}" = --shards ]; then
  SHARDS=${2:-}
  [[ $SHARDS =~ ^[1-9][0-9]*$ ]] || usage
  shift 2
fi
[ $# -ge 2 ] || usage
SRC=$1 OUT=$2
shift 2
OPTS=("$@")
FMT=lmdb THREADS=0
while [ $# -gt 0 ]; do
  case $1 in
    --format) FMT=${2:-}; shift 2 || usage;;
    --threads) THREADS=${2:-}; shift 2 || usage;;
    --*) shift 2 || usage;;
    *) usage;;
  esac
done
if [ -n "${SLURM_JOB_ID:-}" ]; then
  cd "${SLURM_SUBMIT_DIR:-.}" || exit 1  # sbatch runs a copy of this file
  HERE=$PWD
  [ "$THREADS" != 0 ] || THREADS=${SLURM_CPUS_PER_TASK:-$(nproc)}
else
  HERE=$(cd "$(dirname "$0")/.." && pwd)
fi
case ${IMAGEPACK_BUILD_DIR:-build} in
  /*) BIN=$IMAGEPACK_BUILD_DIR/tools;;
  *) BIN=$HERE/${IMAGEPACK_BUILD_DIR:-build}/tools;;
esac
[ -x "$BIN/verify_db" ] || { echo "slurm_prepare_check: no $BIN/verify_db: build first (scripts/build.sh)" >&2; exit 1; }
[ -d "$SRC/train" ] && [ -d "$SRC/val" ] || { echo "slurm_prepare_check: $SRC has no train/ and val/" >&2; exit 1; }

rerun_command() {  # rerun_command SHARD...
  local ids
  ids=$(IFS=,; echo "$*")
  printf 'sbatch --array=%s scripts/slurm_prepare.sbatch --shards %s' "$ids" "$N"
  printf ' %q' "$SRC" "$OUT" "${OPTS[@]}"
  echo
}

if [ -z "$SHARDS" ]; then
  # N from what the tasks left: databases and logs (a task that failed
  # early leaves at least its log).
  mapfile -t counts < <(find "$OUT" -maxdepth 1 \( -name "train-*-of-*.$FMT" -o -name "val-*-of-*.$FMT" \
    -o -name 'prepare-*-of-*.log' \) -printf '%f\n' 2>/dev/null |
    sed -n 's/^[a-z]*-[0-9]*-of-\([0-9]*\)\..*$/\1/p' | sort -un)
  if [ ${#counts[@]} -eq 0 ]; then
    echo "slurm_prepare_check: no shard in $OUT (no train-I-of-N.$FMT nor prepare-I-of-N.log): nothing was prepared; give --shards N for the command that prepares them" >&2
    exit 1
  fi
  if [ ${#counts[@]} -gt 1 ]; then
    echo "slurm_prepare_check: $OUT holds shards of several splits (of ${counts[*]}): give --shards N" >&2
    exit 1
  fi
  N=${counts[0]}
else
  N=$SHARDS
fi
echo "slurm_prepare_check: $N shard(s) of $SRC in $OUT"

bad=()
for ((i = 0; i < N; i++)); do
  why=""
  for split in train val; do
    db=$OUT/$split-$i-of-$N.$FMT
    if [ ! -e "$db" ]; then
      why+="${why:+; }$split-$i-of-$N.$FMT missing"
    elif ! out=$("$BIN/verify_db" "$db" -q --threads "$THREADS" 2>&1); then
      why+="${why:+; }$split-$i-of-$N.$FMT fails verify_db: $(grep -m1 -e PROBLEM -e verify_db <<<"$out" | cut -c1-200)"
    fi
  done
  if [ -n "$why" ]; then
    echo "shard $i: $why"
    bad+=("$i")
  fi
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "slurm_prepare_check: ${#bad[@]} of $N shard(s) missing or failed: ${bad[*]}"
  echo "prepare just those again (from the imagepack folder):"
  echo "  $(rerun_command "${bad[@]}")"
  exit 1
fi

# Every shard is intact on its own: now all of them against the source.
dbs() { local s=$1 i; for ((i = 0; i < N; i++)); do echo "$OUT/$s-$i-of-$N.$FMT"; done; }
status=0
for split in train val; do
  mapfile -t list < <(dbs "$split")
  out=$("$BIN/verify_db" "${list[@]}" --against "$SRC/$split" -q --threads "$THREADS" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "$split: $(tail -n 1 <<<"$out")"
    continue
  fi
  missing=$(grep -c 'source image is not in the database' <<<"$out")
  other=$(grep -c PROBLEM <<<"$out")
  other=$((other - missing))
  skipped=$(cat "$OUT"/errors-resize-"$split"-*-of-"$N".tsv "$OUT"/errors-pack-"$split"-*-of-"$N".tsv 2>/dev/null |
    grep -vc 'not an image file name')
  if [ "$other" -eq 0 ] && [ "$missing" -le "$skipped" ]; then
    echo "$split: complete but for $missing source image(s) skipped as unreadable (OUT/errors-*-$split-*-of-$N.tsv)"
    [ $status -eq 0 ] && status=3
  else
    echo "$split: the shards and $SRC/$split disagree:"
    grep -e PROBLEM -e verify_db <<<"$out" | head -n 20
    echo "(did $SRC change after the preparation? prepare again: $(rerun_command $(seq -s ' ' 0 $((N - 1)))))"
    status=1
  fi
done
if [ $status -ne 1 ]; then
  echo "slurm_prepare_check: all $N shard(s) verify together against $SRC; train on them with"
  echo "  train --data $(dbs train | paste -sd,) --val $(dbs val | paste -sd,) ..."
fi
exit $status
