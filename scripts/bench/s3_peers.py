#!/usr/bin/python3
"""What a user would write instead of imagepack to train from a bucket:
a PyTorch Dataset that GETs each loose JPEG with boto3, RandomResizedCrop
(224) + flip + PILToTensor, through DataLoader with 2 workers.

    s3_peers.py upload TREE BUCKET PREFIX     put every JPEG (16 threads), write PREFIX/index.txt
    s3_peers.py boto3 BUCKET PREFIX [--batches N] [--batch 256] [--workers 2]
    s3_peers.py imagefolder MOUNTED_TREE ...  (an s3fs mount of the same keys)

Endpoint and credentials from the AWS_* variables. Prints
"<peer>: N images in S s: R images/s, first batch F s".
"""
import argparse
import concurrent.futures
import io
import os
import time

import boto3
import torch
import torch.utils.data
import torchvision.datasets
import torchvision.transforms as T
from PIL import Image


def client():
    return boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL"),
                        region_name=os.environ.get("AWS_REGION", "us-east-1"))


class Boto3Dataset(torch.utils.data.Dataset):
    def __init__(self, bucket, keys, labels, transform):
        self.bucket, self.keys, self.labels, self.transform = bucket, keys, labels, transform
        self.s3 = None

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        if self.s3 is None:  # one client per worker process
            self.s3 = client()
        body = self.s3.get_object(Bucket=self.bucket, Key=self.keys[i])["Body"].read()
        return self.transform(Image.open(io.BytesIO(body)).convert("RGB")), self.labels[i]


def upload(tree, bucket, prefix):
    s3 = client()
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs)
    classes = sorted(os.listdir(tree))

    def put(path):
        s3.upload_file(path, bucket, prefix + "/" + os.path.relpath(path, tree))

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))
    lines = ["%s %d" % (os.path.relpath(p, tree), classes.index(os.path.relpath(p, tree).split("/")[0]))
             for p in files]
    s3.put_object(Bucket=bucket, Key=prefix + "/index.txt", Body="\n".join(lines).encode())
    print("uploaded %d files" % len(files))


def run(name, dataset, args):
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         persistent_workers=False)
    t0 = time.time()
    n, first = 0, None
    for b, (x, _) in enumerate(loader):
        n += len(x)
        if first is None:
            first = time.time() - t0
        if b + 1 >= args.batches:
            break
    s = time.time() - t0
    print("%s: %d images in %.2f s: %.1f images/s, first batch %.2f s" % (name, n, s, n / s, first))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer", choices=["upload", "boto3", "imagefolder"])
    ap.add_argument("args", nargs="+")
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])
    if a.peer == "upload":
        upload(*a.args)
    elif a.peer == "boto3":
        bucket, prefix = a.args
        index = client().get_object(Bucket=bucket, Key=prefix + "/index.txt")["Body"].read().decode().split("\n")
        keys = [prefix + "/" + line.split()[0] for line in index]
        labels = [int(line.split()[1]) for line in index]
        run("boto3 get_object + DataLoader", Boto3Dataset(bucket, keys, labels, tf), a)
    else:
        run("s3fs + ImageFolder + DataLoader", torchvision.datasets.ImageFolder(a.args[0], tf), a)


if __name__ == "__main__":
    main()
