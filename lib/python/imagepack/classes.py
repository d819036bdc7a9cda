"""A dataset's labels matched to the training data's classes by name."""
import os

import numpy as np

from . import _imagepack
from .common import _torch
from .dataset import Dataset


class ClassMatch:
    """How a dataset's labels map onto the training data's classes
    (match_classes): `to_train[label]` is the training label of `label`,
    `absent` the training classes the dataset lacks, `identity` whether
    the lists are equal, str() one line for a log."""

    def __init__(self, to_train, absent, description):
        self.to_train = list(to_train)
        self.absent = list(absent)
        self.identity = self.to_train == list(range(len(self.to_train))) and not self.absent
        self._description = description
        self._table = np.asarray(self.to_train + [-1], dtype=np.int64)  # -1 (unlabelled) stays -1

    def remap(self, labels):
        """Labels of the dataset (array, tensor or int) as training labels."""
        if isinstance(labels, (int, np.integer)):
            return int(self._table[labels])
        torch = _torch()
        if torch is not None and isinstance(labels, torch.Tensor):
            return torch.from_numpy(self._table)[labels]
        return self._table[np.asarray(labels)]

    def __str__(self):
        return self._description

    def __repr__(self):
        return "imagepack.ClassMatch(%s)" % self._description


def _classes_and_name(x):
    """(class names, a name for messages) of a Loader, Dataset, path(s) or list of names."""
    from .loader import Loader  # the Loader matches its classes= with this: imported when used
    if isinstance(x, (Loader, Dataset)):
        return list(x.classes), x._name if isinstance(x, Loader) else ",".join(x._paths)
    if isinstance(x, (str, os.PathLike)):
        ds = Dataset(x)
        return list(ds.classes), ",".join(ds._paths)
    return [str(c) for c in x], "the given class list"


def match_classes(train, other, what="classes"):
    """Matches `other`'s classes to `train`'s by name (each a Loader, a
    Dataset, one database path or a list of class names; shards: a Loader
    or Dataset over them): the training data
    defines the classes. Returns a ClassMatch; raises ValueError naming the
    first class of `other` that `train` lacks and what to do. The C++
    trainer and scripts/train_imagepack.py apply the same rule (a Loader
    given classes= does it itself)."""
    reference, reference_name = _classes_and_name(train)
    names, other_name = _classes_and_name(other)
    return ClassMatch(*_imagepack.match_classes(reference, reference_name, names, other_name, what))
