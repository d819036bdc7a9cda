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
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
ROUNDS=3 BATCHES=15
bench_options "[--rounds R] [--batches N]" --rounds=ROUNDS --batches=BATCHES -- "$@"
bench_setup pack_lmdb
bench_resized_base_lmdb
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
