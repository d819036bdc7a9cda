#!/usr/bin/env bash
# torchvision's reference training transforms, side by side in one run:
# imagepack.Loader against PyTorch's DataLoader with torchvision's own
# transforms (ImageFolder, PIL, 2 workers), both making what the reference
# train.py's ClassificationPresetTrain makes (RandomResizedCrop 224, flip,
# the policy, float32 normalised, RandomErasing), on the resized photo
# tree (2000 JPEGs from the wallpapers, shorter edge 256, page-cached;
# imagepack reads its pack). Rows:
#   - TrivialAugmentWide + RandomErasing 0.25 (the "new recipe"), both;
#   - each policy alone (none, ta_wide, ra, imagenet, augmix) and erasing
#     alone, both, as the cost against plain RandomResizedCrop + flip.
# ROUNDS rounds, every configuration once a round, in turn; medians.
#
#   scripts/bench/bench_augment.sh [--rounds 3] [--batches 15] [--workers 2]
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
ROUNDS=3 BATCHES=15 WORKERS=2
bench_options "[--rounds R] [--batches N] [--workers W]" --rounds=ROUNDS --batches=BATCHES --workers=WORKERS -- "$@"
bench_setup pack_lmdb
bench_resized_base_lmdb
find "$TREE" -type f -exec cat {} + >/dev/null
cat "$DB" >/dev/null
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}

CONFIGS=("ta_wide 0.25" "none 0" "ta_wide 0" "ra 0" "imagenet 0" "augmix 0" "none 0.25")
declare -A RATES
for _ in $(seq "$ROUNDS"); do
  for c in "${CONFIGS[@]}"; do
    read -r policy erase <<<"$c"
    for pipe in imagepack dataloader; do
      src=$DB
      [ "$pipe" = dataloader ] && src=$TREE
      out=$(/usr/bin/python3 scripts/bench/augment_peers.py "$pipe" "$src" --policy "$policy" --erase "$erase" \
            --batches "$BATCHES" --workers "$WORKERS")
      RATES["$pipe $c"]+=" $(sed -n 's/.* s: \([0-9.]*\) images\/s.*/\1/p' <<<"$out")"
    done
  done
done
declare -A R
for k in "${!RATES[@]}"; do
  # shellcheck disable=SC2086
  R[$k]=$(median ${RATES[$k]})
done
echo "bench_augment: $(find "$TREE" -type f | wc -l) JPEGs (shorter edge 256) -> 224 px float32, $(nproc) cores;" \
     "DataLoader $WORKERS workers; $BATCHES batches of 128 after a warm-up batch; median of $ROUNDS rounds"
printf '%-34s %16s %16s %9s %14s %14s\n' "transforms" "imagepack img/s" "DataLoader img/s" "ratio" \
  "imagepack cost" "DataLoader cost"
for c in "${CONFIGS[@]}"; do
  read -r policy erase <<<"$c"
  name="$policy"
  [ "$policy" = none ] && name="crop + flip"
  [ "$erase" != 0 ] && name="$name + erase $erase"
  awk -v n="$name" -v i="${R[imagepack $c]}" -v d="${R[dataloader $c]}" -v i0="${R[imagepack none 0]}" \
      -v d0="${R[dataloader none 0]}" \
      'BEGIN {printf "%-34s %16.0f %16.0f %8.2fx %13.2fx %13.2fx\n", n, i, d, i / d, i0 / i, d0 / d}'
done
echo "cost: the plain crop + flip's images/s over this row's (1.00x: free)"
