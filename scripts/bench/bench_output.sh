#!/usr/bin/env bash
# What the output types cost the loader (docs/PYTHON.md, "Output as the
# model takes it"): imagepack.Loader's crop + flip batches of the resized
# photo tree (bench_augment.sh's: 2000 JPEGs, shorter edge 256, page-cached)
# at 224 px, as uint8, as float32 / float16 / bfloat16 normalised with
# ImageNet's mean and std on the decode threads, as float32 channels_last,
# and as uint8 normalised by torch on the training thread (1 torch thread).
# ROUNDS rounds, every configuration once a round, in turn; medians.
#
#   scripts/bench/bench_output.sh [--rounds 3] [--batches 15]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=3 BATCHES=15
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) ROUNDS=$2; shift 2;;
    --batches) BATCHES=$2; shift 2;;
    *) echo "usage: $0 [--rounds R] [--batches N]" >&2; exit 2;;
  esac
done
BUILD=${IMAGEPACK_BUILD_DIR:-build}
BIN=$BUILD/tools
[ -x "$BIN/pack_lmdb" ] || scripts/build.sh >/dev/null
WORK=${BENCH_DIR:-/tmp/imagepack-bench}
mkdir -p "$WORK"
[ -d "$WORK/photos-2000" ] ||
  /usr/bin/python3 scripts/make_photo_tree.py "$WORK/photos-2000" --images 2000 --classes 10 --seed 3 >/dev/null
[ -d "$WORK/resized-base" ] || "$BIN/resize_imagenet" "$WORK/photos-2000" "$WORK/resized-base" --max-size 256 -q >/dev/null
DB=$WORK/resized-base.lmdb
[ -e "$DB" ] || "$BIN/pack_lmdb" "$WORK/resized-base" "$DB" -q >/dev/null
cat "$DB" >/dev/null
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}

CONFIGS=("uint8" "float32" "float16" "bfloat16" "float32 --channels-last" "uint8 --torch-normalise")
declare -A RATES
for _ in $(seq "$ROUNDS"); do
  for c in "${CONFIGS[@]}"; do
    read -r dtype extra <<<"$c"
    # shellcheck disable=SC2086
    out=$(/usr/bin/python3 scripts/bench/augment_peers.py imagepack "$DB" --policy none --dtype "$dtype" $extra \
          --batches "$BATCHES")
    RATES["$c"]+=" $(sed -n 's/.* s: \([0-9.]*\) images\/s.*/\1/p' <<<"$out")"
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "bench_output: crop + flip to 224 px, batches of 128, $(nproc) cores, 15 batches after a warm-up; median of $ROUNDS rounds"
printf '%-34s %16s %10s\n' "output" "imagepack img/s" "vs uint8"
# shellcheck disable=SC2086
u=$(median ${RATES[uint8]})
for c in "${CONFIGS[@]}"; do
  # shellcheck disable=SC2086
  r=$(median ${RATES[$c]})
  name=$c
  [ "$c" = "uint8 --torch-normalise" ] && name="uint8, then torch normalises"
  [ "$c" = "float32 --channels-last" ] && name="float32 channels_last"
  awk -v n="$name" -v r="$r" -v u="$u" 'BEGIN {printf "%-34s %16.0f %9.2fx\n", n, r, r / u}'
done
