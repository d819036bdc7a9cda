#!/usr/bin/env bash
# The main job end to end on a small real dataset (README command 1):
# Fashion-MNIST from Debian's dataset-fashion-mnist -> image tree ->
# resize_imagenet -> pack_lmdb (train shuffled, test) -> verify_db -> train
# small_cnn with 2 DDP processes -> test accuracy and a PNG of the curves.
#
#   scripts/demo.sh [--out DIR] [--limit-train N] [--limit-test N] [--epochs E]
#   scripts/demo.sh --task segmentation|restoration [--out DIR] [--train N] [--test N] [--epochs E]
#
# --task segmentation: Fashion-MNIST scenes (make_fmnist_scenes.py: image +
# mask trees and a JSON Lines manifest with boxes) -> pack_lmdb --manifest
# -> verify_db --against -> train --task segmentation (fcn_small, 2 DDP
# processes) -> test mIoU, curves, and a PNG of validation inputs,
# predictions and ground truths. --task restoration: photo pairs
# (make_photo_pairs.py: blurry/sharp trees) -> pack_lmdb --field
# target=sharp -> train --task restoration (unet_small) -> PSNR against the
# degraded input's. Re-running reuses every finished step. Outputs go to
# DIR (default out/demo, or out/demo-TASK).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="" LIMIT_TRAIN=0 LIMIT_TEST=0 EPOCHS="" NPROC=2 TASK=classification NTRAIN="" NTEST=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2;;
    --task) TASK=$2; shift 2;;
    --train) NTRAIN=$2; shift 2;;
    --test) NTEST=$2; shift 2;;
    --limit-train) LIMIT_TRAIN=$2; shift 2;;
    --limit-test) LIMIT_TEST=$2; shift 2;;
    --epochs) EPOCHS=$2; shift 2;;
    --nproc) NPROC=$2; shift 2;;
    -h|--help) sed -n '2,20p' "$0"; exit 0;;
    *) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
case $TASK in
  classification) OUT=${OUT:-out/demo} EPOCHS=${EPOCHS:-8};;
  segmentation|restoration) OUT=${OUT:-out/demo-$TASK} EPOCHS=${EPOCHS:-8};;
  *) echo "demo.sh: --task must be classification, segmentation or restoration" >&2; exit 2;;
esac
step() { printf '\n== %s\n' "$*"; }

step "set-up and build"
scripts/setup.sh
scripts/build.sh >/dev/null
BIN=${IMAGEPACK_BUILD_DIR:-build}/tools
TRAIN=${IMAGEPACK_BUILD_DIR:-build}/trainer/train
mkdir -p "$OUT"

if [ "$TASK" != classification ]; then
  [ -x "$TRAIN" ] || { echo "demo.sh: the trainer is not built (LibTorch missing?)" >&2; exit 1; }
  if [ "$TASK" = segmentation ]; then
    step "make Fashion-MNIST scenes: image and mask trees, JSON Lines manifests with boxes"
    /usr/bin/python3 scripts/make_fmnist_scenes.py "$OUT/data" --train "${NTRAIN:-3000}" --test "${NTEST:-500}"
    step "pack_lmdb --manifest: image + mask + boxes (train shuffled)"
    for split in train test; do
      [ -f "$OUT/$split.lmdb" ] && "$BIN/verify_db" "$OUT/$split.lmdb" -q >/dev/null 2>&1 && continue
      "$BIN/pack_lmdb" --manifest "$OUT/data/$split.jsonl" "$OUT/$split.lmdb" --overwrite -q \
        --mask-classes "$OUT/data/mask_classes.txt" --box-classes "$OUT/data/box_classes.txt" \
        $([ $split = train ] && echo --shuffle 1)
    done
    step "verify_db against the manifests"
    for split in train test; do "$BIN/verify_db" "$OUT/$split.lmdb" --decode --against "$OUT/data/$split.jsonl" -q; done
    ARGS=(--task segmentation --size 96 --batch-size 32 --lr 0.05 --wd 1e-4)
  else
    step "make photo pairs: blurry/sharp trees from the wallpaper packages"
    /usr/bin/python3 scripts/make_photo_pairs.py "$OUT/data" --train "${NTRAIN:-2000}" --test "${NTEST:-300}"
    step "pack_lmdb: blurry + target=sharp, raw pixels (train shuffled)"
    for split in train test; do
      [ -f "$OUT/$split.lmdb" ] && "$BIN/verify_db" "$OUT/$split.lmdb" -q >/dev/null 2>&1 && continue
      "$BIN/pack_lmdb" "$OUT/data/$split/blurry" "$OUT/$split.lmdb" --field "target=$OUT/data/$split/sharp" \
        --no-class --encoding raw --overwrite -q $([ $split = train ] && echo --shuffle 1)
    done
    step "verify_db against the trees"
    for split in train test; do "$BIN/verify_db" "$OUT/$split.lmdb" --against "$OUT/data/$split/blurry" -q; done
    ARGS=(--task restoration --size 64 --batch-size 16 --lr 0.02 --wd 0)
  fi
  step "train --task $TASK, $NPROC DDP processes (Gloo), $EPOCHS epochs"
  scripts/launch.sh --nproc "$NPROC" -- "$TRAIN" --data "$OUT/train.lmdb" --val "$OUT/test.lmdb" "${ARGS[@]}" \
    --epochs "$EPOCHS" --schedule cosine --output "$OUT/run" --print-freq 50 --resume auto --save-predictions 8
  step "result"
  /usr/bin/python3 scripts/plot_metrics.py "$OUT/run/metrics.jsonl" "$OUT/curves.png"
  /usr/bin/python3 scripts/plot_predictions.py "$OUT/run" "$OUT/predictions.png"
  /usr/bin/python3 - "$OUT/run/metrics.jsonl" <<'PY'
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l][-1]
if "miou" in last:
    print("demo: test mIoU %.2f%%, pixel accuracy %.2f%% after %d epochs" % (last["miou"], last["pixel_acc"],
                                                                         last["epoch"] + 1))
else:
    print("demo: test PSNR %.2f dB against the degraded input's %.2f dB (gain %+.2f dB), SSIM %.4f against %.4f, "
          "after %d epochs" % (last["psnr"], last["psnr_input"], last["psnr_gain"], last["ssim"], last["ssim_input"],
                               last["epoch"] + 1))
PY
  echo "demo: curves in $OUT/curves.png, predictions in $OUT/predictions.png, run in $OUT/run/"
  exit 0
fi

step "export Fashion-MNIST to an image tree"
/usr/bin/python3 scripts/export_fashion_mnist.py "$OUT/tree" --limit-train "$LIMIT_TRAIN" --limit-test "$LIMIT_TEST"

step "resize_imagenet (1-channel JPEGs, shorter edge <= 32: these are 28 px, so no upscaling)"
for split in train test; do
  rc=0
  "$BIN/resize_imagenet" "$OUT/tree/$split" "$OUT/resized/$split" --max-size 32 --channels 1 --quality 95 -q \
    --errors "$OUT/resize-$split.errors" || rc=$?
  [ $rc -eq 0 ] || { echo "demo.sh: resize_imagenet failed ($rc), see $OUT/resize-$split.errors" >&2; exit 1; }
done

step "pack_lmdb: train (shuffled) and test, raw 28x28 gray pixels"
pack() {  # SPLIT EXTRA...
  local split=$1; shift
  if [ -f "$OUT/$split.lmdb" ] && "$BIN/verify_db" "$OUT/$split.lmdb" -q >/dev/null 2>&1; then
    echo "pack_lmdb: $OUT/$split.lmdb already complete"
    return
  fi
  "$BIN/pack_lmdb" "$OUT/resized/$split" "$OUT/$split.lmdb" --encoding raw --channels 1 --overwrite -q "$@"
}
pack train --shuffle 1
pack test

step "verify_db against the trees"
"$BIN/verify_db" "$OUT/train.lmdb" --against "$OUT/resized/train" -q
"$BIN/verify_db" "$OUT/test.lmdb" --against "$OUT/resized/test" --stats -q | tail -3

step "inspect_db: contact sheet, the loader's first batch, summary; test leaking into train?"
# --overwrite: a second demo replaces the pictures of the first.
"$BIN/inspect_db" "$OUT/train.lmdb" --out "$OUT/inspect" --tile 56 --crop 28 --augment pad_crop --overwrite
# Near-identical pairs only: Fashion-MNIST's centred garments look alike
# at the defaults (docs/BENCHMARKS.md, "Import, export and duplicates").
"$BIN/inspect_db" "$OUT/train.lmdb" "$OUT/test.lmdb" --out "$OUT/inspect" --duplicates -q --overwrite \
  --min-similarity 0.97 --min-detail 0.9 --max-distance 4

if [ ! -x "$TRAIN" ]; then
  echo "demo.sh: the trainer is not built (LibTorch missing?): stopping after verification" >&2
  exit 1
fi
step "train small_cnn, $NPROC DDP processes (Gloo), $EPOCHS epochs"
scripts/launch.sh --nproc "$NPROC" -- "$TRAIN" --data "$OUT/train.lmdb" --val "$OUT/test.lmdb" \
  --arch small_cnn --epochs "$EPOCHS" --batch-size 64 --lr 0.1 --schedule cosine --wd 5e-4 --no-bn-wd \
  --output "$OUT/run" --print-freq 100 --resume auto

step "result"
/usr/bin/python3 scripts/plot_metrics.py "$OUT/run/metrics.jsonl" "$OUT/curves.png"
/usr/bin/python3 - "$OUT/run/metrics.jsonl" <<'PY'
import json, sys
evals = [json.loads(l) for l in open(sys.argv[1]) if '"eval"' in l]
last = evals[-1]
print("demo: test accuracy %.2f%% (top-1) after %d epochs" % (100 - last["error1"], last["epoch"] + 1))
PY
echo "demo: curves in $OUT/curves.png, checkpoints and metrics in $OUT/run/"
