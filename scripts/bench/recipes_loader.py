#!/usr/bin/python3
"""The loader's cost of the training recipes (bench_recipes.sh runs it):

    recipes_loader.py rate DB... [--size S] [--weights W,W] [--epochs E] [--threads T]
        images/s of imagepack.Loader over E epochs after one warm-up epoch:
        one dataset (DB, or its shards), or with --weights the DBs mixed.
    recipes_loader.py rss DB --sizes 160,192,160 [--batch B]
        the process's resident memory (VmRSS, kB) after one epoch at each size,
        on one loader (set_output_size between epochs).
"""
import argparse
import sys
import time

import imagepack


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["rate", "rss"])
    p.add_argument("db", nargs="+")
    p.add_argument("--size", type=int, default=192)
    p.add_argument("--sizes", default="")
    p.add_argument("--weights", default="")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    kw = dict(batch_size=a.batch, threads=a.threads, as_torch=False, seed=1, rank=0, world_size=1)
    if a.what == "rss":
        sizes = [int(s) for s in a.sizes.split(",")]
        loader = imagepack.Loader(a.db, size=sizes[0], **kw)
        for e, s in enumerate(sizes):
            loader.set_output_size(s)
            loader.set_epoch(e)
            for _ in loader:
                pass
        with open("/proc/self/status") as f:
            print(int(next(line for line in f if line.startswith("VmRSS")).split()[1]))
        return 0
    data = a.db
    if a.weights:  # each DB a dataset of the mix; an epoch of all their records
        data = [[d] for d in a.db]
        kw["weights"] = [float(w) for w in a.weights.split(",")]
    loader = imagepack.Loader(data, size=a.size, **kw)
    n = 0
    for e in range(a.epochs + 1):
        loader.set_epoch(e)
        if e == 1:
            t0 = time.perf_counter()
        for images, labels in loader:
            if e > 0:
                n += len(labels)
    print("%.1f images/s" % (n / (time.perf_counter() - t0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
