"""Samples beyond (image, class): masks, paired images, boxes, lists and text,
from pack_lmdb through verify_db and the loader to Python, checked against
references written here (numpy nearest neighbour, Pillow, box arithmetic)
and against the pure-Python reader scripts/read_db.py."""
import hashlib
import importlib.util
import json
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

import imagepack
from conftest import SCRIPTS, nearest_reference, tool

spec = importlib.util.spec_from_file_location("read_db", os.path.join(SCRIPTS, "read_db.py"))
read_db = importlib.util.module_from_spec(spec)
spec.loader.exec_module(read_db)

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
IGNORE = 255


def luma(rgb):
    return rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def label_of(l):
    """The mask a sample's image implies: 0, 1, 2 by luma thresholds."""
    return (l > 100).astype(np.uint8) + (l > 170)


def make_image(rng, w, h):
    """Steep smooth ramps (>= 3 grey levels per pixel) so label edges are sharp."""
    y, x = np.mgrid[0:h, 0:w]
    fx, fy = rng.uniform(2.5, 4), rng.uniform(-2, 2)
    base = (x * fx + y * fy + rng.uniform(0, 60)) % 256
    return np.stack([base, (base * 0.8 + 30) % 256, base], -1).astype(np.uint8)


def run_pack(*args, ok=(0,)):
    r = subprocess.run([tool("pack_lmdb"), "-q", *map(str, args)], capture_output=True, text=True)
    assert r.returncode in ok, r.stderr
    return r


@pytest.fixture(scope="module")
def seg_tree(tmp_path_factory):
    """Images (PNG) in two class folders, their luma-threshold masks (with an
    ignore corner) and their negatives as paired targets."""
    root = tmp_path_factory.mktemp("seg")
    rng = np.random.default_rng(7)
    for c in range(2):
        for d in ("images", "masks", "targets"):
            os.makedirs(root / d / ("c%d" % c))
        for i in range(20):
            w, h = int(rng.integers(50, 110)), int(rng.integers(50, 110))
            img = make_image(rng, w, h)
            mask = label_of(luma(img))
            mask[:4, :4] = IGNORE
            Image.fromarray(img).save(root / "images" / ("c%d" % c) / ("%02d.png" % i))
            Image.fromarray(mask).save(root / "masks" / ("c%d" % c) / ("%02d.png" % i))
            Image.fromarray(255 - img).save(root / "targets" / ("c%d" % c) / ("%02d.png" % i))
    return root


@pytest.fixture(scope="module")
def seg_db(seg_tree, tmp_path_factory):
    dst = tmp_path_factory.mktemp("segdb") / "seg.blob"
    run_pack(seg_tree / "images", dst, "--format", "blob", "--encoding", "raw", "--field",
             "mask=%s" % (seg_tree / "masks"), "--field", "target=%s" % (seg_tree / "targets"), "--mask-classes", "3")
    return str(dst)


def test_metadata_declares_the_fields_and_verify_passes(seg_db):
    ds = imagepack.open(seg_db)
    assert ds.meta["format_version"] == 4
    assert ds.fields == [{"name": "mask", "kind": "mask", "classes": ["0", "1", "2"], "ignore": 255},
                         {"name": "target", "kind": "image"}]
    assert ds.classes == ["c0", "c1"]
    r = subprocess.run([tool("verify_db"), seg_db, "--decode"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_round_trip_every_field_read_by_the_python_reader(seg_tree, seg_db):
    db = read_db.open_db(seg_db)
    assert db.meta["count"] == 40
    for i in range(db.meta["count"]):
        rec = read_db.read_record(db, i)
        src = np.array(Image.open(seg_tree / "images" / rec["path"]))
        stem = rec["path"]
        assert np.array_equal(rec["payload"], src)
        mask, target = rec["fields"]
        assert (mask["slot"], mask["kind"]) == (0, "mask")
        assert np.array_equal(mask["value"], np.array(Image.open(seg_tree / "masks" / stem)))
        assert target["kind"] == "image" and np.array_equal(target["value"]["payload"], 255 - src)


def batches(loader, epoch=0):
    loader.set_epoch(epoch)
    return [{k: (np.array(v) if not isinstance(v, list) else v) for k, v in b.items()} for b in loader]


@pytest.mark.parametrize("transform", ["train", "pad_crop", "eval"])
def test_mask_crop_equals_numpy_nearest_reference_over_many_crops(seg_db, transform):
    """Thousands of random crops (and flips both ways): pixel for pixel the
    reference, and never a value the source mask does not hold."""
    ds = imagepack.open(seg_db)
    masks = [ds.sample(i)["mask"] for i in range(len(ds))]
    loader = imagepack.Loader(seg_db, batch_size=16, size=24, transform=transform, pad=6, vflip=True, seed=3,
                              threads=2, as_torch=False)
    crops = flips = 0
    for epoch in range(60 if transform != "eval" else 1):
        for b in batches(loader, epoch):
            for k in range(len(b["index"])):
                src = masks[b["index"][k]]
                ref = nearest_reference(src, b["crop_box"][k], 24, IGNORE)
                assert np.array_equal(b["mask"][k], ref), (epoch, b["index"][k], b["crop_box"][k])
                assert set(np.unique(b["mask"][k])) <= set(np.unique(src)) | {IGNORE}
                crops += 1
                flips += int(b["crop_box"][k][5])
    assert crops >= (2400 if transform != "eval" else 40)
    if transform != "eval":
        assert 0.4 < flips / crops < 0.6  # vertical flips happen, about half the time


def edge_free(mask):
    """Pixels whose 3x3 neighbourhood holds one label (away from label edges)."""
    p = np.pad(mask, 1, mode="edge")
    same = np.ones(mask.shape, bool)
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            same &= p[dy:dy + mask.shape[0], dx:dx + mask.shape[1]] == mask
    return same


def alignment_mismatches(images, masks):
    """Pixels away from label edges (and not within 3 levels of a threshold)
    where the mask is not the luma threshold of the loader's image."""
    bad = total = 0
    for img, m in zip(images, masks):
        l = luma(np.transpose(img, (1, 2, 0)))
        near = (np.abs(l - 100) < 3) | (np.abs(l - 170) < 3)
        keep = edge_free(m) & (m != IGNORE) & ~near
        bad += int(np.sum(label_of(l)[keep] != m[keep]))
        total += int(np.sum(keep))
    return bad, total


def test_mask_stays_aligned_with_its_image_and_fails_when_cropped_apart(seg_db):
    loader = imagepack.Loader(seg_db, batch_size=20, size=40, vflip=True, seed=5, threads=2, as_torch=False)
    for epoch in range(3):
        for b in batches(loader, epoch):
            bad, total = alignment_mismatches(b["image"], b["mask"])
            # A crop shrunk a few times over gives the image's antialiasing
            # filter a support wider than the 3x3 neighbourhood taken as
            # edge-free, so a pixel or three of a batch may mix across an
            # edge (0 to 3 of ~28,000 over seeds 0-11); the controls below
            # are off on more than 5%.
            assert total > 0.5 * b["mask"].size and bad <= 0.001 * total
            # The negative controls: the same masks flipped on their own, or
            # taken from another sample's crop, break the relation.
            bad_flip, total_flip = alignment_mismatches(b["image"], b["mask"][:, :, ::-1])
            assert bad_flip > 0.05 * total_flip
            bad_other, total_other = alignment_mismatches(b["image"], np.roll(b["mask"], 1, axis=0))
            assert bad_other > 0.05 * total_other


def test_paired_target_gets_the_same_crop_and_flips(seg_db):
    loader = imagepack.Loader(seg_db, batch_size=20, size=40, vflip=True, seed=8, threads=2, as_torch=False)
    for epoch in range(3):
        for b in batches(loader, epoch):
            img, target = b["image"].astype(int), b["target"].astype(int)
            # Resampling is linear up to rounding: two separable passes, each
            # rounding to 8 bits, are off by at most 2 together.
            assert np.abs(target - (255 - img)).max() <= 2
            assert np.abs(target[..., ::-1] - (255 - img)).mean() > 10  # an independent flip would show


def test_fields_are_the_same_whatever_threads_and_resume_exactly(seg_db):
    def run(threads, resume_after=None):
        loader = imagepack.Loader(seg_db, batch_size=7, size=20, vflip=True, seed=2, threads=threads, as_torch=False)
        loader.set_epoch(1)
        out = []
        for b in loader:
            out.append({k: np.array(v) for k, v in b.items()})
            if resume_after is not None and len(out) == resume_after:
                state = loader.state_dict()
                fresh = imagepack.Loader(seg_db, batch_size=7, size=20, vflip=True, seed=2, threads=threads,
                                         as_torch=False)
                fresh.load_state_dict(state)
                out += [{k: np.array(v) for k, v in b.items()} for b in fresh]
                break
        return out

    one, three, resumed = run(1), run(3), run(2, resume_after=2)
    assert len(one) == len(three) == len(resumed) == 6
    for a, b, c in zip(one, three, resumed):
        assert a.keys() == b.keys() == c.keys() == {"image", "label", "index", "mask", "target", "crop_box"}
        for k in a:
            assert np.array_equal(a[k], b[k]) and np.array_equal(a[k], c[k]), k


def test_classification_datasets_still_yield_tuples_and_old_files_load(tmp_path):
    """Databases of the format before fields (tests/data/format2) open and
    load byte for byte as they did."""
    expected = json.load(open(os.path.join(DATA, "format2", "expected.json")))
    for name, want in expected.items():
        path = os.path.join(DATA, "format2", name)
        db = read_db.open_db(path)
        ds = imagepack.open(path)
        assert ds.classes == want["classes"] and not ds.fields and ds.meta["format_version"] == 2
        for i, rec in enumerate(want["records"]):
            assert hashlib.sha256(db.raw(i)).hexdigest() == rec["record_sha256"]
            image, label, path_ = ds.record(i)
            assert (label, path_) == (rec["label"], rec["path"])
            assert image.shape[:2] == (rec["height"], rec["width"])
        loader = imagepack.Loader(path, batch_size=4, size=16, threads=1, as_torch=False)
        images, labels = next(iter(loader))
        assert images.shape == (4, 3, 16, 16) and sorted(labels.tolist()) == sorted(r["label"] for r in want["records"])


@pytest.fixture(scope="module")
def manifest_dir(tmp_path_factory):
    """A JSON Lines manifest with boxes, multi-labels, a float vector and text."""
    root = tmp_path_factory.mktemp("manifest")
    rng = np.random.default_rng(11)
    os.makedirs(root / "img")
    rows = []
    for i in range(24):
        w, h = int(rng.integers(60, 120)), int(rng.integers(60, 120))
        Image.fromarray(make_image(rng, w, h)).save(root / "img" / ("%02d.jpg" % i), quality=92)
        boxes = []
        for _ in range(int(rng.integers(0, 5))):
            x0, y0 = rng.uniform(0, w - 10), rng.uniform(0, h - 10)
            boxes.append([round(x0, 2), round(y0, 2), round(rng.uniform(x0 + 2, w), 2), round(rng.uniform(y0 + 2, h), 2),
                          int(rng.integers(0, 3))])
        rows.append({"image": "img/%02d.jpg" % i, "label": ["cat", "dog"][i % 2], "boxes": boxes,
                     "tags": [int(t) for t in rng.integers(0, 9, int(rng.integers(1, 4)))],
                     "depth": [float(round(v, 3)) for v in rng.uniform(0, 5, 3)],
                     "caption": "photo %d — café" % i})
    with open(root / "samples.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return root, rows


@pytest.fixture(scope="module")
def det_db(manifest_dir, tmp_path_factory):
    root, _ = manifest_dir
    dst = tmp_path_factory.mktemp("det") / "det.lmdb"
    run_pack("--manifest", root / "samples.jsonl", dst)
    return str(dst)


def test_manifest_round_trip_of_boxes_lists_and_text(manifest_dir, det_db):
    root, rows = manifest_dir
    ds = imagepack.open(det_db)
    assert [(f["name"], f["kind"]) for f in ds.fields] == [("boxes", "boxes"), ("caption", "text"),
                                                           ("depth", "floats"), ("tags", "ints")]
    assert ds.classes == ["cat", "dog"]
    db = read_db.open_db(det_db)
    by_path = {r["image"]: r for r in rows}
    for i in range(len(ds)):
        rec = read_db.read_record(db, i)
        row = by_path[rec["path"]]
        fields = {ds.fields[f["slot"]]["name"]: f["value"] for f in rec["fields"]}
        xy, cls = fields["boxes"]
        want = np.array([b[:4] for b in row["boxes"]], np.float32).reshape(-1, 4)
        assert np.array_equal(xy, want) and cls.tolist() == [b[4] for b in row["boxes"]]
        assert fields["tags"].tolist() == row["tags"]
        assert np.array_equal(fields["depth"], np.array(row["depth"], np.float32))
        assert fields["caption"] == row["caption"]
        assert rec["label"] == ["cat", "dog"].index(row["label"])
    r = subprocess.run([tool("verify_db"), det_db, "--decode", "--against", str(root / "samples.jsonl")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def reference_boxes(boxes, labels, crop, size, min_visible):
    """Map through the crop and its flips, clip to the output, drop the empty
    and the mostly hidden: written here from the definition."""
    x, y, w, h, hf, vf = (float(v) for v in crop)
    out = []
    for (x0, y0, x1, y1), c in zip(boxes, labels):
        X0, X1 = (x0 - x) * size / w, (x1 - x) * size / w
        Y0, Y1 = (y0 - y) * size / h, (y1 - y) * size / h
        if hf:
            X0, X1 = size - X1, size - X0
        if vf:
            Y0, Y1 = size - Y1, size - Y0
        area = (X1 - X0) * (Y1 - Y0)
        cx0, cx1 = min(max(X0, 0), size), min(max(X1, 0), size)
        cy0, cy1 = min(max(Y0, 0), size), min(max(Y1, 0), size)
        if cx1 <= cx0 or cy1 <= cy0 or (cx1 - cx0) * (cy1 - cy0) < min_visible * area:
            continue
        out.append((cx0, cy0, cx1, cy1, c))
    return out


def test_boxes_follow_the_crop_against_a_reference(det_db):
    ds = imagepack.open(det_db)
    src = [ds.sample(i) for i in range(len(ds))]
    loader = imagepack.Loader(det_db, batch_size=8, size=32, vflip=True, min_box_visible=0.3, seed=4, threads=2,
                              as_torch=False)
    seen = 0
    for epoch in range(20):
        for b in batches(loader, epoch):
            assert b["boxes"].shape[:2] == b["box_labels"].shape and b["boxes"].shape[2] == 4
            assert b["boxes"].shape[1] == max(b["num_boxes"].max(), 0)
            assert len(b["caption"]) == len(b["index"])
            for k, index in enumerate(b["index"]):
                s = src[index]
                ref = reference_boxes(s["boxes"], s["box_labels"], b["crop_box"][k], 32, 0.3)
                n = b["num_boxes"][k]
                assert n == len(ref)
                got = np.concatenate([b["boxes"][k][:n], b["box_labels"][k][:n, None]], 1)
                assert np.allclose(got, np.array(ref, np.float64).reshape(-1, 5), atol=1e-3)
                assert (b["box_labels"][k][n:] == -1).all()
                assert b["caption"][k] == s["caption"]
                assert b["tags"][k][:b["num_tags"][k]].tolist() == s["tags"].tolist()
                seen += n
    assert seen > 200


def test_csv_manifest_and_coco_instances(tmp_path, manifest_dir):
    root, rows = manifest_dir
    with open(root / "samples.csv", "w") as f:
        f.write("image,label,boxes\n")
        for r in rows[:6]:
            f.write('%s,%s,"%s"\n' % (r["image"], r["label"], json.dumps(r["boxes"])))
    run_pack("--manifest", root / "samples.csv", tmp_path / "csv.lmdb")
    ds = imagepack.open(str(tmp_path / "csv.lmdb"))
    assert len(ds) == 6 and [f["name"] for f in ds.fields] == ["boxes"]
    for i in range(6):
        s = ds.sample(i)
        row = next(r for r in rows if r["image"] == s["path"])
        assert np.allclose(s["boxes"], np.array([b[:4] for b in row["boxes"]]).reshape(-1, 4), atol=1e-4)
    coco = {"images": [{"id": 10 + i, "file_name": r["image"], "width": 0, "height": 0} for i, r in enumerate(rows[:5])],
            "categories": [{"id": 7, "name": "person"}, {"id": 3, "name": "bicycle"}],
            "annotations": [{"id": 1, "image_id": 10, "bbox": [1, 2, 10, 20], "category_id": 7},
                            {"id": 2, "image_id": 10, "bbox": [5, 5, 4, 4], "category_id": 3},
                            {"id": 3, "image_id": 12, "bbox": [0, 0, 3, 3], "category_id": 3, "iscrowd": 1}]}
    with open(tmp_path / "instances.json", "w") as f:
        json.dump(coco, f)
    run_pack("--coco", tmp_path / "instances.json", "--images", root, tmp_path / "coco.lmdb")
    ds = imagepack.open(str(tmp_path / "coco.lmdb"))
    assert ds.fields == [{"name": "boxes", "kind": "boxes", "classes": ["bicycle", "person"]},
                         {"name": "crowd_boxes", "kind": "boxes", "classes": ["bicycle", "person"]}]
    s = ds.sample([ds.sample(i)["path"] for i in range(len(ds))].index(rows[0]["image"]))
    assert s["boxes"].tolist() == [[1, 2, 11, 22], [5, 5, 9, 9]] and s["box_labels"].tolist() == [1, 0]
    crowd_only = ds.sample([ds.sample(i)["path"] for i in range(len(ds))].index(rows[2]["image"]))
    assert crowd_only["boxes"].shape == (0, 4)
    assert crowd_only["crowd_boxes"].tolist() == [[0, 0, 3, 3]] and crowd_only["crowd_boxes_labels"].tolist() == [0]


def assert_nearest_like_pillow(ours, src):
    """Equal to Pillow's NEAREST resize, except where an output centre falls
    exactly on a source pixel edge (a tie, which Pillow's floating point
    breaks either way): there, one of the two pixels beside the edge."""
    th, tw = ours.shape
    h, w = src.shape
    ref = np.array(Image.fromarray(src).resize((tw, th), Image.NEAREST))
    tie_x = ((2 * np.arange(tw) + 1) * w) % (2 * tw) == 0
    tie_y = ((2 * np.arange(th) + 1) * h) % (2 * th) == 0
    tie = tie_y[:, None] | tie_x[None, :]
    assert np.array_equal(ours[~tie], ref[~tie])
    for y, x in zip(*np.nonzero(tie)):
        sy = ((2 * y + 1) * h) // (2 * th)
        sx = ((2 * x + 1) * w) // (2 * tw)
        near = {src[yy, xx] for yy in (sy - tie_y[y], sy) for xx in (sx - tie_x[x], sx)}
        assert ours[y, x] in near


def test_resize_while_packing_masks_by_nearest_like_pillow_and_boxes_scaled(tmp_path):
    rng = np.random.default_rng(2)
    os.makedirs(tmp_path / "img")
    w, h = 97, 73
    img = make_image(rng, w, h)
    Image.fromarray(img).save(tmp_path / "img" / "a.png")
    mask = rng.integers(0, 6, (h, w)).astype(np.uint8)
    Image.fromarray(mask).save(tmp_path / "mask.png")
    with open(tmp_path / "m.jsonl", "w") as f:
        f.write(json.dumps({"image": "img/a.png", "mask": "mask.png", "boxes": [[9.7, 7.3, 48.5, 73, 1]]}) + "\n")
    run_pack("--manifest", tmp_path / "m.jsonl", tmp_path / "r.lmdb", "--max-size", "32")
    s = imagepack.open(str(tmp_path / "r.lmdb")).sample(0)
    tw, th = 43, 32  # round(97 * 32 / 73) = 43
    assert s["image"].shape == (th, tw, 3) and s["mask"].shape == (th, tw)
    assert_nearest_like_pillow(s["mask"], mask)
    assert np.allclose(s["boxes"], [[9.7 * tw / w, 7.3 * th / h, 48.5 * tw / w, 32]], atol=1e-3)


def test_exif_orientation_turns_mask_and_boxes_with_the_image(tmp_path):
    """A JPEG stored sideways with EXIF orientation 6 (rotate 90 clockwise):
    the record's image is upright, and a mask and boxes drawn on the stored
    pixels turn with it (Pillow's exif_transpose as the reference)."""
    rng = np.random.default_rng(4)
    W, H = 80, 48
    img = make_image(rng, W, H)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(img).save(tmp_path / "a.jpg", quality=95, exif=exif)
    mask = np.zeros((H, W), np.uint8)
    mask[5:20, 10:30] = 1
    Image.fromarray(mask).save(tmp_path / "a_mask.png")
    with open(tmp_path / "m.jsonl", "w") as f:
        f.write(json.dumps({"image": "a.jpg", "mask": "a_mask.png", "boxes": [[10, 5, 30, 20, 0]]}) + "\n")
    run_pack("--manifest", tmp_path / "m.jsonl", tmp_path / "e.lmdb")
    s = imagepack.open(str(tmp_path / "e.lmdb")).sample(0)
    from PIL import ImageOps
    upright = ImageOps.exif_transpose(Image.open(tmp_path / "a.jpg"))
    assert s["image"].shape == (upright.height, upright.width, 3) == (W, H, 3)
    want_mask = np.array(Image.fromarray(mask).transpose(Image.ROTATE_270))
    assert np.array_equal(s["mask"], want_mask)
    ys, xs = np.nonzero(s["mask"])
    assert s["boxes"].tolist() == [[xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]]


def test_bad_samples_are_skipped_and_named_nothing_else_lost(tmp_path, seg_tree):
    rng = np.random.default_rng(9)
    os.makedirs(tmp_path / "img")
    rows = []
    for i in range(6):
        Image.fromarray(make_image(rng, 40, 30)).save(tmp_path / "img" / ("%d.png" % i))
        Image.fromarray(np.zeros((30, 40), np.uint8)).save(tmp_path / ("%d_mask.png" % i))
        rows.append({"image": "img/%d.png" % i, "mask": "%d_mask.png" % i, "boxes": [[1, 1, 10, 10, 0]]})
    os.remove(tmp_path / "1_mask.png")                                                   # partner missing
    Image.fromarray(np.zeros((31, 40), np.uint8)).save(tmp_path / "2_mask.png")         # wrong size
    rows[3]["boxes"] = [[1, 1, 50, 10, 0]]                                               # outside the image
    rows[4]["boxes"] = [[1, 1, 1e39, 10, 0]]                                             # not finite
    Image.fromarray(np.zeros((30, 40), np.uint8)).save(tmp_path / "5_mask.jpg")          # lossy mask
    rows[5]["mask"] = "5_mask.jpg"
    rows.append({"image": "img/0.png", "mask": "0_mask.png"})                           # listed twice
    rows.append({"mask": "0_mask.png"})                                                  # no image
    with open(tmp_path / "m.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    r = run_pack("--manifest", tmp_path / "m.jsonl", tmp_path / "b.lmdb", "--errors", tmp_path / "errors.txt", ok=(3,))
    errors = open(tmp_path / "errors.txt").read()
    assert "img/1.png" in errors and "1_mask.png" in errors
    assert "img/2.png" in errors and "is 40x31, the image is 40x30" in errors
    assert "img/3.png" in errors and "not inside the 40x30 image" in errors
    assert "img/4.png" in errors and "not finite" in errors
    assert "img/5.png" in errors and "JPEG" in errors
    assert "m.jsonl:7" in errors and "listed twice" in errors
    assert "m.jsonl:8" in errors and 'no "image"' in errors
    ds = imagepack.open(str(tmp_path / "b.lmdb"))
    assert [ds.sample(i)["path"] for i in range(len(ds))] == ["img/0.png"]
    # A paired tree with a missing partner: the image is skipped and named.
    os.makedirs(tmp_path / "masks" / "c0")
    for name in sorted(os.listdir(seg_tree / "masks" / "c0"))[1:]:
        os.link(seg_tree / "masks" / "c0" / name, tmp_path / "masks" / "c0" / name)
    os.makedirs(tmp_path / "images")
    os.symlink(seg_tree / "images" / "c0", tmp_path / "images" / "c0")
    r = run_pack(tmp_path / "images", tmp_path / "p.lmdb", "--field", "mask=%s" % (tmp_path / "masks"),
                 "--errors", tmp_path / "e2.txt", ok=(3,))
    assert "c0/00.png" in open(tmp_path / "e2.txt").read() and "no mask file c0/00.*" in open(tmp_path / "e2.txt").read()
    assert len(imagepack.open(str(tmp_path / "p.lmdb"))) == 19


def test_pack_refuses_a_mask_value_verify_would_reject(tmp_path):
    """A mask value outside the declared classes (too few classes declared)
    is refused by pack, named by path, field and value: pack applies
    verify's rule before it writes (verify's own check of such a record is
    tested in tests/lib/fields_test.cc)."""
    rng = np.random.default_rng(1)
    os.makedirs(tmp_path / "img" / "a")
    os.makedirs(tmp_path / "mask" / "a")
    Image.fromarray(make_image(rng, 20, 20)).save(tmp_path / "img" / "a" / "x.png")
    m = np.zeros((20, 20), np.uint8)
    m[3, 4] = 7
    Image.fromarray(m).save(tmp_path / "mask" / "a" / "x.png")
    r = subprocess.run([tool("pack_lmdb"), str(tmp_path / "img"), str(tmp_path / "v.lmdb"), "-q", "--field",
                        "mask=%s" % (tmp_path / "mask"), "--mask-classes", "3"], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "a/x.png" in r.stderr and "mask: mask value 7 is outside the 3 mask classes" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "v.lmdb")


def test_resize_imagenet_mask_tree_keeps_each_mask_on_its_images_geometry(tmp_path, seg_tree):
    """Images and masks resized as two trees with the same limit pair up
    again: the masks are Pillow's nearest neighbour at the images' sizes."""
    for tree, extra in (("images", []), ("masks", ["--mask"])):
        r = subprocess.run([tool("resize_imagenet"), str(seg_tree / tree), str(tmp_path / tree), "--max-size", "32",
                            "-q", *extra], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    for rel in ("c0/00", "c1/07"):
        img = Image.open(tmp_path / "images" / (rel + ".png"))
        mask = Image.open(tmp_path / "masks" / (rel + ".png"))
        assert mask.mode == "L" and mask.size == img.size and min(img.size) == 32
        assert_nearest_like_pillow(np.array(mask), np.array(Image.open(seg_tree / "masks" / (rel + ".png"))))
    run_pack(tmp_path / "images", tmp_path / "small.lmdb", "--field", "mask=%s" % (tmp_path / "masks"),
             "--mask-classes", "3")
    r = subprocess.run([tool("verify_db"), str(tmp_path / "small.lmdb"), "--decode"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout
    os.makedirs(tmp_path / "badmasks")
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "badmasks" / "x.jpg")
    r = subprocess.run([tool("resize_imagenet"), str(tmp_path / "badmasks"), str(tmp_path / "out"), "--mask", "-q",
                        "--max-size", "4"],
                       capture_output=True, text=True)
    assert r.returncode == 3 and "x.jpg" in r.stderr and "JPEG" in r.stderr


def test_pack_usage_errors_for_fields(tmp_path, manifest_dir):
    root, _ = manifest_dir
    for args in (["--manifest", root / "samples.jsonl", tmp_path / "a.lmdb", "--field", "mask=%s" % root],
                 ["--coco", root / "x.json", tmp_path / "b.lmdb"],
                 [root / "img", tmp_path / "c.lmdb", "--field", "target"]):
        r = subprocess.run([tool("pack_lmdb"), *map(str, args)], capture_output=True, text=True)
        assert r.returncode == 2, (args, r.stderr)
        assert not os.path.exists(str(args[-1])) and not os.path.exists(str(tmp_path / "c.lmdb"))


def test_elastic_resume_gives_every_field_of_the_rest_of_the_epoch_once(seg_db):
    """A state saved by one rank, continued by two: together they render the
    rest of the epoch once, and each sample's fields (crop, mask, target)
    are those the single rank would have rendered at that position."""
    opts = dict(batch_size=5, size=16, vflip=True, seed=6, threads=2, as_torch=False)
    single = imagepack.Loader(seg_db, world_size=1, rank=0, **opts)
    single.set_epoch(2)
    by_index, state = {}, None
    for k, b in enumerate(single):
        if k == 0:
            first = int(b["index"][0])  # position 0 of the epoch's order
        if k == 2:
            state = single.state_dict()  # after 3 batches: position 15
        if k >= 3:
            for j, index in enumerate(b["index"]):
                by_index[int(index)] = {f: np.array(b[f][j]) for f in ("mask", "target", "crop_box")}
    assert state["position"] == 15 and len(by_index) == 40 - 15
    seen = []
    for rank in (0, 1):
        loader = imagepack.Loader(seg_db, world_size=2, rank=rank, **opts)
        loader.load_state_dict(state)
        for b in loader:
            for j, index in enumerate(b["index"]):
                seen.append(int(index))
                if int(index) in by_index:
                    for f in ("mask", "target", "crop_box"):
                        assert np.array_equal(b[f][j], by_index[int(index)][f]), (rank, index, f)
    # Even partition: 25 positions over 2 ranks make 13 each; the 26th
    # repeats position 0 of the epoch's order (DistributedSampler's rule).
    assert len(seen) == 26 and sorted(seen) == sorted(list(by_index) + [first])


@pytest.mark.parametrize("kw", [{"auto_augment": "ta_wide"}, {"random_erase": 0.5}])
def test_augmentations_that_move_the_image_alone_are_refused_with_spatial_fields(seg_db, kw):
    """The policy and erasing change the image only: with a mask (or a
    second image, or boxes) beside it they are refused by name, never
    applied so that the mask no longer matches."""
    with pytest.raises(ValueError) as e:
        imagepack.Loader(seg_db, batch_size=4, size=32, **kw)
    assert "follows the image's geometry" in str(e.value) and "mask" in str(e.value), str(e.value)
    imagepack.Loader(seg_db, batch_size=4, size=32, train=False, **kw)  # evaluation takes none of them
