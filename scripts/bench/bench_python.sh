#!/usr/bin/env bash
# The Python package side by side, on the same 256-px images as
# bench_loader.sh (RandomResizedCrop 224 + flip, batch 256): imagepack.Loader
# from Python vs bench_loader (C++), JPEG records (LMDB) and raw records
# (blob), and PyTorch's DataLoader + ImageFolder with one worker per core.
# Then a short training run of a small torchvision model (so the input
# matters) fed by each. Interleaved rounds, medians; peak RSS per method.
#
#   scripts/bench/bench_python.sh [--rounds 5] [--batches 70] [--steps 30] [--train-size 112]
#
# All batches come from one epoch (78 batches of the 20,000 images): an
# epoch boundary drains and restarts the pipeline in every loader, which
# would weigh on whichever run crossed more of them. bench_loader times its
# first batch too; the Python runs take one untimed batch first.
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
ROUNDS=5 BATCHES=70 STEPS=30 TRAIN_SIZE=112
bench_options "[--rounds R] [--batches B] [--steps S] [--train-size PX]" \
  --rounds=ROUNDS --batches=BATCHES --steps=STEPS --train-size=TRAIN_SIZE -- "$@"
bench_tools
export PYTHONPATH=$(cd "${IMAGEPACK_BUILD_DIR:-build}/python" && pwd)
bench_work
TREE=$WORK/resized-20000
DB=/dev/shm/imagepack-bench-loader
[ -f "$DB/jpeg.lmdb" ] && [ -f "$DB/raw.blob" ] || scripts/bench/bench_loader.sh --rounds 1 >/dev/null
CORES=$(nproc)
PY="/usr/bin/python3 scripts/bench/python_loader.py"
declare -A R M
for r in $(seq "$ROUNDS"); do
  take cj "$BIN/bench_loader" "$DB/jpeg.lmdb" --batches "$((BATCHES + 1))"
  take pj $PY loader imagepack "$DB/jpeg.lmdb" --batches "$BATCHES"
  take cr "$BIN/bench_loader" "$DB/raw.blob" --batches "$((BATCHES + 1))"
  take pr $PY loader imagepack "$DB/raw.blob" --batches "$BATCHES"
  take dl $PY loader imagefolder "$TREE" --workers "$CORES" --batches "$BATCHES"
done
base=$(median ${R[dl]})
echo "Python loader benchmark: 256-px images, RandomResizedCrop(224) + flip, batch 256, $CORES cores, median of $ROUNDS rounds"
printf '%-52s %10s %14s %10s\n' method images/s "vs DataLoader" "peak RSS"
row() { awk -v n="$1" -v r="$2" -v b="$base" -v m="$3" 'BEGIN {printf "%-52s %10.1f %13.2fx %6s MiB\n", n, r, r / b, m}'; }
row "PyTorch DataLoader + ImageFolder, $CORES workers" "$base" "${M[dl]}"
row "bench_loader (C++), JPEG records, LMDB" "$(median ${R[cj]})" "${M[cj]}"
row "imagepack.Loader (Python), JPEG records, LMDB" "$(median ${R[pj]})" "${M[pj]}"
row "bench_loader (C++), raw records, blob" "$(median ${R[cr]})" "${M[cr]}"
row "imagepack.Loader (Python), raw records, blob" "$(median ${R[pr]})" "${M[pr]}"
awk -v a="$(median ${R[pj]})" -v b="$(median ${R[cj]})" -v c="$(median ${R[pr]})" -v d="$(median ${R[cr]})" \
  'BEGIN {printf "Python / C++: JPEG %.1f%%, raw %.1f%%\n", 100 * a / b, 100 * c / d}'
/usr/bin/python3 -c "import resource, torch, imagepack
print('(Python rows include the interpreter with torch and imagepack imported: %.0f MiB)' %
      (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))"

echo
echo "training mobilenet_v3_small, batch 64, $TRAIN_SIZE px, $CORES cores shared by input and training, $STEPS steps after 3"
$PY train imagepack "$DB/jpeg.lmdb" --steps "$STEPS" --size "$TRAIN_SIZE"
$PY train imagepack "$DB/raw.blob" --steps "$STEPS" --size "$TRAIN_SIZE"
$PY train imagefolder "$TREE" --workers "$CORES" --steps "$STEPS" --size "$TRAIN_SIZE"
