"""What the docs runner checks per block, the settings it substitutes, and
the known failures (tests/docs/README.md).

A block is found by its doc and a piece of its text (`match`), so that the
table follows a block when lines move; a spec that matches no block, or
more than one, is an error.
"""
import re

import hub


class Spec:
    def __init__(self, doc, match, check=None, subst=(), fresh_each=False, rc=None, prelude="", post="",
                 timeout=120, options_only=False, omit=(), hub=False):
        self.doc, self.match = doc, match
        self.key = (doc, match)
        self.check = check            # check(ctx): asserts on what the block produced
        self.subst = list(subst)      # (doc text, text run instead): small settings for CI
        self.fresh_each = fresh_each  # each command in its own copy of the fixtures (alternatives)
        self.rc = rc or {}            # command (whitespace-normalised) -> expected exit code
        self.prelude, self.post = prelude, post   # Python run before / after a snippet
        self.timeout = timeout        # seconds per command
        self.options_only = options_only
        self.omit = list(omit)        # fixtures the block makes itself (removed from its folder)
        self.hub = hub                # reads hf://datasets/ORG/NAME from the Hub emulator (tests/docs/hub.py)


# Rewrites applied to every block before it runs (never to the option check):
# `[--amp]` in a synopsis is an optional flag (run with it); `/data/...`
# paths in examples live in the block's folder.
GLOBAL_OVERRIDES = [
    (re.compile(r"\[(--[\w-]+)\]"), r"\1"),
    (re.compile(r"(?<![\w./])/data/"), "data/"),
    (re.compile(r"(?<![\w./])/scratch/"), "scratch/"),
]


def apply_overrides(text, spec):
    for pat, rep in GLOBAL_OVERRIDES:
        text = pat.sub(rep, text)
    if spec:
        for old, new in spec.subst:
            if old not in text:
                raise AssertionError("specs.py: override %r not found in %s's block %r" % (old, spec.doc, spec.match))
            text = text.replace(old, new)
    return text


def _exists(ctx, *paths):
    import os
    for p in paths:
        assert os.path.exists(ctx.path(p)), "%s was not made" % p


def _records(ctx, db):
    """How many records a database holds, from its metadata (read_db.py)."""
    import subprocess
    out = subprocess.run(["/usr/bin/python3", "scripts/read_db.py", db], cwd=ctx.dir, capture_output=True,
                         text=True, check=True).stdout
    m = re.search(r"^count (\d+),", out)
    assert m, "read_db.py %s printed no record count: %r" % (db, out[:200])
    return int(m.group(1))


def _shaped(ctx, needle, lines):
    from run_docs import compare_transcript
    bad = compare_transcript(lines, ctx.out(needle))
    assert not bad, "`%s...`: %s" % (needle, bad)


# -- README.md ---------------------------------------------------------------
def _readme_tour(ctx):
    import glob
    from PIL import Image
    out = glob.glob(ctx.path("home/in256/train/*/*.JPEG"))
    assert len(out) == 12, "resize_imagenet wrote %d of 12 images to ~/in256/train" % len(out)
    assert all(min(Image.open(p).size) == 256 for p in out), "shorter edges are not 256 after --max-size 256"
    assert _records(ctx, "train.lmdb") == 12
    assert "OK" in ctx.out("verify_db train.lmdb"), "verify_db did not say OK"
    assert re.search(r"^random\s", ctx.out("shuffle_quality"), re.M), "shuffle_quality printed no table"
    assert _records(ctx, "seg.lmdb") == 6 and _records(ctx, "det.lmdb") == 6 and _records(ctx, "wds.lmdb") == 147
    _exists(ctx, "out/shards/shard-000000.tar", "report/sheet.png", "report/grid.png", "report/summary.png",
            "report/duplicates.csv")
    got = ctx.out("imagepack.open").strip()
    assert got == "12", "len(imagepack.open('train.lmdb')) printed %r, not 12" % got
    assert "n01" in ctx.out("scripts/read_db.py train.lmdb 0"), "read_db.py printed no record"
    _exists(ctx, "runs/r50/checkpoint.pt", "runs/r50/metrics.jsonl")
    assert "gloo" in ctx.out("scripts/launch.sh").lower(), "the launch does not say Gloo"


# -- FORMAT.md ---------------------------------------------------------------
META_PRELUDE = """
import lmdb
env = lmdb.open("train.lmdb", subdir=False, readonly=True, lock=False)
with env.begin() as _txn:
    meta_bytes = bytes(_txn.get(b"__meta__"))
"""
META_POST = """
# the same check fails on metadata with one byte changed
_t = text.replace(b'"count"', b'"cOunt"')
assert xxhash.xxh3_64_intdigest(_t[:at] + b"0" * 16 + _t[at + 16:]) != stored
"""
RECORD_PRELUDE = """
import json, lmdb, struct, xxhash
env = lmdb.open("train.lmdb", subdir=False, readonly=True, lock=False)
txn = env.begin()
meta = json.loads(bytes(txn.get(b"__meta__")))
i = 5
"""
RECORD_POST = """
assert magic == b"IPKG", magic
assert record[8:12] == b"IPKR", "record 5 does not start with its checksum and IPKR"
assert struct.unpack_from("<Q", record, 0)[0] == xxhash.xxh3_64_intdigest(bytes(record[8:])), "checksum"
sys.path.insert(0, "scripts")
import read_db
assert read_db.read_record(read_db.open_db("train.lmdb"), 5)["path"].encode() in bytes(record)
"""

# -- PYTHON.md ---------------------------------------------------------------
LOADER_POST = """
assert tuple(images.shape[1:]) == (3, 224, 224) and images.dtype == torch.uint8, (images.shape, images.dtype)
assert labels.dtype == torch.int64 and labels.shape == (images.shape[0],)
assert x.dtype == torch.float32 and abs(float(x.mean())) < 3
"""
RESUME_PRELUDE = """
import imagepack
class _Counting(imagepack.Loader):
    batches = 0
    def __iter__(self):
        for b in super().__iter__():
            self.batches += 1
            yield b
loader = _Counting("train.lmdb", batch_size=4, size=32, seed=0)
loader.set_epoch(3)
_it = iter(loader)
next(_it), next(_it)
loader.batches = 0
"""
RESUME_POST = """
assert state["epoch"] == 3 and state["position"] == 8, state
assert loader.batches == 4, "the loop ran %d batches, not the 4 left of epoch 3" % loader.batches
_ref = imagepack.Loader("train.lmdb", batch_size=4, size=32, seed=0)
_ref.set_epoch(3)
_last = list(_ref)[-1]
assert torch.equal(_last[0], images), "the resumed epoch's last batch is not the uninterrupted run's"
"""
SEG_PRELUDE = "model = torch.nn.Conv2d(3, 21, 1)\n"
SEG_POST = """
assert b["mask"].dtype == torch.uint8 and tuple(b["mask"].shape[1:]) == (512, 512), (b["mask"].dtype, b["mask"].shape)
assert tuple(x.shape[1:]) == (3, 512, 512)
assert set(torch.unique(y).tolist()) <= set(range(21)) | {255}
assert torch.isfinite(loss)
"""
PAIRS_POST = """
assert blurry.shape == sharp.shape and tuple(sharp.shape[1:]) == (3, 256, 256), (blurry.shape, sharp.shape)
assert -1 <= float(blurry.min()) and float(sharp.max()) <= 1
"""
DET_POST = """
assert targets["boxes"].ndim == 2 and targets["boxes"].shape[1] == 4, targets["boxes"].shape
assert float(targets["boxes"].min()) >= 0 and float(targets["boxes"].max()) <= 512, "boxes not in output pixels"
assert set(targets["labels"].tolist()) <= {0, 1}
"""
OPEN_POST = """
assert image.ndim == 3 and image.shape[2] == 3 and image.dtype.name == "uint8", (image.shape, image.dtype)
assert isinstance(label, int) and isinstance(path, str) and len(ds) == 10
assert len(ds.classes) == 3 and len(ds.meta["mean"]) == 3
# "ds[i] of a JPEG record is Pillow's Image.open(...).convert("RGB"), byte for byte"
import io, numpy as np
from PIL import Image
sys.path.insert(0, "scripts")
import read_db
_rec = read_db.read_record(read_db.open_db("val.lmdb"), 0)
assert np.array_equal(np.asarray(Image.open(io.BytesIO(_rec["payload"])).convert("RGB")), image), \
    "ds[0] is not Pillow's decode of the stored JPEG"
"""
TV_POST = """
_dl = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2)
_x, _y = next(iter(_dl))
assert tuple(_x.shape) == (8, 3, 224, 224), _x.shape
"""
ELSEWHERE_POST = """
assert all(any(n.endswith(e) for n in names) for e in (".jpg", ".cls", ".json")), names[:6]
assert len(ds) == 6 and len(ds.classes) == 3
assert isinstance(leaks, list)
"""
READ_DB_POST = """
assert isinstance(rec["label"], int) and rec["path"] and rec["encoding"] in ("jpeg", "raw", 0, 1), rec.keys()
assert rec["fields"] == [] or isinstance(rec["fields"], list)
"""

OUTPUT_POST = """
assert images.dtype == torch.bfloat16 and tuple(images.shape[1:]) == (3, 224, 224), (images.dtype, images.shape)
assert images.is_contiguous(memory_format=torch.channels_last)
import torchvision.transforms.functional as _F
_u, _ = next(iter(imagepack.Loader("train.lmdb", batch_size=64, size=224)))
_ref = torch.stack([_F.normalize(_v.float().div(255), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]) for _v in _u])
assert torch.equal(images, _ref.to(torch.bfloat16)), "not torchvision's Normalize of the same batch, cast to bfloat16"
assert x.dtype == torch.bfloat16
"""
# The reference's args for the port (its parser's names), on the docs' small databases.
PORT_PRELUDE = """
import argparse
args = argparse.Namespace(data_path=".", batch_size=4, train_crop_size=32, val_crop_size=32, val_resize_size=36,
                          auto_augment="ta_wide", ra_magnitude=9, augmix_severity=3, random_erase=0.25,
                          interpolation="bilinear")  # the reference's recipe flags; its defaults for the rest
import torch as _torch
def mixupcutmix(batch, target):  # RandomMixup(3, p=1.0) with lambda 0.5: the reference's formula
    target = _torch.nn.functional.one_hot(target, 3).to(batch.dtype)
    return batch.roll(1, 0) * 0.5 + batch * 0.5, target.roll(1, 0) * 0.5 + target * 0.5
"""
# What the rest of train.py does with them: two epochs without DDP (no
# set_epoch: the orders must differ), set_epoch as under DDP, and
# evaluate()'s reads of data_loader.dataset.
PORT_POST = """
assert num_classes == 3 and len(data_loader) == 6 and len(dataset) == 24, (num_classes, len(data_loader), len(dataset))
_model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, num_classes))
_orders = []
for _epoch in range(2):
    _seen = []
    for _image, _target in data_loader:
        assert _image.dtype == torch.float32 and tuple(_image.shape[1:]) == (3, 32, 32)
        assert _target.shape == (_image.shape[0], 3), "the batch did not go through mixupcutmix"
        torch.nn.functional.cross_entropy(_model(_image.to("cpu")), _target).backward()
        _seen += _target.tolist()
    _orders.append(_seen)
assert _orders[0] != _orders[1], "the second epoch repeated the first"
train_sampler.set_epoch(0)
assert sum([t.tolist() for _, t in data_loader], []) == _orders[0], "set_epoch(0) did not give epoch 0 again"
train_sampler.set_epoch(1)
assert sum([t.tolist() for _, t in data_loader], []) == _orders[1], "set_epoch(1) did not give epoch 1 again"
_processed = sum(_image.shape[0] for _image, _ in data_loader_test)
assert hasattr(data_loader_test.dataset, "__len__") and len(data_loader_test.dataset) == _processed == 10
"""


def _python_path(ctx):
    import os
    got = ctx.out("imagepack.__file__").strip()
    assert got.endswith(os.path.join("python", "imagepack", "__init__.py")), got


def _train_imagepack(ctx):
    assert re.search(r"train_imagepack: test accuracy [\d.]+%", ctx.out("train_imagepack.py")), \
        "no 'train_imagepack: test accuracy' line"


def _train_imagepack_progressive(ctx):
    out = ctx.out("train_imagepack.py")
    assert re.search(r"train_imagepack: test accuracy [\d.]+%", out), "no 'train_imagepack: test accuracy' line"
    assert re.search(r"^Epoch 0: 16 px", out, re.M) and re.search(r"^Epoch 1: 28 px", out, re.M), \
        "the epochs did not train at 16 then 28 px: %s" % re.findall(r"^Epoch \d+: .*", out, re.M)


RECIPES_POST = """
assert tuple(images.shape[1:]) == (3, 192, 192), images.shape
assert [imagepack.resolution(e, 160, 192, 11, 13) for e in range(16)] == [160] * 12 + [192] * 4
assert sum(s["samples"] for s in mix.sources) == mix.epoch_length == len(imagepack.open("train.lmdb")) + len(imagepack.open("val.lmdb"))
_counts = [s["samples"] for s in mix.sources]
assert abs(_counts[0] - 0.7 * mix.epoch_length) < 1, _counts
fixed.set_epoch(0)
assert tuple(next(iter(fixed))[0].shape[2:]) == (192, 192)
"""


def _train_imagepack_reference(ctx):
    out = ctx.out("train_imagepack.py")
    assert re.search(r"train_imagepack: test accuracy [\d.]+%", out), "no 'train_imagepack: test accuracy' line"
    assert re.search(r"^ \* Epoch 0 EMA  Acc@1 [\d.]+", out, re.M), "no evaluation of the EMA weights"


def _train_imagepack_seg(ctx):
    assert re.search(r"mIoU", ctx.out("train_imagepack.py")), "no mIoU reported"


# -- TRAINING.md -------------------------------------------------------------
def _train_r50(ctx):
    out = ctx.out("train --data")
    _exists(ctx, "runs/r50/checkpoint.pt", "runs/r50/model_best.pt", "runs/r50/metrics.jsonl")
    assert re.search(r"Epoch: \[0\]\[0/", out), "no 'Epoch: [0][0/...' log line"
    assert re.search(r"bf16|bfloat16", out, re.I), "--amp: nothing says bf16 autocast"


# -- USAGE.md ----------------------------------------------------------------
def _usage_import(ctx):
    outs = {cmd.split()[1]: out + err for cmd, rc, out, err in ctx.runs}
    for src, n in (("data/shards/", 3), ("'data/train-{000000..000146}.tar'", 147),
                   ("'data/{train,extra}-{00..09}.tar'", 22), ("laion/00000.tar", 3), ("imagenet_train.lmdb", 6)):
        assert re.search(r"\b%d records" % n, outs[src]), "pack_lmdb %s: no '%d records' in %r" % (src, n, outs[src][-300:])
    fields = _read_db(ctx).open_db(ctx.dirs[3] + "/laion.lmdb").meta.get("fields", [])
    assert {"name": "txt", "kind": "text"} in [{k: f.get(k) for k in ("name", "kind")} for f in fields], \
        "laion.lmdb keeps no txt captions: fields %s" % fields


def _usage_export(ctx):
    import glob
    import os
    # each command ran in its own folder (alternatives)
    d0, d1, d2 = ctx.dirs
    assert os.path.exists(os.path.join(d0, "shards", "shard-000000.tar")), "no shards/shard-000000.tar"
    assert os.path.exists(os.path.join(d1, "shards", "train-000000.tar.gz")), "no shards/train-000000.tar.gz"
    assert glob.glob(os.path.join(d2, "folder", "n01440764", "*")), "no folder/CLASS/FILE"


def _usage_duplicates(ctx):
    _shaped(ctx, "inspect_db", ["within train.lmdb: 3 exact, 41 near",
                                "between train.lmdb and val.lmdb: 0 exact, 17 near (leak)"])
    _exists(ctx, "report/duplicates.csv", "report/duplicates.png")


def _loader_example(ctx):
    # two epochs of the two shards (24 records together), every sample once
    assert "loader example: 48 images" in ctx.out("docs_loader_example"), ctx.out("docs_loader_example")


SPECS = [
    Spec("docs/LOADER.md", "imagepack::LoaderOptions o;", _loader_example),
    Spec("README.md", "build/tools/resize_imagenet ~/imagenet/train", _readme_tour, omit=["train.lmdb", "det.lmdb"],
         subst=[("--arch resnet50 --epochs 90 --batch-size 64",
                 "--arch resnet18 --epochs 1 --batch-size 4 --size 32 --max-steps 2"),
                # 12 records hold no batch of 256 to measure (a usage error): batches of 4
                ("build/tools/shuffle_quality train.lmdb ", "build/tools/shuffle_quality train.lmdb --batch 4 ")],
         timeout=300),
    Spec("docs/FORMAT.md", "xxh3_64_intdigest", prelude=META_PRELUDE, post=META_POST),
    Spec("docs/FORMAT.md", 'k = meta["records_per_value"]', prelude=RECORD_PRELUDE, post=RECORD_POST),
    Spec("docs/PYTHON.md", "print(imagepack.__file__)", _python_path),
    Spec("docs/PYTHON.md", "for epoch in range(90):", post=LOADER_POST),
    Spec("docs/PYTHON.md", "memory_format=torch.channels_last, pin_memory=True", post=OUTPUT_POST),
    Spec("docs/PYTHON.md", "def load_data(args, mixupcutmix=None):", prelude=PORT_PRELUDE, post=PORT_POST),
    Spec("docs/PYTHON.md", "state = loader.state_dict()", prelude=RESUME_PRELUDE, post=RESUME_POST,
         subst=[('range(state["epoch"], 90)', 'range(state["epoch"], 4)')]),
    Spec("docs/PYTHON.md", 'Loader("seg.lmdb"', prelude=SEG_PRELUDE, post=SEG_POST),
    Spec("docs/PYTHON.md", 'Loader("pairs.lmdb"', post=PAIRS_POST),
    Spec("docs/PYTHON.md", 'Loader("det.lmdb"', post=DET_POST),
    Spec("docs/PYTHON.md", 'imagepack.open("val.lmdb")', post=OPEN_POST),
    Spec("docs/PYTHON.md", "T.RandomResizedCrop(224)", post=TV_POST),
    Spec("docs/PYTHON.md", "--arch small_cnn --epochs 8", _train_imagepack, subst=[("--epochs 8", "--epochs 1")],
         timeout=300),
    Spec("docs/PYTHON.md", "size_schedule=(160, 192, 11, 13)", post=RECIPES_POST),
    Spec("docs/PYTHON.md", "--res-schedule 16,28,1,4,4", _train_imagepack_progressive,
         subst=[("--epochs 6", "--epochs 2"), ("16,28,1,4,4", "16,28,0,1,4")]),
    Spec("docs/PYTHON.md", "--mixup-alpha 0.2 --cutmix-alpha 1.0", _train_imagepack_reference,
         subst=[("--epochs 8", "--epochs 1")], timeout=300),
    Spec("docs/PYTHON.md", "--task segmentation", _train_imagepack_seg, subst=[("--epochs 8", "--epochs 1")],
         timeout=300),
    Spec("docs/PYTHON.md", "old/imagenet_train.lmdb", post=ELSEWHERE_POST, omit=["train.lmdb"]),
    Spec("docs/PYTHON.md", "read_db.open_db", post=READ_DB_POST),
    Spec("docs/PYTHON.md", 'Loader("hf://datasets/ORG/NAME"', post=hub.LOADER_POST, hub=True,
         subst=[("batch_size=256", "batch_size=8")]),
    Spec("docs/OBJECT_STORAGE.md", "export IMAGEPACK_CACHE_DIR", hub.check_tools, hub=True,
         omit=["train.lmdb", "val.lmdb"]),
    Spec("docs/TRAINING.md", "--lr-scale-batch --schedule cosine --warmup-epochs 5", _train_r50, timeout=300,
         subst=[("--arch resnet50 --epochs 90", "--arch resnet18 --epochs 1 --size 32 --max-steps 2"),
                ("--batch-size 64", "--batch-size 4")]),
    Spec("docs/USAGE.md", "laion/00000.tar", _usage_import, fresh_each=True, omit=["train.lmdb"]),
    Spec("docs/USAGE.md", "export_db train.lmdb shards/ --shard-mb 512", _usage_export, fresh_each=True,
         omit=["shards"]),
    Spec("docs/USAGE.md", "inspect_db train.lmdb val.lmdb --out report/ --duplicates", _usage_duplicates),
    Spec("docs/USAGE.md", "$ shuffle_quality train.lmdb",  # 24 records: batches of 8, not 256
         subst=[("shuffle_quality train.lmdb --block-mb", "shuffle_quality train.lmdb --batch 8 --block-mb")]),
]


class Claim:
    """A sentence of prose saying what a command does (found by `text`,
    which must stay on one line of the doc), checked by running it."""
    def __init__(self, doc, text, check):
        self.doc, self.text, self.check = doc, text, check


def _read_db(ctx):
    import sys
    if ctx.path("scripts") not in sys.path:
        sys.path.insert(0, ctx.path("scripts"))
    import read_db
    return read_db


def _records_of(ctx, db):
    """Metadata and records of a database, by the reference reader;
    payloads as bytes (raw ones with their shape)."""
    read_db = _read_db(ctx)
    h = read_db.open_db(ctx.path(db))
    recs = []
    for i in range(h.meta["count"]):
        r = read_db.read_record(h, i)
        if not isinstance(r["payload"], bytes):
            r["payload"] = (r["payload"].shape, r["payload"].tobytes())
        recs.append(r)
    return h.meta, recs


def _round_trip(ctx):
    """export_db then pack_lmdb gives back the same records: a shuffled
    JPEG pack (train.lmdb) and a raw gray one (the demo's test.lmdb)."""
    bad = []
    for db in ("train.lmdb", "out/demo/test.lmdb"):
        name = db.replace("/", "_")
        ctx.run("export_db %s exp-%s/ -q" % (db, name))
        ctx.run("pack_lmdb exp-%s/ back-%s -q" % (name, name))
        _, a = _records_of(ctx, db)
        _, b = _records_of(ctx, "back-" + name)
        if len(a) != len(b):
            bad.append("%s: %d records back of %d" % (db, len(b), len(a)))
            continue
        show = lambda v: ("%d bytes" % len(v)) if isinstance(v, bytes) else (
            "raw %s" % (v[0],)) if isinstance(v, tuple) else repr(v)
        diff = next(("record %d's %s is %s, was %s" % (i, k, show(y[k]), show(x[k]))
                     for i, (x, y) in enumerate(zip(a, b))
                     for k in ("path", "label", "encoding", "channels", "payload") if x[k] != y[k]), None)
        if diff:
            bad.append("%s exported and packed again: %s" % (db, diff))
    assert not bad, "; ".join(bad)


def _no_statistics(ctx):
    ctx.run("pack_lmdb home/imagenet/train nostats.lmdb --stats-sample 0 -q")
    meta = _read_db(ctx).open_db(ctx.path("nostats.lmdb")).meta
    got = {k: meta.get(k) for k in ("mean", "std", "stats_images") if k in meta}
    assert not meta.get("mean") and not meta.get("std"), "--stats-sample 0 wrote %s" % got


def _val_shards(ctx):
    for k in range(2):
        ctx.run("pack_lmdb home/imagenet/train v%d.lmdb --shard %d/2 -q" % (k, k))
    out = ctx.run("train --data train.lmdb --val v0.lmdb,v1.lmdb --arch small_cnn --size 32 --epochs 1 "
                  "--batch-size 4 --max-steps 1 --output run", timeout=300)
    assert "(12 samples)" in out, "the evaluation did not read both val shards (12 samples): %s" % out[-300:]


def _python_recipe_options(ctx):
    train = ctx.runner.registry.tools["train"].options()
    py = ctx.runner.registry.tools["scripts/train_imagepack.py"].options()
    sgd = ["--lr", "--momentum", "--nesterov", "--wd", "--no-bn-wd", "--label-smoothing", "--schedule",
           "--step-size", "--warmup-epochs", "--lr-scale-batch",
           # the recipes (TRAINING.md, "Recipes")
           "--weights", "--repeat", "--choose", "--classes", "--res-schedule", "--val-size", "--val-resize",
           "--lr-peak-epoch", "--blurpool"]
    assert set(sgd) <= train, "train lacks %s" % sorted(set(sgd) - train)
    missing = [o for o in sgd if o not in py]
    assert not missing, "scripts/train_imagepack.py --help lacks the C++ trainer's %s" % " ".join(missing)


def _doc_paragraph(ctx, doc, first, stop):
    """The lines of DOC from the one holding `first` up to (not including)
    the first after it matching `stop`."""
    import os
    lines = open(os.path.join(ctx.runner.root, doc), encoding="utf-8").read().split("\n")
    k = next(i for i, l in enumerate(lines) if first in l)
    out = [lines[k]]
    for l in lines[k + 1:]:
        if re.match(stop, l):
            break
        out.append(l)
    return "\n".join(out)


PY_KEYWORDS = """
import imagepack, inspect, json, sys
names, values = json.loads(sys.argv[1])
known = set(inspect.signature(imagepack.Loader.__init__).parameters) | set(imagepack.Loader.options_defaults())
bad = ["Loader has no keyword %s" % n for n in names if n not in known]
for name, value in values:
    try:
        imagepack.Loader("train.lmdb", 4, 32, **{name: value})
    except Exception as e:
        bad.append("Loader(..., %s=%r): %s: %s" % (name, value, type(e).__name__, e))
print("\\n".join(bad))
"""


def _python_keywords(ctx):
    """Every keyword PYTHON.md lists is one imagepack.Loader takes, and every
    value it shows (`transform="pad_crop"`, `order` `"blocks"`) is accepted."""
    import json
    import shlex
    para = _doc_paragraph(ctx, "docs/PYTHON.md", "- Options (keyword arguments", r"^- ")
    names, values, last = [], [], None
    for span in re.findall(r"`([^`]+)`", para):
        m = re.fullmatch(r'([a-z_]+)(?:=("?)([\w.]+)\2)?', span)
        if m:
            last = m.group(1)
            names.append(last)
            if m.group(3) is not None:
                values.append((last, m.group(3) if m.group(2) else {"False": False, "True": True}.get(
                    m.group(3), m.group(3))))
        elif re.fullmatch(r'"\w+"', span) and last:
            values.append((last, span.strip('"')))
    assert len(names) > 20, "found only %s in PYTHON.md's options" % names
    out = ctx.run("/usr/bin/python3 -c %s %s" % (shlex.quote(PY_KEYWORDS), shlex.quote(json.dumps([names, values]))))
    assert not out.strip(), out.strip().replace("\n", "; ")


def _loader_options(ctx):
    """LOADER.md's table of LoaderOptions: each field it names is one of the
    struct's (loader.h), each kName constant one the headers define."""
    import glob
    import os
    inc = os.path.join(ctx.runner.root, "lib", "include", "imagepack")
    header = open(os.path.join(inc, "loader.h"), encoding="utf-8").read()
    struct = header[header.index("struct LoaderOptions"):]
    struct = struct[:struct.index("\n};")]
    struct = re.sub(r"//.*", "", struct)
    every = "".join(open(h, encoding="utf-8").read() for h in glob.glob(os.path.join(inc, "*.h")))
    table = _doc_paragraph(ctx, "docs/LOADER.md", "## Options (`LoaderOptions`)", r"^## ")
    bad, n = [], 0
    for row in table.split("\n"):
        if not row.startswith("| `"):
            continue
        first = row.split("|")[1]
        for span in re.findall(r"`([^`]+)`", first) + re.findall(r"`(\w+)` \(\d", row):
            m = re.fullmatch(r"(\w+?)_min/max", span)
            for field in ([m.group(1) + "_min", m.group(1) + "_max"] if m else [span]):
                n += 1
                if not re.search(r"[\s,]%s\s*(=|;|,)" % re.escape(field), struct):
                    bad.append("LoaderOptions has no field %s" % field)
        for k in re.findall(r"`(k[A-Z]\w*)`", row):
            n += 1
            if not re.search(r"\b%s\b" % k, every):
                bad.append("no header defines %s" % k)
    assert n > 20, "found only %d names in LOADER.md's options table" % n
    assert not bad, "; ".join(bad)


CLAIMS = [
    Claim("docs/PYTHON.md", "- Options (keyword arguments, the C++ loader's", _python_keywords),
    Claim("docs/LOADER.md", "## Options (`LoaderOptions`)", _loader_options),
    Claim("docs/USAGE.md", "`pack_lmdb shards/ back.lmdb` with no option gives back", _round_trip),
    Claim("docs/USAGE.md", "pixel. `0`: no statistics, for JPEG and raw alike", _no_statistics),
    Claim("docs/OBJECT_STORAGE.md", "(shards comma-separated, read", _val_shards),
    Claim("docs/PYTHON.md", "the C++ trainer's SGD and schedule options", _python_recipe_options),
]


def find(block):
    found = [s for s in SPECS if s.doc == block.doc and s.match in block.text]
    if len(found) > 1:
        raise AssertionError("specs.py: %d specs match the block at %s" % (len(found), block.where))
    return found[0] if found else None


def all_keys():
    return {s.key for s in SPECS}


# Options a doc names that are not a project tool's, in a section about one
# (doc or None for every doc, option) -> whose option it is.
FOREIGN_OPTIONS = {
    ("docs/TRAINING.md", "--signal"): "Slurm's sbatch (--signal=USR1@120)",
    ("docs/TRAINING.md", "--array"): "Slurm's sbatch",
    ("docs/TRAINING.md", "--exclusive"): "Slurm's sbatch",
    ("docs/TRAINING.md", "--cpus-per-task"): "Slurm's sbatch",
    ("docs/TRAINING.md", "--dependency"): "Slurm's sbatch",
    ("docs/TRAINING.md", "--kill-on-invalid-dep"): "Slurm's sbatch",
    ("docs/TRAINING.md", "--requeue"): "Slurm's sbatch",
    ("docs/TRAINING.md", "--open-mode"): "Slurm's sbatch",
    ("docs/TRAINING.md", "--no_python"): "torchrun's (python3-torch 1.13 spells it with an underscore)",
    ("docs/PYTHON.md", "--no-index"): "pip's",
    ("docs/PYTHON.md", "--cache-dataset"): "torchvision's reference train.py",
    ("docs/PYTHON.md", "--workers"): "torchvision's reference train.py",
}


def option_exception(doc, tool, option):
    return FOREIGN_OPTIONS.get((doc, option), FOREIGN_OPTIONS.get((None, option)))


# A block that fails because the code does not do what its doc says (not a
# doc slip): (doc, match) -> the finding. It must fail; once it passes, the
# runner says to remove it.
KNOWN_BLOCK_FAILURES = {}
# (doc, tool, option) -> the finding.
KNOWN_OPTION_FAILURES = {}


def known_block_failure(block):
    for (doc, match) in KNOWN_BLOCK_FAILURES:
        if doc == block.doc and match in block.text:
            return (doc, match)
    return None


def known_option_failure(doc, tool, option):
    for key in ((doc, tool, option), (None, tool, option)):
        if key in KNOWN_OPTION_FAILURES:
            return key
    return None


KNOWN_CLAIM_FAILURES = {}


def all_known():
    return set(KNOWN_BLOCK_FAILURES) | set(KNOWN_OPTION_FAILURES) | set(KNOWN_CLAIM_FAILURES)
