"""Other people's files through the tools: shaped the way the real producers
write them (webdataset's TarWriter/ShardWriter, which are Python's tarfile
with webdataset's key rules; img2dataset's LAION shards; COCO keypoint and
crowd files; Pascal VOC palette masks; folder2lmdb), and hostile files
(docs/RELIABILITY.md, "Hostile input"). Each hostile case runs the real
tool under a time and peak-memory budget asserted here: a clear error
naming the file, never an abort, a hang or a swap storm."""
import gzip
import io
import json
import os
import pickle
import signal
import stat
import struct
import subprocess
import sys
import tarfile
import time

import lmdb
import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402  (independent reader: python3-lmdb + numpy)

# Generous for ASan builds (shadow memory), far below what the old code
# reached (2-3 GB, or growing without end).
RSS_BUDGET_MB = 1500
# Under ASan + UBSan (the sanitizer pass: IMAGEPACK_SANITIZED) the tools
# run several times slower; the memory budget stays.
TIME_BUDGET_S = 60 * (4 if os.environ.get("IMAGEPACK_SANITIZED") else 1)
# The sanitizer preset's tools (ctest python.tools.test_outside_input):
# LeakSanitizer checks leaks there, and ASan's quarantine makes peak RSS
# say little.
UNDER_ASAN = "ASAN_OPTIONS" in os.environ


def budgeted(*args, ok_codes=(0, 1, 3)):
    """Runs a tool under /usr/bin/time; returns (rc, stdout, stderr, peak MB).
    Fails on a signal, a timeout or a peak over the budget."""
    cmd = ["/usr/bin/time", "-f", "@@maxrss %M"] + [str(a) for a in args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=TIME_BUDGET_S)
    except subprocess.TimeoutExpired:
        pytest.fail("%s did not finish in %d s" % (args[0], TIME_BUDGET_S))
    lines = r.stderr.splitlines()
    peak = int([ln for ln in lines if ln.startswith("@@maxrss")][-1].split()[1]) // 1024
    err = "\n".join(ln for ln in lines if not ln.startswith("@@maxrss") and "Command exited" not in ln
                    and "Command terminated" not in ln)
    assert "terminated by signal" not in r.stderr, r.stderr
    assert r.returncode in ok_codes, "rc %d: %s" % (r.returncode, err)
    assert peak < RSS_BUDGET_MB, "%s peaked at %d MB" % (args[0], peak)
    return r.returncode, r.stdout, err, peak


def jpeg(seed, size=(24, 16), mode="RGB"):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 255, (size[1], size[0], 3 if mode == "RGB" else 1), dtype=np.uint8)
    b = io.BytesIO()
    Image.fromarray(a.squeeze()).save(b, "JPEG", quality=90)
    return b.getvalue()


def write_shard(path, members, fmt=tarfile.PAX_FORMAT, gz=False):
    """Members as webdataset's TarWriter writes them: Python's tarfile."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            t.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if gz else data)
    return path


def tar_header(name, size_field, typ=b"0"):
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:107] = b"0000644"
    h[124:136] = size_field
    h[156:157] = typ
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:155] = b"%06o\x00" % sum(h)
    return bytes(h)


def field(rec, meta, name):
    for f in rec["fields"]:
        if meta["fields"][f["slot"]]["name"] == name:
            return f["value"]
    return None


def records(db):
    d = read_db.open_db(str(db))
    out = []
    for i in range(d.meta["count"]):
        out.append(read_db.read_record(d, i))
    return d.meta, out


# ---- hostile tar, pickle, JSON, labels: errors within budget ------------

def test_tar_member_size_that_wraps_fails_at_once(tmp_path):
    size = b"\x80" + b"\x00" * 3 + struct.pack(">Q", 2**64 - 512)
    shard = tmp_path / "loop.tar"
    shard.write_bytes(tar_header(b"a.jpg", size) + b"x" * 4096 + b"\0" * 1024)
    rc, _, err, _ = budgeted(tool("pack_lmdb"), shard, tmp_path / "o.lmdb", "-q")
    assert rc == 1 and "loop.tar" in err and "tar header at byte 0" in err, err
    assert not (tmp_path / "o.lmdb").exists()


@pytest.mark.parametrize("length", [b"abc", b"-5", b"99999999999999999999999999"])
def test_pax_length_that_is_not_a_number_is_an_error(tmp_path, length):
    body = length + b" path=a.jpg\n"
    shard = tmp_path / "pax.tar"
    shard.write_bytes(tar_header(b"PaxHeader", b"%011o\x00" % len(body), b"x") + body.ljust(512, b"\0") +
                      tar_header(b"a.jpg", b"%011o\x00" % 3) + b"abc".ljust(512, b"\0") + b"\0" * 1024)
    rc, _, err, _ = budgeted(tool("pack_lmdb"), shard, tmp_path / "o.lmdb", "-q")
    assert rc == 1 and "pax record" in err and "pax.tar" in err, err


def test_deep_json_in_a_shard_is_a_per_sample_error(tmp_path):
    shard = write_shard(tmp_path / "deep.tar", [
        ("a.jpg", jpeg(1)), ("a.json", b"[" * 400000 + b"]" * 400000), ("a.cls", b"0"),
        ("b.jpg", jpeg(2)), ("b.cls", b"0")])
    rc, out, err, _ = budgeted(tool("pack_lmdb"), shard, tmp_path / "o.lmdb", "-q", "--errors", tmp_path / "e.tsv")
    assert rc == 3, err
    assert "deep.tar:a" in err and "nested 400000 deep" in err, err
    assert len(records(tmp_path / "o.lmdb")[1]) == 1


def test_deep_manifest_value_is_an_error_naming_the_line(tmp_path):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.jpg")
    (tmp_path / "m.jsonl").write_text('{"image": "a.jpg", "label": 0}\n{"image": "a.jpg", "t": ' +
                                      "[" * 300000 + "]" * 300000 + "}\n")
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m.jsonl", tmp_path / "o.lmdb", "-q")
    assert rc == 1 and "m.jsonl:2" in err and "deep" in err, err


def pickled_lmdb(path, items, keys=None):
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26, lock=False)
    with env.begin(write=True) as txn:
        for k, v in items:
            txn.put(k, v)
        if keys is not None:
            txn.put(b"__keys__", keys)
    env.close()
    return path


def memo_bomb(depth=200):
    """t0 = []; t(i) = (t(i-1), t(i-1)): 2^200 leaves if copied; Python's
    own unpickler shares them and loads it at once."""
    p = b"\x80\x04]q\x000"
    for i in range(1, depth):
        p += b"h" + bytes([(i - 1) & 255]) * 1 + b"h" + bytes([(i - 1) & 255]) + b"\x86q" + bytes([i & 255]) + b"0"
    return p + b"h" + bytes([(depth - 1) & 255]) + b"."


def test_pickle_memo_bomb_and_deep_nesting_are_bounded(tmp_path):
    bomb = memo_bomb()
    t0 = time.process_time()  # CPU time: a loaded machine does not stretch it
    assert len(pickle.loads(bomb)) == 2 and time.process_time() - t0 < 1  # what Python itself does
    deep = b"\x80\x04" + b"]" * 1000000 + b"a" * 999999 + b"."
    db = pickled_lmdb(tmp_path / "f2l.lmdb", [(b"0", pickle.dumps((jpeg(0), 1))), (b"1", bomb), (b"2", deep)])
    rc, _, err, _ = budgeted(tool("pack_lmdb"), db, tmp_path / "o.lmdb", "-q", "--errors", tmp_path / "e.tsv")
    assert rc == 3, err
    tsv = (tmp_path / "e.tsv").read_text()
    assert "f2l.lmdb:1\tvalue is not a pickled (image bytes, label)" in tsv, tsv
    assert "f2l.lmdb:2\t" in tsv, tsv
    keys_bomb = pickled_lmdb(tmp_path / "k.lmdb", [(b"0", pickle.dumps((jpeg(0), 1)))], keys=memo_bomb(60))
    rc, _, err, _ = budgeted(tool("pack_lmdb"), keys_bomb, tmp_path / "k-out.lmdb", "-q")
    assert rc == 1 and "__keys__" in err, err


@pytest.mark.parametrize("where", ["cls", "json", "pickle", "manifest", "csv", "labels"])
def test_one_huge_label_is_an_error_not_a_class_table(tmp_path, where):
    big = 999999999
    img = jpeg(5)
    if where in ("cls", "json"):
        member = ("a.cls", b"%d" % big) if where == "cls" else ("a.json", json.dumps({"label": big}).encode())
        src = write_shard(tmp_path / "s.tar", [("a.jpg", img), member, ("b.jpg", img), ("b.cls", b"1")])
        args = [src, tmp_path / "o.lmdb"]
    elif where == "pickle":
        src = pickled_lmdb(tmp_path / "f.lmdb", [(b"0", pickle.dumps((img, big))), (b"1", pickle.dumps((img, 1)))])
        args = [src, tmp_path / "o.lmdb"]
    elif where in ("manifest", "csv"):
        (tmp_path / "a.jpg").write_bytes(img)
        if where == "manifest":
            (tmp_path / "m.jsonl").write_text('{"image": "a.jpg", "label": %d}\n' % big)
            args = ["--manifest", tmp_path / "m.jsonl", tmp_path / "o.lmdb"]
        else:
            (tmp_path / "m.csv").write_text("image,label\na.jpg,%d\n" % big)
            args = ["--manifest", tmp_path / "m.csv", tmp_path / "o.lmdb"]
    else:
        os.makedirs(tmp_path / "flat")
        (tmp_path / "flat" / "a.jpg").write_bytes(img)
        (tmp_path / "labels.txt").write_text("a.jpg %d\n" % big)
        args = [tmp_path / "flat", tmp_path / "o.lmdb", "--labels", tmp_path / "labels.txt"]
    rc, _, err, peak = budgeted(tool("pack_lmdb"), *args, "-q")
    assert rc == 1 and str(big) in err and "--classes" in err, err
    assert peak < 400 or UNDER_ASAN, peak


def test_devices_and_fifos_are_refused_by_name(tmp_path, jpeg_db):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args in ([tool("verify_db"), fifo], [tool("export_db"), fifo, tmp_path / "x"],
                 [tool("inspect_db"), fifo, "--out", tmp_path / "r"], [tool("shuffle_quality"), fifo]):
        rc, out, err, _ = budgeted(*args, "-q") if args[0] != tool("shuffle_quality") else budgeted(*args)
        assert rc == 1 and "FIFO" in out + err and str(fifo) in out + err, (args[0], out, err)
    (tmp_path / "m.jsonl").write_text('{"image": "/dev/zero"}\n{"image": "fifo.jpg"}\n')
    os.mkfifo(tmp_path / "fifo.jpg")
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m.jsonl", tmp_path / "o.lmdb", "-q",
                             "--allow-outside-paths", "--errors", tmp_path / "e.tsv")
    tsv = (tmp_path / "e.tsv").read_text()
    assert rc == 1 and "character device" in tsv and "FIFO" in tsv, tsv
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", fifo, tmp_path / "o2.lmdb", "-q")
    assert rc == 1 and "FIFO" in err, err


def test_manifest_paths_outside_its_folder_need_an_option(tmp_path):
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(jpeg(9))
    os.makedirs(tmp_path / "m")
    (tmp_path / "m" / "ok.jpg").write_bytes(jpeg(8))
    (tmp_path / "m" / "m.jsonl").write_text('{"image": "ok.jpg"}\n{"image": "%s"}\n{"image": "../secret.jpg"}\n' % secret)
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m" / "m.jsonl", tmp_path / "o.lmdb", "-q")
    assert rc == 3 and "leaves the manifest's folder" in err, err
    assert [r["path"] for r in records(tmp_path / "o.lmdb")[1]] == ["ok.jpg"]
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m" / "m.jsonl", tmp_path / "o2.lmdb", "-q",
                             "--allow-outside-paths")
    assert rc == 0, err
    assert len(records(tmp_path / "o2.lmdb")[1]) == 3


def test_damaged_png_masks_leak_nothing(tmp_path):
    """Damaged masks: the old reader leaked through libpng's longjmp (100
    masks 36 MB, 1000 masks 171 MB). The peak of 1000 is now that of 100."""
    good = io.BytesIO()
    Image.fromarray(np.ones((64, 64), np.uint8)).save(good, "PNG")
    bad = good.getvalue()[:-40] + b"\0" * 40  # IDAT damaged after the header: rows allocated, then an error
    peaks = []
    for n in (100, 1000):
        root = tmp_path / str(n)
        os.makedirs(root / "img" / "c")
        os.makedirs(root / "mask" / "c")
        for i in range(n):
            (root / "img" / "c" / ("%04d.jpg" % i)).write_bytes(jpeg(i, (64, 64)))
            (root / "mask" / "c" / ("%04d.png" % i)).write_bytes(bad)
        rc, _, err, peak = budgeted(tool("pack_lmdb"), root / "img", root / "o.lmdb", "-q", "--no-class",
                                    "--threads", "2", "--field", "mask=" + str(root / "mask"))
        assert rc == 1 and "every input was skipped" in err and "mask" in err, err
        assert not (root / "o.lmdb").exists()
        peaks.append(peak)
    assert peaks[1] - peaks[0] < 40 or UNDER_ASAN, peaks


def written(pid):
    """Bytes process `pid` has written so far (wchar of /proc/PID/io)."""
    try:
        with open("/proc/%d/io" % pid) as f:
            return next(int(line.split()[1]) for line in f if line.startswith("wchar:"))
    except (OSError, StopIteration):
        return 0


def test_gzip_shard_leaves_no_scratch_file_when_killed(tmp_path):
    """SIGKILL while a shard inflates: the old scratch file beside DST (306
    MB in one run) stayed for good; an O_TMPFILE has no name to leave."""
    shard = tmp_path / "big.tar.gz"
    with gzip.open(shard, "wb", compresslevel=1) as g:  # a 400 MB member of zeros: ~0.4 MB gzipped
        info = tarfile.TarInfo("big.bin")
        info.size = 400 << 20
        g.write(info.tobuf(format=tarfile.PAX_FORMAT))
        zeros = b"\0" * (4 << 20)
        for _ in range(100):
            g.write(zeros)
        g.write(b"\0" * 1024)
    out = tmp_path / "out"
    os.makedirs(out)
    p = subprocess.Popen([tool("pack_lmdb"), shard, out / "o.lmdb", "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Killed once it has written 16 MiB of the 400 MiB it inflates (its
    # write count in /proc/PID/io), not after a fixed sleep.
    deadline = time.time() + 120
    while written(p.pid) < 16 << 20 and p.poll() is None and time.time() < deadline:
        time.sleep(0.002)
    assert p.poll() is None, "pack_lmdb ended before it could be killed while inflating"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert os.listdir(out) == [] or all("ipk-lock" in n for n in os.listdir(out)), os.listdir(out)


def test_every_input_skipped_leaves_no_database(tmp_path):
    os.makedirs(tmp_path / "t" / "c")
    (tmp_path / "t" / "c" / "a.jpg").write_bytes(b"not a jpeg")
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "t", tmp_path / "o.lmdb", "-q")
    assert rc == 1 and "every input was skipped" in err and "a.jpg" in err, err
    assert not (tmp_path / "o.lmdb").exists()


def test_tfrecord_lengths_and_examples_are_bounded(tmp_path):
    """A record that claims 1 TiB (its length CRC right), an Example whose
    field runs 4 GiB past its end, and one of 200,000 features: each a
    skipped record naming the file, the record and the byte, in bounded
    memory; with nothing left, no database."""
    from tfrecord_writer import example, frame, masked
    huge = struct.pack("<Q", 1 << 40)
    (tmp_path / "a.tfrecord").write_bytes(huge + struct.pack("<I", masked(huge)) + b"x" * 64)
    (tmp_path / "b.tfrecord").write_bytes(frame(b"\x0a\xff\xff\xff\xff\x0f") +
                                          frame(example({str(i): [] for i in range(200_000)})))
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "%s::%s" % (tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"),
                             tmp_path / "o.lmdb", "--errors", tmp_path / "e.txt")
    errors = (tmp_path / "e.txt").read_text()
    assert rc == 1 and not (tmp_path / "o.lmdb").exists(), err
    assert "a.tfrecord:record 0\ta record of 1099511627776 bytes (budget 1073741824)" in errors, errors
    assert "b.tfrecord:record 0\ttf.train.Example: a field of 4294967295 bytes past its message's end at byte" in errors
    assert "b.tfrecord:record 1\ttf.train.Example: more than 100000 features at byte" in errors


def test_parquet_footers_and_pages_are_bounded(tmp_path):
    """A footer that claims a list of 2^40 schema elements, one nested 100
    structures deep, and a footer longer than its file: each refused
    naming the file and the byte, in bounded memory, nothing written."""
    def parquet(footer, length=None):
        return b"PAR1" + footer + struct.pack("<I", len(footer) if length is None else length) + b"PAR1"
    huge_list = b"\x29\xfc" + b"\x80\x80\x80\x80\x80\x80\x01"  # field 2: a list of structs, 2^42 long
    deep = b"\x1c" * 100 + b"\x00" * 101  # struct in struct, 100 deep
    cases = {"list.parquet": (parquet(huge_list), "a list of 4398046511104 elements past the end"),
             "deep.parquet": (parquet(deep), "structures nested deeper than 64"),
             "long.parquet": (parquet(b"\x00", 1 << 30), "a footer of 1073741824 bytes in a file of")}
    for name, (data, why) in cases.items():
        (tmp_path / name).write_bytes(data)
        rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / name, tmp_path / "o.lmdb")
        assert rc == 1 and name in err and why in err, err
        assert not (tmp_path / "o.lmdb").exists()


# ---- names: bytes until proven UTF-8 --------------------------------------

def test_latin1_names_are_refused_up_front_and_the_rest_exports(tmp_path):
    root = bytes(tmp_path / "t")
    os.makedirs(os.path.join(root, b"caf\xe9"))
    os.makedirs(os.path.join(root, b"ok"))
    for d, n in ((b"caf\xe9", b"a.jpg"), (b"ok", b"\xe9t\xe9.jpg"), (b"ok", b"good.jpg")):
        with open(os.path.join(root, d, n), "wb") as f:
            f.write(jpeg(len(n)))
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "t", tmp_path / "o.lmdb", "-q", "--errors", tmp_path / "e")
    assert rc == 3 and "\\xe9" in err and "not UTF-8" in err, err
    meta, recs = records(tmp_path / "o.lmdb")
    assert meta["classes"] == ["ok"] and [r["path"] for r in recs] == ["ok/good.jpg"]
    rc, _, err, _ = budgeted(tool("export_db"), tmp_path / "o.lmdb", tmp_path / "x", "-q")
    assert rc == 0, err
    rc, _, err, _ = budgeted(tool("verify_db"), tmp_path / "o.lmdb", "-q")
    assert rc == 0, err


# ---- WebDataset as its users write it -------------------------------------

def test_laion_shards_from_img2dataset_pack_every_sample(tmp_path):
    """img2dataset writes KEY.jpg, KEY.txt (caption) and KEY.json (url,
    caption, key, status, sizes). The url ends in .jpg: data, not a file."""
    members = []
    for i in range(4):
        k = "%09d" % i
        meta = {"url": "https://example.org/img/%04d.jpg" % i, "caption": "photo %d" % i, "key": k,
                "status": "success", "error_message": None, "width": 24, "height": 16,
                "original_width": 640, "original_height": 480, "exif": None, "sha256": "ab" * 32}
        members += [(k + ".jpg", jpeg(i)), (k + ".txt", ("photo %d" % i).encode()),
                    (k + ".json", json.dumps(meta).encode())]
    write_shard(tmp_path / "00000.tar", members)
    rc, out, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "00000.tar", tmp_path / "o.lmdb", "-q", "--no-class")
    assert rc == 0, err
    assert "4 .txt members not packed (--keep-members txt" in err, err
    meta, recs = records(tmp_path / "o.lmdb")
    assert len(recs) == 4
    names = [f["name"] for f in meta["fields"]]
    assert "url" in names and "caption" in names and all(f["kind"] != "image" for f in meta["fields"]), meta["fields"]
    rc, out, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "00000.tar", tmp_path / "k.lmdb", "-q", "--no-class",
                               "--keep-members", "txt")
    assert rc == 0, err
    meta, _ = records(tmp_path / "k.lmdb")
    assert "txt" in [f["name"] for f in meta["fields"]]


def test_json_paths_in_a_shard_never_read_local_files(tmp_path):
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(jpeg(42))
    write_shard(tmp_path / "s.tar", [("a.jpg", jpeg(1)), ("a.cls", b"0"),
                                     ("a.json", json.dumps({"original_filename": "IMG_0001.JPG",
                                                            "other": str(secret)}).encode())])
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "s.tar", tmp_path / "o.lmdb", "-q")
    assert rc == 0, err
    _, recs = records(tmp_path / "o.lmdb")
    assert len(recs) == 1
    raw = open(tmp_path / "o.lmdb", "rb").read()
    assert secret.read_bytes() not in raw


def test_duplicate_keys_and_bad_json_are_reported_per_sample(tmp_path):
    write_shard(tmp_path / "s.tar", [("a.jpg", jpeg(1)), ("a.cls", b"0"), ("a.jpg", jpeg(2)),
                                     ("b.jpg", jpeg(3)), ("b.cls", b"1"), ("b.json", b"{not json"),
                                     ("c.jpg", jpeg(4)), ("c.cls", b"1")])
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "s.tar", tmp_path / "o.lmdb", "-q",
                             "--errors", tmp_path / "e.tsv")
    tsv = (tmp_path / "e.tsv").read_text()
    assert rc == 3 and "s.tar:a\tmember a.jpg appears twice" in tsv and "s.tar:b\t" in tsv and "JSON" in tsv, tsv
    assert [r["path"] for r in records(tmp_path / "o.lmdb")[1]] == ["c.jpg"]


def test_several_shard_arguments_and_brace_alternatives(tmp_path):
    for split in ("train", "val"):
        for i in range(2):
            write_shard(tmp_path / ("%s-%d.tar" % (split, i)),
                        [("%s%d.jpg" % (split, i), jpeg(i)), ("%s%d.cls" % (split, i), b"%d" % i)])
    rc, _, err, _ = budgeted(tool("pack_lmdb"), str(tmp_path / "{train,val}-{0..1}.tar"), tmp_path / "a.lmdb", "-q")
    assert rc == 0, err
    assert len(records(tmp_path / "a.lmdb")[1]) == 4
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "train-0.tar", tmp_path / "val-1.tar",
                             tmp_path / "b.lmdb", "-q")
    assert rc == 0, err
    assert sorted(r["path"] for r in records(tmp_path / "b.lmdb")[1]) == ["train0.jpg", "val1.jpg"]


# ---- export and import round trips ----------------------------------------

def test_class_names_with_spaces_hash_and_unicode_round_trip(tmp_path):
    classes = ["T-shirt/top", "Ankle boot", "#hashtag", "caf\u00e9"]
    rows = []
    os.makedirs(tmp_path / "i")
    for i in range(8):
        (tmp_path / "i" / ("%d.jpg" % i)).write_bytes(jpeg(i))
        rows.append(json.dumps({"image": "i/%d.jpg" % i, "label": classes[i % 4]}))
    (tmp_path / "m.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "classes.txt").write_text("\n".join(classes) + "\n")
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m.jsonl", tmp_path / "a.lmdb", "-q",
                             "--classes", tmp_path / "classes.txt")
    assert rc == 0, err
    meta_a, recs_a = records(tmp_path / "a.lmdb")
    assert meta_a["classes"] == classes
    for layout in ("webdataset", "imagefolder"):
        budgeted(tool("export_db"), tmp_path / "a.lmdb", tmp_path / layout, "-q", "--to", layout)
    budgeted(tool("pack_lmdb"), tmp_path / "webdataset", tmp_path / "b.lmdb", "-q")
    meta_b, recs_b = records(tmp_path / "b.lmdb")
    assert meta_b["classes"] == classes
    assert sorted((r["path"], r["label"]) for r in recs_a) == sorted((r["path"], r["label"]) for r in recs_b)
    # ImageFolder: the folders are the classes; classes.txt keeps their order.
    budgeted(tool("pack_lmdb"), tmp_path / "imagefolder", tmp_path / "c.lmdb", "-q",
             "--classes", tmp_path / "imagefolder" / "classes.txt")
    meta_c, recs_c = records(tmp_path / "c.lmdb")
    assert meta_c["classes"] == ["T-shirt_top" if c == "T-shirt/top" else c for c in classes] or \
        meta_c["classes"] == classes, meta_c["classes"]


def test_classless_database_round_trips(tmp_path):
    os.makedirs(tmp_path / "t")
    for i in range(5):
        (tmp_path / "t" / ("%d.jpg" % i)).write_bytes(jpeg(i))
    budgeted(tool("pack_lmdb"), tmp_path / "t", tmp_path / "a.lmdb", "-q", "--no-class")
    budgeted(tool("export_db"), tmp_path / "a.lmdb", tmp_path / "w", "-q")
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "w", tmp_path / "b.lmdb", "-q")
    assert rc == 0, err
    meta, recs = records(tmp_path / "b.lmdb")
    assert meta["classes"] == [] and len(recs) == 5 and all(r["label"] == -1 for r in recs)


def test_export_names_are_unique_and_stay_inside_dst(tmp_path):
    """13 records whose paths collide after webdataset's key rule, or name
    places outside the folder: 13 members out, none outside."""
    paths = ["a.jpg", "a.png", "a.x.jpg", "a_x.jpg", "../a.jpg", "/abs/a.jpg", "./a.jpg", "c0/a.jpg", "a",
             "a~3.jpg", "d/../a.jpg", "..", "x/./a.jpg"]
    os.makedirs(tmp_path / "i")
    rows = []
    for i, p in enumerate(paths):
        (tmp_path / "i" / ("%d.jpg" % i)).write_bytes(jpeg(i))
        rows.append({"image": "i/%d.jpg" % i, "label": 0})
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m.jsonl", tmp_path / "a.lmdb", "-q")
    # Rewrite the stored paths with an independent writer would need the
    # format; instead pack from a shard whose .json carries those paths.
    members = []
    for i, p in enumerate(paths):
        members += [("s%02d.jpg" % i, jpeg(i)), ("s%02d.cls" % i, b"0"), ("s%02d.json" % i, json.dumps({"path": p}).encode())]
    write_shard(tmp_path / "in.tar", members)
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "in.tar", tmp_path / "b.lmdb", "-q",
                             "--errors", tmp_path / "e.tsv")
    _, recs = records(tmp_path / "b.lmdb")
    n = len(recs)
    assert n >= 12, (n, err)
    budgeted(tool("export_db"), tmp_path / "b.lmdb", tmp_path / "w", "-q")
    budgeted(tool("export_db"), tmp_path / "b.lmdb", tmp_path / "f", "-q", "--to", "imagefolder")
    names = []
    for shard in sorted(os.listdir(tmp_path / "w")):
        if shard.endswith(".tar"):
            with tarfile.open(tmp_path / "w" / shard) as t:
                names += t.getnames()
    jpgs = [m for m in names if m.endswith(".jpg")]
    assert len(jpgs) == n and len(set(jpgs)) == n, jpgs
    assert not any(m.startswith("/") or ".." in m.split("/") for m in names), names
    files = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path / "f") for f in fs if f.endswith(".jpg")]
    assert len(files) == n, files
    assert all(os.path.realpath(f).startswith(str(tmp_path / "f")) for f in files)
    assert not os.path.exists(tmp_path / "a.jpg")


# ---- COCO as other projects write it ----------------------------------------

def test_coco_keypoints_crowd_null_iscrowd_and_rounding(tmp_path):
    os.makedirs(tmp_path / "img")
    for n in ("a.jpg", "b.jpg"):
        (tmp_path / "img" / n).write_bytes(jpeg(3, (40, 30)))
    coco = {"images": [{"id": 1, "file_name": "a.jpg", "width": 40, "height": 30},
                       {"id": 2, "file_name": "b.jpg", "width": 40, "height": 30},
                       {"id": 3, "file_name": "a.jpg", "width": 40, "height": 30}],
            "categories": [{"id": 1, "name": "person", "keypoints": ["nose"], "skeleton": []},
                           {"id": 2, "name": "car"}],
            "annotations": [
                {"id": 1, "image_id": 1, "category_id": 1, "bbox": [-0.4, 0, 40.3, 30.6], "iscrowd": None},
                {"id": 2, "image_id": 1, "category_id": 2, "bbox": [5, 5, 10, 10], "iscrowd": 1},
                {"id": 3, "image_id": 2, "category_id": 1, "keypoints": [1, 2, 2], "num_keypoints": 1},
                {"id": 4, "image_id": 2, "category_id": 2, "bbox": [1, 1, 5, 5], "iscrowd": "no"}]}
    (tmp_path / "c.json").write_text(json.dumps(coco))
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--coco", tmp_path / "c.json", "--images", tmp_path / "img",
                             tmp_path / "o.lmdb", "-q", "--errors", tmp_path / "e.tsv")
    tsv = (tmp_path / "e.tsv").read_text()
    assert rc == 3, err
    assert "annotation 3\thas no bbox" in tsv and "iscrowd is \"no\"" in tsv and "listed twice" in tsv, tsv
    meta, recs = records(tmp_path / "o.lmdb")
    by_path = {r["path"]: r for r in recs}
    assert sorted(by_path) == ["a.jpg", "b.jpg"]
    xy, cls = field(by_path["a.jpg"], meta, "boxes")
    # The box a fraction of a pixel outside the image is clipped to it; the
    # crowd box is not an instance: it is kept apart, as a region to ignore.
    assert cls.tolist() == [0] and np.allclose(xy, [[0, 0, 39.9, 30]]), (xy, cls)
    assert [f["name"] for f in meta["fields"]] == ["boxes", "crowd_boxes"]
    cxy, ccls = field(by_path["a.jpg"], meta, "crowd_boxes")
    assert ccls.tolist() == [1] and np.allclose(cxy, [[5, 5, 15, 15]]), (cxy, ccls)
    assert len(field(by_path["b.jpg"], meta, "boxes")[1]) == 0


def test_duplicate_coco_category_ids_are_an_error(tmp_path):
    os.makedirs(tmp_path / "img")
    coco = {"images": [], "annotations": [], "categories": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}]}
    (tmp_path / "c.json").write_text(json.dumps(coco))
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--coco", tmp_path / "c.json", "--images", tmp_path / "img",
                             tmp_path / "o.lmdb", "-q")
    assert rc == 1 and "category id 1 is listed twice" in err, err


# ---- VOC palette masks with 255 as ignore -----------------------------------

def test_voc_palette_masks_keep_every_value(tmp_path):
    os.makedirs(tmp_path / "JPEGImages")
    os.makedirs(tmp_path / "SegmentationClass")
    rng = np.random.default_rng(0)
    want = {}
    for i in range(3):
        m = rng.integers(0, 21, (30, 40)).astype(np.uint8)
        m[0, :] = 255  # VOC's object borders: ignore
        img = Image.fromarray(m, "P")
        img.putpalette([v for c in range(256) for v in (c * 3 % 256, c * 5 % 256, c * 7 % 256)])
        img.save(tmp_path / "SegmentationClass" / ("2007_%06d.png" % i))
        (tmp_path / "JPEGImages" / ("2007_%06d.jpg" % i)).write_bytes(jpeg(i, (40, 30)))
        want["2007_%06d.jpg" % i] = m
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "JPEGImages", tmp_path / "o.lmdb", "-q", "--no-class",
                             "--field", "mask=" + str(tmp_path / "SegmentationClass"), "--mask-classes", "21",
                             "--encoding", "raw")
    assert rc == 0, err
    meta, recs = records(tmp_path / "o.lmdb")
    assert meta["fields"][0]["kind"] == "mask" and len(recs) == 3
    assert meta["fields"][0].get("ignore", 255) == 255
    # The stored label map is the palette indices Pillow reads, 255 kept.
    for r in recs:
        np.testing.assert_array_equal(field(r, meta, "mask"), want[r["path"]])


def test_seg_member_is_a_mask_when_the_user_says_so(tmp_path):
    """KEY.seg.png: a second RGB JPEG image by default (any NAME), a
    lossless mask with --mask-member seg: every label value kept."""
    m = np.arange(16 * 24, dtype=np.uint8).reshape(16, 24) % 21
    b = io.BytesIO()
    Image.fromarray(m, "L").save(b, "PNG")
    write_shard(tmp_path / "s.tar", [("a.jpg", jpeg(1)), ("a.seg.png", b.getvalue())])
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "s.tar", tmp_path / "o.lmdb", "-q", "--no-class",
                             "--mask-member", "seg")
    assert rc == 0, err
    meta, recs = records(tmp_path / "o.lmdb")
    assert meta["fields"][0]["name"] == "seg" and meta["fields"][0]["kind"] == "mask"
    np.testing.assert_array_equal(field(recs[0], meta, "seg"), m)


def test_pack_refuses_what_verify_would_reject(tmp_path):
    """A path holding a NUL or over 65,535 bytes and a field named "" used
    to pack (exit 0) into a database verify_db rejects."""
    write_shard(tmp_path / "s.tar", [
        ("a.jpg", jpeg(1)), ("a.cls", b"0"), ("a.json", json.dumps({"path": "x\u0000y.jpg"}).encode()),
        ("b.jpg", jpeg(2)), ("b.cls", b"0"), ("b.json", json.dumps({"path": "p" * 70000 + ".jpg"}).encode()),
        ("c.jpg", jpeg(3)), ("c.cls", b"0")])
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "s.tar", tmp_path / "o.lmdb", "-q",
                             "--errors", tmp_path / "e.tsv")
    tsv = (tmp_path / "e.tsv").read_text()
    assert rc == 3 and "NUL" in tsv and "70004 bytes (at most 65535)" in tsv, tsv
    assert [r["path"] for r in records(tmp_path / "o.lmdb")[1]] == ["c.jpg"]
    rc, out, err, _ = budgeted(tool("verify_db"), tmp_path / "o.lmdb", "--decode", "-q")
    assert rc == 0, out + err
    (tmp_path / "a.jpg").write_bytes(jpeg(4))
    (tmp_path / "m.jsonl").write_text('{"image": "a.jpg", "": "x"}\n')
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m.jsonl", tmp_path / "m.lmdb", "-q")
    assert rc == 1 and "m.jsonl:1" in err and "field name" in err, err


def test_folder2lmdb_missing_first_key_skips_only_that_record(tmp_path):
    """`__keys__` naming a key that is not in the database (first in the
    list) used to fail the whole import."""
    items = [(b"1", pickle.dumps((jpeg(1), 0))), (b"2", pickle.dumps((jpeg(2), 1)))]
    db = pickled_lmdb(tmp_path / "f.lmdb", items, keys=pickle.dumps([b"0", b"1", b"2"]))
    rc, _, err, _ = budgeted(tool("pack_lmdb"), db, tmp_path / "o.lmdb", "-q", "--errors", tmp_path / "e.tsv")
    assert rc == 3, err
    assert "f.lmdb:0\tlisted in __keys__ but not in the database" in (tmp_path / "e.tsv").read_text()
    assert [r["path"] for r in records(tmp_path / "o.lmdb")[1]] == ["1", "2"]


def test_latin1_labels_in_cls_and_csv_are_refused_by_name(tmp_path):
    write_shard(tmp_path / "s.tar", [("a.jpg", jpeg(1)), ("a.cls", b"caf\xe9"), ("b.jpg", jpeg(2)), ("b.cls", b"tea")])
    rc, _, err, _ = budgeted(tool("pack_lmdb"), tmp_path / "s.tar", tmp_path / "o.lmdb", "-q")
    assert rc == 3 and "s.tar:a" in err and "\\xe9" in err, err
    meta, recs = records(tmp_path / "o.lmdb")
    assert meta["classes"] == ["tea"] and len(recs) == 1
    (tmp_path / "b.jpg").write_bytes(jpeg(2))
    (tmp_path / "m.csv").write_bytes(b"image,label\nb.jpg,caf\xe9\n")
    rc, _, err, _ = budgeted(tool("pack_lmdb"), "--manifest", tmp_path / "m.csv", tmp_path / "m.lmdb", "-q")
    assert rc == 1 and "m.csv:2: not UTF-8" in err, err
