"""python3 -m imagepack.train: the trainer (imagepack.train's docstring)."""
from .run import entry

entry()
