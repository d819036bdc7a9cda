# shellcheck shell=bash
# What the benchmark scripts share: option parsing, the data they set up,
# timing, medians. Each script starts
#
#   # shellcheck source=scripts/bench/lib.sh
#   . "$(dirname "$0")/lib.sh"
#
# which sets -euo pipefail and goes to the repository root (the paths in
# the scripts are relative to it); the rest defines functions.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

# bench_options USAGE SPEC... -- ARGS...: parse ARGS by SPEC, each
# `--opt=VAR` (an option that takes a value: `--opt V` sets VAR to V) or
# `--opt=VAR=VALUE` (a flag: `--opt` sets VAR to VALUE). Anything else
# prints "usage: $0 USAGE" and exits 2.
bench_options() {
  local usage=$1 opt var; shift
  local -A takes=() sets=()
  while [ "$1" != -- ]; do
    opt=${1%%=*} var=${1#*=}
    case $var in *=*) sets[$opt]=$var;; *) takes[$opt]=$var;; esac
    shift
  done
  shift
  while [ $# -gt 0 ]; do
    if [ -n "$1" ] && [ -n "${takes[$1]:-}" ]; then
      printf -v "${takes[$1]}" '%s' "$2"; shift 2
    elif [ -n "$1" ] && [ -n "${sets[$1]:-}" ]; then
      printf -v "${sets[$1]%%=*}" '%s' "${sets[$1]#*=}"; shift
    else
      echo "usage: $0 $usage" >&2; exit 2
    fi
  done
}

# bench_tools: BUILD (IMAGEPACK_BUILD_DIR, default build) and BIN, its
# tools.
bench_tools() {
  BUILD=${IMAGEPACK_BUILD_DIR:-build}
  BIN=$BUILD/tools
}

# bench_setup TOOL: bench_tools (scripts/build.sh builds them first when
# BIN has no TOOL) and bench_work.
bench_setup() {
  bench_tools
  [ -x "$BIN/$1" ] || scripts/build.sh >/dev/null
  bench_work
}

# bench_work: WORK (BENCH_DIR, default /tmp/imagepack-bench), made.
bench_work() {
  WORK=${BENCH_DIR:-/tmp/imagepack-bench}
  mkdir -p "$WORK"
}

# bench_resized_base: TREE, the 2000 photos of $WORK/photos-2000 (seed 3,
# 10 classes) with their shorter edge resized to 256 px; each made when
# missing (needs BIN and WORK).
bench_resized_base() {
  [ -d "$WORK/photos-2000" ] ||
    /usr/bin/python3 scripts/make_photo_tree.py "$WORK/photos-2000" --images 2000 --classes 10 --seed 3 >/dev/null
  TREE=$WORK/resized-base
  [ -d "$TREE" ] || "$BIN/resize_imagenet" "$WORK/photos-2000" "$TREE" --max-size 256 -q >/dev/null
}

# bench_resized_base_lmdb: bench_resized_base, and DB, its JPEG LMDB (made
# when missing).
bench_resized_base_lmdb() {
  bench_resized_base
  DB=$WORK/resized-base.lmdb
  [ -e "$DB" ] || "$BIN/pack_lmdb" "$TREE" "$DB" -q >/dev/null
}

# bench_resized FILES: TREE, bench_pack.sh's tree of FILES resized photos
# ($WORK/resized-FILES), made by bench_pack.sh when missing.
bench_resized() {
  TREE=$WORK/resized-$1
  [ -d "$TREE" ] || scripts/bench/bench_pack.sh --files "$1" --rounds 1 --only jpeg >/dev/null
}

# bench_out NAME: OUT, an empty folder for outputs on tmpfs
# (/dev/shm/imagepack-bench-NAME; $WORK/NAME-out where there is no
# /dev/shm), removed on exit.
bench_out() {
  OUT=/dev/shm/imagepack-bench-$1
  [ -d /dev/shm ] || OUT=$WORK/$1-out
  rm -rf "$OUT" && mkdir -p "$OUT"
  trap 'rm -rf "$OUT"' EXIT
}

# bench_parquet NAME TOOL ARGS...: the set-up of the benchmarks that write
# a tree as parquet with DuckDB: options --tree --rounds --threads --size
# (TREE, absolute; ROUNDS, THREADS, SIZE), the tools (TOOL built), the tree
# (bench_pack.sh's 20,000 resized photos without --tree), MODS (the node
# modules holding @duckdb/node-api) and OUT (bench_out NAME).
bench_parquet() {
  local name=$1 tool=$2
  shift 2
  # shellcheck disable=SC2034  # the caller's
  TREE='' ROUNDS=3 THREADS=0 SIZE=224
  bench_options "[--tree DIR] [--rounds R] [--threads N] [--size PX]" \
    --tree=TREE --rounds=ROUNDS --threads=THREADS --size=SIZE -- "$@"
  bench_setup "$tool"
  [ -n "$TREE" ] || bench_resized 20000
  MODS=${IMAGEPACK_DUCKDB_NODE_MODULES:-$PWD/build/npm/node_modules}
  [ -d "$MODS/@duckdb/node-api" ] || { echo "bench_$name: no @duckdb/node-api in $MODS (npm install --prefix build/npm @duckdb/node-api)" >&2; exit 1; }
  bench_out "$name"
  TREE=$(cd "$TREE" && pwd)
}

# duckdb_tree_js: JavaScript for a DuckDB script (connection c) that reads
# TREE's class folders into table t: image {bytes, path}, label (the
# folder's index), shard (row number mod 8); and hf, the Hugging Face
# metadata naming the classes (KV_METADATA {huggingface: ...}).
duckdb_tree_js() {
  cat <<EOF
await c.run(\`CREATE TABLE f AS SELECT content, split_part(filename, '/', -2) AS folder, split_part(filename, '/', -1) AS file
             FROM read_blob('$TREE/*/*')\`);
const names = (await c.runAndReadAll(\`SELECT DISTINCT folder FROM f ORDER BY folder\`)).getRows().map(r => r[0]);
const hf = JSON.stringify({info: {features: {image: {_type: 'Image'}, label: {names, _type: 'ClassLabel'}}}});
await c.run(\`CREATE TABLE t AS SELECT {'bytes': content, 'path': folder || '/' || file} AS image,
             (dense_rank() OVER (ORDER BY folder) - 1)::BIGINT AS label,
             (row_number() OVER (ORDER BY folder, file)) % 8 AS shard FROM f ORDER BY folder, file\`);
EOF
}

# secs CMD...: CMD's wall seconds, its output dropped; a failed CMD stops
# the benchmark (exit 1, named on stderr).
secs() {
  local s; s=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || { echo "$(basename "$0" .sh): failed: $*" >&2; exit 1; }
  awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "%.6f\n", b - a}'
}

# secs_any CMD...: as secs, but a failed CMD is timed as well (builds that
# lack a job's option, compared as they are).
secs_any() {
  local s; s=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || true
  awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN {printf "%.6f\n", b - a}'
}

# median N...: the middle value; of an even count, the lower middle one.
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# median_mean N...: the middle value; of an even count, the mean of the two
# middle ones.
median_mean() {
  printf '%s\n' "$@" | sort -g |
    awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}

# rate: the first "...: N images/s" figure of bench_loader's (and the
# peers') output on stdin.
rate() { sed -n 's/.*: \([0-9.]*\) images\/s.*/\1/p' | head -1; }

# mib: the "peak RSS N MiB" figure of the output on stdin.
mib() { sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' | head -1; }

# take KEY CMD...: one run of CMD; appends its rate to R[KEY] and keeps its
# peak RSS in M[KEY] (the caller declares the associative arrays R and M).
take() {
  local out; out=$("${@:2}")
  R[$1]+="$(echo "$out" | rate) "
  # shellcheck disable=SC2034  # M is the caller's
  M[$1]=$(echo "$out" | mib)
}

# timed NAME CLEAN CMD...: T[NAME], the median seconds of ROUNDS runs of
# CMD, CLEAN removed before each (the caller declares the associative array
# T).
timed() {
  local name=$1 clean=$2; shift 2
  local ts=()
  for _ in $(seq "$ROUNDS"); do rm -rf "$clean"; ts+=("$(secs "$@")"); done
  # shellcheck disable=SC2004,SC2034  # T is the caller's associative array
  T[$name]=$(median "${ts[@]}")
}
