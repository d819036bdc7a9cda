#!/usr/bin/python3
"""The Python packer a user would write instead of pack_lmdb, in the style of
Efficient-PyTorch's folder2lmdb: walk an ImageFolder tree, store pickled
(jpeg_bytes, label) per record under ASCII index keys with python3-lmdb,
commit every 5000 records, then keys and length.

    folder2lmdb.py SRC DST.lmdb
"""
import os
import pickle
import sys
import time

import lmdb


def main():
    src, dst = sys.argv[1], sys.argv[2]
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    files = []
    for label, c in enumerate(classes):
        for root, _, names in os.walk(os.path.join(src, c)):
            for n in sorted(names):
                files.append((os.path.join(root, n), label))
    t0 = time.perf_counter()
    env = lmdb.open(dst, subdir=False, map_size=1 << 40, readonly=False, meminit=False, map_async=True)
    txn = env.begin(write=True)
    for i, (path, label) in enumerate(files):
        with open(path, "rb") as f:
            txn.put(("%d" % i).encode(), pickle.dumps((f.read(), label)))
        if i % 5000 == 4999:
            txn.commit()
            txn = env.begin(write=True)
    txn.commit()
    keys = [("%d" % i).encode() for i in range(len(files))]
    with env.begin(write=True) as txn:
        txn.put(b"__keys__", pickle.dumps(keys))
        txn.put(b"__len__", pickle.dumps(len(keys)))
    env.sync()
    env.close()
    secs = time.perf_counter() - t0
    print("folder2lmdb: %d images in %.2f s: %.1f images/s" % (len(files), secs, len(files) / secs))


if __name__ == "__main__":
    main()
