"""Random access to a database's records (Dataset, open), and a mix's
datasets as one (_Concat, a Loader's dataset)."""
import os

import numpy as np

from . import _imagepack
from .common import _parse_meta, _paths, _torch

_IMAGE_FORMS = ("numpy", "pil", "tensor")


class Dataset:
    """Random access to the records of one database or of its shards:
    ds[i] -> (HxWxC uint8 numpy array, label); for a dataset with fields, a
    dict {"image", "label", "path", and each field: second images HxWxC,
    masks HxW uint8 or uint16 (the field's dtype), depth maps HxW uint16,
    boxes Nx4 float32 with "box_labels", ints, floats,
    text as str}. Decoding runs in C++ without the GIL. Safe in DataLoader
    worker processes: each process opens the database for itself on first
    use.

    image: the form images come in, for what takes them next (transform=):
    "numpy" (HxWxC uint8 array, the default), "pil" (a PIL.Image, mode RGB
    or L: torchvision's PIL transforms, ImageFolder's items) or "tensor"
    (a CxHxW uint8 torch tensor, as torchvision.io.decode_jpeg gives:
    torchvision's tensor transforms). Second images of a dataset with
    fields come in the same form."""

    def __init__(self, paths, in_ram=False, transform=None, image="numpy", split=None, image_column=None,
                 label_column=None, no_class=False):
        if image not in _IMAGE_FORMS:
            raise ValueError("image must be one of %s, not %r" % (", ".join(_IMAGE_FORMS), image))
        if image == "tensor" and _torch() is None:
            raise ValueError("image=\"tensor\" needs torch; \"pil\" or \"numpy\" without it")
        self._form = image
        self._paths = _paths(paths)
        self._in_ram = bool(in_ram)
        # Files read in place: the split, parquet's columns, labels or none.
        self._in_place = (split or "", image_column or "", label_column or "", bool(no_class))
        self.transform = transform
        self._pid = None
        self._ds = None
        self._open()
        self.meta = _parse_meta(self._ds.meta_json)
        self.classes = self.meta["classes"]
        self.fields = self.meta.get("fields", [])

    def _open(self):
        if self._pid != os.getpid():  # a fork (DataLoader workers) reopens
            self._ds = _imagepack.Dataset(self._paths, self._in_ram, *self._in_place)
            self._pid = os.getpid()
        return self._ds

    def __len__(self):
        return len(self._open())

    def __getitem__(self, index):
        if self.fields:
            sample = self.sample(index)
            return self.transform(sample) if self.transform is not None else sample
        image, label, _ = self.record(index)
        if self.transform is not None:
            image = self.transform(image)
        return image, label

    def _as_form(self, image):
        """An HxWxC uint8 array in the form image= asked for."""
        if self._form == "pil":
            from PIL import Image
            return Image.fromarray(image[:, :, 0] if image.shape[2] == 1 else image)
        if self._form == "tensor":
            return _torch().from_numpy(image).permute(2, 0, 1).contiguous()
        return image

    def sample(self, index):
        """Record `index` as a dict: image, label, path and every field."""
        image, label, path = self.record(index)
        out = {"image": image, "label": label, "path": path}
        extra = self._open().fields(int(index))
        for spec in self.fields:
            if spec["kind"] == "image" and spec["name"] in extra:
                extra[spec["name"]] = self._as_form(extra[spec["name"]])
        out.update(extra)
        return out

    def record(self, index):
        """(image, label, source path) of record `index`, the image in the form image= asked for."""
        image, label, path = self._open().get(int(index))
        return self._as_form(image), label, path

    def __getstate__(self):  # picklable for spawned workers: reopened there
        state = self.__dict__.copy()
        state["_ds"] = None
        state["_pid"] = None
        return state

    def __repr__(self):
        return "imagepack.Dataset(%s, %d records)" % (self._open().describe(), len(self))


def open(paths, in_ram=False, transform=None, image="numpy", split=None, image_column=None,  # noqa: A001
         label_column=None, no_class=False):
    """A Dataset over one database (LMDB or blob) or the shards of one,
    or another tool's files read in place (split: the files of that split,
    as the Hub names them, needed where they hold several; image_column,
    label_column: parquet's, where its metadata does not say; no_class:
    files without labels, every record unlabelled); image="pil" or
    "tensor" hands images out in the forms torchvision's transforms take
    (Dataset)."""
    return Dataset(paths, in_ram=in_ram, transform=transform, image=image, split=split, image_column=image_column,
                   label_column=label_column, no_class=no_class)


class _Concat:
    """A mix's records as one indexable dataset, source after source (the
    loader's dataset indices): items as imagepack.open gives them."""

    def __init__(self, parts):
        self.parts = parts
        self.classes = parts[0].classes
        self._starts = np.cumsum([0] + [len(p) for p in parts])

    def __len__(self):
        return int(self._starts[-1])

    def __getitem__(self, index):
        index = int(index)
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("record %d outside [0, %d) of the mix" % (index, len(self)))
        k = int(np.searchsorted(self._starts, index, side="right")) - 1
        return self.parts[k][index - int(self._starts[k])]
