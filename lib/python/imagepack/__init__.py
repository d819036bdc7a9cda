"""imagepack from Python: the C++ loader and the packed databases.

    import imagepack
    loader = imagepack.Loader("train.lmdb", batch_size=256, size=224)
    for epoch in range(90):
        loader.set_epoch(epoch)            # optional: each iteration runs the next epoch
        for images, labels in loader:      # uint8 NCHW, int64; torch tensors
            ...                            # when torch is importable
    # dtype="float32" / "bfloat16", mean="imagenet", memory_format="channels_last":
    # the model's input, made by the loader's threads. loader.dataset,
    # loader.sampler.set_epoch, batch_size, drop_last: shaped like a DataLoader.

    ds = imagepack.open("val.lmdb")        # random access, decoding in C++
    image, label = ds[0]                   # HxWxC uint8 numpy array, int
                                           # (image="pil" / "tensor": torchvision's forms)

A dataset with fields beyond (image, class) (masks, paired images, boxes,
text: docs/FORMAT.md) yields a dict per batch instead, e.g. {"image",
"label", "mask", "index", "crop_box"} (docs/PYTHON.md), and ds[i] a dict.

Batches are decoded by the library's worker threads (no worker processes,
no shared memory); the GIL is released while they work. See docs/PYTHON.md.
"""

from . import _imagepack
from . import options
from .classes import ClassMatch, match_classes
from .dataset import Dataset, open
from .loader import _LOADER_OPTIONS, _TRANSFORMS, TRANSFORMS, Loader
from .output import IMAGENET_MEAN, IMAGENET_STD
from .ranks import distributed_env
from .sampler import EpochSampler
from .schedule import _schedule, resolution

# The modules by subject: loader (Loader), dataset (Dataset, open), classes
# (match_classes), ranks (distributed_env), output (dtype=, mean=, std=,
# memory_format=), sampler (EpochSampler, the DataLoader-only keywords),
# schedule (resolution), mix (a mix's sources), common (what they share),
# options (the option table's rows for the Loader).
__all__ = ["Loader", "Dataset", "open", "CorruptionError", "epoch_indices", "match_classes", "ClassMatch",
           "distributed_env", "resolution", "TRANSFORMS", "IMAGENET_MEAN", "IMAGENET_STD", "EpochSampler"]

CorruptionError = _imagepack.CorruptionError
epoch_indices = _imagepack.epoch_indices

# The public classes and functions are imagepack's, as before the split
# (their reprs, pickles and help()).
for _name in ("Loader", "Dataset", "ClassMatch", "EpochSampler", "open", "match_classes", "distributed_env",
              "resolution"):
    globals()[_name].__module__ = __name__
del _name
