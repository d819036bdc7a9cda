#!/usr/bin/env bash
# What the training recipes cost the loader, on the resized photo tree
# (2000 JPEGs from the wallpapers, shorter edge 256, page-cached):
#   - progressive resolution: images/s of the train transform at 160 and
#     at 192 px (decode-bound: every core decoding), and the resident
#     memory of one loader after epochs at 160, 192, 160 against a fresh
#     loader's after three epochs at 192;
#   - mixing: the same 2000 records as one pack, and as two packs (70% and
#     30% of each class) mixed 0.7/0.3 with an epoch of 2000 samples
#     (each record about once), at 192 px.
# ROUNDS rounds, the configurations alternated in each; medians.
#
#   scripts/bench/bench_recipes.sh [--rounds 3] [--threads 0]
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
ROUNDS=3 THREADS=0
bench_options "[--rounds R] [--threads T]" --rounds=ROUNDS --threads=THREADS -- "$@"
bench_setup pack_lmdb
bench_out recipes
bench_resized_base
# The split: the first 70% of each class's files (in name order) and the rest.
rm -rf "$OUT/a" "$OUT/b"
for class in "$TREE"/*/; do
  c=$(basename "$class")
  mkdir -p "$OUT/a/$c" "$OUT/b/$c"
  files=("$class"*)
  keep=$(( ${#files[@]} * 7 / 10 ))
  for i in "${!files[@]}"; do
    if [ "$i" -lt "$keep" ]; then ln -s "${files[$i]}" "$OUT/a/$c/"; else ln -s "${files[$i]}" "$OUT/b/$c/"; fi
  done
done
"$BIN/pack_lmdb" "$TREE" "$OUT/all.lmdb" -q --shuffle 1 >/dev/null
"$BIN/pack_lmdb" "$OUT/a" "$OUT/a.lmdb" -q --shuffle 1 >/dev/null
"$BIN/pack_lmdb" "$OUT/b" "$OUT/b.lmdb" -q --shuffle 1 >/dev/null
cat "$OUT"/*.lmdb > /dev/null
na=$(find "$OUT/a" -type l | wc -l) nb=$(find "$OUT/b" -type l | wc -l)

export PYTHONPATH=$BUILD/python
run() { /usr/bin/python3 scripts/bench/recipes_loader.py "$@" --threads "$THREADS"; }
rate() { sed -n 's/^\([0-9.]*\) images\/s.*/\1/p'; }
declare -A R
for r in $(seq "$ROUNDS"); do
  R[160]+="$(run rate "$OUT/all.lmdb" --size 160 | rate) "
  R[192]+="$(run rate "$OUT/all.lmdb" --size 192 | rate) "
  R[mix]+="$(run rate "$OUT/a.lmdb" "$OUT/b.lmdb" --weights 0.7,0.3 --size 192 | rate) "
  R[one]+="$(run rate "$OUT/all.lmdb" --size 192 | rate) "
  R[rss_fresh]+="$(run rss "$OUT/all.lmdb" --sizes 192,192,192) "
  R[rss_cycle]+="$(run rss "$OUT/all.lmdb" --sizes 160,192,160) "
done
cores=$(nproc)
echo "recipes benchmark: $(find "$TREE" -type f | wc -l) JPEGs (shorter edge 256), RandomResizedCrop + flip, batch 256,"
echo "$cores cores ($(lscpu | sed -n 's/^Model name: *//p')), median of $ROUNDS rounds"
echo "per round: 160 px ${R[160]}| 192 px ${R[192]}${R[one]}| mix ${R[mix]}"
r160=$(median_mean ${R[160]}) r192=$(median_mean ${R[192]})
printf '%-58s %10.1f images/s\n' "one pack, 160 px" "$r160"
printf '%-58s %10.1f images/s  (160 px: %.2fx)\n' "one pack, 192 px" "$r192" "$(echo "$r160 / $r192" | bc -l)"
one=$(median_mean ${R[one]} ${R[192]}) mix=$(median_mean ${R[mix]})
printf '%-58s %10.1f images/s\n' "one pack of all records, 192 px (both runs)" "$one"
printf '%-58s %10.1f images/s  (%+.1f%%)\n' "mix 0.7/0.3 of two packs ($na + $nb records), 192 px" "$mix" \
  "$(echo "($mix / $one - 1) * 100" | bc -l)"
fresh=$(median_mean ${R[rss_fresh]}) cycle=$(median_mean ${R[rss_cycle]})
printf '%-58s %10.1f MB\n' "RSS after epochs at 192, 192, 192 (one loader)" "$(echo "$fresh / 1024" | bc -l)"
printf '%-58s %10.1f MB  (%+.1f%%)\n' "RSS after epochs at 160, 192, 160 (one loader)" "$(echo "$cycle / 1024" | bc -l)" \
  "$(echo "($cycle / $fresh - 1) * 100" | bc -l)"
