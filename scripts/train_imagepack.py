#!/usr/bin/python3
"""Train a model from imagepack databases with PyTorch: a recipe to copy.

    scripts/launch.sh --nproc 2 -- scripts/train_imagepack.py \\
        --data train.lmdb --val val.lmdb --arch resnet50 --epochs 90 --batch-size 64 --output runs/r50

The trainer is the package's module imagepack.train (lib/python/imagepack/
train/, its docstring says the rest): this script runs it, as
`python3 -m imagepack.train` does, with the same options and exit codes.
"""
from imagepack.train.run import entry

if __name__ == "__main__":
    entry()
