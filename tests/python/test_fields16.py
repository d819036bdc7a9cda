"""16-bit maps: masks of dtype uint16 (label ids up to 60,000) and depth
maps (uint16 millimetres, 0 for no reading), from paired trees, manifests
and WebDataset shards through pack_lmdb, verify_db, the loader, Python and
export_db back to 16-bit PNGs. The references are Pillow (which wrote and
reads the PNGs) and a numpy nearest-neighbour crop (conftest.py)."""
import importlib.util
import io
import json
import os
import subprocess
import tarfile

import numpy as np
import pytest
from PIL import Image

import imagepack
from conftest import SCRIPTS, nearest_reference, tool

_spec = importlib.util.spec_from_file_location("read_db", os.path.join(SCRIPTS, "read_db.py"))
read_db = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(read_db)

IGNORE = 65535   # the uint16 mask's default ignore value
NO_READING = 0   # depth's default


def run(*args, ok=(0,)):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    assert r.returncode in ok, r.stdout + r.stderr
    return r


def png16(array, path):
    """A 16-bit gray PNG written by Pillow (mode I;16)."""
    Image.fromarray(array.astype(np.uint16)).save(path)


def read_png(path_or_bytes):
    """Pillow's values of a PNG, as uint16."""
    src = io.BytesIO(path_or_bytes) if isinstance(path_or_bytes, bytes) else path_or_bytes
    im = Image.open(src)
    assert im.mode in ("I;16", "I"), im.mode
    return np.array(im).astype(np.uint16)


def sample_maps(rng, w, h, i):
    """A label map of ids among a few up to 60,000 (blocks, with an ignore
    strip) and a depth map in mm with a no-reading hole."""
    ids = np.array([0, 1, 300, 4095, 33000, 60000], np.uint16)
    blocks = rng.integers(0, len(ids), (h // 4 + 1, w // 4 + 1))
    label = ids[np.kron(blocks, np.ones((4, 4), int))[:h, :w]]
    label[:, :2] = IGNORE
    y, x = np.mgrid[0:h, 0:w]
    depth = (500 + 900 * x + 37 * y + 1000 * i).astype(np.uint16)
    depth[h // 3:h // 2, w // 3:w // 2] = NO_READING
    return label, depth


@pytest.fixture(scope="module")
def tree16(tmp_path_factory):
    """Two class folders of 40x32 JPEGs with 16-bit label and depth trees."""
    root = tmp_path_factory.mktemp("tree16")
    rng = np.random.default_rng(16)
    maps = {}
    for c in range(2):
        for sub in ("img", "label", "depth"):
            os.makedirs(root / sub / ("c%d" % c), exist_ok=True)
        for i in range(6):
            w, h = 40, 32
            rel = "c%d/s%d" % (c, i)
            img = rng.integers(0, 256, (h, w, 3), np.uint8)
            Image.fromarray(img).save(root / "img" / (rel + ".jpg"), quality=90)
            label, depth = sample_maps(rng, w, h, i + 6 * c)
            png16(label, root / "label" / (rel + ".png"))
            png16(depth, root / "depth" / (rel + ".png"))
            maps[rel + ".jpg"] = (label, depth)
    return root, maps


def pack_tree(root, dst, *extra):
    run(tool("pack_lmdb"), root / "img", dst, "-q", "--field", "seg:mask=%s" % (root / "label"),
        "--field", "depth=%s" % (root / "depth"), "--mask-dtype", "uint16", "--depth-scale", "0.001", *extra)
    return str(dst)


@pytest.fixture(scope="module")
def db16(tree16, tmp_path_factory):
    root, _ = tree16
    return pack_tree(root, tmp_path_factory.mktemp("db16") / "d.lmdb")


def test_metadata_is_format_5_with_dtype_scale_and_fill(db16):
    meta = imagepack.open(db16).meta
    assert meta["format_version"] == 5
    seg, depth = meta["fields"]
    # Classes 0 .. the largest value but the ignore value: stored as a count
    # (format 5) rather than 60,001 names, handed to Python as the names.
    assert seg == {"name": "seg", "kind": "mask", "dtype": "uint16", "ignore": IGNORE,
                   "classes": [str(v) for v in range(60001)]}
    assert read_db.open_db(db16).meta["fields"][0]["classes"] == 60001
    assert depth == {"name": "depth", "kind": "depth", "no_reading": 0, "scale": 0.001}
    run(tool("verify_db"), db16, "--decode")


def test_values_survive_pack_and_python_bit_for_bit(tree16, db16):
    _, maps = tree16
    ds = imagepack.open(db16)
    assert len(ds) == len(maps)
    for i in range(len(ds)):
        s = ds.sample(i)
        label, depth = maps[s["path"]]
        assert s["seg"].dtype == np.uint16 and s["depth"].dtype == np.uint16
        assert np.array_equal(s["seg"], label) and np.array_equal(s["depth"], depth)
    # The pure-Python reader (the format's documented layout) reads the same.
    db = read_db.open_db(db16)
    for i in range(len(ds)):
        rec = read_db.parse_record(db.raw(i))
        fields = {f["kind"]: f["value"] for f in rec["fields"]}
        label, depth = maps[rec["path"]]
        assert fields["mask"].dtype == np.dtype("<u2") and np.array_equal(fields["mask"], label)
        assert np.array_equal(fields["depth"], depth)


@pytest.mark.parametrize("transform", ["train", "pad_crop", "eval"])
def test_loader_crops_equal_the_numpy_reference_and_pad_with_the_fill(db16, transform):
    ds = imagepack.open(db16)
    src = [(ds.sample(i)["seg"], ds.sample(i)["depth"]) for i in range(len(ds))]
    loader = imagepack.Loader(db16, batch_size=5, size=24, transform=transform, pad=6, vflip=True, seed=11,
                              threads=2, as_torch=False)
    crops = padded = 0
    for epoch in range(12 if transform != "eval" else 1):
        loader.set_epoch(epoch)
        for b in loader:
            assert b["seg"].dtype == np.uint16 and b["depth"].dtype == np.uint16
            assert b["seg"].shape == (len(b["index"]), 24, 24)
            for k, index in enumerate(b["index"]):
                label, depth = src[index]
                box = b["crop_box"][k]
                want_seg = nearest_reference(label, box, 24, IGNORE)
                want_depth = nearest_reference(depth, box, 24, NO_READING)
                assert np.array_equal(b["seg"][k], want_seg), (epoch, index, box)
                assert np.array_equal(b["depth"][k], want_depth), (epoch, index, box)
                # No value the source does not hold (or the fill).
                assert set(np.unique(b["seg"][k])) <= set(np.unique(label)) | {IGNORE}
                assert set(np.unique(b["depth"][k])) <= set(np.unique(depth)) | {NO_READING}
                x, y, w, h = (int(v) for v in box[:4])
                outside = x < 0 or y < 0 or x + w > label.shape[1] or y + h > label.shape[0]
                padded += outside
                crops += 1
    assert crops >= (120 if transform != "eval" else 12)
    if transform == "pad_crop":
        assert padded > 0  # the fill was tested, not only the inside


def test_torch_batches_hold_the_values_as_int32(db16):
    torch = pytest.importorskip("torch")
    ref = imagepack.Loader(db16, batch_size=4, size=20, seed=3, threads=1, as_torch=False)
    tor = imagepack.Loader(db16, batch_size=4, size=20, seed=3, threads=1)
    for a, b in zip(ref, tor):
        for name in ("seg", "depth"):
            assert b[name].dtype == torch.int32
            assert np.array_equal(b[name].numpy(), a[name].astype(np.int32))
        assert int(b["seg"].max()) >= 33000 or int(a["seg"].max()) < 33000


def test_export_writes_16_bit_pngs_and_import_restores_every_value(tree16, db16, tmp_path):
    _, maps = tree16
    run(tool("export_db"), db16, tmp_path / "wds", "-q", "--records-per-shard", "5")
    shards = sorted(f for f in os.listdir(tmp_path / "wds") if ".tar" in f)
    seen = 0
    for s in shards:
        with tarfile.open(tmp_path / "wds" / s) as t:
            members = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
        for name, data in members.items():
            if not name.endswith(".json"):
                continue
            key = name[:-len(".json")]
            path = json.loads(data)["path"]
            label, depth = maps[path]
            for member in (".seg.png", ".depth.png"):  # IHDR: bit depth 16, colour type 0 (gray)
                assert members[key + member][24:26] == b"\x10\x00"
            assert np.array_equal(read_png(members[key + ".seg.png"]), label)
            assert np.array_equal(read_png(members[key + ".depth.png"]), depth)
            seen += 1
    assert seen == len(maps)
    run(tool("pack_lmdb"), tmp_path / "wds", tmp_path / "back.lmdb", "-q")
    a, b = imagepack.open(db16), imagepack.open(str(tmp_path / "back.lmdb"))
    assert b.meta["fields"] == a.meta["fields"] and b.meta["format_version"] == 5
    by_path = {b.sample(i)["path"]: i for i in range(len(b))}
    for i in range(len(a)):
        sa = a.sample(i)
        sb = b.sample(by_path[sa["path"]])
        for name in ("seg", "depth"):
            assert sb[name].dtype == np.uint16 and np.array_equal(sa[name], sb[name])


def test_manifest_and_webdataset_members_as_other_tools_write_them(tree16, db16, tmp_path):
    """A JSON Lines manifest naming the PNGs, and WebDataset shards written
    with Python's tarfile (KEY.jpg, KEY.seg.png, KEY.depth.png, KEY.cls, as
    webdataset's TarWriter names members) give the paired trees' records."""
    root, maps = tree16
    rows = []
    for rel in sorted(maps):
        stem = rel[:-len(".jpg")]
        rows.append({"image": "img/" + rel, "label": int(rel[1]), "mask": "label/%s.png" % stem,
                     "depth": "depth/%s.png" % stem})
    manifest = root / "m.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(tool("pack_lmdb"), "--manifest", manifest, tmp_path / "m.lmdb", "-q", "--mask-dtype", "uint16")
    os.makedirs(tmp_path / "shards")
    with tarfile.open(tmp_path / "shards" / "train-000000.tar", "w") as t:
        for n, rel in enumerate(sorted(maps)):
            stem = rel[:-len(".jpg")]
            for ext, path in (("jpg", root / "img" / rel), ("mask.png", root / "label" / (stem + ".png")),
                              ("depth.png", root / "depth" / (stem + ".png")), ("cls", None)):
                data = path.read_bytes() if path else rel[1].encode()
                info = tarfile.TarInfo("%06d.%s" % (n, ext))
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    run(tool("pack_lmdb"), tmp_path / "shards", tmp_path / "w.lmdb", "-q", "--mask-dtype", "uint16")
    for db in ("m.lmdb", "w.lmdb"):
        ds = imagepack.open(str(tmp_path / db))
        assert ds.meta["format_version"] == 5
        kinds = {f["name"]: (f["kind"], f.get("dtype")) for f in ds.meta["fields"]}
        assert kinds == {"mask": ("mask", "uint16"), "depth": ("depth", None)}
        run(tool("verify_db"), tmp_path / db)
        values = sorted((ds.sample(i)["mask"].tobytes(), ds.sample(i)["depth"].tobytes()) for i in range(len(ds)))
        want = sorted((label.tobytes(), depth.tobytes()) for label, depth in maps.values())
        assert values == want


def test_resize_while_packing_is_nearest_neighbour(tree16, tmp_path):
    """--max-size 20: 40x32 maps become 25x20 by nearest neighbour
    (floor((x + 0.5) * 40 / 25)), every value one the source holds."""
    root, maps = tree16
    db = pack_tree(root, tmp_path / "r.lmdb", "--max-size", "20")
    ds = imagepack.open(db)
    for i in range(len(ds)):
        s = ds.sample(i)
        label, depth = maps[s["path"]]
        xs = ((2 * np.arange(25) + 1) * 40) // 50
        ys = ((2 * np.arange(20) + 1) * 32) // 40
        assert np.array_equal(s["seg"], label[np.ix_(ys, xs)])
        assert np.array_equal(s["depth"], depth[np.ix_(ys, xs)])


def test_a_uint8_mask_field_refuses_wide_values_and_verify_checks_classes(tree16, tmp_path):
    root, _ = tree16
    r = run(tool("pack_lmdb"), root / "img", tmp_path / "u8.lmdb", "-q", "--field", "seg:mask=%s" % (root / "label"),
            ok=(1, 2, 3))
    assert "over 255" in r.stderr and "--mask-dtype uint16" in r.stderr
    r = run(tool("pack_lmdb"), root / "img", tmp_path / "c.lmdb", "-q", "--field", "seg:mask=%s" % (root / "label"),
            "--mask-dtype", "uint16", "--mask-classes", "5000", ok=(1, 2, 3))
    assert "value 60000 is outside the 5000 mask classes" in r.stderr
    r = run(tool("pack_lmdb"), root / "img", tmp_path / "i.lmdb", "-q", "--field", "seg:mask=%s" % (root / "label"),
            "--ignore-value", "70000", "--mask-dtype", "uint16", ok=(2,))
    assert "--ignore-value" in r.stderr


def test_resize_imagenet_keeps_16_bit_maps_16_bit(tree16, tmp_path):
    """resize_imagenet --mask on the 16-bit label tree: 16-bit PNGs out,
    nearest neighbour of the source (40x32 -> 25x20 at --max-size 20)."""
    root, maps = tree16
    run(tool("resize_imagenet"), root / "label", tmp_path / "small", "--mask", "--max-size", "20", "-q")
    xs = ((2 * np.arange(25) + 1) * 40) // 50
    ys = ((2 * np.arange(20) + 1) * 32) // 40
    for rel, (label, _) in maps.items():
        path = tmp_path / "small" / (rel[:-len(".jpg")] + ".png")
        assert path.read_bytes()[24:26] == b"\x10\x00"
        assert np.array_equal(read_png(str(path)), label[np.ix_(ys, xs)])
