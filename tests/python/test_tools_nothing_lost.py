"""The tools' side of the rule in docs/USAGE.md, "Exit codes": nothing that
exists is dropped without the user asking (an input left out is counted
as skipped with its true reason, and turns the exit code to 3), a check
that cannot be made is said, not passed, and what a tool is told to write
is checked before any work (exit 1 when the environment does not allow
it). Real processes on real JPEGs, PNGs and LMDBs."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import CAN_ATTACK, SCRIPTS, run, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402  (independent reader)


def picture(path, seed, size=(30, 20), fmt=None):
    """A smooth picture, different per seed, saved as its extension says."""
    w, h = size
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([(x * 255 // w + 37 * seed) % 256, (y * 255 // h + 11 * seed) % 256,
                  ((x + y) * 3 + 71 * seed) % 256], -1).astype(np.uint8)
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    Image.fromarray(a).save(path, fmt, **({"quality": 92} if str(path).endswith(".jpg") else {}))


def class_tree(root, classes, per_class=2):
    for c, name in enumerate(classes):
        for i in range(per_class):
            picture(root / name / ("%d.jpg" % i), 10 * c + i)
    return root


def tsv(path):
    return [line.split("\t") for line in open(path).read().splitlines()]


def records(db):
    d = read_db.open_db(str(db))
    return d.meta, [read_db.read_record(d, i) for i in range(d.meta["count"])]


# ---- pack_lmdb: an image left out is a skip with its reason -----------------

def test_classes_file_skips_unlisted_folders_with_their_reason(tmp_path):
    src = class_tree(tmp_path / "src", ["n01", "n0144", "n03"], per_class=3)
    picture(src / "stray.jpg", 99)
    classes = tmp_path / "classes.txt"
    classes.write_text("n01\nn03\nghost_a\nghost_b\n")
    r = run(tool("pack_lmdb"), src, tmp_path / "o.lmdb", "-q", "--classes", classes, "--errors",
            tmp_path / "e.tsv", ok=False)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert "6 records in 4 classes" in r.stdout and "4 skipped" in r.stdout, r.stdout
    rows = {p: why for p, why in tsv(tmp_path / "e.tsv")}
    unlisted = "class 'n0144' is not in --classes %s" % classes
    assert rows == {"n0144/0.jpg": unlisted, "n0144/1.jpg": unlisted, "n0144/2.jpg": unlisted,
                    "stray.jpg": rows.get("stray.jpg")}, rows
    assert "not inside a class folder" in rows["stray.jpg"]
    assert "skipped n0144/0.jpg: " + unlisted in r.stderr, r.stderr
    assert "not an image file name" not in r.stderr + open(tmp_path / "e.tsv").read()
    assert "2 classes of --classes %s have no images: ghost_a, ghost_b" % classes in r.stderr, r.stderr
    meta, recs = records(tmp_path / "o.lmdb")
    assert meta["classes"] == ["n01", "n03", "ghost_a", "ghost_b"]
    assert sorted(rec["path"] for rec in recs) == ["n01/0.jpg", "n01/1.jpg", "n01/2.jpg",
                                                   "n03/0.jpg", "n03/1.jpg", "n03/2.jpg"]


def test_classes_file_relabels_databases_and_shards_by_name(tmp_path):
    """The trainer's advice for a dataset with a class the training set
    lacks ("pack it with --classes FILE listing the training set's classes
    in their order: records of other classes are then skipped and listed")
    holds for a database and for the shards export_db wrote, not only for a
    tree: each record keeps its class by name, in the file's order."""
    src = class_tree(tmp_path / "src", ["a", "b", "c"])
    db = tmp_path / "abc.lmdb"
    run(tool("pack_lmdb"), src, db, "-q")
    run(tool("export_db"), db, tmp_path / "shards", "-q")
    os.remove(tmp_path / "shards" / "meta.json")  # indices then name classes.txt's classes
    (tmp_path / "ca.txt").write_text("c\na\n")
    for name, source in (("database", db), ("shards", tmp_path / "shards")):
        out = tmp_path / ("%s.lmdb" % name)
        r = run(tool("pack_lmdb"), source, out, "-q", "--classes", tmp_path / "ca.txt", ok=False)
        assert r.returncode == 3 and "2 skipped" in r.stdout, (name, r.stdout, r.stderr)
        assert "class 'b' is not in" in r.stderr, (name, r.stderr)
        meta, recs = records(out)
        assert meta["classes"] == ["c", "a"], (name, meta["classes"])
        assert sorted((rec["path"].split("/")[0], rec["label"]) for rec in recs) == \
            [("a", 1), ("a", 1), ("c", 0), ("c", 0)], name


def test_class_folders_that_hold_no_images_are_named(tmp_path):
    src = tmp_path / "src"
    for name in ("cats", "dogs"):
        os.makedirs(src / name)
    (src / "dogs" / "notes.txt").write_text("x")
    r = run(tool("pack_lmdb"), src, tmp_path / "o.lmdb", "-q", ok=False)
    assert r.returncode == 1, r.stderr
    assert "has no class folders" not in r.stderr, r.stderr
    assert "2 class folders (cats, dogs) hold no images" in r.stderr, r.stderr
    assert "1 files ignored for their names" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "o.lmdb")


def test_pack_summary_says_how_each_image_was_stored(tmp_path):
    src = tmp_path / "src"
    picture(src / "a" / "small.jpg", 1, (30, 20))      # within the limit: copied as-is
    picture(src / "a" / "big.jpg", 2, (80, 60))        # resized
    picture(src / "b" / "flat.png", 3, (30, 20))       # lossless, re-encoded at its size
    picture(src / "b" / "large.png", 4, (90, 60))      # lossless, resized
    r = run(tool("pack_lmdb"), src, tmp_path / "j.lmdb", "-q", "--max-size", "24")
    assert "1 copied as-is, 2 resized, 1 re-encoded, 0 skipped" in r.stdout, r.stdout
    assert "2 lossless images stored as JPEG q90 (lossy; --encoding raw keeps their pixels)" in r.stdout, r.stdout
    r = run(tool("pack_lmdb"), src, tmp_path / "q.lmdb", "-q", "--quality", "75")
    assert "2 copied as-is, 0 resized, 2 re-encoded" in r.stdout, r.stdout
    assert "2 lossless images stored as JPEG q75" in r.stdout, r.stdout
    r = run(tool("pack_lmdb"), src, tmp_path / "r.lmdb", "-q", "--encoding", "raw", "--max-size", "24")
    assert "2 decoded, 2 resized, 0 skipped" in r.stdout and "lossless" not in r.stdout, r.stdout


def test_coco_skips_count_records_and_annotations_apart(tmp_path):
    for n in ("a.jpg", "b.jpg"):
        picture(tmp_path / "img" / n, len(n), (40, 30))
    coco = {"images": [{"id": 1, "file_name": "a.jpg"}, {"id": 2, "file_name": "b.jpg"}],
            "categories": [{"id": 1, "name": "thing"}],
            "annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5]},
                            {"id": 8, "image_id": 2, "category_id": 1, "keypoints": [1, 2, 2]}]}
    (tmp_path / "c.json").write_text(json.dumps(coco))
    r = run(tool("pack_lmdb"), "--coco", tmp_path / "c.json", "--images", tmp_path / "img", tmp_path / "o.lmdb",
            "-q", "--errors", tmp_path / "e.tsv", ok=False)
    assert r.returncode == 3, r.stderr
    assert "2 records" in r.stdout and "0 skipped" in r.stdout, r.stdout
    assert "1 annotation left out" in r.stdout, r.stdout
    rows = tsv(tmp_path / "e.tsv")
    assert len(rows) == 1 and rows[0][0].endswith("annotation 8") and rows[0][1].startswith("has no bbox"), rows
    assert len(records(tmp_path / "o.lmdb")[1]) == 2


# ---- verify_db: labels of a flat folder ---------------------------------

def flat_val(tmp_path):
    """A flat folder of six images, its true labels file and a wrong one."""
    val = tmp_path / "val"
    truth, wrong = [], []
    for i in range(6):
        picture(val / ("v%d.jpg" % i), i)
        truth.append("v%d.jpg %s" % (i, "ab"[i % 2]))
        wrong.append("v%d.jpg %s" % (i, "ab"[(i + (i == 3)) % 2]))  # v3 says a, it is b
    (tmp_path / "truth.txt").write_text("\n".join(truth) + "\n")
    (tmp_path / "wrong.txt").write_text("\n".join(wrong) + "\n")
    return val


def test_verify_checks_a_flat_folder_label_by_label(tmp_path):
    val = flat_val(tmp_path)
    db = tmp_path / "val.lmdb"
    run(tool("pack_lmdb"), val, db, "-q", "--labels", tmp_path / "wrong.txt")
    # Without a labels file the labels cannot be checked: said, not passed.
    r = run(tool("verify_db"), db, "--against", val, "-q")
    assert r.returncode == 0, r.stdout
    assert "labels not checked: %s is a flat folder; give --labels FILE" % val in r.stdout, r.stdout
    r = run(tool("verify_db"), db, "--against", val, "--labels", tmp_path / "truth.txt", "-q", ok=False)
    assert r.returncode == 1, r.stdout
    problems = [line for line in r.stdout.splitlines() if line.startswith("PROBLEM")]
    assert len(problems) == 1 and "(v3.jpg)" in problems[0], r.stdout
    assert "stored class 'a'" in problems[0] and "says 'b'" in problems[0], problems
    r = run(tool("verify_db"), db, "--against", val, "--labels", tmp_path / "wrong.txt", "-q")
    assert "OK" in r.stdout and "labels not checked" not in r.stdout, r.stdout


def test_verify_classes_file_expects_the_folders_pack_left_out(tmp_path):
    src = class_tree(tmp_path / "src", ["a", "b", "c"])
    (tmp_path / "ac.txt").write_text("a\nc\n")
    db = tmp_path / "ac.lmdb"
    assert run(tool("pack_lmdb"), src, db, "-q", "--classes", tmp_path / "ac.txt", ok=False).returncode == 3
    r = run(tool("verify_db"), db, "--against", src, "-q", ok=False)
    assert r.returncode == 1 and r.stdout.count("source image is not in the database") == 2, r.stdout
    r = run(tool("verify_db"), db, "--against", src, "--classes", tmp_path / "ac.txt", "-q")
    assert "2 images of folders outside --classes not expected" in r.stdout, r.stdout
    (tmp_path / "ca.txt").write_text("c\na\n")
    r = run(tool("verify_db"), db, "--against", src, "--classes", tmp_path / "ca.txt", "-q", ok=False)
    assert r.returncode == 1 and "class list differs from --classes" in r.stdout, r.stdout


# ---- labels files: read one way, nothing in them lost ----------------------

def problems_of(r):
    return [line for line in r.stdout.splitlines() if line.startswith("PROBLEM")]


def test_verify_reads_a_labels_file_as_pack_does(tmp_path):
    # Class names with one index among them: pack reads the index as a name
    # (docs/USAGE.md), and verify must read the file the same way.
    val = tmp_path / "val"
    lines = []
    for i, label in enumerate(["a", "7", "b", "c", "d", "a"]):
        picture(val / ("v%d.jpg" % i), i)
        lines.append("v%d.jpg %s" % (i, label))
    (tmp_path / "v2l.txt").write_text("\n".join(lines) + "\n")
    db = tmp_path / "val.lmdb"
    run(tool("pack_lmdb"), val, db, "-q", "--labels", tmp_path / "v2l.txt")
    meta, recs = records(db)
    assert meta["classes"] == ["7", "a", "b", "c", "d"], meta["classes"]
    r = run(tool("verify_db"), db, "--against", val, "--labels", tmp_path / "v2l.txt", "-q", ok=False)
    assert r.returncode == 0 and ": OK:" in r.stdout and not problems_of(r), r.stdout
    # With --classes an index indexes its list: pack refuses the file, and
    # verify given the same --classes refuses it the same way.
    (tmp_path / "classes.txt").write_text("a\nb\nc\nd\n7\nz\n")
    r = run(tool("pack_lmdb"), val, tmp_path / "val2.lmdb", "-q", "--labels", tmp_path / "v2l.txt", "--classes",
            tmp_path / "classes.txt", ok=False)
    says = "%s:2: v1.jpg: label 7 is not a class of the 6" % (tmp_path / "v2l.txt")
    assert r.returncode == 1 and says in r.stderr, r.stderr
    r = run(tool("verify_db"), db, "--against", val, "--labels", tmp_path / "v2l.txt", "--classes",
            tmp_path / "classes.txt", "-q", ok=False)
    assert r.returncode == 1 and says in r.stderr and not problems_of(r), (r.stdout, r.stderr)


def test_labels_file_entries_without_images_are_skipped_and_said(tmp_path):
    val = flat_val(tmp_path)
    os.remove(val / "v1.jpg")
    os.remove(val / "v4.jpg")
    labels = tmp_path / "truth.txt"
    db = tmp_path / "val.lmdb"
    r = run(tool("pack_lmdb"), val, db, "-q", "--labels", labels, "--errors", tmp_path / "e.tsv", ok=False)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert "4 records" in r.stdout and "2 skipped" in r.stdout, r.stdout
    why = "listed in %s but not in %s" % (labels, val)
    assert {p: w for p, w in tsv(tmp_path / "e.tsv")} == {"v1.jpg": why, "v4.jpg": why}
    assert "skipped v1.jpg: " + why in r.stderr, r.stderr
    # verify: not a problem (pack said it), but said on the summary line.
    r = run(tool("verify_db"), db, "--against", val, "--labels", labels, "-q", ok=False)
    assert r.returncode == 0 and not problems_of(r), r.stdout
    assert "2 entries of --labels %s are in neither %s nor the database" % (labels, val) in r.stdout, r.stdout
    # A database that holds an image the folder has lost is a problem.
    full = tmp_path / "full.lmdb"
    picture(val / "v1.jpg", 1)
    run(tool("pack_lmdb"), val, full, "-q", "--labels", labels, ok=False)
    os.remove(val / "v1.jpg")
    r = run(tool("verify_db"), full, "--against", val, "--labels", labels, "-q", ok=False)
    assert r.returncode == 1 and len(problems_of(r)) == 1 and "(v1.jpg): not in the source tree" in r.stdout, \
        r.stdout
    assert "1 entries of --labels" in r.stdout, r.stdout


def test_labels_file_entries_without_images_are_skipped_by_their_shard(tmp_path):
    # A folder resized shard by shard holds only some images: each entry
    # without one is the skip of the one shard its path hashes to.
    val = flat_val(tmp_path)
    os.remove(val / "v1.jpg")
    os.remove(val / "v4.jpg")
    skipped = []
    for i in range(2):
        r = run(tool("pack_lmdb"), val, tmp_path / ("s%d.lmdb" % i), "-q", "--shard", "%d/2" % i, "--labels",
                tmp_path / "truth.txt", "--errors", tmp_path / ("e%d.tsv" % i), ok=False)
        assert r.returncode in (0, 3), r.stderr
        skipped += [p for p, _ in tsv(tmp_path / ("e%d.tsv" % i))]
    assert sorted(skipped) == ["v1.jpg", "v4.jpg"], skipped


def test_labels_file_naming_an_image_twice_differently_skips_it(tmp_path):
    val = flat_val(tmp_path)
    labels = tmp_path / "twice.txt"
    lines = open(tmp_path / "truth.txt").read().splitlines()
    # v1 is 'b' on line 2 and 'a' on line 7; v2 is 'a' twice (lines 3, 8).
    labels.write_text("\n".join(lines + ["v1.jpg a", "v2.jpg a"]) + "\n")
    db = tmp_path / "val.lmdb"
    r = run(tool("pack_lmdb"), val, db, "-q", "--labels", labels, "--errors", tmp_path / "e.tsv", ok=False)
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert "5 records" in r.stdout and "1 skipped" in r.stdout, r.stdout
    why = "listed twice in %s with different labels: line 2 says 'b', line 7 says 'a'" % labels
    assert tsv(tmp_path / "e.tsv") == [["v1.jpg", why]]
    assert sorted(rec["path"] for rec in records(db)[1]) == ["v0.jpg", "v2.jpg", "v3.jpg", "v4.jpg", "v5.jpg"]
    r = run(tool("verify_db"), db, "--against", val, "--labels", labels, "-q", ok=False)
    assert r.returncode == 0 and not problems_of(r), r.stdout
    assert "1 images labelled twice differently in --labels %s not expected" % labels in r.stdout, r.stdout
    # A database that holds it anyway: its label cannot be checked, a problem.
    full = tmp_path / "full.lmdb"
    run(tool("pack_lmdb"), val, full, "-q", "--labels", tmp_path / "truth.txt")
    r = run(tool("verify_db"), full, "--against", val, "--labels", labels, "-q", ok=False)
    assert r.returncode == 1 and len(problems_of(r)) == 1, r.stdout
    assert "(v1.jpg): in the database, but " + why[:-len(": line 2 says 'b', line 7 says 'a'")] in r.stdout, r.stdout


def test_verify_problems_name_the_record_and_its_path(tmp_path):
    val = flat_val(tmp_path)
    db = tmp_path / "val.blob"
    run(tool("pack_lmdb"), val, db, "-q", "--format", "blob", "--labels", tmp_path / "truth.txt")
    blob = bytearray(db.read_bytes())
    start = blob.find(b"v3.jpg") - 40
    header = read_db.HEADER.unpack_from(blob, start)
    end = start + 40 + header[8] + header[10]
    good = bytes(blob)
    index = next(i for i in range(6) if read_db.read_record(read_db.open_db(str(db)), i)["path"] == "v3.jpg")
    blob[end - 100] ^= 0xFF  # a payload byte: the checksum fails, the path is still there
    db.write_bytes(bytes(blob))
    r = run(tool("verify_db"), db, "-q", ok=False)
    assert "PROBLEM %s record %010d (v3.jpg): checksum mismatch" % (db, index) in r.stdout, r.stdout
    blob = bytearray(good)
    blob[start + 8] ^= 0xFF  # the magic: nothing in the record can be trusted
    db.write_bytes(bytes(blob))
    r = run(tool("verify_db"), db, "-q", ok=False)
    assert "PROBLEM %s record %010d (path unknown: record unreadable): bad record magic" % (db, index) in r.stdout, \
        r.stdout
    # A labels-file problem names the record and the line.
    db.write_bytes(good)
    (tmp_path / "other.txt").write_text("v0.jpg a\nv1.jpg b\nv2.jpg a\nv3.jpg zebra\nv4.jpg a\nv5.jpg b\n")
    r = run(tool("verify_db"), db, "--against", val, "--labels", tmp_path / "other.txt", "-q", ok=False)
    shown = problems_of(r)
    assert len(shown) == 1 and shown[0].startswith("PROBLEM %s record %010d (v3.jpg): " % (db, index)), r.stdout
    assert "%s:4 says 'zebra'" % (tmp_path / "other.txt") in shown[0], shown


def test_verify_classes_file_names_the_first_class_that_differs(tmp_path):
    src = class_tree(tmp_path / "src", ["a", "b", "c", "d"], per_class=1)
    db = tmp_path / "o.lmdb"
    run(tool("pack_lmdb"), src, db, "-q")
    (tmp_path / "c.txt").write_text("a\nb\nd\nc\n")
    r = run(tool("verify_db"), db, "--against", src, "--classes", tmp_path / "c.txt", "-q", ok=False)
    assert r.returncode == 1, r.stdout
    assert "class 2 is 'c', %s's is 'd'" % (tmp_path / "c.txt") in r.stdout, r.stdout
    (tmp_path / "c.txt").write_text("a\nb\nc\nd\ne\n")
    r = run(tool("verify_db"), db, "--against", src, "--classes", tmp_path / "c.txt", "-q", ok=False)
    assert "class 4 is missing, %s's is 'e'" % (tmp_path / "c.txt") in r.stdout, r.stdout


# ---- inspect_db: its --out ------------------------------------------------

def test_inspect_out_that_cannot_be_made_is_an_environment_failure(jpeg_db, tmp_path):
    (tmp_path / "file").write_text("x")
    out = tmp_path / "file" / "report"
    r = run(tool("inspect_db"), jpeg_db, "--out", out, "-q", ok=False)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--out %s" % out in lines[0] and "Try" not in r.stderr, r.stderr


@pytest.mark.needs_root
def test_inspect_read_only_out_is_refused_before_any_work(jpeg_db, tmp_path):
    ro = tmp_path / "ro"
    os.makedirs(ro)
    os.chmod(ro, 0o555)
    os.chmod(tmp_path, 0o755)
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", tool("inspect_db"), "/nonexistent.lmdb",
           "--out", str(ro / "report"), "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    # The folder is checked first: the missing database is not reached.
    assert r.returncode == 1 and str(ro / "report") in r.stderr and "nonexistent" not in r.stderr, r.stderr


def test_failed_inspect_leaves_no_out_folder_it_made(tmp_path):
    out = tmp_path / "new" / "report"
    r = run(tool("inspect_db"), tmp_path / "missing.lmdb", "--out", out, "--summary", "-q", ok=False)
    assert r.returncode == 1 and "missing.lmdb" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "new"), os.listdir(tmp_path)
    os.makedirs(tmp_path / "mine")
    r = run(tool("inspect_db"), tmp_path / "missing.lmdb", "--out", tmp_path / "mine", "--summary", "-q", ok=False)
    assert r.returncode == 1 and os.path.isdir(tmp_path / "mine")  # not this run's: kept


def test_inspect_keeps_pictures_already_in_out_unless_asked(jpeg_db, tmp_path):
    out = tmp_path / "report"
    run(tool("inspect_db"), jpeg_db, "--out", out, "--summary", "-q")
    before = (out / "summary.png").read_bytes()
    (out / "summary.png").write_bytes(b"mine")
    r = run(tool("inspect_db"), jpeg_db, "--out", out, "--summary", "--seed", "1", "-q", ok=False)
    assert r.returncode == 1 and "%s exists" % (out / "summary.png") in r.stderr and "--overwrite" in r.stderr, \
        r.stderr
    assert (out / "summary.png").read_bytes() == b"mine"
    run(tool("inspect_db"), jpeg_db, "--out", out, "--sheet", "-q")  # another picture: nothing in its way
    run(tool("inspect_db"), jpeg_db, "--out", out, "--summary", "--overwrite", "-q")
    assert (out / "summary.png").read_bytes() == before


# ---- resize_imagenet: nothing to do is a failure, outputs checked first ------

def test_resize_of_a_source_without_images_fails_and_makes_nothing(tmp_path):
    src = tmp_path / "src"
    os.makedirs(src / "a")
    (src / "a" / "notes.txt").write_text("x")
    r = run(tool("resize_imagenet"), src, tmp_path / "dst", "--max-size", "16", "-q", ok=False)
    assert r.returncode == 1, (r.returncode, r.stdout)
    assert "%s holds no images" % src in r.stderr and "1 files ignored for their names" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "dst")


def test_pack_of_a_source_without_images_fails_and_makes_nothing(tmp_path):
    os.makedirs(tmp_path / "empty")
    (tmp_path / "empty" / "notes.txt").write_text("x")
    (tmp_path / "none.jsonl").write_text("")
    for args, says in (([tmp_path / "empty", tmp_path / "a.lmdb", "--no-class"],
                        "%s holds no images (1 files" % (tmp_path / "empty")),
                       (["--manifest", tmp_path / "none.jsonl", tmp_path / "a.lmdb"],
                        "%s holds no images" % (tmp_path / "none.jsonl"))):
        r = run(tool("pack_lmdb"), *args, "-q", ok=False)
        assert r.returncode == 1 and says in r.stderr, (args, r.stdout, r.stderr)
        assert not os.path.exists(tmp_path / "a.lmdb")


@pytest.mark.parametrize("name", ["resize_imagenet", "pack_lmdb"])
def test_errors_file_that_cannot_be_written_stops_before_any_work(name, tree, tmp_path):
    (tmp_path / "file").write_text("x")
    bad = tmp_path / "file" / "errors.tsv"
    out = tmp_path / "out"
    args = [tree, out, "--max-size", "16"] if name == "resize_imagenet" else [tree, out]
    r = run(tool(name), *args, "-q", "--errors", bad, ok=False)
    assert r.returncode == 1 and "--errors %s" % bad in r.stderr, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and not os.path.exists(out), r.stdout
    r = run(tool(name), *args, "-q", "--errors", tmp_path, ok=False)  # a folder
    assert r.returncode == 1 and "is a folder" in r.stderr and not os.path.exists(out), r.stderr


def test_pack_refuses_an_existing_destination_before_any_work(tmp_path):
    src = class_tree(tmp_path / "src", ["a"])
    dst = tmp_path / "o.lmdb"
    dst.write_bytes(b"precious")
    (tmp_path / "classes.txt").write_text("a\n")
    r = run(tool("pack_lmdb"), src, dst, "-q", "--labels", tmp_path / "missing.txt", ok=False)
    assert r.returncode == 1 and "already exists" in r.stderr and "missing.txt" not in r.stderr, r.stderr
    assert dst.read_bytes() == b"precious"


# ---- shuffle_quality: its score ---------------------------------------------

def test_shuffle_score_states_its_sampling_error_and_needs_a_batch(tmp_path):
    src = class_tree(tmp_path / "src", ["a", "b"], per_class=4)
    db = tmp_path / "s.lmdb"
    run(tool("pack_lmdb"), src, db, "-q", "--shuffle", "1")
    r = run(tool("shuffle_quality"), db, "--batch", "4", "--block-mb", "1", "--window-blocks", "4")
    head = r.stdout.splitlines()[0]
    assert "a full permutation scores 1 on average" in head and "+-" in head, r.stdout
    se = float(head.split("+-")[1].split()[0])
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[2:]}
    assert abs(float(rows["random"][5]) - 1) <= 3 * se + 1e-9, r.stdout
    # Batches larger than rank 0's share: nothing to measure, so not a 0 score.
    r = run(tool("shuffle_quality"), db, "--batch", "16", ok=False)
    assert r.returncode == 2 and "--batch 16" in r.stderr and "8 records" in r.stderr, (r.stdout, r.stderr)
    assert r.stdout == ""
