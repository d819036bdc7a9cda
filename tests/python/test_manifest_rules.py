"""Manifest fields by rule, not by guess (docs/USAGE.md, "A manifest"): a
string is opened as a file only under a key declared with --field
NAME:KIND or named by a file kind's prefix (image*, mask*, depth*);
anything else is text, whatever it looks like. Checked on the manifest
scripts/make_photo_pairs.py writes (real wallpapers, real processes) and
against Pillow's pixels."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, run, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402


def fields_of(db, i):
    rec = read_db.read_record(db, i)
    return rec, {db.meta["fields"][f["slot"]]["name"]: f["value"] for f in rec["fields"]}


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    if not os.path.isdir("/usr/share/wallpapers") and not os.path.isdir("/usr/share/backgrounds/mate"):
        pytest.skip("no wallpaper packages (scripts/setup.sh installs them)")
    out = tmp_path_factory.mktemp("pairs")
    subprocess.run(["/usr/bin/python3", os.path.join(SCRIPTS, "make_photo_pairs.py"), str(out), "--size", "32",
                    "--train", "5", "--test", "1"], check=True, capture_output=True)
    return out


def test_photo_pairs_manifest_packs_every_row(pairs, tmp_path):
    """The finding: "target" and "source" hold paths, so every row was
    skipped for a "source" file that is not there. By rule they are text."""
    rows = [json.loads(line) for line in open(pairs / "train.jsonl")]
    r = run(tool("pack_lmdb"), "--manifest", pairs / "train.jsonl", tmp_path / "t.lmdb", "-q", "--no-class")
    assert "5 records" in r.stdout and "0 skipped" in r.stdout, r.stdout + r.stderr
    assert "field 'target' is text" in r.stderr and "--field target:KIND" in r.stderr  # says how to open them
    db = read_db.open_db(str(tmp_path / "t.lmdb"))
    kinds = {f["name"]: f["kind"] for f in db.meta["fields"]}
    assert kinds == {"target": "text", "source": "text", "crop": "ints", "degradation": "text"}
    by_path = {row["image"]: row for row in rows}
    for i in range(5):
        rec, f = fields_of(db, i)
        row = by_path[rec["path"]]
        assert (f["target"], f["source"], f["degradation"]) == (row["target"], row["source"], row["degradation"])
        assert f["crop"].tolist() == row["crop"]


def test_declared_image_field_is_opened(pairs, tmp_path):
    rows = {json.loads(line)["image"]: json.loads(line) for line in open(pairs / "train.jsonl")}
    run(tool("pack_lmdb"), "--manifest", pairs / "train.jsonl", tmp_path / "p.lmdb", "-q", "--no-class",
        "--encoding", "raw", "--field", "target:image")
    db = read_db.open_db(str(tmp_path / "p.lmdb"))
    assert {f["name"]: f["kind"] for f in db.meta["fields"]}["target"] == "image"
    for i in range(db.meta["count"]):
        rec, f = fields_of(db, i)
        want_in = np.asarray(Image.open(pairs / rec["path"]).convert("RGB"))
        want_target = np.asarray(Image.open(pairs / rows[rec["path"]]["target"]).convert("RGB"))
        assert np.array_equal(rec["payload"], want_in)
        assert np.array_equal(f["target"]["payload"], want_target)


@pytest.mark.parametrize("ext", ["jsonl", "csv"])
def test_names_and_declarations_decide(tmp_path, ext):
    """image*, mask* and depth* keys hold paths; a path-looking string under
    another key is text; --field NAME:text keeps a mask* key's string as
    text; --field NAME:mask makes a map of a key of any name."""
    os.makedirs(tmp_path / "d")
    rows = []
    for i in range(3):
        Image.fromarray(np.full((10, 12, 3), 40 * i, np.uint8)).save(tmp_path / "d" / ("%d.png" % i))
        Image.fromarray(np.full((10, 12, 3), 200 - 40 * i, np.uint8)).save(tmp_path / "d" / ("%d.t.png" % i))
        Image.fromarray(np.full((10, 12), i, np.uint8)).save(tmp_path / "d" / ("%d.m.png" % i))
        rows.append({"image": "d/%d.png" % i, "image_sharp": "d/%d.t.png" % i, "mask_note": "masks/%d.png" % i,
                     "seg": "d/%d.m.png" % i, "original": "somewhere/else/%d.jpg" % i, "label": 0})
    keys = list(rows[0])
    if ext == "jsonl":
        (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        (tmp_path / "m.csv").write_text(",".join(keys) + "\n" + "".join(
            ",".join(str(r[k]) for k in keys) + "\n" for r in rows))
    manifest = tmp_path / ("m." + ext)
    r = run(tool("pack_lmdb"), "--manifest", manifest, tmp_path / "o.lmdb", "-q", "--encoding", "raw",
            "--field", "mask_note:text", "--field", "seg:mask", "--mask-classes", "3")
    assert "3 records" in r.stdout and "0 skipped" in r.stdout, r.stdout + r.stderr
    db = read_db.open_db(str(tmp_path / "o.lmdb"))
    kinds = {f["name"]: f["kind"] for f in db.meta["fields"]}
    assert kinds == {"image_sharp": "image", "mask_note": "text", "seg": "mask", "original": "text"}
    for i in range(3):
        rec, f = fields_of(db, i)
        n = int(rec["path"][2])
        assert np.array_equal(f["image_sharp"]["payload"],
                              np.asarray(Image.open(tmp_path / "d" / ("%d.t.png" % n)).convert("RGB")))
        assert np.array_equal(f["seg"], np.asarray(Image.open(tmp_path / "d" / ("%d.m.png" % n))))
        assert (f["mask_note"], f["original"]) == ("masks/%d.png" % n, "somewhere/else/%d.jpg" % n)
    # Without the declaration mask_note is a mask, and its file is missing.
    r = run(tool("pack_lmdb"), "--manifest", manifest, tmp_path / "x.lmdb", "-q", "--errors", tmp_path / "e.tsv",
            ok=False)
    assert r.returncode == 1 and "masks/0.png" in (tmp_path / "e.tsv").read_text()


def test_field_syntax_is_checked(tmp_path):
    (tmp_path / "m.jsonl").write_text('{"image": "a.png"}\n')
    for bad, says in (("target=dir", "NAME:KIND"), ("target:picture", "unknown field kind"),
                      ("image:text", "record's own image")):
        r = run(tool("pack_lmdb"), "--manifest", tmp_path / "m.jsonl", tmp_path / "o.lmdb", "-q", "--field", bad,
                ok=False)
        assert r.returncode in (1, 2) and says in r.stderr, (bad, r.stderr)
    r = run(tool("pack_lmdb"), tmp_path, tmp_path / "o.lmdb", "-q", "--field", "target:image", ok=False)
    assert r.returncode == 2 and "--manifest" in r.stderr
