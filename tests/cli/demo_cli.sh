#!/usr/bin/env bash
# The end-to-end loop at reduced size (issue: demo steps in CI), plus the
# shard workflow (2 shards packed separately, trained as one) and the Python
# Dataset. Usage: demo_cli.sh BINDIR DATADIR SCRIPTSDIR
BIN=$1
SCRIPTS=$3
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$SCRIPTS/.." && pwd)
TRAIN=$ROOT/${IMAGEPACK_BUILD_DIR:-build}/trainer/train
[ -x "$TRAIN" ] || TRAIN=$(dirname "$BIN")/trainer/train

run demo "$SCRIPTS/demo.sh" --out "$WORK/demo" --limit-train 6000 --limit-test 1000 --epochs 2
expect_rc 0 "demo at reduced size" demo
acc=$(sed -n 's/^demo: test accuracy \([0-9.]*\)%.*/\1/p' "$WORK/demo.out")
expect_true "[ -n '$acc' ] && awk 'BEGIN {exit !($acc > 65)}'" "demo accuracy $acc% well above chance (10%)"
for f in train.lmdb test.lmdb curves.png run/checkpoint.pt run/model_best.pt run/metrics.jsonl \
    inspect/sheet.png inspect/grid.png inspect/summary.png inspect/duplicates.csv; do
  expect_true "[ -s $WORK/demo/$f ]" "demo artefact $f"
done
expect_true "[ \$(grep -c '\"type\": *\"eval\"' $WORK/demo/run/metrics.jsonl) -eq 2 ]" "one eval row per epoch"
expect_in demo.out "verify_db: OK"
expect_in demo.out "[gloo, torchrun]"
expect_true "head -c 8 $WORK/demo/curves.png | od -An -c | grep -q P" "curves.png is a PNG"

# The Python training example (imagepack.Loader + torch DDP over Gloo) on
# the same databases with the C++ trainer's recipe: the same accuracy, within
# the spread of a 2-epoch run; and a torchvision model under --amp, played
# on a CPU without native bf16 (IMAGEPACK_CPU_BF16=0) whatever this one
# is, so that its time does not depend on the CPU: it trains in fp32 and
# says why.
recipe=(--epochs 2 --batch-size 64 --lr 0.1 --schedule cosine --wd 5e-4 --no-bn-wd --print-freq 1000)
run pytrain "$SCRIPTS/launch.sh" --nproc 2 -- "$PY" "$SCRIPTS/train_imagepack.py" --data "$WORK/demo/train.lmdb" \
  --val "$WORK/demo/test.lmdb" --arch small_cnn "${recipe[@]}" --output "$WORK/pyrun"
expect_rc 0 "Python training example, 2 processes" pytrain
pyacc=$(sed -n 's/^train_imagepack: test accuracy \([0-9.]*\)%.*/\1/p' "$WORK/pytrain.out")
expect_true "[ -n '$pyacc' ] && awk 'BEGIN {exit !($pyacc >= $acc - 4)}'" \
  "Python example's accuracy $pyacc% reaches the C++ trainer's $acc% on the same recipe"
expect_in pytrain.out "2 process(es) [gloo]"
expect_true "[ -s $WORK/pyrun/model.pt ] && [ \$(grep -c acc1 $WORK/pyrun/metrics.jsonl) -eq 2 ]" "Python run's artefacts"
run pyresnet env IMAGEPACK_CPU_BF16=0 "$SCRIPTS/launch.sh" --nproc 2 -- "$PY" "$SCRIPTS/train_imagepack.py" --data "$WORK/demo/train.lmdb" \
  --val "$WORK/demo/test.lmdb" --arch resnet18 --size 28 --amp --epochs 1 --batch-size 64 --lr 0.05 --schedule cosine \
  --wd 5e-4 --no-bn-wd --print-freq 1000
expect_rc 0 "torchvision resnet18 with --amp from imagepack.Loader" pyresnet
rnacc=$(sed -n 's/^train_imagepack: test accuracy \([0-9.]*\)%.*/\1/p' "$WORK/pyresnet.out")
expect_true "[ -n '$rnacc' ] && awk 'BEGIN {exit !($rnacc > 50)}'" "resnet18 accuracy $rnacc% well above chance"
expect_in pyresnet.out "this CPU has no native bf16"
expect_not_in pyresnet.out "AMP bfloat16"

# Re-running reuses every finished step and trains no further.
run again "$SCRIPTS/demo.sh" --out "$WORK/demo" --limit-train 6000 --limit-test 1000 --epochs 2
expect_rc 0 "demo re-run" again
expect_in again.out "already complete"
expect_in again.out "resumed from"
expect_not_in again.out "Epoch: [0]"

# Shards: two machines each pack one shard; training reads both as one.
T=$WORK/demo/resized/train
for i in 0 1; do
  run shard$i "$BIN/pack_lmdb" "$T" "$WORK/s$i.lmdb" --encoding raw --channels 1 --shard $i/2 --shuffle 1 -q
  expect_rc 0 "pack shard $i" shard$i
done
n0=$(sed -n 's/.*: \([0-9]*\) records.*/\1/p' "$WORK/shard0.out")
n1=$(sed -n 's/.*: \([0-9]*\) records.*/\1/p' "$WORK/shard1.out")
expect_true "[ $((n0 + n1)) -eq 6000 ]" "shards add up to the tree ($n0 + $n1)"
run sv "$BIN/verify_db" "$WORK/s0.lmdb" "$WORK/s1.lmdb" --against "$T" -q
expect_rc 0 "verify both shards against the tree" sv
run st "$SCRIPTS/launch.sh" --nproc 2 -- "$TRAIN" --data "$WORK/s0.lmdb,$WORK/s1.lmdb" --val "$WORK/demo/test.lmdb" \
  --arch small_cnn --epochs 1 --batch-size 64 --output "$WORK/shardrun" --print-freq 1000
expect_rc 0 "train on two shards" st
expect_in st.out "(1000 samples)"
expect_in st.out "Epoch: [0][0/47]"

# The Python Dataset over the same database, through torch's DataLoader.
run pyds "$PY" "$SCRIPTS/imagepack_dataset.py" "$WORK/demo/test.lmdb" --size 24 --batch 50 --workers 2
expect_rc 0 "Python Dataset" pyds
expect_in pyds.out "1000 images, 10 labels seen, batch shape (50, 1, 24, 24)"

finish
