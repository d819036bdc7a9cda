#!/usr/bin/env bash
# The C++ trainer's segmentation and restoration side by side with the
# plain-PyTorch peer (dense_peer.py: same network, recipe and data; Pillow +
# torchvision transforms + DataLoader with 2 workers), one process each on
# the whole machine, one run each: final test figure and wall time.
#
#   scripts/bench/bench_tasks.sh [--epochs 8] [--scenes 3000] [--pairs 2000] [--only segmentation|restoration]
set -euo pipefail
cd "$(dirname "$0")/../.."
EPOCHS=8 SCENES=3000 PAIRS=2000 ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
    --epochs) EPOCHS=$2; shift 2;; --scenes) SCENES=$2; shift 2;; --pairs) PAIRS=$2; shift 2;;
    --only) ONLY=$2; shift 2;; *) echo "usage: $0 [--epochs E] [--scenes N] [--pairs N] [--only TASK]" >&2; exit 2;;
  esac
done
BIN=${IMAGEPACK_BUILD_DIR:-build}
WORK=${BENCH_DIR:-/tmp/imagepack-bench}/tasks
mkdir -p "$WORK"
PY=/usr/bin/python3
wall() { local t0; t0=$(date +%s%N); "$@" > "$LOG" 2>&1; awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {print (b - a) / 1e9}'; }
last() { $PY -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1]) if '\"eval\"' in l][-1]; print('%.2f' % r[sys.argv[2]])" "$1" "$2"; }
rows=()
if [ "$ONLY" != restoration ]; then
  D=$WORK/scenes-$SCENES
  $PY scripts/make_fmnist_scenes.py "$D" --train "$SCENES" --test 500 >/dev/null
  for s in train test; do
    # Raw pixels: the peer reads the lossless PNGs, so the same data.
    [ -f "$D/$s-raw.lmdb" ] || "$BIN/tools/pack_lmdb" --manifest "$D/$s.jsonl" "$D/$s-raw.lmdb" -q --encoding raw \
      --mask-classes "$D/mask_classes.txt" --box-classes "$D/box_classes.txt" $([ $s = train ] && echo --shuffle 1)
  done
  R="--epochs $EPOCHS --batch-size 32 --lr 0.05 --wd 1e-4"
  rm -rf "$D/cpp" "$D/peer"
  LOG=$D/cpp.log; t=$(wall "$BIN/trainer/train" --task segmentation --data "$D/train-raw.lmdb" --val "$D/test-raw.lmdb" \
    --size 96 --schedule cosine $R --print-freq 1000 --output "$D/cpp")
  rows+=("segmentation|C++ train (imagepack loader)|mIoU $(last "$D/cpp/metrics.jsonl" miou)|$t")
  LOG=$D/peer.log; t=$(wall $PY scripts/bench/dense_peer.py segmentation "$D/train.jsonl" "$D/test.jsonl" $R \
    --workers 2 --output "$D/peer")
  rows+=("segmentation|PyTorch peer (Pillow + DataLoader, 2 workers)|mIoU $(last "$D/peer/metrics.jsonl" miou)|$t")
fi
if [ "$ONLY" != segmentation ]; then
  D=$WORK/pairs-$PAIRS
  $PY scripts/make_photo_pairs.py "$D" --train "$PAIRS" --test 300 >/dev/null
  for s in train test; do
    [ -f "$D/$s.lmdb" ] || "$BIN/tools/pack_lmdb" "$D/$s/blurry" "$D/$s.lmdb" --field "target=$D/$s/sharp" \
      --no-class --encoding raw -q $([ $s = train ] && echo --shuffle 1)
  done
  R="--epochs $EPOCHS --batch-size 16 --lr 0.02 --wd 0"
  rm -rf "$D/cpp" "$D/peer"
  LOG=$D/cpp.log; t=$(wall "$BIN/trainer/train" --task restoration --data "$D/train.lmdb" --val "$D/test.lmdb" \
    --size 64 --schedule cosine $R --print-freq 1000 --output "$D/cpp")
  rows+=("restoration|C++ train (imagepack loader)|gain $(last "$D/cpp/metrics.jsonl" psnr_gain) dB|$t")
  LOG=$D/peer.log; t=$(wall $PY scripts/bench/dense_peer.py restoration "$D/train" "$D/test" $R --size 64 \
    --workers 2 --output "$D/peer")
  rows+=("restoration|PyTorch peer (Pillow + DataLoader, 2 workers)|gain $(last "$D/peer/metrics.jsonl" psnr_gain) dB|$t")
fi
echo "tasks benchmark: $EPOCHS epochs, $(nproc) cores, one process each"
printf '%-13s %-46s %-16s %10s\n' task run "test figure" "wall s"
for r in "${rows[@]}"; do IFS='|' read -r a b c d <<<"$r"; printf '%-13s %-46s %-16s %10.1f\n' "$a" "$b" "$c" "$d"; done
