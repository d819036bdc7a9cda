#!/usr/bin/python3
"""A read-only FUSE file system that passes a folder through and adds a
fixed latency to every open and every read request, as a network file
system's round trip does (the kernel caches pages as it would for NFS).
For scripts/bench/bench_storage.sh; needs python3-fusepy and /dev/fuse.

    latency_fs.py ROOT MOUNTPOINT [--ms 2]   (foreground; unmount with umount)
"""
import argparse
import errno
import os
import time

from fusepy import FUSE, FuseOSError, Operations


class Latency(Operations):
    def __init__(self, root, seconds):
        self.root, self.delay = root, seconds

    def _full(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def getattr(self, path, fh=None):
        try:
            st = os.lstat(self._full(path))
        except OSError as e:
            raise FuseOSError(e.errno)
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                                            "st_size", "st_uid", "st_ino")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._full(path))

    def open(self, path, flags):
        if flags & (os.O_WRONLY | os.O_RDWR):
            raise FuseOSError(errno.EROFS)
        time.sleep(self.delay)
        return os.open(self._full(path), os.O_RDONLY)

    def read(self, path, size, offset, fh):
        time.sleep(self.delay)
        return os.pread(fh, size, offset)

    def release(self, path, fh):
        os.close(fh)
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("mountpoint")
    ap.add_argument("--ms", type=float, default=2.0)
    a = ap.parse_args()
    FUSE(Latency(os.path.abspath(a.root), a.ms / 1000), a.mountpoint, foreground=True, ro=True, nothreads=False,
         allow_other=True, kernel_cache=True, max_read=1048576, max_readahead=1048576, attr_timeout=60,
         entry_timeout=60)


if __name__ == "__main__":
    main()
