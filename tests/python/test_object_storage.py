"""Datasets in S3-compatible object storage, against a real Ceph RADOS
Gateway started for these tests (scripts/ceph_gateway.sh) and a real
client library (boto3) to put, replace and inspect objects.

Tests whose name holds "tool" use the command-line tools only; they also
run under the sanitizers (tests/CMakeLists.txt)."""
import os
import select
import signal
import socket
import struct
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import SCRIPTS, tool

boto3 = pytest.importorskip("boto3")
try:
    import imagepack
except ImportError:  # the sanitizer builds have no Python package: tool tests only
    imagepack = None

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
GATEWAY = os.path.join(SCRIPTS, "ceph_gateway.sh")


def free_port_block(n=42):
    """A base port with n free ports after it (monitor, OSD, gateway)."""
    for base in range(int(os.environ.get("IMAGEPACK_TEST_S3_PORT", 17480)), 60000, 97):
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            for s in socks:
                s.close()
            return base
        except OSError:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    """The gateway's folder and environment (credentials, endpoint)."""
    folder = tmp_path_factory.mktemp("ceph")
    subprocess.run([GATEWAY, "start", str(folder), str(free_port_block())], check=True, timeout=180)
    env = {}
    for line in open(folder / "env"):
        k, v = line.split()[1].split("=", 1)
        env[k] = v
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    os.environ["IMAGEPACK_S3_RETRY_SECONDS"] = "20"
    try:
        yield folder, env
    finally:
        subprocess.run([GATEWAY, "stop", str(folder)], timeout=60)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def s3(gateway):
    _, env = gateway
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    client.create_bucket(Bucket="data")
    return client


@pytest.fixture(scope="module")
def packed(tree, tmp_path_factory, s3):
    """The test tree packed to a local blob and, by pack_lmdb, to the bucket."""
    # One creation time for both, so that the two packs are the same bytes even when they are made in
    # different seconds: the tests compare the bucket's blocks with the local file.
    env = dict(os.environ, SOURCE_DATE_EPOCH="1700000000")
    local = tmp_path_factory.mktemp("local") / "train.blob"
    subprocess.run([tool("pack_lmdb"), str(tree), str(local), "-q", "--shuffle", "1", "--format", "blob"],
                   check=True, env=env)
    subprocess.run([tool("pack_lmdb"), str(tree), "s3://data/train.blob", "-q", "--shuffle", "1"], check=True,
                   env=env)
    with open(local, "rb") as f:
        assert s3.get_object(Bucket="data", Key="train.blob")["Body"].read() == f.read()
    return str(local), "s3://data/train.blob"


def arrays(batch):
    if isinstance(batch, dict):
        return [np.array(batch[k]) for k in sorted(batch)]
    return [np.array(x) for x in batch]


def epochs(path, n=2, **kw):
    loader = imagepack.Loader(path, as_torch=False, **kw)
    out = []
    for e in range(n):
        loader.set_epoch(e)
        out.extend(arrays(b) for b in loader)
    return loader, out


def same(a, b):
    return len(a) == len(b) and all(len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y))
                                    for x, y in zip(a, b))


needs_package = pytest.mark.skipif(imagepack is None, reason="the Python package is not built here")


def test_tool_pack_to_bucket_is_the_local_blob_byte_for_byte_and_verifies(packed, s3):
    local, url = packed
    body = s3.get_object(Bucket="data", Key="train.blob")["Body"].read()
    with open(local, "rb") as f:
        want = f.read()
    # Two packs of one tree: the same bytes but the metadata's "created"
    # time (and so its checksum and the header's checksums of it).
    import json
    import struct
    meta_at = struct.unpack_from("<Q", want, 32)[0]
    assert len(body) == len(want) and body[8:32] == want[8:32] and body[64:meta_at] == want[64:meta_at]

    def meta(b):
        m = json.loads(b[meta_at:])
        return {k: v for k, v in m.items() if k not in ("created", "meta_checksum")}
    assert meta(body) == meta(want)
    out = subprocess.run([tool("verify_db"), url], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "OK: 90 of 90 records checked" in out.stdout + out.stderr


@needs_package
@pytest.mark.parametrize("order", ["blocks", "random"])
def test_loader_batches_from_the_bucket_are_the_local_files(packed, order):
    local, url = packed
    opts = dict(batch_size=8, size=24, seed=7, order=order, block_mb=0.05, window_blocks=2)
    _, want = epochs(local, threads=2, **opts)
    for threads in (1, 3):  # determinism whatever the thread count
        loader, got = epochs(url, threads=threads, **opts)
        assert same(want, got)
    assert loader.stats()["remote_requests"] > 1
    ds = imagepack.open(url)
    ref = imagepack.open(local)
    assert len(ds) == len(ref) == 90
    for i in (0, 45, 89):
        assert np.array_equal(np.array(ds[i][0]), np.array(ref[i][0])) and ds[i][1] == ref[i][1]


@needs_package
def test_tfrecords_in_a_bucket_load_in_place_as_the_local_files(tree, s3, tmp_path):
    """TFRecord shards (python3-protobuf's Examples) uploaded by boto3 and
    read in place from the bucket by a brace pattern: the batches of the
    same files on the local disk, in block order through the block cache."""
    from tfrecord_writer import example, write
    items = []
    for c, name in enumerate(sorted(os.listdir(tree))):
        for f in sorted(os.listdir(tree / name)):
            items.append(example({"image/encoded": (tree / name / f).read_bytes(), "image/class/label": c + 1}))
    for k in range(2):
        path = tmp_path / ("train-%05d-of-00002.tfrecord" % k)
        write(path, items[k::2])
        s3.upload_file(str(path), "data", "tfr/" + path.name)
    opts = dict(batch_size=8, size=24, seed=7, order="blocks", block_mb=0.05, window_blocks=2, threads=2)
    _, want = epochs(str(tmp_path / "train-{00000..00001}-of-00002.tfrecord"), **opts)
    loader, got = epochs("s3://data/tfr/train-{00000..00001}-of-00002.tfrecord", **opts)
    assert len(want) == 2 * 12 and same(want, got)
    assert loader.stats()["remote_requests"] > 1


@needs_package
def test_a_mix_of_a_bucket_and_a_local_pack_is_the_mix_of_the_local_files(packed):
    """A mix's datasets may live in a bucket: the batches are those of the
    same records read from local files."""
    local, url = packed
    opts = dict(batch_size=8, size=24, seed=3, threads=2, weights=[0.7, 0.3])
    _, want = epochs([local, local], **opts)
    loader, got = epochs([url, [local]], **opts)
    assert same(want, got) and len(got) == 2 * 23  # 180 samples per epoch in batches of 8
    assert [s["samples"] for s in loader.sources] == [126, 54] and loader.stats()["remote_requests"] > 1


@needs_package
def test_in_ram_is_one_shared_copy_filled_from_the_bucket(packed, s3, tmp_path, monkeypatch):
    local, url = packed
    monkeypatch.setenv("IMAGEPACK_SHM_DIR", str(tmp_path))
    opts = dict(batch_size=8, size=24, seed=2, threads=2, as_torch=False)
    a = imagepack.Loader(url, in_ram=True, **opts)
    b = imagepack.Loader(url, in_ram=True, **opts)
    mine = tmp_path / ("imagepack-%d" % os.geteuid())
    copies = [p for p in os.listdir(mine) if p.endswith(".db")]
    assert len(copies) == 1 and os.path.getsize(mine / copies[0]) == os.path.getsize(local)
    with open(mine / copies[0], "rb") as f:
        assert f.read() == s3.get_object(Bucket="data", Key="train.blob")["Body"].read()
    want = [arrays(x) for x in imagepack.Loader(local, in_ram=True, **opts)]
    assert same(want, [arrays(x) for x in a]) and same(want, [arrays(x) for x in b])
    del a, b
    import gc
    gc.collect()
    assert [p for p in os.listdir(mine) if p.endswith(".db")] == []  # the last holders removed both copies


@needs_package
def test_every_field_kind_and_resume_on_another_world(s3, tmp_path):
    # The format-3 fixture holds every field kind (masks, boxes, pairs, ...).
    blob = os.path.join(DATA, "format3", "fields.blob")
    s3.upload_file(blob, "data", "fields.blob")
    opts = dict(batch_size=4, size=16, seed=3, threads=2, order="blocks", block_mb=0.01, window_blocks=2)
    _, want = epochs(blob, **opts)
    _, got = epochs("s3://data/fields.blob", **opts)
    assert len(want) > 0 and same(want, got)
    # Resume mid-epoch with 2 ranks, continue with 1: the same as from the file.
    def resumed(path):
        a = imagepack.Loader(path, as_torch=False, rank=0, world_size=2, **opts)
        a.set_epoch(1)
        it = iter(a)
        next(it)
        state = a.state_dict()
        rest = imagepack.Loader(path, as_torch=False, rank=0, world_size=1, **opts)
        rest.load_state_dict(state)
        return [arrays(b) for b in rest]
    assert same(resumed(blob), resumed("s3://data/fields.blob"))


def gateway_ctl(gateway, what):
    subprocess.run([GATEWAY, what, str(gateway[0])], check=True, timeout=120)


@needs_package
def test_gateway_stopped_mid_epoch_then_started_the_loader_continues(packed, gateway, monkeypatch):
    local, url = packed
    # Small blocks and a small RAM cache: most batches need a GET.
    monkeypatch.setenv("IMAGEPACK_FETCH_BLOCK_MB", "0.01")
    monkeypatch.setenv("IMAGEPACK_RAM_CACHE_MB", "0.04")
    opts = dict(batch_size=6, size=16, seed=5, threads=2, order="blocks", block_mb=0.02, window_blocks=1,
                prefetch=1)
    _, want = epochs(local, n=1, **opts)
    loader = imagepack.Loader(url, as_torch=False, **opts)
    it = iter(loader)
    got = [arrays(next(it)) for _ in range(3)]
    gateway_ctl(gateway, "stop-rgw")
    restarter = threading.Timer(3.0, gateway_ctl, (gateway, "start-rgw"))
    restarter.start()
    try:
        got.extend(arrays(b) for b in it)
    finally:
        restarter.join()
    assert same(want, got)


def test_tool_gateway_gone_for_good_is_an_error_naming_the_url_not_a_hang(packed, gateway, tmp_path):
    _, url = packed
    env = dict(os.environ, IMAGEPACK_S3_RETRY_SECONDS="3", IMAGEPACK_FETCH_BLOCK_MB="0.01",
               IMAGEPACK_RAM_CACHE_MB="0.04")
    # Enough epochs (every one fetched again: the RAM cache holds 4 blocks)
    # that the run is still reading when the gateway goes.
    proc = subprocess.Popen([tool("bench_loader"), url, "--batch", "6", "--size", "16", "--epochs", "200",
                             "--threads", "2", "--order", "blocks", "--block-mb", "0.02", "--digest"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # The gateway goes once batches come (a --digest line: read from it),
    # not after a fixed sleep a loaded machine outlasts or falls short of.
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    assert ready and proc.stdout.readline().startswith("batch "), proc.poll()
    gateway_ctl(gateway, "stop-rgw")
    try:
        t0 = time.time()
        out, err = proc.communicate(timeout=90)
        assert proc.returncode != 0, out
        assert url in err and ("connection" in err or "HTTP 5" in err), err
        assert "attempts" in err and time.time() - t0 < 60
    finally:
        if proc.poll() is None:
            proc.kill()
        gateway_ctl(gateway, "start-rgw")


def run_tool(*args, env=None):
    return subprocess.run([tool(args[0]), *args[1:]], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})))


def test_tool_credentials_bucket_and_key_errors_name_the_url_and_no_secret(packed, gateway):
    _, env = gateway
    secret = env["AWS_SECRET_ACCESS_KEY"]
    wrong = "wrong-secret-0123456789"
    cases = [
        (["verify_db", "s3://data/train.blob"], {"AWS_SECRET_ACCESS_KEY": wrong}, "SignatureDoesNotMatch"),
        (["verify_db", "s3://data/train.blob"], {"AWS_ACCESS_KEY_ID": "NOSUCHKEY"}, "InvalidAccessKeyId"),
        (["verify_db", "s3://nobucket/train.blob"], {}, "HTTP 404 NoSuchBucket"),
        (["verify_db", "s3://data/missing.blob"], {}, "HTTP 404 NoSuchKey"),
        (["verify_db", "s3://data/x"], {"AWS_ACCESS_KEY_ID": ""}, "AWS_ACCESS_KEY_ID"),
    ]
    for args, extra, code in cases:
        out = run_tool(*args, env=dict(extra, IMAGEPACK_S3_RETRY_SECONDS="2"))
        text = out.stdout + out.stderr
        assert out.returncode != 0, text
        assert args[1] in text and code in text, text
        assert secret not in text and wrong not in text
    # An LMDB is refused with what to do instead.
    lmdb = os.path.join(DATA, "format3", "fields.lmdb")
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1").upload_file(
        lmdb, "data", "fields.lmdb")
    out = run_tool("verify_db", "s3://data/fields.lmdb")
    assert out.returncode != 0 and "--format blob" in out.stdout + out.stderr


@needs_package
def test_an_object_replaced_mid_epoch_is_an_error_naming_it(packed, s3, tree, tmp_path, monkeypatch):
    local, _ = packed
    s3.upload_file(local, "data", "replaced.blob")
    monkeypatch.setenv("IMAGEPACK_FETCH_BLOCK_MB", "0.01")
    monkeypatch.setenv("IMAGEPACK_RAM_CACHE_MB", "0.04")
    loader = imagepack.Loader("s3://data/replaced.blob", batch_size=6, size=16, threads=2, order="blocks",
                              block_mb=0.02, window_blocks=1, prefetch=1, as_torch=False)
    it = iter(loader)
    next(it)
    other = tmp_path / "other.blob"
    subprocess.run([tool("pack_lmdb"), str(tree), str(other), "-q", "--shuffle", "9", "--format", "blob"],
                   check=True)
    s3.upload_file(str(other), "data", "replaced.blob")
    with pytest.raises(Exception) as e:
        for _ in it:
            pass
    assert "s3://data/replaced.blob changed since it was opened" in str(e.value)


def block_files(cache):
    return [os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs if f[0] == "b" and f[1:].isdigit()]


def cached_block(path):
    """A cache file's block, after checking its XXH3-64 trailer."""
    import xxhash
    with open(path, "rb") as f:
        body = f.read()
    assert int.from_bytes(body[-8:], "little") == xxhash.xxh3_64_intdigest(body[:-8]), path
    return body[:-8]


@needs_package
def test_cache_second_epoch_makes_no_request_even_with_the_gateway_down(packed, gateway, tmp_path, monkeypatch):
    local, url = packed
    monkeypatch.setenv("IMAGEPACK_FETCH_BLOCK_MB", "0.01")
    monkeypatch.setenv("IMAGEPACK_RAM_CACHE_MB", "0.04")  # far smaller than the data: epoch 2 reads the disk
    opts = dict(batch_size=8, size=16, seed=1, threads=2, order="blocks", block_mb=0.02, window_blocks=2)
    _, want = epochs(local, **opts)
    loader = imagepack.Loader(url, as_torch=False, cache_dir=str(tmp_path / "cache"), **opts)
    got = [arrays(b) for b in loader]
    first = loader.stats()
    size = os.path.getsize(local)
    assert first["remote_bytes"] <= size * 1.05
    gateway_ctl(gateway, "stop-rgw")
    try:
        loader.set_epoch(1)
        got.extend(arrays(b) for b in loader)
        assert loader.stats()["remote_requests"] == first["remote_requests"]
    finally:
        gateway_ctl(gateway, "start-rgw")
    assert same(want, got)
    # Each cached block is exactly the object's bytes.
    with open(local, "rb") as f:
        data = f.read()
    files = block_files(tmp_path / "cache")
    assert files
    step = int(0.01 * (1 << 20))
    for p in files:
        b = int(os.path.basename(p)[1:])
        body = cached_block(p)
        assert len(body) > 0 and body == data[b * step:b * step + len(body)]
    # A cached block damaged in place (same size) is not served: it is
    # fetched again, and the next epoch's batches are still the file's.
    victim = sorted(files)[len(files) // 2]
    with open(victim, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    again = imagepack.Loader(url, as_torch=False, cache_dir=str(tmp_path / "cache"), **opts)
    again.set_epoch(1)
    assert same(want[len(want) // 2:], [arrays(b) for b in again])
    b = int(os.path.basename(victim)[1:])
    assert cached_block(victim) == data[b * step:b * step + len(cached_block(victim))]


def test_tool_a_fully_cached_object_trains_in_a_new_process_while_the_gateway_is_down(packed, gateway, s3, tmp_path):
    """A run caches every block of the object and pins its ETag; the
    gateway goes; a new process (whose HEAD cannot pin anything) starts
    from the cache, says which ETag it trusts, and gives the same batches.
    With one block gone from the cache it cannot, and says which."""
    local, url = packed
    cache = tmp_path / "cache"
    env = dict(os.environ, IMAGEPACK_CACHE_DIR=str(cache), IMAGEPACK_FETCH_BLOCK_MB="0.01",
               IMAGEPACK_S3_RETRY_SECONDS="2")
    cmd = [tool("bench_loader"), url, "--batch", "10", "--size", "16", "--threads", "2", "--digest"]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    etag = s3.head_object(Bucket="data", Key="train.blob")["ETag"]
    gateway_ctl(gateway, "stop-rgw")
    try:
        t0 = time.time()
        again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert again.returncode == 0, again.stderr
        batches = lambda out: [l for l in out.splitlines() if l.startswith("batch ")]  # noqa: E731
        assert batches(again.stdout) == batches(first.stdout) and len(batches(first.stdout)) == 9
        assert "warning" in again.stderr and "ETag " + etag in again.stderr and url in again.stderr, again.stderr
        assert time.time() - t0 < 30
        blocks = sorted((p for p in cache.rglob("b*") if p.name[1:].isdigit()), key=lambda p: int(p.name[1:]))
        blocks[-1].unlink()
        partial = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert partial.returncode != 0
        assert "holds %d of the %d blocks of ETag %s" % (len(blocks) - 1, len(blocks), etag) in partial.stderr
        assert "missing blocks of 10485 bytes: %d)" % (len(blocks) - 1) in partial.stderr, partial.stderr
    finally:
        gateway_ctl(gateway, "start-rgw")


def test_tool_two_processes_download_each_block_once_and_the_limit_holds(packed, tmp_path):
    local, url = packed
    cache = tmp_path / "cache"
    env = dict(os.environ, IMAGEPACK_FETCH_BLOCK_MB="0.01", IMAGEPACK_RAM_CACHE_MB="64",
               IMAGEPACK_CACHE_DIR=str(cache))
    cmd = [tool("bench_loader"), url, "--batch", "10", "--size", "16", "--epochs", "1", "--threads", "1",
           "--order", "sequential"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    fetched = sum(float(o.split("from the network ")[1].split(" MB")[0]) for o in outs)
    assert fetched * 1e6 <= os.path.getsize(local) * 1.15, outs
    # A limit far below the data: the cache never holds more than it.
    limited = tmp_path / "limited"
    env2 = dict(env, IMAGEPACK_CACHE_DIR=str(limited), IMAGEPACK_CACHE_LIMIT_MB="0.05")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env2, timeout=120)
    assert out.returncode == 0, out.stderr
    held = sum(os.path.getsize(p) - 8 for p in block_files(limited))
    assert 0 < held <= 0.05 * (1 << 20)


def test_tool_a_process_killed_while_caching_leaves_no_torn_block(packed, tmp_path):
    local, url = packed
    cache = tmp_path / "cache"
    env = dict(os.environ, IMAGEPACK_FETCH_BLOCK_MB="0.004", IMAGEPACK_RAM_CACHE_MB="0.02",
               IMAGEPACK_CACHE_DIR=str(cache))
    cmd = [tool("bench_loader"), url, "--batch", "4", "--size", "16", "--epochs", "20", "--threads", "2",
           "--order", "blocks", "--block-mb", "0.01"]
    with open(local, "rb") as f:
        data = f.read()
    step = int(0.004 * (1 << 20))
    for blocks in (1, 3, 6):
        # Killed once it has cached that many more blocks (it goes on
        # fetching and writing others), whatever the machine's load.
        before = len(block_files(cache))
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + 120
        while len(block_files(cache)) < before + blocks and p.poll() is None and time.time() < deadline:
            time.sleep(0.002)
        p.send_signal(signal.SIGKILL)
        p.wait()
        files = block_files(cache)
        last = max([int(os.path.basename(f)[1:]) for f in files], default=0)
        for f in files:
            b = int(os.path.basename(f)[1:])
            body = cached_block(f)
            assert body == data[b * step:b * step + len(body)] and (len(body) == step or b == last), f
    # And a run after the kills reads every record right.
    out = subprocess.run([tool("verify_db"), url], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr


def test_tool_pack_killed_mid_upload_leaves_no_object_and_no_dangling_upload(tmp_path, s3):
    from PIL import Image
    src = tmp_path / "big"
    rng = np.random.default_rng(0)
    for c in range(2):
        os.makedirs(src / ("c%d" % c))
        for i in range(40):
            Image.fromarray(rng.integers(0, 255, (600, 800, 3), dtype=np.uint8)).save(
                src / ("c%d" % c) / ("%d.jpg" % i), quality=97)
    url = "s3://data/big.blob"
    staging = tmp_path / "staging"
    staging.mkdir()
    env = dict(os.environ, IMAGEPACK_S3_PART_MB="5", IMAGEPACK_STAGING_DIR=str(staging))
    killed = False
    for attempt in range(5):
        p = subprocess.Popen([tool("pack_lmdb"), str(src), url, "-q", "--overwrite"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while time.time() < deadline and p.poll() is None:
            ups = s3.list_multipart_uploads(Bucket="data", Prefix="big.blob").get("Uploads", [])
            if ups:
                p.send_signal(signal.SIGKILL)
                killed = True
                break
            time.sleep(0.01)
        p.wait()
        if killed:
            break
        s3.delete_object(Bucket="data", Key="big.blob")
    assert killed, "pack_lmdb finished its upload before it could be killed"
    with pytest.raises(s3.exceptions.ClientError):
        s3.head_object(Bucket="data", Key="big.blob")
    assert s3.list_multipart_uploads(Bucket="data", Prefix="big.blob").get("Uploads")
    out = subprocess.run([tool("pack_lmdb"), str(src), url, "-q"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert not s3.list_multipart_uploads(Bucket="data", Prefix="big.blob").get("Uploads")
    assert os.listdir(staging) == []  # the killed run's staging folder went too
    assert s3.head_object(Bucket="data", Key="big.blob")["ContentLength"] > 0
    assert run_tool("verify_db", url).returncode == 0


def test_tool_export_to_a_bucket_and_import_from_it_round_trip(packed, s3, tmp_path):
    import tarfile
    local, url = packed
    out = run_tool("export_db", url, "s3://data/wds/train", "--records-per-shard", "40")
    assert out.returncode == 0, out.stderr
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="data", Prefix="wds/train/")["Contents"])
    shards = [k for k in keys if k.endswith(".tar")]
    assert len(shards) == 3 and "wds/train/meta.json" in keys, keys
    # The shards as any tar reader sees them: every record's image, in order.
    members = []
    for k in shards:
        body = s3.get_object(Bucket="data", Key=k)["Body"].read()
        (tmp_path / "s.tar").write_bytes(body)
        with tarfile.open(tmp_path / "s.tar") as t:
            members += [m.name for m in t.getmembers() if m.name.endswith((".jpg", ".jpeg"))]
    assert len(members) == 90
    # Back from the bucket with a brace pattern: the same records as the source.
    pattern = "s3://data/wds/train/%s-{%s..%s}.tar" % (shards[0].split("/")[-1].rsplit("-", 1)[0],
                                                         shards[0].rsplit("-", 1)[1][:-4],
                                                         shards[-1].rsplit("-", 1)[1][:-4])
    staging = tmp_path / "staging"
    staging.mkdir()
    back = tmp_path / "back.blob"
    out = run_tool("pack_lmdb", pattern, str(back), "-q", "--format", "blob", env={"IMAGEPACK_STAGING_DIR": str(staging)})
    assert out.returncode == 0, out.stderr
    assert os.listdir(staging) == []  # the downloaded shards are gone
    # Record by record, read by the dependency-free reader: same images, same labels.
    import sys
    sys.path.insert(0, SCRIPTS)
    import read_db

    def records(path):
        db = read_db.open_db(path)
        return [read_db.read_record(db, i) for i in range(db.meta["count"])]
    want, got = records(local), records(str(back))
    assert len(got) == 90
    key = lambda r: (r["label"], r["payload"])  # noqa: E731
    assert sorted(map(key, want)) == sorted(map(key, got))


def test_tool_virtual_hosted_addressing_packs_and_reads_the_same_object(packed, gateway, tree, s3):
    """IMAGEPACK_S3_ADDRESSING=virtual: requests go to BUCKET.localhost (the
    gateway's DNS name is localhost), so the gateway finds the bucket in the
    Host header; were the bucket left out of it, the key would be read as a
    bucket name and every request would fail with NoSuchBucket."""
    _, env = gateway
    port = env["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]
    virtual = {"AWS_ENDPOINT_URL": "http://localhost:" + port, "IMAGEPACK_S3_ADDRESSING": "virtual"}
    out = run_tool("pack_lmdb", str(tree), "s3://data/virtual.blob", "-q", "--shuffle", "1", env=virtual)
    assert out.returncode == 0, out.stdout + out.stderr
    out = run_tool("verify_db", "s3://data/virtual.blob", env=virtual)
    assert out.returncode == 0 and "OK" in out.stdout, out.stdout + out.stderr
    # The object, read path-style by boto3, holds the same records as the
    # path-style pack (pack_lmdb stamps each pack's creation time in its
    # metadata, so the records are compared, not the files).
    got = s3.get_object(Bucket="data", Key="virtual.blob")["Body"].read()
    want = s3.get_object(Bucket="data", Key="train.blob")["Body"].read()
    assert len(got) == len(want) and got[:16] == want[:16]
    index = struct.unpack_from("<Q", want, 24)[0]
    assert got[64:index] == want[64:index]
    # A bucket that is not there is named as such (the Host header carries it).
    out = run_tool("verify_db", "s3://nosuchbucket/virtual.blob", env=virtual)
    assert out.returncode != 0 and "NoSuchBucket" in out.stdout + out.stderr, out.stdout + out.stderr
