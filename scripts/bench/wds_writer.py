#!/usr/bin/python3
"""The Python WebDataset writer a user would write instead of export_db: walk
an ImageFolder tree and write tar shards with `tarfile`, KEY.jpg + KEY.cls
per sample, as webdataset's ShardWriter does.

    wds_writer.py SRC DST_DIR [--per-shard 10000]
"""
import io
import os
import sys
import tarfile
import time


def main():
    src, dst = sys.argv[1], sys.argv[2]
    per = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--per-shard" else 10000
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    files = [(os.path.join(src, c, n), label) for label, c in enumerate(classes)
             for n in sorted(os.listdir(os.path.join(src, c)))]
    os.makedirs(dst, exist_ok=True)
    t0 = time.perf_counter()
    tar = None
    for i, (path, label) in enumerate(files):
        if i % per == 0:
            if tar:
                tar.close()
            tar = tarfile.open(os.path.join(dst, "shard-%06d.tar" % (i // per)), "w")
        key = "%09d" % i
        with open(path, "rb") as f:
            data = f.read()
        for ext, b in (("jpg", data), ("cls", str(label).encode())):
            info = tarfile.TarInfo(key + "." + ext)
            info.size = len(b)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(b))
    if tar:
        tar.close()
    secs = time.perf_counter() - t0
    print("wds_writer: %d images in %.2f s: %.1f images/s" % (len(files), secs, len(files) / secs))


if __name__ == "__main__":
    main()
