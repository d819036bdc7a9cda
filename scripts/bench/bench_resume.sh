#!/usr/bin/env bash
# What exact resume and mid-epoch checkpoints cost:
#  1. restoring the loader in the middle of an ImageNet-sized epoch
#     (1,281,167 records) and of a 10^9-record one: the rank's share of the
#     epoch's order, computed per position, and its first and last entries
#     (the loader's Restore does no more before its first read);
#  2. size and write time of a ResNet-50 checkpoint (model + SGD momentum +
#     state; fsync of file and folder), to disk and to tmpfs;
#  3. the step time of --checkpoint-every: ResNet-18 at 64 px on the
#     bench_loader database, 1 process, every step timed, with checkpoints
#     every 10 steps and without, interleaved.
#
#   scripts/bench/bench_resume.sh [--steps 40]
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=40
while [ $# -gt 0 ]; do case $1 in --steps) STEPS=$2; shift 2;; *) exit 2;; esac; done
TRAIN=${IMAGEPACK_BUILD_DIR:-build}/trainer/train
export PYTHONPATH=$(cd "${IMAGEPACK_BUILD_DIR:-build}/python" && pwd)
DB=/dev/shm/imagepack-bench-loader/jpeg.lmdb
[ -f "$DB" ] || scripts/bench/bench_loader.sh --rounds 1 >/dev/null
OUT=$(mktemp -d /tmp/imagepack-bench-resume-XXXXXX)
SHM=$(mktemp -d /dev/shm/imagepack-bench-resume-XXXXXX)
trap 'rm -rf "$OUT" "$SHM"' EXIT

echo "1. loader restore in the middle of an epoch (no data read), median of 5"
/usr/bin/python3 - <<'PY'
import statistics, time
import imagepack
for n in (1281167, 10 ** 9):
    for world in (1, 8, 64):
        times = []
        for _ in range(5):
            t = time.perf_counter()
            mine = imagepack.epoch_indices(n, True, 0, 17, 0, world, True, start=n // 2)
            first, last = mine[0], mine[-1]
            times.append(time.perf_counter() - t)
        print("   %10d records, world %2d: %6.3f ms (this rank's %d indices of the %d left, computed per index)" % (
            n, world, 1000 * statistics.median(times), len(mine), n - n // 2))
PY

echo "2. ResNet-50 checkpoint (batch 2, one step, then --stop-at-step 1)"
for dir in "$OUT" "$SHM"; do
  "$TRAIN" --data "$DB" --val "$DB" --arch resnet50 --batch-size 2 --no-val --stop-at-step 1 --threads "$(nproc)" \
    --output "$dir/r50" --print-freq 1000 >/dev/null
  /usr/bin/python3 - "$dir/r50/metrics.jsonl" "$dir" <<'PY'
import json, sys
c = [json.loads(l) for l in open(sys.argv[1]) if '"checkpoint"' in l][-1]
where = "tmpfs" if sys.argv[2].startswith("/dev/shm") else "disk (ext4)"
print("   %-12s %.1f MB written in %.2f s (%.0f MB/s)" % (where, c["bytes"] / 1e6, c["seconds"],
                                                      c["bytes"] / 1e6 / c["seconds"]))
PY
done

echo "3. step time, ResNet-18 at 64 px, batch 32, 1 process, $STEPS steps (first 3 untimed), output on disk"
step_times() {  # metrics.jsonl -> median step seconds, and checkpoint count and mean seconds
  /usr/bin/python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step_seconds"] for r in rows if r.get("type") == "train"][3:]
ck = [r["seconds"] for r in rows if r.get("type") == "checkpoint"]
print("%.4f %.4f %d %.3f" % (statistics.median(steps), statistics.mean(steps), len(ck),
                             statistics.mean(ck) if ck else 0))
PY
}
declare -a OFF ON
for r in 1 2; do
  for every in 0 10; do
    rm -rf "$OUT/r18"
    "$TRAIN" --data "$DB" --val "$DB" --arch resnet18 --size 64 --batch-size 32 --no-val --epochs 1 \
      --max-steps "$STEPS" --checkpoint-every "$every" --threads "$(nproc)" --print-freq 1 --output "$OUT/r18" \
      >/dev/null
    line=$(step_times "$OUT/r18/metrics.jsonl")
    echo "   --checkpoint-every $every, round $r: median step $(echo $line | cut -d' ' -f1) s, mean $(echo $line | cut -d' ' -f2) s; $(echo $line | cut -d' ' -f3) checkpoints of $(echo $line | cut -d' ' -f4) s"
  done
done
