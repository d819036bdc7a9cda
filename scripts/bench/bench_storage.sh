#!/usr/bin/env bash
# Reading packed data at the storage's speed: one run, one table per
# device. Root only (loop devices, a blkio cgroup, dmsetup); everything it
# sets up is torn down on exit.
#
#   scripts/bench/bench_storage.sh [--files 20000] [--batches 12] [--long 78] [--rounds 1]
#                                  [--devices "cache disk hdd delay ranks"]
#
# Data: FILES 256-px JPEGs cut from real photos (the 2000 that
# bench_pack.sh resizes, copied round), in 100 classes, as an ImageFolder
# tree, a folder2lmdb-style LMDB (the peers' input), our LMDB packed with
# --shuffle, and one packed in class order (for the shuffle score). Devices:
#   cache  the files in the page cache (read just before)
#   disk   this machine's disk, each file's pages dropped (POSIX_FADV_DONTNEED)
#   hdd    an ext4 image on a loop device (direct I/O: no second cache)
#          throttled by the blkio cgroup to 150 IOPS and 120 MB/s
#   delay  the local data through a FUSE pass-through (latency_fs.py, needs
#          python3-fusepy) that adds 2 ms to every open and read request,
#          as a network file system's round trip does (this kernel has no
#          device-mapper, so dm-delay is not available)
# Rows per device: PyTorch DataLoader + ImageFolder and over the LMDB
# Dataset (2 workers, shuffled), imagepack random order (reads from the
# decode threads alone, then with 16 more in flight), blocks, and in_ram
# (the copy's load time apart). Random-order rows read BATCHES batches
# (they are slow on slow devices); blocks and in_ram LONG (an epoch), so that
# the first window's read (a window must be in before its first batch)
# does not dominate. With --rounds R > 1, blocks and in_ram run R times,
# interleaved (this host's rates move by 10-20% from one minute to the
# next), and their rows give the median, the range, and blocks over in_ram
# in each round.
#   sweep  block order on the HDD-like and the latency device with
#          io_threads 1 2 4 8 (4 MB blocks) and block_mb 1 4 16 (4 threads):
#          the measurements the defaults come from
#   ranks  4 bench_loader processes (ranks 0-3 of 4) with --in-ram on a raw
#          blob of the same images (5+ GB): the machine's memory in use
#          (MemTotal - MemAvailable) and shared memory, sampled while they
#          run, against the size of one copy. Each row: images/s, MB/s of records
# read, the device's sequential read rate measured in the same run (dd of
# our LMDB, cold), and the order's shuffle score (shuffle_quality). Cold
# rows drop the caches before each run.
# shellcheck source=scripts/bench/lib.sh
. "$(dirname "$0")/lib.sh"
FILES=20000 BATCHES=12 LONG=78 ROUNDS=1 DEVICES="cache disk hdd delay ranks"
bench_options "[--files N] [--batches B] [--long L] [--rounds R] [--devices \"cache disk hdd delay\"]" \
  --files=FILES --batches=BATCHES --long=LONG --rounds=ROUNDS --devices=DEVICES -- "$@"
[ "$(id -u)" = 0 ] || { echo "$0: needs root (loop devices, cgroups, FUSE)" >&2; exit 2; }
case " $DEVICES " in *" delay "*)
  /usr/bin/python3 -c "import fusepy" 2>/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-fusepy >/dev/null; };;
esac
bench_setup bench_loader
PY=/usr/bin/python3
[ -d "$WORK/resized-base" ] || bench_resized_base
BASE=$WORK/resized-base
DATA=$WORK/storage-$FILES   # on this machine's disk
TREE=$DATA/tree
mkdir -p "$DATA"
[ -d "$TREE" ] || $PY - "$BASE" "$TREE" "$FILES" <<'PY'
import os, shutil, sys
base, out, files = sys.argv[1], sys.argv[2], int(sys.argv[3])
srcs = sorted(os.path.join(d, f) for d, _, fs in os.walk(base) for f in fs)
for i in range(files):
    c = "c%03d" % (i * 100 // files)
    os.makedirs(os.path.join(out, c), exist_ok=True)
    shutil.copyfile(srcs[i % len(srcs)], os.path.join(out, c, "%06d.JPEG" % i))
PY
[ -f "$DATA/jpeg.lmdb" ] || "$BIN/pack_lmdb" "$TREE" "$DATA/jpeg.lmdb" --shuffle 1 -q >/dev/null
[ -f "$DATA/sorted.lmdb" ] || "$BIN/pack_lmdb" "$TREE" "$DATA/sorted.lmdb" -q >/dev/null
[ -f "$DATA/py.lmdb" ] || $PY scripts/bench/folder2lmdb.py "$TREE" "$DATA/py.lmdb" >/dev/null

MNT=$WORK/storage-mnt IMG=$WORK/storage.img CG=/sys/fs/cgroup/blkio/imagepack-bench FUSE_MNT=$WORK/storage-fuse
LOOP=
cleanup() {
  set +e
  mountpoint -q "$FUSE_MNT" && umount "$FUSE_MNT"
  mountpoint -q "$MNT" && umount "$MNT"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  [ -d "$CG" ] && { cat "$CG/cgroup.procs" 2>/dev/null | while read -r p; do echo "$p" > /sys/fs/cgroup/blkio/cgroup.procs; done; rmdir "$CG"; }
  rm -f "$IMG"
}
trap cleanup EXIT

# Drops the page-cache pages of files and trees (and of the same names
# under $UNDER: what a FUSE mount passes through).
drop() { $PY - "$@" ${UNDER:+$(for f in "$@"; do echo "$UNDER/${f#"$FUSE_MNT"/}"; done)} <<'PY'
import os, sys
for top in sys.argv[1:]:
    paths = [top] if os.path.isfile(top) else [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
PY
}
warm() { find -L "$@" -type f -exec cat {} + > /dev/null; }

# Runs a command in the throttling cgroup (when there is one).
run() {
  if [ -d "$CG" ]; then bash -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$CG" "$@"
  else "$@"; fi
}

score() {  # "score/repeat" of an order on a pack: shuffle score, repeat pairs over a full permutation's
  "$BIN/shuffle_quality" "$DATA/$1" --batch 256 --block-mb 4 --window-blocks 16 |
    awk -v o="$2" '$1 == o && (o != "blocks" || ($2 == "4" && $3 == "16")) {
      split($8, r, "/"); printf "%s/%.2fx", $6, r[1] / r[2]; exit}'
}
SCORE_RANDOM=$(score jpeg.lmdb random)
SCORE_BLOCKS=$(score jpeg.lmdb blocks)
SCORE_BLOCKS_SORTED=$(score sorted.lmdb blocks)
BYTES_PER_IMAGE=$(du -sb "$TREE" | awk -v n="$FILES" '{print $1 / n}')
CORES=$(nproc)

table() {  # device name, directory holding the data, cold (1/0)
  local dev=$1 dir=$2 cold=$3
  local seq
  drop "$dir/jpeg.lmdb"
  seq=$(run dd if="$dir/jpeg.lmdb" of=/dev/null bs=4M 2>&1 | sed -n 's/.* \([0-9.]*\) \([MG]\)B\/s.*/\1 \2/p' |
        awk '{print ($2 == "G" ? $1 * 1000 : $1)}')
  [ "$cold" = 1 ] || warm "$dir"
  echo
  echo "## $dev: device sequential read ${seq} MB/s (dd of the LMDB, cold)"
  printf '%-46s %10s %8s %9s %12s\n' method images/s MB/s "of dev" shuffle
  line() {  # name images/s shuffle [extra]
    awk -v n="$1" -v r="$2" -v b="$BYTES_PER_IMAGE" -v s="$seq" -v q="$3" -v x="${4:-}" \
      'BEGIN {mb = r * b / 1e6; printf "%-46s %10.1f %8.1f %8.0f%% %12s %s\n", n, r, mb, 100 * mb / s, q, x}'
  }
  local r out
  [ "$cold" = 1 ] && drop "$dir/tree"
  r=$(run $PY scripts/bench/loader_peers.py imagefolder "$dir/tree" --workers "$CORES" --batches "$BATCHES" | rate)
  line "DataLoader + ImageFolder, $CORES workers" "$r" "$SCORE_RANDOM"
  [ "$cold" = 1 ] && drop "$dir/py.lmdb"
  r=$(run $PY scripts/bench/loader_peers.py lmdb "$dir/py.lmdb" --workers "$CORES" --batches "$BATCHES" | rate)
  line "DataLoader + LMDB Dataset, $CORES workers" "$r" "$SCORE_RANDOM"
  for variant in "random 0" "random 16"; do
    set -- $variant
    [ "$cold" = 1 ] && drop "$dir/jpeg.lmdb"
    r=$(run "$BIN/bench_loader" "$dir/jpeg.lmdb" --order "$1" --io-threads "$2" --batches "$BATCHES" | rate)
    line "imagepack, order $1$([ "$2" -gt 0 ] && echo ", $2 reads in flight")" "$r" "$SCORE_RANDOM"
  done
  # Blocks and in_ram, ROUNDS times interleaved.
  local blocks=() first=() after=() inram=() load=() i
  for i in $(seq "$ROUNDS"); do
    [ "$cold" = 1 ] && drop "$dir/jpeg.lmdb"
    out=$(run "$BIN/bench_loader" "$dir/jpeg.lmdb" --order blocks --batches "$LONG")
    blocks+=("$(echo "$out" | rate)")
    first+=("$(echo "$out" | sed -n 's/.*first batch after \([0-9.]*\) s.*/\1/p')")
    after+=("$(echo "$out" | sed -n 's/.*first batch after [0-9.]* s, then \([0-9.]*\) images\/s.*/\1/p')")
    [ "$cold" = 1 ] && drop "$dir/jpeg.lmdb"
    out=$(run "$BIN/bench_loader" "$dir/jpeg.lmdb" --in-ram --batches "$LONG")
    inram+=("$(echo "$out" | rate)")
    load+=("$(echo "$out" | sed -n 's/.*open \([0-9.]*\) s.*/\1/p')")
  done
  range() {
    if [ $# -gt 1 ]; then printf '%s\n' "$@" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "range %.0f-%.0f; ", lo, hi}'; fi
  }
  local ratios=() f
  for i in $(seq 0 $((ROUNDS - 1))); do
    ratios+=("$(awk -v a="${blocks[$i]}" -v b="${inram[$i]}" 'BEGIN {printf "%.0f%%", 100 * a / b}')")
  done
  line "imagepack, order blocks" "$(median_mean "${blocks[@]}")" "$SCORE_BLOCKS" \
    "$(range "${blocks[@]}")first batch after $(median_mean "${first[@]}") s, then $(median_mean "${after[@]}") images/s; of in_ram per round: ${ratios[*]}"
  f=$(stat -c %s "$dir/jpeg.lmdb")
  line "imagepack, in_ram (random)" "$(median_mean "${inram[@]}")" "$SCORE_RANDOM" \
    "$(range "${inram[@]}")$(awk -v t="$(median_mean "${load[@]}")" -v f="$f" -v s="$seq" \
       'BEGIN {printf "load %.1f s, %.0f MB/s (%.0f%% of dev)", t, f / t / 1e6, 100 * f / t / 1e6 / s}')"
}

sweep() {  # device name, directory: block order, LONG batches, cold, by io_threads and block size
  local dev=$1 dir=$2 out
  echo
  echo "## sweep on the $dev: block order, cold, images/s over the epoch / after the first batch"
  for v in "1 4" "2 4" "4 4" "8 4" "4 1" "4 16"; do
    set -- $v
    drop "$dir/jpeg.lmdb"
    out=$(run "$BIN/bench_loader" "$dir/jpeg.lmdb" --order blocks --io-threads "$1" --block-mb "$2" --batches "$LONG")
    printf '%-34s %10s / %s\n' "io_threads $1, block_mb $2" "$(echo "$out" | rate)" \
      "$(echo "$out" | sed -n 's/.*then \([0-9.]*\) images\/s.*/\1/p')"
  done
}

echo "storage benchmark: $FILES 256-px JPEGs ($(awk -v b="$BYTES_PER_IMAGE" 'BEGIN {printf "%.1f", b / 1000}') KB each)," \
     "RandomResizedCrop(224) + flip, batch 256, $BATCHES batches (blocks, in_ram: $LONG), $CORES cores"
echo "shuffle: score (distinct classes per batch / a full permutation's) / repeat pairs (pairs sharing a batch" \
     "again next epoch / a full permutation's): random $SCORE_RANDOM, blocks 4 MB x 16: $SCORE_BLOCKS" \
     "(shuffled pack), $SCORE_BLOCKS_SORTED (pack in class order)"
for dev in $DEVICES; do
  case $dev in
    cache) table "page cache" "$DATA" 0;;
    disk) table "local disk, cold" "$DATA" 1;;
    delay)
      mkdir -p "$FUSE_MNT"
      $PY scripts/bench/latency_fs.py "$DATA" "$FUSE_MNT" --ms 2 &
      for _ in $(seq 50); do [ -f "$FUSE_MNT/jpeg.lmdb" ] && break; sleep 0.1; done
      UNDER=$DATA table "latency: the local disk through FUSE + 2 ms per open and read, cold" "$FUSE_MNT" 1
      umount "$FUSE_MNT"
      wait;;
    hdd|sweep)
      if ! mountpoint -q "$MNT"; then
        size=$(( $(du -sbL "$DATA/jpeg.lmdb" "$DATA/py.lmdb" "$TREE" | awk '{s += $1} END {printf "%.0f\n", s}') * 13 / 10 / 1048576 + 64 ))
        truncate -s "${size}M" "$IMG"
        mkfs.ext4 -q -F "$IMG"
        mkdir -p "$MNT"
        LOOP=$(losetup -f --show --direct-io=on "$IMG")
        mount "$LOOP" "$MNT"
        cp "$DATA/jpeg.lmdb" "$DATA/py.lmdb" "$MNT/"
        cp -r "$TREE" "$MNT/tree"
        sync
        umount "$MNT"
      fi
      mount "$LOOP" "$MNT"
      mkdir -p "$CG"
      majmin=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')
      echo "$majmin 150" > "$CG/blkio.throttle.read_iops_device"
      echo "$majmin $((120 * 1000 * 1000))" > "$CG/blkio.throttle.read_bps_device"
      if [ "$dev" = hdd ]; then
        table "HDD-like: loop device throttled to 150 IOPS, 120 MB/s, cold" "$MNT" 1
      else
        sweep "HDD-like device" "$MNT"
      fi
      umount "$MNT"
      cat "$CG/cgroup.procs" | while read -r p; do echo "$p" > /sys/fs/cgroup/blkio/cgroup.procs; done
      rmdir "$CG"
      if [ "$dev" = sweep ]; then
        mkdir -p "$FUSE_MNT"
        $PY scripts/bench/latency_fs.py "$DATA" "$FUSE_MNT" --ms 2 &
        for _ in $(seq 50); do [ -f "$FUSE_MNT/jpeg.lmdb" ] && break; sleep 0.1; done
        UNDER=$DATA sweep "latency device (FUSE + 2 ms)" "$FUSE_MNT"
        umount "$FUSE_MNT"
        wait
      fi;;
    ranks)
      [ -f "$DATA/raw.blob" ] || "$BIN/pack_lmdb" "$DATA/jpeg.lmdb" "$DATA/raw.blob" --format blob --encoding raw -q >/dev/null
      size=$(stat -c %s "$DATA/raw.blob")
      meminfo() { awk -v k="$1" '$1 == k":" {printf "%.0f\n", $2 * 1024}' /proc/meminfo; }
      used0=$(( $(meminfo MemTotal) - $(meminfo MemAvailable) )) shm0=$(meminfo Shmem)
      ( peak_used=0 peak_shm=0
        while [ ! -f "$WORK/ranks.done" ]; do
          u=$(( $(meminfo MemTotal) - $(meminfo MemAvailable) - used0 )) m=$(( $(meminfo Shmem) - shm0 ))
          [ $u -gt $peak_used ] && peak_used=$u
          [ $m -gt $peak_shm ] && peak_shm=$m
          echo "$peak_used $peak_shm" > "$WORK/ranks.peak"
          sleep 0.2
        done ) &
      sampler=$!
      rm -f "$WORK/ranks.done"
      t0=$(date +%s.%N)
      for r in 0 1 2 3; do
        "$BIN/bench_loader" "$DATA/raw.blob" --in-ram --rank $r --world 4 --batch 64 --threads 1 --batches 40 \
          > "$WORK/ranks.$r" &
      done
      wait $(jobs -p | grep -v "^$sampler$")
      touch "$WORK/ranks.done"
      wait "$sampler"
      rm -f "$WORK/ranks.done"
      read -r peak_used peak_shm < "$WORK/ranks.peak"
      echo
      echo "## 4 ranks on one machine, --in-ram, raw blob of $(awk -v s="$size" 'BEGIN {printf "%.2f GB", s / 1e9}')"
      for r in 0 1 2 3; do
        echo "rank $r: $(sed -n 's/.*: \([0-9.]*\) images\/s.*/\1 images\/s/p' "$WORK/ranks.$r"), $(grep -o 'open [0-9.]* s' "$WORK/ranks.$r"), $(grep -o 'peak RSS [0-9]* MiB' "$WORK/ranks.$r"), $(grep -o 'RssAnon.*' "$WORK/ranks.$r")"
      done
      awk -v u="$peak_used" -v m="$peak_shm" -v s="$size" 'BEGIN {
        printf "peak shared memory %.2f GB (%.2fx one copy); peak memory in use %.2f GB (%.2fx one copy)\n",
               m / 1e9, m / s, u / 1e9, u / s}'
      rm -f "$WORK"/ranks.*;;
    *) echo "$0: unknown device $dev" >&2; exit 2;;
  esac
done
