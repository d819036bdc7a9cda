"""The small data the docs' commands run on, made once per run in DATA.

Every name a doc's block uses (`~/imagenet/train`, `train.lmdb`,
`images/`, `shards/train-{000..146}.tar`, `out/demo/train.lmdb`, ...)
exists here, tiny: a few JPEGs of smooth random colours, a few Fashion-MNIST
images from Debian's dataset-fashion-mnist. Each block then runs in its own
copy of this folder (hard links), so no block sees another's outputs.
"""
import gzip
import io
import json
import os
import pickle
import subprocess
import tarfile

import lmdb
import numpy as np
from PIL import Image

SYNSETS = ["n01440764", "n01443537", "n01484850"]


def _picture(rng, w, h, k):
    """A smooth, distinct RGB picture: gradients and a blob, seeded by k."""
    y, x = np.mgrid[0:h, 0:w]
    cx, cy = rng.integers(0, w), rng.integers(0, h)
    blob = 120 * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2.0 * (min(w, h) / 4) ** 2))
    a = np.stack([(x * 200 // w + 37 * k) % 256, (y * 200 // h + 53 * k) % 256,
                  ((x + y) * 100 // (w + h) + 71 * k) % 256], -1).astype(np.float64)
    a[..., k % 3] += blob
    return np.clip(a, 0, 255).astype(np.uint8)


def _jpeg_bytes(arr, quality=90):
    b = io.BytesIO()
    Image.fromarray(arr).save(b, "JPEG", quality=quality)
    return b.getvalue()


def _write(path, data):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _tree(root, classes, per_class, rng, size=(72, 96), ext=".jpg", start=0):
    paths = []
    for c, name in enumerate(classes):
        for i in range(per_class):
            w = int(rng.integers(size[0], size[1]))
            h = int(rng.integers(size[0], size[1]))
            p = os.path.join(root, name, "%s_%04d%s" % (name, start + i, ext))
            _write(p, _jpeg_bytes(_picture(rng, w, h, 7 * c + i + start)))
            paths.append(p)
    return paths


def _tar(path, samples, gz=False):
    """samples: (key, {ext: bytes}) pairs, written as webdataset members."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with tarfile.open(path, "w:gz" if gz else "w") as t:
        for key, members in samples:
            for ext, data in members.items():
                info = tarfile.TarInfo("%s.%s" % (key, ext))
                info.size = len(data)
                info.mtime = 0
                t.addfile(info, io.BytesIO(data))


def _shard_sample(rng, k, label):
    return ("s%06d" % k, {"jpg": _jpeg_bytes(_picture(rng, 40, 32, k)), "cls": b"%d" % label})


def _folder2lmdb(path, items):
    """The Efficient-PyTorch layout: pickled (bytes, label) per key."""
    env = lmdb.open(path, subdir=False, map_size=1 << 26, lock=False)
    keys = []
    with env.begin(write=True) as txn:
        for i, (data, label) in enumerate(items):
            key = ("%d" % i).encode()
            txn.put(key, pickle.dumps((data, label)))
            keys.append(key)
        txn.put(b"__keys__", pickle.dumps(keys))
        txn.put(b"__len__", pickle.dumps(len(keys)))
    env.close()


def _fashion_mnist(n, split):
    src = "/usr/share/datasets/fashion-mnist"
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(src, prefix + "-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:n]
    with gzip.open(os.path.join(src, prefix + "-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[:n]
    return images, labels


def make(data, tools, scripts):
    """Writes every fixture under DATA; tools: the folder of the built tools."""
    rng = np.random.default_rng(43)
    j = lambda *p: os.path.join(data, *p)
    pack = lambda *a: subprocess.run([os.path.join(tools, "pack_lmdb"), *a, "-q"], check=True,
                                     stdout=subprocess.DEVNULL)

    # An ImageNet-like tree (README's ~/imagenet/train).
    _tree(j("home/imagenet/train"), SYNSETS, 4, rng, size=(300, 420), ext=".JPEG")

    # train.lmdb / val.lmdb: 3 classes, val holds one exact copy of a
    # training image (a leak for inspect_db --duplicates to find).
    train = _tree(j("src/train"), SYNSETS, 8, rng)
    _tree(j("src/val"), SYNSETS, 3, rng, start=100)
    leak = os.path.join(j("src/val"), SYNSETS[0], "leak.jpg")
    with open(train[0], "rb") as f:
        _write(leak, f.read())
    pack(j("src/train"), j("train.lmdb"), "--shuffle", "1")
    pack(j("src/val"), j("val.lmdb"))
    for k in range(2):              # LOADER.md's shards
        pack(j("src/train"), j("train-%d-of-2.lmdb" % k), "--shard", "%d/2" % k)
    _write(j("synsets.txt"), ("\n".join(SYNSETS) + "\n").encode())

    # Segmentation (flat images/ and masks/, 21 classes and 255 = ignore)
    # and restoration (blurry/ and sharp/ with the same names).
    for i in range(6):
        a = _picture(rng, 64, 48, i)
        _write(j("images", "%02d.jpg" % i), _jpeg_bytes(a))
        m = ((a[..., 0].astype(np.int32) * 21) // 256).astype(np.uint8)
        m[:4] = 255
        os.makedirs(j("masks"), exist_ok=True)
        Image.fromarray(m).save(j("masks", "%02d.png" % i))
        sharp = _picture(rng, 80, 64, 50 + i)
        blurry = np.asarray(Image.fromarray(sharp).resize((40, 32)).resize((80, 64)))
        _write(j("sharp", "%02d.jpg" % i), _jpeg_bytes(sharp, 95))
        _write(j("blurry", "%02d.jpg" % i), _jpeg_bytes(blurry, 95))

    # A detection manifest (README: pack_lmdb --manifest samples.jsonl).
    rows = []
    for i in range(6):
        _write(j("det", "%02d.jpg" % i), _jpeg_bytes(_picture(rng, 96, 80, 20 + i)))
        rows.append({"image": "det/%02d.jpg" % i, "label": ["cat", "dog"][i % 2],
                     "boxes": [[4, 6, 40, 50, i % 2], [30, 20, 90, 70, 1 - i % 2]]})
    _write(j("samples.jsonl"), "".join(json.dumps(r) + "\n" for r in rows).encode())
    pack("--manifest", j("samples.jsonl"), j("det.lmdb"))

    # WebDataset shards: README's shards/train-{000..146}.tar, PYTHON.md's
    # shards/train-{000000..000146}.tar, USAGE.md's data/... (its /data/).
    k = 0
    for width, folder in ((3, "shards"), (6, "shards"), (6, "data")):
        for s in range(147):
            _tar(j(folder, "train-%0*d.tar" % (width, s)), [_shard_sample(rng, k, s % 3)])
            k += 1
    for s in range(3):
        _tar(j("data/shards", "train-%03d.tar" % s), [_shard_sample(rng, k + s, s % 3)])
    for name in ("train", "extra"):
        for s in range(10):
            _tar(j("data", "%s-%02d.tar" % (name, s)), [_shard_sample(rng, k, s % 3)])
            k += 1
    _tar(j("a.tar"), [_shard_sample(rng, k, 0)])
    _tar(j("b.tar.gz"), [_shard_sample(rng, k + 1, 1)], gz=True)
    # img2dataset: jpg, txt caption, json with a url, no class.
    _tar(j("laion/00000.tar"), [("%09d" % i, {
        "jpg": _jpeg_bytes(_picture(rng, 48, 40, 90 + i)), "txt": b"a caption %d" % i,
        "json": json.dumps({"url": "http://example.com/%d.jpg" % i, "caption": "a caption"}).encode()})
        for i in range(3)])

    # folder2lmdb LMDBs (USAGE.md's imagenet_train.lmdb, PYTHON.md's old/).
    items = [(_jpeg_bytes(_picture(rng, 40, 36, 200 + i)), i % 3) for i in range(6)]
    _folder2lmdb(j("imagenet_train.lmdb"), items)
    os.makedirs(j("old"), exist_ok=True)
    _folder2lmdb(j("old/imagenet_train.lmdb"), items)

    # The demo's databases (PYTHON.md, TRAINING.md): Fashion-MNIST, raw
    # 28x28 gray as scripts/demo.sh packs them, 600 train / 200 test.
    for split, n in (("train", 600), ("test", 200)):
        images, labels = _fashion_mnist(n, split)
        for i, (im, lab) in enumerate(zip(images, labels)):
            p = j("src/fmnist", split, "%d_class" % lab, "%05d.png" % i)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            Image.fromarray(im, "L").save(p)
        extra = ["--shuffle", "1"] if split == "train" else []
        pack(j("src/fmnist", split), j("out/demo", split + ".lmdb"), "--encoding", "raw", "--channels", "1", *extra)

    # The segmentation demo's databases: Fashion-MNIST scenes, as demo.sh.
    scenes = j("src/scenes")
    subprocess.run(["/usr/bin/python3", os.path.join(scripts, "make_fmnist_scenes.py"), scenes,
                    "--train", "64", "--test", "16"], check=True, stdout=subprocess.DEVNULL)
    for split in ("train", "test"):
        pack("--manifest", os.path.join(scenes, split + ".jsonl"), j("out/demo-segmentation", split + ".lmdb"),
             "--mask-classes", os.path.join(scenes, "mask_classes.txt"),
             "--box-classes", os.path.join(scenes, "box_classes.txt"))
