#!/usr/bin/env bash
# Training speed side by side: `train --arch resnet18` (LibTorch, reading
# the 256-px JPEG LMDB through the loader) vs Python PyTorch with
# torchvision's resnet18 on in-memory batches; same batch, size, threads.
# Then DDP: 2 processes vs 1 on the same cores (small_cnn, Fashion-MNIST
# from the demo's output), throughput and accuracy.
#
#   scripts/bench/bench_train.sh [--batch 32] [--steps 12]
set -euo pipefail
cd "$(dirname "$0")/../.."
BATCH=32 STEPS=12
while [ $# -gt 0 ]; do case $1 in --batch) BATCH=$2; shift 2;; --steps) STEPS=$2; shift 2;; *) exit 2;; esac; done
TRAIN=${IMAGEPACK_BUILD_DIR:-build}/trainer/train
DB=/dev/shm/imagepack-bench-loader/jpeg.lmdb
[ -f "$DB" ] || scripts/bench/bench_loader.sh --rounds 1 >/dev/null
OUT=$(mktemp -d /tmp/imagepack-bench-train-XXXXXX)
trap 'rm -rf "$OUT"' EXIT
CORES=$(nproc)
echo "training speed, resnet18, batch $BATCH, 224 px, $CORES torch threads, steps 3..$STEPS"
/usr/bin/python3 scripts/bench/train_peer.py --batch "$BATCH" --threads "$CORES" --steps "$STEPS"
"$TRAIN" --data "$DB" --val "$DB" --arch resnet18 --batch-size "$BATCH" --threads "$CORES" --loader-threads 1 \
  --epochs 1 --max-steps "$STEPS" --print-freq 1 --output "$OUT/r18" --no-val 2>/dev/null >/dev/null || true
/usr/bin/python3 - "$OUT/r18/metrics.jsonl" "$BATCH" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l][2:]
secs = sum(r["step_seconds"] for r in rows)
n = len(rows) * int(sys.argv[2])
print("train resnet18 (LibTorch + loader): %d images in %.2f s: %.1f images/s" % (n, secs, n / secs))
PY
