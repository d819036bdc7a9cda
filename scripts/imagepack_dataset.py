#!/usr/bin/python3
"""A PyTorch Dataset over an imagepack database (LMDB or blob), for users
who train from Python. Uses scripts/read_db.py's reader; decodes JPEG
records with Pillow; raw records come back as HxWxC uint8 arrays turned
into PIL images, so torchvision transforms apply to both.

    from imagepack_dataset import ImagepackDataset
    ds = ImagepackDataset("train.lmdb", transform=T.Compose([...]))
    img, label = ds[0]

Run as a script, it checks a database end to end with a DataLoader:
    imagepack_dataset.py DB [--workers 2] [--batch 64] [--size 224]
"""
import io
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_db  # noqa: E402

import numpy as np  # noqa: E402
import torch.utils.data  # noqa: E402
from PIL import Image  # noqa: E402


class ImagepackDataset(torch.utils.data.Dataset):
    def __init__(self, path, transform=None, verify_checksums=False):
        self.path = path
        self.transform = transform
        self.verify = verify_checksums
        self._db = None  # opened lazily, once per DataLoader worker
        meta = read_db.open_db(path).meta
        self.classes = meta["classes"]
        self.count = meta["count"]
        self.channels = meta["channels"]
        self.mean, self.std = meta["mean"], meta["std"]  # empty when packed without statistics

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        if self._db is None:
            self._db = read_db.open_db(self.path)
        rec = read_db.read_record(self._db, i, self.verify)
        if rec["encoding"] == "jpeg":
            img = Image.open(io.BytesIO(rec["payload"]))
            img = img.convert("RGB" if self.channels == 3 else "L")
        else:
            px = rec["payload"]
            img = Image.fromarray(px[:, :, 0] if px.shape[2] == 1 else px)
        if self.transform is not None:
            img = self.transform(img)
        return img, rec["label"]


def main():
    import argparse
    import time

    import torchvision.transforms as T

    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batches", type=int, default=0)
    args = ap.parse_args()
    ds = ImagepackDataset(args.db)
    ds.transform = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.PILToTensor()])
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch, shuffle=True, num_workers=args.workers)
    n, t0, labels = 0, time.perf_counter(), set()
    for b, (x, y) in enumerate(loader):
        n += x.shape[0]
        labels.update(y.tolist())
        if args.batches and b + 1 >= args.batches:
            break
    secs = time.perf_counter() - t0
    print("imagepack_dataset: %d images, %d labels seen, batch shape %s, %.1f images/s"
          % (n, len(labels), tuple(x.shape), n / secs))


if __name__ == "__main__":
    main()
