#!/usr/bin/env bash
# The whole ImageNet preparation on one data-prep machine (or one shard of
# it): resize train and val, pack train (shuffled) and val (flat folder +
# ground truth), verify, summarise. Safe to re-run: finished steps are kept.
#
#   scripts/prepare_imagenet.sh SRC OUT [--shard I/N] [--max-size N] [--encoding jpeg|raw]
#                               [--format lmdb|blob] [--val-labels FILE] [--classes FILE] [--seed S]
#                               [--threads T]
#
# SRC holds train/<wnid>/*.JPEG and val/*.JPEG. Val labels: --val-labels FILE
# with lines "FILENAME WNID", or ImageNet's LOC_val_solution.csv (default:
# SRC/LOC_val_solution.csv, else SRC/val_labels.txt). Classes: --classes FILE
# (e.g. LOC_synset_mapping.txt) or the sorted train folders.
# Outputs: OUT/train-I-of-N.lmdb, OUT/val-I-of-N.lmdb, OUT/classes.txt,
# OUT/prepare-I-of-N.log, OUT/errors-*.tsv. With N shards, run I = 0..N-1 on
# N machines (scripts/slurm_prepare.sbatch; several may run at once into one
# OUT) and train on all the shards (scripts/slurm_prepare_check.sh checks
# them together and prints this command):
#   train --data OUT/train-0-of-N.lmdb,OUT/train-1-of-N.lmdb,... --val OUT/val-0-of-N.lmdb,...
# --threads T: worker threads of every tool (default 0: all cores).
# IMAGEPACK_BUILD_DIR: the build folder, absolute or below the project (build).
set -euo pipefail
die() { echo "prepare_imagenet: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: prepare_imagenet.sh SRC OUT [--shard I/N] [--max-size N] [--encoding jpeg|raw] [--format lmdb|blob] [--val-labels FILE] [--classes FILE] [--seed S] [--threads T]"
SRC=$1 OUT=$2; shift 2
SHARD=0/1 MAX=256 ENC=jpeg FMT=lmdb VAL_LABELS="" CLASSES="" SEED=0 THREADS=0
while [ $# -gt 0 ]; do
  case $1 in
    --shard) SHARD=$2; shift 2;;
    --max-size) MAX=$2; shift 2;;
    --encoding) ENC=$2; shift 2;;
    --format) FMT=$2; shift 2;;
    --val-labels) VAL_LABELS=$2; shift 2;;
    --classes) CLASSES=$2; shift 2;;
    --seed) SEED=$2; shift 2;;
    --threads) THREADS=$2; shift 2;;
    *) die "unknown option $1";;
  esac
done
[[ $SHARD =~ ^([0-9]+)/([0-9]+)$ ]] || die "--shard must be I/N"
I=${BASH_REMATCH[1]} N=${BASH_REMATCH[2]}
[ "$I" -lt "$N" ] || die "--shard $SHARD: I must be < N"
[ -d "$SRC/train" ] || die "$SRC/train does not exist"
[ -d "$SRC/val" ] || die "$SRC/val does not exist"
[[ $THREADS =~ ^[0-9]+$ ]] || die "--threads must be a number"
HERE=$(cd "$(dirname "$0")/.." && pwd)
case ${IMAGEPACK_BUILD_DIR:-build} in
  /*) BIN=$IMAGEPACK_BUILD_DIR/tools;;
  *) BIN=$HERE/${IMAGEPACK_BUILD_DIR:-build}/tools;;
esac
[ -x "$BIN/pack_lmdb" ] || die "tools not built: run scripts/build.sh first"
mkdir -p "$OUT"
TAG=$I-of-$N
LOG=$OUT/prepare-$TAG.log
exec > >(tee -a "$LOG") 2>&1
# The tee runs on after this script's last line unless waited for: a caller
# reading our output right after we exit could miss the end of it.
TEE_PID=$!
trap 'exec >&- 2>&-; wait "$TEE_PID"' EXIT
echo "== prepare_imagenet $(date -u +%FT%TZ) shard $SHARD, max-size $MAX, $ENC/$FMT, threads $THREADS, on $(hostname)"

# Files every shard writes, perhaps at the same time as others: written
# under a temporary name and renamed, so a reader never sees half of one,
# and left alone when unchanged.
publish() {  # publish TMP FINAL
  if cmp -s "$1" "$2"; then rm -f "$1"; else mv "$1" "$2"; fi
}

# Class order: shared by every shard, train and val.
if [ -n "$CLASSES" ]; then
  awk 'NF && $1 !~ /^#/ {print $1}' "$CLASSES" > "$OUT/classes.txt.tmp.$$"
else
  (cd "$SRC/train" && find . -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | LC_ALL=C sort) > "$OUT/classes.txt.tmp.$$"
fi
publish "$OUT/classes.txt.tmp.$$" "$OUT/classes.txt"
echo "classes: $(wc -l < "$OUT/classes.txt")"

# Validation ground truth as "FILENAME WNID" lines.
if [ -z "$VAL_LABELS" ]; then
  if [ -f "$SRC/LOC_val_solution.csv" ]; then VAL_LABELS=$SRC/LOC_val_solution.csv
  elif [ -f "$SRC/val_labels.txt" ]; then VAL_LABELS=$SRC/val_labels.txt
  else die "no validation labels: give --val-labels FILE"; fi
fi
case $VAL_LABELS in
  *.csv) awk -F, 'NR > 1 {split($2, a, " "); print $1 ".JPEG", a[1]}' "$VAL_LABELS" > "$OUT/val_labels.txt.tmp.$$";;
  *) cp "$VAL_LABELS" "$OUT/val_labels.txt.tmp.$$";;
esac
publish "$OUT/val_labels.txt.tmp.$$" "$OUT/val_labels.txt"

complete() {  # complete DB: it exists and verifies (checksums; no decoding)
  [ -f "$1" ] && "$BIN/verify_db" "$1" -q --threads "$THREADS" >/dev/null 2>&1
}
# A shard done before is left as it is: nothing is listed, resized or
# written again.
if complete "$OUT/train-$TAG.$FMT" && complete "$OUT/val-$TAG.$FMT"; then
  echo "== shard $SHARD already complete: $OUT/train-$TAG.$FMT $OUT/val-$TAG.$FMT verify (log $LOG)"
  exit 0
fi

status=0
resize() {  # SPLIT
  local rc=0
  "$BIN/resize_imagenet" "$SRC/$1" "$OUT/resized/$1" --max-size "$MAX" --shard "$SHARD" --threads "$THREADS" \
    --errors "$OUT/errors-resize-$1-$TAG.tsv" || rc=$?
  case $rc in 0) ;; 3) echo "resize $1: some inputs skipped, see $OUT/errors-resize-$1-$TAG.tsv"; status=3;;
    *) die "resize_imagenet $1 failed ($rc)";; esac
}
pack() {  # SPLIT DB EXTRA...
  local split=$1 db=$2; shift 2
  if complete "$db"; then echo "pack $split: $db already complete"; return; fi
  local rc=0
  "$BIN/pack_lmdb" "$OUT/resized/$split" "$db" --format "$FMT" --encoding "$ENC" --shard "$SHARD" --threads "$THREADS" \
    --classes "$OUT/classes.txt" --overwrite --errors "$OUT/errors-pack-$split-$TAG.tsv" "$@" || rc=$?
  case $rc in 0) ;; 3) echo "pack $split: some inputs skipped, see $OUT/errors-pack-$split-$TAG.tsv"; status=3;;
    *) die "pack_lmdb $split failed ($rc)";; esac
}
resize train
resize val
pack train "$OUT/train-$TAG.$FMT" --shuffle "$SEED"
pack val "$OUT/val-$TAG.$FMT" --labels "$OUT/val_labels.txt"
for split in train val; do
  "$BIN/verify_db" "$OUT/$split-$TAG.$FMT" --decode --stats -q --threads "$THREADS" | tail -2 || die "verify_db $split failed"
done
echo "== done: $OUT/train-$TAG.$FMT $OUT/val-$TAG.$FMT (log $LOG)"
exit $status
