"""A shared machine, tried as a second user would attack it
(docs/RELIABILITY.md, "Shared machines"). The victim is this process and
the tools it starts; the attacker is a real other uid (`nobody`, through
setpriv) working in a world-writable sticky folder, as /dev/shm and /tmp
are. Each attack worked on the build before: a planted shared copy
served permuted labels, planted links made a pack overwrite the victim's
own file, a held lock blocked every in_ram loader, and a database damaged
in place was served from its old copy.

Also here: the metadata checksum (format 4) against random single-byte
damage, the old formats still loading, a loader state refused by another
dataset, field names that would replace the loader's own batch keys, and
inspect_db removing its dead runs' temporaries."""
import hashlib
import json
import os
import random
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, temp_name, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402  (independent reader: python3-lmdb, numpy, xxhash)

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
NOBODY = 65534
needs_root = pytest.mark.needs_root  # conftest.py: skipped without root, failed where CI requires them


def as_nobody(code, *args, wait=True):
    """Runs Python `code` as uid/gid 65534 (no other groups). With wait,
    returns the CompletedProcess; else the Popen, after it printed 'ready'."""
    cmd = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups",
           "/usr/bin/python3", "-c", code] + [str(a) for a in args]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


@pytest.fixture
def shared():
    """A folder every user may write, sticky: like /dev/shm and /tmp."""
    d = tempfile.mkdtemp(prefix="ipk-shared-", dir="/tmp")
    os.chmod(d, 0o1777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def victim(tree):
    """The victim's own folder (others may read it, as datasets usually
    are), holding a packed blob and a file the attacks aim at."""
    d = tempfile.mkdtemp(prefix="ipk-victim-", dir="/tmp")
    os.chmod(d, 0o755)
    subprocess.run([tool("pack_lmdb"), str(tree), os.path.join(d, "train.blob"), "-q", "--format", "blob",
                    "--encoding", "raw", "--max-size", "32"], check=True)
    with open(os.path.join(d, "precious.txt"), "w") as f:
        f.write("precious\n")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def labels_of(path, **kw):
    imagepack = pytest.importorskip("imagepack")
    loader = imagepack.Loader(path, batch_size=1000, size=32, transform="eval", shuffle=False, threads=2,
                              as_torch=False, **kw)
    return np.concatenate([b[1] for b in loader])


def copy_name(path):
    """The name the build before gave a database's shared copy: anyone
    could compute it from stat()."""
    st = os.stat(path)
    return "imagepack-copy-%x-%x-%x-%d.%09d.db" % (st.st_dev, st.st_ino, st.st_size, int(st.st_mtime_ns // 10**9),
                                                   st.st_mtime_ns % 10**9)


POISON = """
import os, shutil, struct, sys, xxhash
db, shared, name = sys.argv[1:4]
# The victim's own bytes with every label moved to the next class and the
# record checksums made again: the same size, valid records, wrong labels.
data = bytearray(open(db, "rb").read())
count, index_off = struct.unpack_from("<QQ", data, 16)
for i in range(count):
    off, length = struct.unpack_from("<QQ", data, index_off + 16 * i)
    label = struct.unpack_from("<i", data, off + 16)[0]
    struct.pack_into("<i", data, off + 16, (label + 1) % 3)
    struct.pack_into("<Q", data, off, xxhash.xxh3_64_intdigest(bytes(data[off + 8:off + length])))
mine = os.path.join(shared, "imagepack-0")
os.mkdir(mine)
os.chmod(mine, 0o777)
for folder in (shared, mine):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
"""


@needs_root
def test_a_planted_copy_is_never_served(victim, shared, capfd):
    """nobody makes the victim's dataset with every label moved to another
    class (same size, valid record checksums) and plants it under the name
    its copy had (computable from stat) in the shared folder, and in a
    folder named like the victim's private one. The victim's in_ram loader
    uses neither, says which folder it skipped, and reads the true labels."""
    db = os.path.join(victim, "train.blob")
    truth = labels_of(db)
    r = as_nobody(POISON, db, shared, copy_name(db))
    assert r.returncode == 0, r.stderr
    capfd.readouterr()
    os.environ["IMAGEPACK_SHM_DIR"] = shared
    try:
        ram = labels_of(db, in_ram=True)
    finally:
        del os.environ["IMAGEPACK_SHM_DIR"]
    err = capfd.readouterr().err
    assert (ram != truth).sum() == 0, "%d of %d labels served from the planted copy" % ((ram != truth).sum(), len(truth))
    assert os.path.join(shared, "imagepack-0") in err and "owner uid 65534" in err, err
    # The victim's copies went to a folder of its own, private.
    ours = [e for e in os.listdir(shared) if e.startswith("imagepack-0-")]
    assert len(ours) == 1
    st = os.stat(os.path.join(shared, ours[0]))
    assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700


@needs_root
def test_the_private_folder_cannot_be_entered_by_another_user(victim, shared):
    """With no folder planted, the victim's copies live in shared/imagepack-0
    (0700): nobody can neither list it nor put a file in it."""
    imagepack = pytest.importorskip("imagepack")
    os.environ["IMAGEPACK_SHM_DIR"] = shared
    try:
        loader = imagepack.Loader(os.path.join(victim, "train.blob"), batch_size=8, size=32, in_ram=True,
                                  as_torch=False)
        next(iter(loader))
        mine = os.path.join(shared, "imagepack-0")
        st = os.stat(mine)
        assert st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o700
        copies = [e for e in os.listdir(mine) if e.endswith(".db")]
        assert len(copies) == 1
        r = as_nobody("""
import os, sys
mine, name = sys.argv[1:3]
for what, f in (("list", lambda: os.listdir(mine)), ("plant", lambda: open(os.path.join(mine, "x.db"), "w")),
                ("replace", lambda: open(os.path.join(mine, name), "r+b"))):
    try:
        f()
        print(what, "worked")
    except PermissionError:
        print(what, "refused")
""", mine, copies[0])
        assert r.stdout.split("\n")[:3] == ["list refused", "plant refused", "replace refused"], r.stdout + r.stderr
        del loader
    finally:
        del os.environ["IMAGEPACK_SHM_DIR"]


def start_paused(args):
    """A tool started but held before exec, so its pid (and so its
    temporary's name) is known: an attacker plants links for it first."""
    p = subprocess.Popen(["sh", "-c", 'read _; exec "$0" "$@"'] + [str(a) for a in args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p


@needs_root
@pytest.mark.parametrize("fmt", ["lmdb", "blob"])
def test_planted_links_clobber_nothing(victim, shared, tree, fmt):
    """nobody plants links at the names a pack's temporary will have (this
    pid's, and the next ones') pointing at the victim's precious.txt. The
    pack writes its database, precious.txt is untouched, the links stay."""
    dst = os.path.join(shared, "out." + fmt)
    p = start_paused([tool("pack_lmdb"), tree, dst, "-q", "--format", fmt])
    tmp = temp_name(dst, p.pid)
    precious = os.path.join(victim, "precious.txt")
    r = as_nobody("""
import os, sys
tmp, precious = sys.argv[1:3]
for suffix in ["", ".1", ".2"]:
    os.symlink(precious, tmp + suffix)
""", tmp, precious)
    assert r.returncode == 0, r.stderr
    out, err = p.communicate("\n", timeout=120)
    assert p.returncode == 0, err
    assert open(precious).read() == "precious\n"
    assert all(os.path.islink(tmp + s) for s in ["", ".1", ".2"])
    v = subprocess.run([tool("verify_db"), dst], capture_output=True, text=True)
    assert v.returncode == 0, v.stdout + v.stderr


@needs_root
def test_planted_links_clobber_nothing_on_pictures(victim, shared):
    """The same for a picture inspect_db writes into a shared folder.
    (export_db writes only into a new or empty DST, which a planted link
    makes non-empty: it refuses before writing.)"""
    db = os.path.join(victim, "train.blob")
    precious = os.path.join(victim, "precious.txt")
    pics = os.path.join(shared, "pics")
    os.mkdir(pics)
    os.chmod(pics, 0o1777)
    for args, name in (([tool("inspect_db"), db, "--out", pics, "--summary"], "summary.png"),
                       ([tool("inspect_db"), db, "--out", pics, "--sheet"], "sheet.png")):
        p = start_paused(args)
        tmp = temp_name(os.path.join(pics, name), p.pid)
        r = as_nobody("import os, sys; os.symlink(sys.argv[2], sys.argv[1])", tmp, precious)
        assert r.returncode == 0, r.stderr
        _, err = p.communicate("\n", timeout=120)
        assert p.returncode == 0, err
        assert open(precious).read() == "precious\n"
        assert os.path.islink(tmp) and os.path.getsize(os.path.join(pics, name)) > 1000


HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


@needs_root
def test_a_held_lock_blocks_no_run(victim, shared, tree):
    """nobody holds the locks an in_ram loader would wait on if it trusted
    a folder it does not own: the folder lock in the shared root (where
    the build before kept it) and in a folder nobody planted under the
    victim's private name, as well as a destination's write lock in a
    shared folder. The loader runs at once and opens its folder lock in a
    private folder of its own (the name held here is the name it uses);
    the pack fails at once, naming the lock and its owner; an unheld lock
    file of nobody's does not stop a pack."""
    pytest.importorskip("imagepack")
    lock_name = "imagepack-copy-folder.lock"
    planted = os.path.join(shared, "imagepack-%d" % os.geteuid())
    r = as_nobody("import os, sys; os.mkdir(sys.argv[1]); os.chmod(sys.argv[1], 0o777)", planted)
    assert r.returncode == 0, r.stderr
    holders = [as_nobody(HOLD_LOCK, os.path.join(folder, lock_name), wait=False) for folder in (shared, planted)]
    dst_holder = as_nobody(HOLD_LOCK, os.path.join(shared, ".held.lmdb.ipk-lock"), wait=False)
    try:
        code = ("import imagepack, sys; l = imagepack.Loader(sys.argv[1], batch_size=8, size=32, in_ram=True, "
                "as_torch=False); print(len(next(iter(l))[1]))")
        env = dict(os.environ, IMAGEPACK_SHM_DIR=shared)
        t0 = time.time()
        r = subprocess.run([sys.executable, "-c", code, os.path.join(victim, "train.blob")], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "8", r.stderr
        assert time.time() - t0 < 30
        # The loader's own folder lock: the same name, in its private folder.
        mine = [e for e in os.listdir(shared) if e.startswith("imagepack-%d-" % os.geteuid())]
        assert len(mine) == 1 and os.path.exists(os.path.join(shared, mine[0], lock_name)), os.listdir(shared)
        r = subprocess.run([tool("pack_lmdb"), tree, os.path.join(shared, "held.lmdb"), "-q"], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode != 0
        assert ".held.lmdb.ipk-lock" in r.stderr and "nobody" in r.stderr, r.stderr
    finally:
        for h in holders + [dst_holder]:
            h.stdin.close()
            h.wait(10)
    r = as_nobody("import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644))",
                  os.path.join(shared, ".free.lmdb.ipk-lock"))
    assert r.returncode == 0, r.stderr
    r = subprocess.run([tool("pack_lmdb"), tree, os.path.join(shared, "free.lmdb"), "-q"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_ci_runs_the_attacks():
    """The CI command (scripts/test.sh) requires the attacks above to run:
    without root they fail there instead of skipping without a word."""
    text = open(os.path.join(SCRIPTS, "test.sh")).read()
    assert "export IMAGEPACK_REQUIRE_ATTACKS=1" in text


def test_a_source_damaged_in_place_is_not_served_from_its_old_copy(victim, tmp_path):
    """A copy is held (by a running loader) when one byte of a record of the
    file is changed and its size and times are put back. The next in_ram
    loader reads the damage (its checksum fails), not the old copy."""
    imagepack = pytest.importorskip("imagepack")
    db = os.path.join(victim, "train.blob")
    shm = str(tmp_path / "shm")
    os.mkdir(shm)
    os.environ["IMAGEPACK_SHM_DIR"] = shm
    try:
        held = imagepack.Loader(db, batch_size=8, size=32, in_ram=True, as_torch=False)
        next(iter(held))
        index = read_db.open_db(db).index
        off, length = (int(x) for x in index[5])
        st = os.stat(db)
        with open(db, "r+b") as f:
            f.seek(off + length - 7)
            b = f.read(1)
            f.seek(off + length - 7)
            f.write(bytes([b[0] ^ 0x55]))
        os.utime(db, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert os.stat(db).st_size == st.st_size and os.stat(db).st_mtime_ns == st.st_mtime_ns
        fresh = imagepack.Loader(db, batch_size=100, size=32, in_ram=True, shuffle=False, transform="eval",
                                 as_torch=False, on_corrupt="fail")
        with pytest.raises(Exception, match="checksum"):
            for _ in fresh:
                pass
        del held, fresh
    finally:
        del os.environ["IMAGEPACK_SHM_DIR"]


def meta_span(path):
    """(offset, length) of a database file's metadata JSON."""
    data = open(path, "rb").read()
    if data[:8] == b"IPKBLOB1":
        meta_off, meta_len = struct.unpack_from("<QQ", data, 32)
        return meta_off, meta_len
    at = data.index(b'"meta_checksum": "')
    start = data.rindex(b'{\n "channels"', 0, at)
    return start, data.index(b"\n}", at) + 2 - start


def independent_meta_checksum(text):
    """docs/FORMAT.md's rule, with the xxhash module: XXH3-64 of the JSON
    text (trailing whitespace dropped) with its 16 digits read as zeros."""
    text = text.rstrip(b" \n\r\t")
    key = b'"meta_checksum": "'
    at = text.index(key) + len(key)
    stored = int(text[at:at + 16], 16)
    import xxhash
    return stored, xxhash.xxh3_64_intdigest(text[:at] + b"0" * 16 + text[at + 16:])


@pytest.mark.parametrize("fmt", ["lmdb", "blob"])
def test_every_byte_of_the_metadata_is_checked(tree, tmp_path, fmt):
    """Random single-byte damage anywhere in a format-4 database's metadata
    (class names, mean and std, fields, the version, the checksum itself):
    verify_db reports every trial and every open refuses it. The build
    before passed such damage with exit 0."""
    db = str(tmp_path / ("d." + fmt))
    subprocess.run([tool("pack_lmdb"), str(tree), db, "-q", "--format", fmt], check=True)
    meta = read_db.open_db(db).meta
    assert meta["format_version"] == 4
    start, length = meta_span(db)
    good = open(db, "rb").read()
    stored, computed = independent_meta_checksum(good[start:start + length])
    assert stored == computed and "%016x" % stored == meta["meta_checksum"]
    try:
        imagepack = __import__("imagepack")
    except ImportError:
        imagepack = None
    rng = random.Random(7)
    bad = str(tmp_path / ("bad." + fmt))
    trials = int(os.environ.get("IMAGEPACK_META_TRIALS", "120"))  # 1000 for the figures in RELIABILITY.md
    for _ in range(trials):
        at = start + rng.randrange(length)
        data = bytearray(good)
        data[at] ^= rng.randrange(1, 256)
        with open(bad, "wb") as f:
            f.write(data)
        r = subprocess.run([tool("verify_db"), bad], capture_output=True, text=True)
        assert r.returncode != 0, "byte %d (%r) damaged, verify_db passed" % (at - start, bytes(good[at - 10:at + 10]))
        assert "metadata" in r.stdout + r.stderr and bad in r.stdout + r.stderr
        if imagepack is not None:
            with pytest.raises(Exception):
                imagepack.open(bad)


def picture(encoding, payload):
    """A record's picture as read_db.py gives it, as an HxWxC uint8 array:
    raw samples as stored, a JPEG decoded by Pillow (accurate IDCT, as the
    library's default)."""
    if encoding == "raw":
        return np.asarray(payload)
    import io
    return np.asarray(Image.open(io.BytesIO(payload)).convert("RGB"))


def same_picture(got, want):
    """Equal but for at most one grey level (the IDCT's rounding)."""
    return got.shape == want.shape and np.abs(got.astype(int) - want.astype(int)).max() <= 1


@pytest.mark.parametrize("version", [3, 4])
def test_old_formats_still_load_byte_for_byte(version):
    """tests/data/format3 (fields, before the metadata checksum) and format4
    (checksummed, before 16-bit fields): the databases open, verify and
    read exactly as when they were written. Each record's stored bytes
    have the SHA-256 they had; the library's reader (imagepack.open) gives
    every field of every record as the independent reader
    (scripts/read_db.py) reads it from those bytes: path, label, the
    image's pixels, the second image's pixels, boxes and their classes,
    ints, floats, text, and masks value for value."""
    folder = os.path.join(DATA, "format%d" % version)
    expected = json.load(open(os.path.join(folder, "expected.json")))
    for name, want in expected.items():
        path = os.path.join(folder, name)
        r = subprocess.run([tool("verify_db"), path, "--decode"], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        db = read_db.open_db(path)
        assert db.meta["format_version"] == version and ("meta_checksum" in db.meta) == (version >= 4)
        records = []
        for i, rec in enumerate(want["records"]):
            raw = db.raw(i)
            assert hashlib.sha256(raw).hexdigest() == rec["record_sha256"]
            parsed = read_db.parse_record(raw)
            assert [f["kind"] for f in parsed["fields"]] == rec["fields"]
            records.append(parsed)
        try:
            import imagepack
        except ImportError:
            continue
        ds = imagepack.open(path)
        assert ds.classes == want["classes"] and [f["name"] for f in ds.fields] == [f["name"] for f in want["fields"]]
        names = [f["name"] for f in want["fields"]]
        kinds_seen = set()
        for i, (rec, parsed) in enumerate(zip(want["records"], records)):
            sample = ds[i]
            where = "%s record %d" % (name, i)
            assert sample["label"] == rec["label"] == parsed["label"], where
            assert sample["path"] == rec["path"] == parsed["path"], where
            assert sample["image"].shape[:2] == (rec["height"], rec["width"]), where
            assert same_picture(sample["image"], picture(parsed["encoding"], parsed["payload"])), where
            for f in parsed["fields"]:
                key, kind, value = names[f["slot"]], f["kind"], f["value"]
                kinds_seen.add(kind)
                got = sample[key]
                if kind == "image":
                    assert same_picture(got, picture(value["encoding"], value["payload"])), (where, key)
                elif kind == "boxes":
                    xy, cls = value
                    assert np.array_equal(got.reshape(-1, 4), xy.reshape(-1, 4)), (where, key)
                    labels = "box_labels" if key == "boxes" else key + "_labels"
                    assert np.array_equal(sample[labels], cls), (where, key)
                elif kind == "text":
                    assert got == value, (where, key)
                else:  # ints, floats, mask, depth: value for value
                    assert got.shape == value.shape and np.array_equal(got, value), (where, key)
            if "mask_sha256" in rec:
                assert sample["mask"].dtype == np.uint8
                assert [hashlib.sha256(sample["mask"].tobytes()).hexdigest()] == rec["mask_sha256"]
        # Every kind the fixture holds was compared (a fixture that lost
        # one would make this test prove less without a word).
        assert kinds_seen == {"image", "mask", "ints", "boxes", "floats", "text"}, kinds_seen


def test_a_state_from_another_dataset_is_refused(tree, tmp_path):
    """Two datasets of the same size: a loader refuses the other's state
    (it would skip the wrong samples), and takes its own."""
    imagepack = pytest.importorskip("imagepack")
    a, b = str(tmp_path / "a.blob"), str(tmp_path / "b.blob")
    for path, seed in ((a, "1"), (b, "2")):
        subprocess.run([tool("pack_lmdb"), str(tree), path, "-q", "--format", "blob", "--shuffle", seed], check=True)
    la = imagepack.Loader(a, batch_size=10, size=16, as_torch=False, threads=1)
    lb = imagepack.Loader(b, batch_size=10, size=16, as_torch=False, threads=1)
    assert la.dataset_size == lb.dataset_size
    it = iter(la)
    next(it)
    state = la.state_dict()
    assert state["dataset"] != lb.state_dict()["dataset"]
    with pytest.raises(ValueError, match="another dataset"):
        lb.load_state_dict(state)
    again = imagepack.Loader(a, batch_size=10, size=16, as_torch=False, threads=1)
    again.load_state_dict(state)
    assert len(again) == len(la) - 1


@pytest.mark.parametrize("key,clash", [("index", "the loader's own 'index'"),
                                       ("crop_box", "the loader's own 'crop_box'"),
                                       ("num_tags", "field 'tags'"),
                                       ("tags_offsets", None)])
def test_field_names_that_replace_batch_keys_are_refused(tmp_path, key, clash):
    """A manifest key naming a field like a batch key the loader gives (or
    like an array another field adds) is refused at pack, naming both."""
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.jpg")
    row = {"image": "a.jpg", "label": 0, "tags": [1, 2], key: [3] if key != "tags_offsets" else "text"}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    r = subprocess.run([tool("pack_lmdb"), "--manifest", str(tmp_path / "m.jsonl"), str(tmp_path / "o.lmdb"), "-q"],
                       capture_output=True, text=True)
    if clash is None:  # a text field NAME gives NAME_offsets; 'tags_offsets' is free
        assert r.returncode == 0, r.stderr
        return
    assert r.returncode != 0 and not os.path.exists(tmp_path / "o.lmdb")
    assert "'%s'" % key in r.stderr and clash in r.stderr, r.stderr


@needs_root
def test_inspect_db_removes_its_dead_runs_temporaries(victim, shared):
    """A temporary of a picture left by a killed inspect_db (this host, a
    dead pid, ours) goes; one of another user's stays."""
    db = os.path.join(victim, "train.blob")
    dead = 4000000
    while True:
        try:
            os.kill(dead, 0)
            dead += 1
        except ProcessLookupError:
            break
    ours = temp_name(os.path.join(shared, "sheet.png"), dead)
    theirs = temp_name(os.path.join(shared, "grid.png"), dead, uid=NOBODY)
    open(ours, "w").close()
    assert as_nobody("import sys; open(sys.argv[1], 'w').close()", theirs).returncode == 0
    r = subprocess.run([tool("inspect_db"), db, "--out", shared, "--summary"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not os.path.exists(ours) and os.path.exists(theirs)
