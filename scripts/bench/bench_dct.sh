#!/usr/bin/env bash
# The accurate IDCT (Pillow's pixels) against the fast one, side by side in
# one run, on the resized photo tree (2000 256-px JPEGs from the
# wallpapers, page-cached; outputs on tmpfs, so the figures are CPU work):
#   - pack_lmdb --encoding raw --format blob (every JPEG decoded, stored);
#   - verify_db --decode on the JPEG pack (every JPEG decoded, checked);
#   - bench_loader on the JPEG pack, train transform (random crops, DCT
#     scaling, 224 px) and eval transform (shorter edge 256, centre 224).
# ROUNDS rounds, accurate and fast alternated; medians and accurate/fast.
#
#   scripts/bench/bench_dct.sh [--rounds 3] [--threads 2]
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
ROUNDS=3 THREADS=2
bench_options "[--rounds R] [--threads T]" --rounds=ROUNDS --threads=THREADS -- "$@"
bench_setup pack_lmdb
bench_out dct
bench_resized_base
"$BIN/pack_lmdb" "$TREE" "$OUT/jpeg.lmdb" -q --overwrite >/dev/null
cat "$OUT/jpeg.lmdb" > /dev/null
find "$TREE" -type f -exec cat {} + > /dev/null  # warm: the tree in the page cache

n=$(find "$TREE" -type f | wc -l)
declare -A res
for r in $(seq "$ROUNDS"); do
  for dct in accurate fast; do
    s=$(secs_any "$BIN/pack_lmdb" "$TREE" "$OUT/raw.blob" -q --overwrite --encoding raw --format blob --threads "$THREADS" --dct "$dct")
    res[pack_$dct]+="$(echo "$n / $s" | bc -l) "
    s=$(secs_any "$BIN/verify_db" "$OUT/jpeg.lmdb" -q --decode --threads "$THREADS" --dct "$dct")
    res[verify_$dct]+="$(echo "$n / $s" | bc -l) "
    for t in train eval; do
      v=$("$BIN/bench_loader" "$OUT/jpeg.lmdb" --transform "$t" --threads "$THREADS" --batch 64 --epochs 2 --dct "$dct" | rate)
      res[loader_${t}_$dct]+="$v "
    done
  done
done
echo "## accurate against fast IDCT: $n JPEGs of $TREE, $THREADS threads, $ROUNDS rounds (medians, images/s)"
echo
echo "| step | accurate | fast | accurate / fast |"
echo "|---|---:|---:|---:|"
for k in pack verify loader_train loader_eval; do
  # shellcheck disable=SC2086
  a=$(median_mean ${res[${k}_accurate]}) f=$(median_mean ${res[${k}_fast]})
  case $k in
    pack) what="pack_lmdb --encoding raw (blob)";;
    verify) what="verify_db --decode";;
    loader_train) what="bench_loader, train transform";;
    loader_eval) what="bench_loader, eval transform";;
  esac
  awk -v w="$what" -v a="$a" -v f="$f" 'BEGIN {printf "| %s | %.0f | %.0f | %.3f |\n", w, a, f, a / f}'
done
