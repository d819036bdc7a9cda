"""Datasets read in place over HTTPS (and plain HTTP) from Debian's nginx,
started here on 127.0.0.1 with a certificate of a test CA made here with
openssl: packs load, verify and convert, WebDataset shards import, all
byte-identical to the local files, through the block cache with the file
pinned by its ETag; a certificate that does not verify is refused by name,
a file changed on the server mid-run is named, and a fully cached file
opens while the server is gone (docs/OBJECT_STORAGE.md, "HTTPS").

Tests whose name holds "tool" use the command-line tools only; they also
run under the sanitizers (tests/CMakeLists.txt)."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import SCRIPTS, node_modules, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402  (independent reader)

try:
    import imagepack
except ImportError:  # the sanitizer builds have no Python package: tool tests only
    imagepack = None

needs_package = pytest.mark.skipif(imagepack is None, reason="the Python package is not built here")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(folder, name):
    key, pem = str(folder / (name + ".key")), str(folder / (name + ".pem"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", pem, "-days", "2",
            "-subj", "/CN=imagepack %s" % name)
    return key, pem


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx in one process (master_process off), its config, logs and
    temporary paths in `folder`, serving `folder/www` with TLS on one port
    and in plain HTTP on another; keep-alive and ranges are nginx's own."""

    def __init__(self, folder):
        self.folder = folder
        self.www = folder / "www"
        self.www.mkdir()
        (folder / "tmp").mkdir()
        ca_key, self.ca = make_ca(folder, "test-ca")
        _, self.wrong_ca = make_ca(folder, "other-ca")
        key, csr, cert = (str(folder / n) for n in ("server.key", "server.csr", "server.pem"))
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
        (folder / "san.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
                "-days", "2", "-extfile", str(folder / "san.cnf"))
        self.port, self.http_port = free_port(), free_port()
        self.https = "https://127.0.0.1:%d" % self.port
        self.http = "http://127.0.0.1:%d" % self.http_port
        self.log = folder / "access.log"
        temps = "".join("  %s_temp_path %s/tmp;\n" % (t, folder) for t in ("client_body", "proxy", "fastcgi",
                                                                             "uwsgi", "scgi"))
        (folder / "nginx.conf").write_text(
            "master_process off;\ndaemon off;\npid %(f)s/nginx.pid;\nerror_log %(f)s/error.log;\n"
            "events { worker_connections 256; }\n"
            "http {\n"
            "  log_format ipk '$connection $connection_requests $status $request_method \"$http_range\"';\n"
            "  access_log %(f)s/access.log ipk;\n%(temps)s"
            "  keepalive_requests 100000;\n"
            "  server { listen 127.0.0.1:%(port)d ssl; ssl_certificate %(f)s/server.pem;\n"
            "           ssl_certificate_key %(f)s/server.key; root %(f)s/www; }\n"
            "  server { listen 127.0.0.1:%(http)d; root %(f)s/www; }\n"
            "}\n" % dict(f=folder, temps=temps, port=self.port, http=self.http_port))
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([NGINX, "-c", str(self.folder / "nginx.conf"), "-p", str(self.folder)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("nginx did not start: %s" % (self.folder / "error.log").read_text())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(NGINX):
        pytest.fail("nginx is not installed (scripts/setup.sh installs it)")
    s = Nginx(tmp_path_factory.mktemp("nginx"))
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def served(server, tree):
    """The test tree packed to a blob and exported as plain and gzipped
    WebDataset shards, all under the server's root."""
    www = server.www
    subprocess.run([tool("pack_lmdb"), str(tree), str(www / "train.blob"), "-q", "--shuffle", "1", "--format",
                    "blob"], check=True)
    for name, extra in (("wds", []), ("wdsgz", ["--gzip"])):
        subprocess.run([tool("export_db"), str(www / "train.blob"), str(www / name), "--records-per-shard", "40", "-q",
                        *extra], check=True)
    return server


def env_for(server, **extra):
    """The environment with the test CA as SSL_CERT_FILE and no other CA
    variable (CI machines set CURL_CA_BUNDLE and SSL_CERT_DIR to the
    system's)."""
    env = dict(os.environ, SSL_CERT_FILE=server.ca, CURL_CA_BUNDLE="", SSL_CERT_DIR="",
               IMAGEPACK_S3_RETRY_SECONDS="3")
    env.update(extra)
    return env


def run_tool(server, *args, **env):
    return subprocess.run([tool(args[0]), *args[1:]], capture_output=True, text=True, timeout=120,
                          env=env_for(server, **env))


def records(path):
    db = read_db.open_db(path)
    return [db.raw(i) for i in range(db.meta["count"])]


def packed_remote_and_local(server, tmp_path, name, path):
    """{"remote": records, "local": records}: pack_lmdb of PATH (a file or a
    brace pattern under the served folder) over HTTPS and from the local
    folder, each into a blob named after NAME."""
    back = {}
    for where, root in (("remote", server.https), ("local", str(server.www))):
        dst = tmp_path / ("%s-%s.blob" % (name, where))
        out = run_tool(server, "pack_lmdb", root + path, str(dst), "-q", "--format", "blob")
        assert out.returncode == 0, out.stderr
        back[where] = records(str(dst))
    return back


def digests(server, url, *args, **env):
    out = run_tool(server, "bench_loader", url, "--batch", "8", "--size", "24", "--threads", "2", "--digest",
                   "--order", "blocks", "--block-mb", "0.02", *args, **env)
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if l.startswith("batch ")]
    assert lines, out.stdout
    return lines


def test_tool_a_pack_over_https_loads_verifies_and_converts_as_the_local_file(served, tmp_path):
    s = served
    local, url = str(s.www / "train.blob"), s.https + "/train.blob"
    out = run_tool(s, "verify_db", url, "--decode")
    assert out.returncode == 0 and "OK: 90 of 90 records checked" in out.stdout, out.stdout + out.stderr
    # The loader's batches, digest by digest, through the block cache.
    assert digests(s, url, IMAGEPACK_FETCH_BLOCK_MB="0.01") == digests(s, local)
    # Converted to a local blob: every record's bytes as from the local file.
    for src, dst in ((url, tmp_path / "remote.blob"), (local, tmp_path / "local.blob")):
        out = run_tool(s, "pack_lmdb", src, str(dst), "-q", "--format", "blob")
        assert out.returncode == 0, out.stderr
    assert records(str(tmp_path / "remote.blob")) == records(local) == records(str(tmp_path / "local.blob"))
    # Plain HTTP: the same bytes, no TLS.
    out = run_tool(s, "verify_db", s.http + "/train.blob")
    assert out.returncode == 0, out.stderr


def test_tool_webdataset_shards_over_https_import_as_the_local_shards(served, tmp_path):
    s = served
    for folder in ("wds", "wdsgz"):
        names = sorted(os.listdir(s.www / folder))
        shards = [n for n in names if n.endswith((".tar", ".tar.gz"))]
        assert len(shards) == 3 and "meta.json" in names, names
        ext = shards[0][len("shard-000000"):]
        pattern = "/%s/shard-{000000..000002}%s" % (folder, ext)
        back = packed_remote_and_local(s, tmp_path, folder, pattern)
        assert len(back["remote"]) == 90 and back["remote"] == back["local"]
        # The round trip gives back the packed records, in their order.
        assert back["remote"] == records(str(s.www / "train.blob"))


def test_tool_tfrecords_over_https_import_as_the_local_files(served, tree, tmp_path):
    """TFRecords served over HTTPS (tests/python/tfrecord_writer.py's:
    python3-protobuf Examples): Inception's names without an extension,
    found by their first record's header in one ranged read, and TFDS's
    (.tfrecord in the name) gzipped; each pack is the local files' pack."""
    from tfrecord_writer import example, write
    s = served
    items = []
    for c, name in enumerate(sorted(os.listdir(tree))):
        for f in sorted(os.listdir(tree / name)):
            items.append(example({"image/encoded": (tree / name / f).read_bytes(), "image/class/label": c + 1,
                                  "image/class/synset": name.encode(), "image/filename": (name + "/" + f).encode()}))
    for folder, names, gz in (("tf", "train-%05d-of-00002", False), ("tfds", "x.tfrecord-%05d-of-00002", True)):
        os.makedirs(s.www / folder, exist_ok=True)
        for k in range(2):
            write(s.www / folder / (names % k), items[k::2], compress=gz)
        pattern = "/%s/%s" % (folder, names.replace("%05d", "{00000..00001}"))
        back = packed_remote_and_local(s, tmp_path, folder, pattern)
        assert len(back["remote"]) == 90 and back["remote"] == back["local"]


def test_tool_parquet_over_https_imports_as_the_local_file(served, tree, tmp_path):
    """A Hugging Face parquet file (parquet-wasm's, arrow-rs: see
    test_parquet.py; conftest.node_modules finds the npm packages) served over
    HTTPS packs as the local file does."""
    from test_parquet import HF, PARQUET_WASM
    s = served
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in sorted(os.listdir(tree)):
        for f in sorted(os.listdir(tree / name)):
            (flat / ("%s_%s" % (name, f))).write_bytes((tree / name / f).read_bytes())
    (tmp_path / "pw.mjs").write_text(PARQUET_WASM)
    os.symlink(node_modules(), tmp_path / "node_modules")
    os.makedirs(s.www / "hf", exist_ok=True)
    r = subprocess.run(["node", str(tmp_path / "pw.mjs"), str(flat), str(s.www / "hf" / "train-00000-of-00001.parquet"),
                        "ZSTD", "V2", HF], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    back = packed_remote_and_local(s, tmp_path, "hf", "/hf/train-00000-of-00001.parquet")
    assert len(back["remote"]) == 90 and back["remote"] == back["local"]


def test_tool_tfrecords_and_parquet_read_in_place_over_https_as_the_local_files(served, tree, tmp_path):
    """The loader reads TFRecords (python3-protobuf's, by a brace pattern)
    and a parquet file (parquet-wasm's) where the server holds them, no
    pack: every batch (block order, through the block cache) is the one
    read from the same files on the local disk."""
    from test_parquet import HF, PARQUET_WASM
    from tfrecord_writer import example, write
    s = served
    os.makedirs(s.www / "inplace", exist_ok=True)
    items, flat = [], tmp_path / "flat"
    flat.mkdir()
    for c, name in enumerate(sorted(os.listdir(tree))):
        for f in sorted(os.listdir(tree / name)):
            data = (tree / name / f).read_bytes()
            items.append(example({"image/encoded": data, "image/class/label": c + 1}))
            (flat / ("%s_%s" % (name, f))).write_bytes(data)
    for k in range(2):
        write(s.www / "inplace" / ("train-%05d-of-00002" % k), items[k::2])
    (tmp_path / "pw.mjs").write_text(PARQUET_WASM)
    os.symlink(node_modules(), tmp_path / "node_modules")
    r = subprocess.run(["node", str(tmp_path / "pw.mjs"), str(flat), str(s.www / "inplace" / "train.parquet"),
                        "SNAPPY", "V1", HF], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for name in ("train-{00000..00001}-of-00002", "train.parquet"):
        local = digests(s, str(s.www / "inplace" / name))
        assert len(local) == 12  # 90 records in batches of 8
        assert digests(s, s.https + "/inplace/" + name, "--cache-dir", str(tmp_path / "cache")) == local, name


def test_tool_a_certificate_that_does_not_verify_is_refused_by_name(served):
    s = served
    url = s.https + "/train.blob"
    for ca, named in ((s.wrong_ca, "CA file " + s.wrong_ca), ("", "the system's CA bundle")):
        t0 = time.time()
        # A generous retry budget: a refused certificate is not retried.
        out = run_tool(s, "verify_db", url, SSL_CERT_FILE=ca, IMAGEPACK_S3_RETRY_SECONDS="60")
        text = out.stdout + out.stderr
        assert out.returncode != 0, text
        assert "TLS certificate of %s does not verify against %s" % (s.https, named) in text, text
        assert url in text and time.time() - t0 < 20, text
    # CURL_CA_BUNDLE names the CA as well, before SSL_CERT_FILE.
    out = run_tool(s, "verify_db", url, SSL_CERT_FILE=s.wrong_ca, CURL_CA_BUNDLE=s.ca)
    assert out.returncode == 0, out.stderr
    # And the option, where no variable says anything.
    env = {"SSL_CERT_FILE": ""}
    out = run_tool(s, "bench_loader", url, "--batches", "2", "--batch", "8", "--size", "16", "--ca-file", s.ca, **env)
    assert out.returncode == 0, out.stderr


def test_tool_ranges_are_read_on_kept_alive_connections(served):
    s = served
    before = s.log.read_text().count("\n")
    out = run_tool(s, "bench_loader", s.https + "/train.blob", "--batch", "8", "--size", "16", "--threads", "2",
                   IMAGEPACK_FETCH_BLOCK_MB="0.01", IMAGEPACK_RAM_CACHE_MB="0.05")
    assert out.returncode == 0, out.stderr
    lines = [l.split() for l in s.log.read_text().splitlines()[before:]]
    gets = [l for l in lines if l[3] == "GET"]
    assert len(gets) > 10
    assert all(l[2] == "206" and l[4].startswith('"bytes=') for l in gets), gets[:5]
    # Many requests per connection: libcurl's pool keeps them open.
    assert max(int(l[1]) for l in lines) > 5


@needs_package
def test_loader_and_random_access_over_https_are_the_local_file(served, tmp_path, monkeypatch):
    s = served
    for var in ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "SSL_CERT_DIR"):  # the CA comes from the option alone
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("IMAGEPACK_FETCH_BLOCK_MB", "0.01")
    local, url = str(s.www / "train.blob"), s.https + "/train.blob"
    opts = dict(batch_size=8, size=24, seed=7, threads=2, order="blocks", block_mb=0.02, window_blocks=2,
                as_torch=False)
    want = [[np.array(x) for x in b] for b in imagepack.Loader(local, **opts)]
    loader = imagepack.Loader(url, ca_file=s.ca, **opts)
    got = [[np.array(x) for x in b] for b in loader]
    assert len(got) == len(want) and all(all(np.array_equal(p, q) for p, q in zip(a, b)) for a, b in zip(got, want))
    assert loader.stats()["remote_requests"] > 1
    # In RAM: one shared copy, the local file byte for byte.
    monkeypatch.setenv("IMAGEPACK_SHM_DIR", str(tmp_path))
    ram = imagepack.Loader(url, in_ram=True, ca_file=s.ca, **opts)
    mine = tmp_path / ("imagepack-%d" % os.geteuid())
    copies = [p for p in os.listdir(mine) if p.endswith(".db")]
    assert len(copies) == 1
    assert (mine / copies[0]).read_bytes() == open(local, "rb").read()
    del ram


@needs_package
def test_a_file_changed_on_the_server_mid_run_is_named(served, tree, tmp_path, monkeypatch):
    s = served
    shutil.copy(s.www / "train.blob", s.www / "changed.blob")
    monkeypatch.setenv("SSL_CERT_FILE", s.ca)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("IMAGEPACK_FETCH_BLOCK_MB", "0.01")
    monkeypatch.setenv("IMAGEPACK_RAM_CACHE_MB", "0.04")
    url = s.https + "/changed.blob"
    loader = imagepack.Loader(url, batch_size=6, size=16, threads=2, order="blocks", block_mb=0.02, window_blocks=1,
                              prefetch=1, as_torch=False)
    it = iter(loader)
    next(it)
    other = tmp_path / "other.blob"
    subprocess.run([tool("pack_lmdb"), str(tree), str(other), "-q", "--shuffle", "9", "--format", "blob"], check=True)
    # A new file under the name. nginx's ETag is the file's modification
    # time in seconds and its size: a file replaced within the same second
    # by one of the same size keeps its ETag, so the new one is made a
    # minute younger.
    st = os.stat(s.www / "changed.blob")
    os.utime(other, ns=(st.st_atime_ns, st.st_mtime_ns + 60 * 10**9))
    os.replace(other, s.www / "changed.blob")
    with pytest.raises(Exception) as e:
        for _ in it:
            pass
    assert url + " changed since it was opened" in str(e.value)


def test_tool_a_fully_cached_file_opens_while_the_server_is_gone(served, tmp_path):
    s = served
    url = s.https + "/train.blob"
    cache = tmp_path / "cache"
    env = dict(IMAGEPACK_CACHE_DIR=str(cache), IMAGEPACK_FETCH_BLOCK_MB="0.01", IMAGEPACK_S3_RETRY_SECONDS="2")
    out = run_tool(s, "verify_db", url, **env)  # every block read once: the whole file cached, its ETag pinned
    assert out.returncode == 0, out.stderr
    etag = subprocess.run(["curl", "-sSI", "--cacert", s.ca, url], capture_output=True, text=True).stdout
    etag = [l.split(":", 1)[1].strip() for l in etag.splitlines() if l.lower().startswith("etag:")][0]
    s.stop()
    try:
        out = run_tool(s, "verify_db", url, **env)
        assert out.returncode == 0 and "OK: 90 of 90" in out.stdout, out.stdout + out.stderr
        assert "warning" in out.stderr and "ETag " + etag in out.stderr and str(cache) in out.stderr, out.stderr
        # One block gone: the cache cannot stand in, and says what it lacks.
        blocks = sorted((p for p in cache.rglob("b*") if p.name[1:].isdigit()), key=lambda p: int(p.name[1:]))
        assert len(blocks) > 3
        blocks[2].unlink()
        out = run_tool(s, "verify_db", url, **env)
        text = out.stdout + out.stderr
        assert out.returncode != 0, text
        assert "holds %d of the %d blocks of ETag %s" % (len(blocks) - 1, len(blocks), etag) in text, text
        assert "missing blocks of 10485 bytes: 2)" in text, text
    finally:
        s.start()
