#!/usr/bin/env bash
# Two epochs of each recipe preset (trainer/recipes/*.flags) with both
# trainers, build/trainer/train and scripts/train_imagepack.py, on the
# demo's Fashion-MNIST (out/demo/train.lmdb, test.lmdb; made here as
# scripts/demo.sh makes them when missing), on the CPU. Each run takes the
# recipe's flags and overrides only what a small CPU and 28-px images
# need:
#   --arch resnet18   the smallest ResNet: FFCV's --blurpool exists only
#                     for ResNets (small_cnn refuses it), and ResNets take
#                     the recipes' RandomResizedCrop (small_cnn pad-crops);
#   sizes             each recipe's train/eval ratio kept, evaluation at
#                     the images' own 28 px: torchvision 176/232/224 ->
#                     --train-crop-size 22 --val-resize-size 29
#                     --val-crop-size 28; FFCV 160..192 by 32, eval 256
#                     -> --res-schedule 18,21,0,1,1 --val-size 28 (18 px
#                     in epoch 0, 21 px in epoch 1);
#   --epochs 2 --device cpu, and --choose SAMPLES: each epoch draws
#                     SAMPLES of the 60,000 training images (0: all), so
#                     that every schedule runs whole epochs.
# Everything else (lr, batch, schedule, warm-up, mixup, cutmix,
# TrivialAugment, random erasing, EMA, label smoothing, weight decays,
# BlurPool, test-time flips) is the recipe's. Prints one row per run:
# top-1 after each epoch (and the EMA's), each epoch's training images/s
# (its samples over its own time), wall seconds. A run that fails (exit != 0) is
# reported with its command and the end of its log; the rest go on.
#
#   scripts/bench/bench_recipe_presets.sh [--samples 12000] [--recipes a,b]
#       [--trainers cpp,py] [--out out/bench-recipe-presets] [--dry-run]
set -euo pipefail
cd "$(dirname "$0")/../.."
SAMPLES=12000 RECIPES="torchvision_resnet50,ffcv_resnet50_88" TRAINERS="cpp,py"
OUT=out/bench-recipe-presets DRY=0
while [ $# -gt 0 ]; do
  case $1 in
    --samples) SAMPLES=$2; shift 2;;
    --recipes) RECIPES=$2; shift 2;;
    --trainers) TRAINERS=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --dry-run) DRY=1; shift;;
    -h|--help) sed -n '2,28p' "$0"; exit 0;;
    *) echo "bench_recipe_presets.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
BUILD=${IMAGEPACK_BUILD_DIR:-build}
BIN=$BUILD/tools
DEMO=out/demo
PY=/usr/bin/python3
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}

# The demo's databases, as scripts/demo.sh makes them (its steps
# "export", "resize_imagenet", "pack_lmdb"), when missing or incomplete.
demo_data() {
  local split ok=1
  for split in train test; do
    "$BIN/verify_db" "$DEMO/$split.lmdb" -q >/dev/null 2>&1 || ok=0
  done
  [ $ok = 1 ] && return
  echo "== making the demo data in $DEMO (scripts/demo.sh's steps)"
  $PY scripts/export_fashion_mnist.py "$DEMO/tree" >/dev/null
  for split in train test; do
    "$BIN/resize_imagenet" "$DEMO/tree/$split" "$DEMO/resized/$split" --max-size 32 --channels 1 --quality 95 -q \
      --errors "$DEMO/resize-$split.errors"
  done
  "$BIN/pack_lmdb" "$DEMO/resized/train" "$DEMO/train.lmdb" --encoding raw --channels 1 --overwrite -q --shuffle 1
  "$BIN/pack_lmdb" "$DEMO/resized/test" "$DEMO/test.lmdb" --encoding raw --channels 1 --overwrite -q
}

overrides() {  # RECIPE -> the flags that fit it to a small CPU and 28-px images
  case $1 in
    torchvision_resnet50) echo "--train-crop-size 22 --val-resize-size 29 --val-crop-size 28";;
    ffcv_resnet50_88) echo "--res-schedule 18,21,0,1,1 --val-size 28";;
    *) echo "";;
  esac
}

command_for() {  # RECIPE TRAINER -> the command line
  local recipe=$1 trainer=$2 exe
  case $trainer in
    cpp) exe="$BUILD/trainer/train";;
    py) exe="$PY scripts/train_imagepack.py";;
    *) echo "bench_recipe_presets.sh: trainer $trainer: cpp or py" >&2; exit 2;;
  esac
  local choose=""
  [ "$SAMPLES" -gt 0 ] && choose="--choose $SAMPLES"
  echo "$exe --recipe $recipe --data $DEMO/train.lmdb $choose --val $DEMO/test.lmdb --arch resnet18 --epochs 2" \
    "$(overrides "$recipe") --device cpu --output $OUT/$recipe-$trainer --overwrite --print-freq 50"
}

# metrics.jsonl -> "top1_e0 top1_e1 ema_e0 ema_e1 samples_per_epoch rate_e0 / rate_e1"
summarise() {
  $PY - "$1" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def acc(kind, e):
    r = [x["acc1"] for x in rows if x.get("type") == kind and x.get("epoch") == e]
    return "%.2f" % r[-1] if r else "-"
epochs = [x for x in rows if x.get("type") == "epoch"]
samples = [sum(x.get("sources", {}).values()) for x in epochs]
# The epoch's own time: C++ rows hold wait + compute, the script's rows seconds.
secs = [x["seconds"] if "seconds" in x else x["wait_seconds"] + x["compute_seconds"] for x in epochs]
rate = " / ".join("%.0f" % (n / t) for n, t in zip(samples, secs)) or "-"
print(acc("eval", 0), acc("eval", 1), acc("eval_ema", 0), acc("eval_ema", 1),
      ",".join(sorted(set(str(n) for n in samples))) or "-", rate)
PY
}

IFS=, read -r -a RLIST <<<"$RECIPES"
IFS=, read -r -a TLIST <<<"$TRAINERS"
if [ $DRY = 1 ]; then
  for r in "${RLIST[@]}"; do for t in "${TLIST[@]}"; do command_for "$r" "$t"; done; done
  exit 0
fi
[ -x "$BUILD/trainer/train" ] || { echo "bench_recipe_presets.sh: $BUILD/trainer/train is not built" >&2; exit 1; }
demo_data
mkdir -p "$OUT"
echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo -)"
echo "== $(nproc) cores: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)," \
  "family $(sed -n 's/^cpu family[^:]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "== before: $(uptime)"
TABLE="| recipe | trainer | samples per epoch | top-1 epoch 1 | top-1 epoch 2 | EMA top-1 epoch 1 / 2 | train images/s epoch 1 / 2 | wall s |
|---|---|---:|---:|---:|---:|---:|---:|"
FAILED=0
for r in "${RLIST[@]}"; do
  for t in "${TLIST[@]}"; do
    cmd=$(command_for "$r" "$t")
    log=$OUT/$r-$t.log
    echo "== $cmd"
    t0=$(date +%s.%N)
    rc=0
    # shellcheck disable=SC2086  # the command is words by design
    $cmd >"$log" 2>&1 || rc=$?
    wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
    if [ $rc -ne 0 ]; then
      FAILED=1
      echo "FAILED (exit $rc): $cmd" >&2
      tail -5 "$log" >&2
      TABLE+=$'\n'"| $r | $t | failed, exit $rc | | | | | $(printf %.0f "$wall") |"
      continue
    fi
    read -r a0 a1 e0 e1 samples rate <<<"$(summarise "$OUT/$r-$t/metrics.jsonl")"
    ema="-"
    [ "$e0" != "-" ] && ema="$e0% / $e1%"
    name=$([ "$t" = cpp ] && echo "C++ train" || echo "train_imagepack.py")
    TABLE+=$'\n'"| $r | $name | $samples | $a0% | $a1% | $ema | $rate | $(printf %.0f "$wall") |"
    echo "   top-1 $a0 $a1, EMA $e0 $e1, $rate images/s, $(printf %.0f "$wall") s"
  done
done
echo "== after: $(uptime)"
echo
echo "$TABLE"
exit $FAILED
