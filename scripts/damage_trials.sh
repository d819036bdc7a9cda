#!/usr/bin/env bash
# Random single-byte damage to whole databases, checked by verify_db:
# how many copies are reported damaged, pass intact, or crash the tool.
#   scripts/damage_trials.sh [TRIALS] [BINDIR]     (defaults: 300, build/tools)
# Packs 40 small JPEGs (tests/data) into an LMDB and a blob, then for each
# trial overwrites one random byte at a random offset of a copy.
set -uo pipefail
cd "$(dirname "$0")/.."
trials=${1:-300}
bin=${2:-build/tools}
work=$(mktemp -d /tmp/imagepack-damage-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/tree/a" "$work/tree/b"
for i in $(seq 20); do
  cp tests/data/rgb.jpg "$work/tree/a/$i.jpg"
  cp tests/data/gray.jpg "$work/tree/b/$i.jpg"
done
for fmt in lmdb blob; do
  db=$work/db.$fmt
  "$bin/pack_lmdb" "$work/tree" "$db" --format "$fmt" -q >/dev/null
  size=$(stat -c %s "$db")
  crash=0 damaged=0 intact=0
  for _ in $(seq "$trials"); do
    cp "$db" "$work/m"
    off=$(( (RANDOM * 32768 + RANDOM) % size ))
    printf "\\x$(printf %02x $((RANDOM % 256)))" | dd of="$work/m" bs=1 seek="$off" conv=notrunc status=none
    timeout 20 "$bin/verify_db" "$work/m" --decode -q >/dev/null 2>&1
    rc=$?
    if [ "$rc" -eq 0 ]; then intact=$((intact + 1))
    elif [ "$rc" -eq 1 ]; then damaged=$((damaged + 1))
    else crash=$((crash + 1)); echo "$fmt: verify_db exit $rc with byte $off damaged" >&2
    fi
  done
  echo "$fmt ($size bytes, 40 records): $trials trials: $damaged reported damaged, $intact intact (byte in unused space or rewritten with its own value), $crash crashed or hung"
done
