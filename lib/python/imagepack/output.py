"""What a Loader hands out: the images' type (dtype=), their normalisation
(mean=, std=), memory format and pinned memory."""
import numpy as np

from . import _imagepack
from .common import _parse_meta, _torch

# torchvision's ImageNet normalisation (its presets' and pretrained weights'
# mean and std, per channel on [0, 1]): Loader(mean="imagenet").
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


# Loader(dtype=): the output types by every name a caller may use for them.
_DTYPES = {"uint8": "uint8", "float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
           "bfloat16": "bfloat16"}


def _dtype_name(dtype):
    """"uint8", "float32", "float16" or "bfloat16" from a name, a torch dtype or a numpy dtype."""
    if isinstance(dtype, str):
        name = dtype
    elif _torch() is not None and isinstance(dtype, _torch().dtype):
        name = str(dtype).replace("torch.", "")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = repr(dtype)
    if name not in _DTYPES:
        raise ValueError("dtype must be uint8, float32, float16 or bfloat16 (a name, torch or numpy dtype), not %r"
                         % (dtype,))
    return _DTYPES[name]


def _statistic(value, which, paths, mix):
    """mean= or std= as floats per channel on [0, 1]: "imagenet" (torchvision's constants), "dataset" (the
    statistics pack_lmdb stored; a ValueError when there are none), a number, a sequence, or None (empty)."""
    if value is None:
        return []
    if isinstance(value, str):
        if value == "imagenet":
            return list(IMAGENET_MEAN if which == "mean" else IMAGENET_STD)
        if value == "dataset":
            if mix:
                raise ValueError("%s=\"dataset\" names one dataset's statistics, and this is a mix: give the "
                                 "numbers (loader.normalisation() of a loader over the dataset you mean)" % which)
            meta = _parse_meta(_imagepack.Dataset(paths, False).meta_json)
            if not meta.get(which):
                raise ValueError("%s=\"dataset\": %s holds no statistics (packed with --stats-sample 0): give the "
                                 "numbers, or \"imagenet\"" % (which, ",".join(paths)))
            return [float(v) for v in meta[which]]
        raise ValueError("%s must be \"imagenet\", \"dataset\", a number or one number per channel, not %r"
                         % (which, value))
    if isinstance(value, (int, float)):
        return [float(value)]
    return [float(v) for v in value]


def _memory_format(memory_format):
    """True for channels_last (a name or torch.channels_last), False for contiguous NCHW."""
    if memory_format is None:
        return False
    name = memory_format if isinstance(memory_format, str) else str(memory_format).replace("torch.", "")
    if name not in ("channels_last", "contiguous_format", "contiguous"):
        raise ValueError("memory_format must be \"channels_last\" or \"contiguous_format\" (or torch's), not %r"
                         % (memory_format,))
    return name == "channels_last"


def configure(loader, o, dtype, mean, std, memory_format, pin_memory, as_torch):
    """The images' type, normalisation, memory format and pinning of `loader`
    (a Loader being made) into its C++ options `o`."""
    if isinstance(std, type(None)) and isinstance(mean, str):
        std = mean  # "imagenet" / "dataset": both from the same place
    name = _dtype_name(dtype) if dtype is not None else ("float32" if mean is not None or std is not None
                                                          else "uint8")
    if name == "bfloat16" and (not as_torch or _torch() is None):
        raise ValueError("dtype=bfloat16 needs torch (numpy has no bfloat16): float16 or float32 for numpy")
    if name == "uint8" and (mean is not None or std is not None):
        raise ValueError("mean and std apply to float outputs: give dtype=\"float32\" (or float16, bfloat16) "
                         "with them, or normalise the uint8 batches yourself")
    loader._dtype = name
    o.output_dtype = name
    paths, mix = loader._paths, loader._mix
    loader._norm = (_statistic(mean, "mean", paths, mix), _statistic(std, "std", paths, mix),
                    mean if isinstance(mean, str) else "given")
    o.norm_mean, o.norm_std = loader._norm[0], loader._norm[1]
    # torchvision erases after Normalize with 0, the mean: normalised
    # outputs are erased with the mean's grey levels unless told otherwise.
    if loader._erase_value_default and o.random_erase > 0 and loader._norm[0]:
        m = list(loader._norm[0]) * (3 if len(loader._norm[0]) == 1 else 1)
        o.random_erase_value = ",".join(str(min(255, max(0, int(round(255 * v))))) for v in m[:3])
    loader._channels_last = _memory_format(memory_format)
    if loader._channels_last:
        if o.layout != "NCHW":
            raise ValueError("memory_format=\"channels_last\" hands out NCHW-shaped images laid out as NHWC: "
                             "leave layout at NCHW (layout=\"NHWC\" gives NHWC-shaped arrays)")
        o.layout = "NHWC"  # the threads write NHWC; the batch is a permuted (channels_last) view of it
    loader.pin_memory = bool(pin_memory)
    if loader.pin_memory:
        torch = _torch()
        why = "torch sees no CUDA device"
        if torch is not None and torch.cuda.is_available():
            torch.cuda.init()  # loads CUDA's runtime, whose cudaHostAlloc the loader calls
            try:
                o.pinned = True
                return
            except ValueError as e:
                why = str(e)
        import warnings
        warnings.warn("imagepack.Loader: pin_memory=True, but %s: batches are not pinned" % why, stacklevel=3)
        loader.pin_memory = False
