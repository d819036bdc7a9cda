#!/usr/bin/python3
"""bench_hub.sh's rows: the Hub emulator holding OUT/pq's shards as
bench/photos (data/), the same shards on its CDN host under pq/ for the
https:// rows, and bench_loader reading each way in turn, round by round.

    hub_rows.py BIN OUT ROUNDS THREADS SIZE"""
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
from hub_emulator import Hub, Repo, env_for  # noqa: E402

BRACE = "train-{00000..00007}-of-00008.parquet"


def epoch(bin_dir, src, env, threads, size, cache=None):
    """(images/s, open seconds) of one bench_loader epoch."""
    cmd = [os.path.join(bin_dir, "bench_loader"), src, "--size", size, "--batch", "256", "--threads", threads,
           "--order", "random", "-q"] + (["--cache-dir", cache] if cache else [])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out = r.stdout + r.stderr
    rate = re.search(r" s: ([0-9.]+) images/s", out)
    opened = re.search(r"; open ([0-9.]+) s;", out)
    if r.returncode or not rate or not opened:
        sys.exit("bench_hub: bench_loader %s failed (%d): %s" % (src, r.returncode, out[-2000:]))
    return float(rate.group(1)), float(opened.group(1))


def main():
    bin_dir, out, rounds, threads, size = sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
        sys.argv[5]
    shards = sorted((out / "pq").glob("train-*.parquet"))
    hub = Hub(out / "hub")
    try:
        repo = Repo("bench/photos")
        repo.commit({"README.md": b"---\nlicense: cc0-1.0\n---\n", **{"data/" + p.name: p.read_bytes() for p in shards}})
        hub.add(repo)
        (hub.folder / "www" / "pq").mkdir()
        for p in shards:
            os.link(p, hub.folder / "www" / "pq" / p.name)
        env = env_for(hub)
        hf = "hf://datasets/bench/photos/data/" + BRACE
        https = "%s/pq/%s" % (hub.cdn, BRACE)
        rows = [("the shards packed into an LMDB (pack_lmdb)", str(out / "packed.lmdb"), None),
                ("parquet in place, local files", str(out / "pq" / BRACE), None),
                ("https:// in place, first epoch (empty node cache)", https, "first"),
                ("https:// in place, cached", https, "cached"),
                ("hf:// in place, first epoch (empty node cache)", hf, "first"),
                ("hf:// in place, cached", hf, "cached")]
        caches = {}
        for _, src, how in rows:  # the cached rows' caches, filled by one epoch
            if how == "cached":
                caches[src] = str(out / ("cache-%d" % len(caches)))
                epoch(bin_dir, src, env, threads, size, caches[src])
        got = {name: [] for name, _, _ in rows}
        for _ in range(rounds):
            for name, src, how in rows:
                cache = None
                if how == "first":
                    cache = str(out / "cache-first")
                    shutil.rmtree(cache, ignore_errors=True)
                elif how == "cached":
                    cache = caches[src]
                got[name].append(epoch(bin_dir, src, env, threads, size, cache))
    finally:
        hub.stop()
    count = subprocess.run(["/usr/bin/python3", "scripts/read_db.py", str(out / "packed.lmdb")], capture_output=True,
                           text=True, check=True).stdout.split("count ", 1)[1].split(",", 1)[0]
    mb = sum(p.stat().st_size for p in shards) / 1e6
    print("bench_hub: %s images in 8 parquet shards (%.0f MB, DuckDB); %d cores; --threads %s; bench_loader, one epoch "
          "of train batches (256) at %s px, random order, median of %d rounds (rows in turn); the Hub emulator and "
          "nginx (TLS) on the loopback; node cache on tmpfs" % (count, mb, os.cpu_count(), threads, size, rounds))
    print("(open: listing, and parquet's copy of the image bytes to scratch; epoch s: the open and one epoch)")
    print("%-52s %9s %7s %8s %9s %9s" % ("bench_loader reading", "images/s", "open s", "epoch s", "vs local",
                                          "vs LMDB"))
    n = int(count)
    # per row: median images/s, median open, median of (open + the epoch's seconds)
    med = {name: (statistics.median(r for r, _ in v), statistics.median(o for _, o in v),
                  statistics.median(o + n / r for r, o in v)) for name, v in got.items()}
    local, packed = med[rows[1][0]][2], med[rows[0][0]][2]
    for name, _, _ in rows:
        rate, opened, whole = med[name]
        print("%-52s %9.0f %7.2f %8.2f %8.2fx %8.2fx" % (name, rate, opened, whole, local / whole, packed / whole))


if __name__ == "__main__":
    main()
