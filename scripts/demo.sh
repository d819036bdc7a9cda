#!/usr/bin/env bash
# The main job end to end on a small real dataset (README command 1):
# Fashion-MNIST from Debian's dataset-fashion-mnist -> image tree ->
# resize_imagenet -> pack_lmdb (train shuffled, test) -> verify_db -> train
# small_cnn with 2 DDP processes -> test accuracy and a PNG of the curves.
#
#   scripts/demo.sh [--out DIR] [--limit-train N] [--limit-test N] [--epochs E]
#
# Re-running reuses every finished step. Outputs go to DIR (default out/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out/demo LIMIT_TRAIN=0 LIMIT_TEST=0 EPOCHS=8 NPROC=2
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2;;
    --limit-train) LIMIT_TRAIN=$2; shift 2;;
    --limit-test) LIMIT_TEST=$2; shift 2;;
    --epochs) EPOCHS=$2; shift 2;;
    --nproc) NPROC=$2; shift 2;;
    -h|--help) sed -n '2,10p' "$0"; exit 0;;
    *) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
step() { printf '\n== %s\n' "$*"; }

step "set-up and build"
scripts/setup.sh
scripts/build.sh >/dev/null
BIN=${IMAGEPACK_BUILD_DIR:-build}/tools
mkdir -p "$OUT"

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

TRAIN=${IMAGEPACK_BUILD_DIR:-build}/trainer/train
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
