"""What the package's modules share: torch when it is importable, database
paths checked before the C++ opens them, the metadata as a dict."""
import json
import os

from . import _imagepack


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _paths(paths):
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise ValueError("no database given")
    for p in paths:
        if _imagepack.is_local(p) and not _imagepack.is_file_pattern(p) and not os.path.exists(p):
            raise FileNotFoundError(2, "no such database", p)
    return paths


def _parse_meta(text):
    """The metadata as a dict, a field's class count (format 5 writes N
    for the names "0".."N-1") given as that list of names, as every other
    field's classes are."""
    meta = json.loads(text)
    for field in meta.get("fields", []):
        if isinstance(field.get("classes"), int):
            field["classes"] = [str(v) for v in range(field["classes"])]
    return meta
