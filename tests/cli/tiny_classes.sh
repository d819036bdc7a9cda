# Sourced by the Slurm and two-node tests: a tiny classification dataset
# that small_cnn trains on in seconds (4 classes x 128 gray 8x8 images,
# raw records, shuffled), packed by the project's own pack_lmdb.
# tiny_classes DIR BINDIR: writes DIR/tiny.lmdb.
tiny_classes() {
  /usr/bin/python3 - "$1/tree" <<'PYEOF'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(7)
for c in range(4):
    os.makedirs(f"{sys.argv[1]}/class{c}", exist_ok=True)
    base = np.zeros((8, 8), np.float64)
    base[:, 2 * c:2 * c + 2] = 160  # a bar per class, in noise
    for i in range(128):
        img = np.clip(base + rng.normal(60, 30, (8, 8)), 0, 255).astype(np.uint8)
        Image.fromarray(img, "L").save(f"{sys.argv[1]}/class{c}/{i:03d}.png")
PYEOF
  "$2/pack_lmdb" "$1/tree" "$1/tiny.lmdb" --encoding raw --channels 1 --shuffle 1 -q >"$1/pack.out"
}
