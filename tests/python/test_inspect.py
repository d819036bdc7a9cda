"""inspect_db: the pictures are read back and checked against references
made here (Pillow thumbnails, the Python loader's batch, counts read with
read_db), and duplicate finding is measured on a planted corpus."""
import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, pack, run, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402


def pillow_tile(jpeg, tile):
    """Our thumbnail rule with Pillow: fit the image into tile x tile keeping
    its aspect (rounded), centred on grey."""
    import io
    im = Image.open(io.BytesIO(jpeg)).convert("RGB")
    s = tile / max(im.size)
    w, h = max(1, round(im.width * s)), max(1, round(im.height * s))
    out = Image.new("RGB", (tile, tile), (200, 200, 200))
    out.paste(im.resize((w, h), Image.BILINEAR), ((tile - w) // 2, (tile - h) // 2))
    return np.asarray(out, np.float32)


def test_contact_sheet_tiles_are_the_records(jpeg_db, tmp_path):
    run(tool("inspect_db"), jpeg_db, "--out", tmp_path, "--sheet", "--tile", "48", "--per-class", "5", "--seed", "3")
    layout = json.loads((tmp_path / "sheet.json").read_text())
    sheet = np.asarray(Image.open(tmp_path / "sheet.png").convert("RGB"), np.float32)
    db = read_db.open_db(jpeg_db)
    tile, pitch, (x0, y0) = layout["tile"], layout["pitch"], layout["origin"]
    assert [r["class"] for r in layout["rows"]] == db.meta["classes"]
    for r, row in enumerate(layout["rows"]):
        assert len(row["records"]) == 5 and len(set(row["records"])) == 5
        refs = {}
        for k in row["records"]:
            rec = read_db.read_record(db, k)
            assert rec["label"] == row["label"]  # every tile of a row is of its class
            refs[k] = pillow_tile(rec["payload"], tile)
        for c, k in enumerate(row["records"]):
            x, y = x0 + c * pitch, y0 + r * pitch
            got = sheet[y:y + tile, x:x + tile]
            errors = {j: np.abs(got - ref).mean() for j, ref in refs.items()}
            assert errors[k] < 6, (r, c, errors[k])
            assert min(errors, key=errors.get) == k  # and it is no other record of the row
    # another seed draws other records
    run(tool("inspect_db"), jpeg_db, "--out", tmp_path / "b", "--sheet", "--per-class", "5", "--seed", "4")
    other = json.loads((tmp_path / "b" / "sheet.json").read_text())
    assert [r["records"] for r in other["rows"]] != [r["records"] for r in layout["rows"]]


def test_grid_is_what_the_loader_hands_the_model(jpeg_db, tmp_path):
    import imagepack
    run(tool("inspect_db"), jpeg_db, "--out", tmp_path, "--grid", "--crop", "64", "--batch", "12", "--seed", "5",
        "--epoch", "2")
    layout = json.loads((tmp_path / "grid.json").read_text())
    grid = np.asarray(Image.open(tmp_path / "grid.png").convert("RGB"))
    loader = imagepack.Loader(jpeg_db, batch_size=12, size=64, seed=5, layout="NHWC", channels=3, as_torch=False)
    loader.set_epoch(2)
    images, labels = next(iter(loader))
    assert layout["zoom"] == 1 and len(layout["tiles"]) == 12
    for i, t in enumerate(layout["tiles"]):
        assert t["label"] == labels[i]
        np.testing.assert_array_equal(grid[t["y"]:t["y"] + 64, t["x"]:t["x"] + 64], images[i])


@pytest.mark.parametrize("flags,keywords", [
    (["--augment", "ta_wide", "--random-erase", "0.25", "--hflip", "0"],
     dict(auto_augment="ta_wide", random_erase=0.25, hflip=0.0)),
    (["--auto-augment", "ra", "--ra-magnitude", "14", "--interpolation", "bicubic"],
     dict(auto_augment="ra", ra_magnitude=14, interpolation="bicubic")),
    (["--augment", "augmix", "--augmix-severity", "5"], dict(auto_augment="augmix", augmix_severity=5)),
], ids=["ta_wide", "ra", "augmix"])
def test_grid_shows_the_recipes_policies_as_the_loader_makes_them(jpeg_db, tmp_path, flags, keywords):
    """Every policy the Loader takes, with the option table's flags of the
    trainers: the grid is the Loader's batch with the same keywords."""
    import imagepack
    run(tool("inspect_db"), jpeg_db, "--out", tmp_path, "--grid", "--crop", "48", "--batch", "8", "--seed", "2",
        *flags)
    layout = json.loads((tmp_path / "grid.json").read_text())
    assert layout["augment"] == "train + " + keywords["auto_augment"]
    grid = np.asarray(Image.open(tmp_path / "grid.png").convert("RGB"))
    loader = imagepack.Loader(jpeg_db, batch_size=8, size=48, seed=2, layout="NHWC", channels=3, as_torch=False,
                              **keywords)
    images, _ = next(iter(loader))
    plain, _ = next(iter(imagepack.Loader(jpeg_db, batch_size=8, size=48, seed=2, layout="NHWC", channels=3,
                                          as_torch=False)))
    assert not np.array_equal(images, plain)  # the policy changed the batch
    for i, t in enumerate(layout["tiles"]):
        np.testing.assert_array_equal(grid[t["y"]:t["y"] + 48, t["x"]:t["x"] + 48], images[i])


@pytest.mark.parametrize("flags,said", [(["--ra-magnitude", "31"], "--ra-magnitude 31: must be 0 to 30"),
                                        (["--augment", "bogus"], "or a policy"),
                                        (["--hflip", "-1"], "--hflip -1: must be in [0, 1]")])
def test_grid_refuses_a_bad_augmentation_before_any_work(jpeg_db, tmp_path, flags, said):
    r = run(tool("inspect_db"), jpeg_db, "--out", tmp_path / "out", "--grid", *flags, ok=False)
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_grid_draws_masks_and_boxes(tmp_path):
    """A segmentation + detection sample: the mask's class is tinted where
    the mask holds it, the box outlined on its edge."""
    root = tmp_path / "src"
    os.makedirs(root / "img")
    os.makedirs(root / "mask")
    rows = []
    for i in range(4):
        Image.fromarray(np.full((40, 40, 3), 128, np.uint8)).save(root / "img" / ("%d.png" % i))
        m = np.zeros((40, 40), np.uint8)
        m[:, 20:] = 1
        Image.fromarray(m).save(root / "mask" / ("%d.png" % i))
        rows.append({"image": "img/%d.png" % i, "mask": "mask/%d.png" % i, "boxes": [[4, 4, 16, 16, 0]]})
    (root / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(tool("pack_lmdb"), "--manifest", root / "m.jsonl", tmp_path / "seg.lmdb", "-q", "--encoding", "raw",
        "--mask-classes", "2")
    run(tool("inspect_db"), tmp_path / "seg.lmdb", "--out", tmp_path, "--grid", "--crop", "40", "--augment", "eval",
        "--batch", "4")
    import imagepack
    layout = json.loads((tmp_path / "grid.json").read_text())
    grid = np.asarray(Image.open(tmp_path / "grid.png").convert("RGB")).astype(int)
    z = layout["zoom"]
    batch = next(iter(imagepack.Loader(str(tmp_path / "seg.lmdb"), batch_size=4, size=40, transform="eval",
                                       layout="NHWC", channels=3, as_torch=False)))
    for i, t in enumerate(layout["tiles"]):
        shown = grid[t["y"]:t["y"] + 40 * z:z, t["x"]:t["x"] + 40 * z:z]  # one pixel per sample pixel
        image, mask = batch["image"][i].astype(int), batch["mask"][i]
        x0, y0, x1, y1 = (int(v) for v in np.floor(batch["boxes"][i][0]))
        outline = np.zeros((40, 40), bool)
        outline[max(0, y0 - 1):y1 + 3, max(0, x0 - 1):x1 + 3] = True
        outline[y0 + 3:y1 - 2, x0 + 3:x1 - 2] = False
        plain = (mask == 0) & ~outline
        tinted = (mask == 1) & ~outline
        assert plain.sum() > 200 and tinted.sum() > 200
        assert np.abs(shown[plain] - image[plain]).max() <= 1        # class 0: untouched
        assert (np.abs(shown[tinted] - image[tinted]).max(1) > 20).all()  # class 1: tinted
        edge = shown[y0 + 2:y1 - 2, x0]                             # the box's left edge
        assert (np.abs(edge - image[y0 + 2:y1 - 2, x0]).max(1) > 20).all()


def test_summary_bars_match_the_class_counts(tmp_path, tree):
    # uneven classes: drop files from two of them
    src = tmp_path / "t"
    shutil.copytree(tree, src)
    for i in range(12):
        os.remove(src / "class1" / ("img%02d.jpg" % i))
    for i in range(25):
        os.remove(src / "class2" / ("img%02d.jpg" % i))
    db = pack(src, tmp_path / "u.lmdb")
    run(tool("inspect_db"), db, "--out", tmp_path, "--summary")
    layout = json.loads((tmp_path / "summary.json").read_text())
    png = np.asarray(Image.open(tmp_path / "summary.png").convert("RGB")).astype(int)
    d = read_db.open_db(db)
    counts = np.bincount([read_db.read_record(d, i)["label"] for i in range(d.meta["count"])], minlength=3)
    assert list(counts) == [30, 18, 5]
    x0, y0, x1, y1 = layout["panels"][0]["plot"]
    heights = []
    for k in range(3):
        cx = x0 + int((k + 0.5) * (x1 - x0) / 3)
        col = png[y0:y1, cx]
        heights.append(int((np.abs(col - [70, 110, 180]).sum(1) < 10).sum()))
    assert heights[0] == y1 - y0
    for h, c in zip(heights, counts):
        assert abs(h - c * (y1 - y0) / counts.max()) <= 1.5, (heights, counts)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    d = tmp_path_factory.mktemp("planted")
    subprocess.run(["/usr/bin/python3", os.path.join(SCRIPTS, "make_planted_duplicates.py"), str(d),
                    "--bases", "10000", "--val", "1000", "--planted", "500"], check=True, capture_output=True)
    run(tool("pack_lmdb"), d / "train", d / "train.lmdb", "-q")
    run(tool("pack_lmdb"), d / "val", d / "val.lmdb", "-q")
    return d


def test_planted_duplicates_are_found(planted, tmp_path):
    r = run(tool("inspect_db"), planted / "train.lmdb", planted / "val.lmdb", "--out", tmp_path, "--duplicates")
    assert "between" in r.stdout and "(leak)" in r.stdout
    orig = {}
    for row in csv.DictReader(open(planted / "truth.csv")):
        orig[row["copy"]] = row["original"]

    def name(db, path):
        return ("train/" if db.endswith("train.lmdb") else "val/") + path

    found, false = set(), []
    for row in csv.DictReader(open(tmp_path / "duplicates.csv")):
        a, b = name(row["db_a"], row["path_a"]), name(row["db_b"], row["path_b"])
        if orig.get(a, a) == orig.get(b, b):  # a copy and its original, or two copies of one
            found.add(frozenset((a, b)))
        else:
            false.append((a, b))
    truth = [frozenset((c, o)) for c, o in orig.items()]
    recall = sum(t in found for t in truth) / len(truth)
    records = 10000 + 1000 + len(truth)
    assert recall >= 0.95, recall
    assert len(false) <= records / 10000, false
    sheet = json.loads((tmp_path / "duplicates.json").read_text())
    assert len(sheet["rows"]) == 48 and Image.open(tmp_path / "duplicates.png").size[0] == 1100


def test_exact_duplicates_and_leaks_name_both_records(tree, tmp_path):
    train, val = tmp_path / "train", tmp_path / "val"
    shutil.copytree(tree, train)
    os.makedirs(val / "class0")
    shutil.copy(tree / "class1" / "img07.jpg", val / "class0" / "leaked.jpg")  # a leak, labelled differently
    shutil.copy(tree / "class2" / "img03.jpg", train / "class2" / "again.jpg")  # a duplicate within train
    shutil.copy(tree / "class0" / "img01.jpg", val / "class0" / "fine.jpg")
    os.remove(train / "class0" / "img01.jpg")
    run(tool("pack_lmdb"), train, tmp_path / "train.lmdb", "-q")
    run(tool("pack_lmdb"), val, tmp_path / "val.lmdb", "-q")
    r = run(tool("inspect_db"), tmp_path / "train.lmdb", tmp_path / "val.lmdb", "--out", tmp_path, "--duplicates")
    rows = list(csv.DictReader(open(tmp_path / "duplicates.csv")))
    exact = {(row["path_a"], row["path_b"]) for row in rows if row["kind"] == "exact"}
    assert exact == {("class2/again.jpg", "class2/img03.jpg"), ("class1/img07.jpg", "class0/leaked.jpg")}
    assert "between %s and %s: 1 exact" % (tmp_path / "train.lmdb", tmp_path / "val.lmdb") in r.stdout
    leak = [row for row in rows if row["path_b"] == "class0/leaked.jpg"][0]
    assert leak["label_a"] == "1" and leak["label_b"] == "0"
