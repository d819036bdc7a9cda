"""A mix of datasets: whether Loader's arguments make one, and its sources."""
import os

from . import _imagepack
from .common import _paths


def _is_mix(paths, weights, repeat, choose):
    if weights is not None or repeat is not None or choose is not None:
        return True
    return isinstance(paths, (list, tuple)) and any(isinstance(p, (list, tuple)) for p in paths)


def _sources(paths, weights, repeat, choose):
    """The datasets of a mix (each its list of shards) and their MixSources."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    datasets = [_paths(p) for p in paths]
    if not datasets:
        raise ValueError("no dataset given")
    shares = {"weights": weights, "repeat": repeat, "choose": choose}
    for name, values in shares.items():
        if values is not None and len(values) != len(datasets):
            raise ValueError("%s has %d entries for %d datasets: one per dataset" % (name, len(values), len(datasets)))
    if weights is not None and (repeat is not None or choose is not None):
        raise ValueError("give weights (relative shares) or repeat/choose (absolute counts), not both")
    sources = []
    for i, d in enumerate(datasets):
        src = _imagepack.MixSource()
        src.paths = d
        if weights is not None:
            src.weight = float(weights[i])
        elif choose is not None and choose[i] is not None:
            src.choose = int(choose[i])
            if repeat is not None and repeat[i] is not None:
                raise ValueError("dataset %d (%s) has both a repeat and a choose" % (i + 1, ",".join(d)))
        elif repeat is not None and repeat[i] is not None:
            src.repeat = float(repeat[i])
        sources.append(src)
    return datasets, sources
