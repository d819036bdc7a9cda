"""hf://datasets/ORG/NAME[@REVISION]/PATH against a Hub emulator
(tests/python/hub_emulator.py: the Hub's API behind nginx with TLS, large
files redirected to a second host serving ranges), which the Hub's own
JavaScript client (npm @huggingface/hub) checks first: it lists the same
files and downloads the same bytes from it. Then the tools and the
Python package read the repository of tests/python/test_hub_layout.py
(DuckDB-written train and test parquet shards in data/) through hf://:
the same records as the local files, the same batches read in place, one
commit per run, a cached dataset offline, every refusal named, and the
token in no output and on no host but the Hub's.

Tests whose name holds "tool" use the command-line tools only."""
import hashlib
import json
import os
import subprocess
import urllib.parse

import pytest

from conftest import node_modules, run, tool
from hub_emulator import TOKEN, Hub, Repo, env_for
from test_hub_layout import hub as layout, md5_records  # noqa: F401 (fixture)
from test_parquet import duckdb, jpegs  # noqa: F401 (fixtures)

try:
    import imagepack
except ImportError:  # the sanitizer builds have no Python package: tool tests only
    imagepack = None

needs_package = pytest.mark.skipif(imagepack is None, reason="the Python package is not built here")


@pytest.fixture(scope="module")
def hub(tmp_path_factory, layout):  # noqa: F811
    """The emulator with org/shards (the layout's repository: README.md,
    .gitattributes, data/ of train and test shards), org/private (the
    same, private), org/gated (gated) and org/converted (a dataset stored
    otherwise, its parquet under refs/convert/parquet)."""
    d, rows = layout
    files = {"README.md": (d / "README.md").read_bytes(), ".gitattributes": (d / ".gitattributes").read_bytes()}
    for p in sorted(d.glob("*.parquet")):
        files["data/" + p.name] = p.read_bytes()
    h = Hub(tmp_path_factory.mktemp("hub"))
    try:
        shards = Repo("org/shards")
        shards.commit(files)
        h.add(shards)
        for name, kw in (("org/private", dict(private=True)), ("org/gated", dict(gated=True))):
            r = Repo(name, **kw)
            r.commit(files)
            h.add(r)
        conv = Repo("org/converted")
        conv.commit({"README.md": files["README.md"], "images/a.txt": b"stored otherwise"})
        conv.commit({"default/train/0000.parquet": files["data/train-00000-of-00002.parquet"],
                     "default/train/0001.parquet": files["data/train-00001-of-00002.parquet"],
                     "default/test/0000.parquet": files["data/test-00000-of-00001.parquet"]},
                    branch="refs/convert/parquet")
        h.add(conv)
        h.local = d
        h.rows = rows
        h.files = files
        yield h
    finally:
        h.stop()


def node(hub, script, **env):
    r = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=120,
                       env=env_for(hub, NODE_PATH=node_modules(), **env), cwd=node_modules())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_the_hubs_own_client_reads_the_emulator(hub):
    """@huggingface/hub lists the repository (recursively, over pages of
    two) and downloads every file through the redirect: the emulator's
    files, byte for byte. The private repository needs the token."""
    script = """
import { listFiles, downloadFile } from "@huggingface/hub";
import { createHash } from "node:crypto";
const hubUrl = process.env.HF_ENDPOINT;
const repo = { type: "dataset", name: process.argv[1] || "org/shards" };
const accessToken = process.env.JS_TOKEN || undefined;
const out = {};
for await (const f of listFiles({ repo, recursive: true, hubUrl, accessToken })) {
  if (f.type !== "file") continue;
  const blob = await downloadFile({ repo, path: f.path, hubUrl, accessToken });
  const bytes = Buffer.from(await blob.arrayBuffer());
  out[f.path] = [bytes.length, createHash("sha256").update(bytes).digest("hex"), f.lfs ? f.lfs.size : f.size];
}
console.log(JSON.stringify(out));
"""
    got = node(hub, script)
    want = {p: [len(b), hashlib.sha256(b).hexdigest(), len(b)] for p, b in hub.files.items()}
    assert got == want
    # Pages of two: the listing of five files and a folder took several requests.
    assert sum(1 for m, p, _ in hub.requests if "/tree/" in p) >= 3
    priv = node(hub, script.replace('"org/shards"', '"org/private"'), JS_TOKEN=TOKEN)
    assert priv == want


def hf(*parts):
    return "hf://datasets/" + "/".join(parts)


def test_tool_pack_and_verify_from_the_hub(hub, tmp_path):
    """pack_lmdb hf://.../data/train-* gives the records of the local
    files; verify_db --against hf:// passes; the repository's root with
    --split is its data/ folder; the token, sent to the Hub's host, never
    reaches the CDN's nor any output."""
    env = env_for(hub, HF_TOKEN=TOKEN, IMAGEPACK_CACHE_DIR=tmp_path / "cache")
    db = tmp_path / "train.lmdb"
    r = run(tool("pack_lmdb"), hf("org", "private", "data", "train-*"), db, "-q", env=env)
    assert TOKEN not in r.stdout + r.stderr
    assert md5_records(db) == sorted(hub.rows["train"])
    r = run(tool("verify_db"), db, "--against", hf("org", "private", "data", "train-*.parquet"), env=env)
    assert TOKEN not in r.stdout + r.stderr
    db2 = tmp_path / "test.lmdb"
    run(tool("pack_lmdb"), hf("org", "shards"), db2, "--split", "test", "-q", env=env)
    assert md5_records(db2) == sorted(hub.rows["test"])
    r = run(tool("pack_lmdb"), hf("org", "shards"), tmp_path / "x.lmdb", "-q", env=env, ok=False)
    assert r.returncode != 0 and "holds several splits: test (1 file), train (2 files)" in r.stderr, r.stderr
    # The converted parquet of a dataset stored otherwise, as its revision.
    db3 = tmp_path / "conv.lmdb"
    run(tool("pack_lmdb"), "hf://datasets/org/converted@refs%2Fconvert%2Fparquet", db3, "--split", "train", "-q",
        env=env)
    assert md5_records(db3) == sorted(hub.rows["train"])
    run(tool("verify_db"), db3, "--against", "hf://datasets/org/converted@refs/convert/parquet/default/train",
        env=env)
    log = hub.cdn_log()
    assert "GET /blobs/" in log and "auth=[-]" in log and "Bearer" not in log, log[-2000:]
    assert any(a == "Bearer " + TOKEN for _, _, a in hub.requests)


@pytest.mark.parametrize("case", ["no-repo", "no-revision", "no-file", "private", "bad-token", "gated"])
def test_tool_refusals_are_named(hub, tmp_path, case):
    url, token, says = {
        "no-repo": (hf("org", "nothing", "data"), None, "no dataset org/nothing at " + hub.url),
        "no-revision": ("hf://datasets/org/shards@v9/data", None, "org/shards has no revision 'v9'"),
        "no-file": (hf("org", "shards", "data", "train-00009-of-00002.parquet"), None,
                    "no file or folder 'data/train-00009-of-00002.parquet' in org/shards"),
        "private": (hf("org", "private", "data"), None, "no token was sent: set HF_TOKEN"),
        "bad-token": (hf("org", "private", "data"), "hf_wrongtoken", "the token from HF_TOKEN was sent"),
        "gated": (hf("org", "gated", "data"), None, "org/gated is gated: accept its conditions at " +
                  hub.url + "/datasets/org/gated"),
    }[case]
    env = env_for(hub, **({"HF_TOKEN": token} if token else {}))
    r = run(tool("pack_lmdb"), url, tmp_path / "x.lmdb", "--split", "train", "-q", env=env, ok=False)
    assert r.returncode != 0 and says in r.stderr, r.stderr
    assert "hf_wrongtoken" not in r.stderr + r.stdout
    assert not (tmp_path / "x.lmdb").exists()


def test_tool_busy_and_failing_hub(hub, tmp_path):
    """429 with Retry-After is waited for, then the pack goes on; a 500
    that lasts past the retry budget is a named failure."""
    env = env_for(hub, IMAGEPACK_S3_RETRY_SECONDS=6)
    hub.fail["/revision/"] = [429, 429]
    db = tmp_path / "a.lmdb"
    run(tool("pack_lmdb"), hf("org", "shards", "data", "test-*"), db, "-q", env=env)
    assert not hub.fail["/revision/"]
    assert md5_records(db) == sorted(hub.rows["test"])
    hub.fail["/tree/"] = [500] * 1000
    try:
        r = run(tool("pack_lmdb"), hf("org", "shards", "data", "test-*"), tmp_path / "b.lmdb", "-q", env=env,
                ok=False)
    finally:
        hub.fail.clear()
    assert r.returncode != 0 and "HTTP 500" in r.stderr and "attempts" in r.stderr, r.stderr


def test_tool_offline_from_the_node_cache(hub, tmp_path):
    """A dataset read once with a node cache is read again with
    HF_HUB_OFFLINE=1 and no request; without the cache it is refused by
    name."""
    cache = tmp_path / "cache"
    url = hf("org", "shards", "data", "test-00000-of-00001.parquet")
    run(tool("pack_lmdb"), url, tmp_path / "a.lmdb", "-q", env=env_for(hub, IMAGEPACK_CACHE_DIR=cache))
    before = len(hub.requests)
    run(tool("pack_lmdb"), url, tmp_path / "b.lmdb", "-q",
        env=env_for(hub, IMAGEPACK_CACHE_DIR=cache, HF_HUB_OFFLINE=1))
    assert len(hub.requests) == before
    assert md5_records(tmp_path / "b.lmdb") == sorted(hub.rows["test"])
    r = run(tool("pack_lmdb"), url, tmp_path / "c.lmdb", "-q",
            env=env_for(hub, IMAGEPACK_CACHE_DIR=tmp_path / "empty", HF_HUB_OFFLINE=1), ok=False)
    assert r.returncode != 0 and "HF_HUB_OFFLINE is set" in r.stderr, r.stderr


@needs_package
def test_loader_reads_the_hub_in_place(hub, tmp_path, monkeypatch):
    """imagepack.Loader("hf://datasets/ORG/NAME", split="train") gives the
    batches of the local files, random and block order, two epochs; a
    branch moved after the open changes nothing of the run."""
    for k, v in env_for(hub, IMAGEPACK_CACHE_DIR=tmp_path / "cache").items():
        monkeypatch.setenv(k, v)
    for k in ("HF_TOKEN", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(k, raising=False)

    def batches(src, order):
        loader = imagepack.Loader(str(src), 16, 32, train=True, seed=5, split="train", order=order, as_torch=False)
        out = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            out += [(b["label"].tolist(), int(b["image"].sum())) for b in loader]
        return out

    for order in ("random", "blocks"):
        assert batches(hf("org", "shards"), order) == batches(hub.local, order), order
    # A mid-epoch resume: the rest of the epoch of the uninterrupted run.
    def loader(src):
        return imagepack.Loader(str(src), 8, 32, train=True, seed=5, split="train", as_torch=False)

    whole = [b["label"].tolist() for b in loader(hf("org", "shards"))]
    first = loader(hf("org", "shards"))
    it = iter(first)
    head = [next(it)["label"].tolist() for _ in range(3)]
    state = first.state_dict()
    again = loader(hf("org", "shards"))
    again.load_state_dict(state)
    assert head + [b["label"].tolist() for b in again] == whole
    # The branch moves: this process keeps the commit it opened.
    repo = hub.repos["org/shards"]
    old = repo.refs["main"]
    new_files = dict(hub.files)
    del new_files["data/train-00001-of-00002.parquet"]
    repo.commit(new_files)
    hub.publish(repo)
    try:
        ds = imagepack.open(hf("org", "shards"), split="train")
        assert len(ds) == len(hub.rows["train"])
        # The new commit named: another dataset, and the state saved on the
        # old one is refused by it.
        moved = loader("hf://datasets/org/shards@%s" % repo.refs["main"])
        assert moved.dataset_size < len(hub.rows["train"])
        with pytest.raises(ValueError, match="state was saved for another dataset"):
            moved.load_state_dict(state)
    finally:
        repo.refs["main"] = old


def test_tool_malformed_urls_are_named(hub, tmp_path):
    env = env_for(hub)
    for url, says in (("hf://models/org/m/x.parquet", "hf:// reads dataset repositories"),
                      ("hf://datasets/org", "ORG/NAME: both parts"),
                      ("hf://datasets/org/sh..ards/data", "ORG and NAME: letters, digits"),
                      ("hf://datasets/org/shards/data/../x", "an empty, '.' or '..' component")):
        r = run(tool("pack_lmdb"), url, tmp_path / "x.lmdb", "-q", env=env, ok=False)
        assert r.returncode != 0 and says in r.stderr, (url, r.stderr)
    assert not any("sh..ards" in p for _, p, _ in hub.requests)


@needs_package
def test_both_trainers_train_from_the_hub(hub, tmp_path):
    """build/trainer/train and scripts/train_imagepack.py, --data and --val
    the same hf:// repository with --split train and --val-split test:
    one epoch each, on the Hub's files as they are."""
    import pathlib
    import sys
    from conftest import SCRIPTS
    env = env_for(hub, IMAGEPACK_CACHE_DIR=tmp_path / "cache", OMP_NUM_THREADS=1)
    for v in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_PROCID"):
        env.pop(v, None)
    data = ["--data", hf("org", "shards"), "--split", "train", "--val", hf("org", "shards"), "--val-split", "test",
            "--arch", "small_cnn", "--size", "16", "--epochs", "1", "--batch-size", "8"]
    train = pathlib.Path(tool("pack_lmdb")).parent.parent / "trainer" / "train"
    script = os.path.join(SCRIPTS, "train_imagepack.py")
    for cmd in ([str(train), *data, "--output", str(tmp_path / "cpp")],
                [sys.executable, script, *data, "--threads", "1", "--output", str(tmp_path / "py")]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, start_new_session=True)
        assert r.returncode == 0, cmd[0] + "\n" + r.stdout[-3000:] + r.stderr[-3000:]
        out = r.stdout + r.stderr
        assert "final weights digest" in out, out[-2000:]
        assert "60" in out and "30" in out, out[-2000:]


def test_both_trainers_resume_on_the_commit_they_trained_on(hub, tmp_path):
    """A run trained on hf://datasets/org/moving (its main branch), whose
    main then moves: --resume auto is refused naming both commits; the
    same resume with --data at the old commit goes on, and so does one
    with --resume-other-commit, which says so."""
    import pathlib
    import sys
    from conftest import SCRIPTS
    repo = Repo("org/moving")
    first = repo.commit(hub.files)
    hub.add(repo)
    env = env_for(hub, OMP_NUM_THREADS=1)
    for v in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_PROCID"):
        env.pop(v, None)
    common = ["--split", "train", "--val", hf("org", "shards"), "--val-split", "test", "--arch", "small_cnn",
              "--size", "16", "--batch-size", "8"]
    train = pathlib.Path(tool("pack_lmdb")).parent.parent / "trainer" / "train"
    trainers = {"cpp": [str(train)], "py": [sys.executable, os.path.join(SCRIPTS, "train_imagepack.py"),
                                            "--threads", "1"]}

    def run_trainer(name, *args):
        cmd = trainers[name] + ["--output", str(tmp_path / name), *args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, start_new_session=True)
        return r.returncode, r.stdout + r.stderr

    for name in trainers:
        rc, out = run_trainer(name, "--data", hf("org", "moving"), *common, "--epochs", "1")
        assert rc == 0, out[-3000:]
    second = repo.commit(dict(hub.files, **{"README.md": b"---\nlicense: mit\n---\n# moved\n"}))
    hub.publish(repo)
    for name in trainers:
        rc, out = run_trainer(name, "--resume", "auto", "--epochs", "2")
        assert rc != 0, out[-3000:]
        assert ("checkpoint %s was trained on hf://datasets/org/moving@%s, but --data now reads "
                "hf://datasets/org/moving@%s (a revision moved)" % (tmp_path / name / "checkpoint.pt", first, second)
                in out), out[-3000:]
        assert "--resume-other-commit" in out and TOKEN not in out
        rc, out = run_trainer(name, "--resume", "auto", "--data", hf("org", "moving@" + first), *common,
                              "--epochs", "2")
        assert rc == 0 and "final weights digest" in out, out[-3000:]
        rc, out = run_trainer(name, "--resume", "auto", "--resume-other-commit", "--data", hf("org", "moving"),
                              *common, "--epochs", "3")
        assert rc == 0 and "--resume-other-commit: " in out and "this run reads hf://datasets/org/moving@" + second \
            in out, out[-3000:]


def test_tool_export_and_inspect_read_the_hub(hub, tmp_path):
    """export_db and inspect_db take an hf:// glob as they take the local
    files: the same ImageFolder tree, a contact sheet written."""
    env = env_for(hub)
    url = hf("org", "shards", "data", "test-*.parquet")
    run(tool("export_db"), url, tmp_path / "from-hub", "--to", "imagefolder", "-q", env=env)
    run(tool("export_db"), str(hub.local / "test-*.parquet"), tmp_path / "local", "--to", "imagefolder", "-q")
    a = sorted(p.relative_to(tmp_path / "from-hub") for p in (tmp_path / "from-hub").rglob("*") if p.is_file())
    b = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*") if p.is_file())
    assert a == b and len(a) >= len(hub.rows["test"])
    for rel in a:
        if rel.name == "export.json":  # names its source and time
            continue
        assert (tmp_path / "from-hub" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes(), rel
    run(tool("inspect_db"), url, "--out", tmp_path / "look", "--sheet", env=env)
    assert (tmp_path / "look" / "sheet.png").stat().st_size > 0


def test_tool_hostile_answers_are_named(hub, tmp_path):
    """A listing nested past the JSON depth budget, one over the answer
    budget, a revision without a commit: each a named error, never a
    crash or a hang."""
    env = env_for(hub, IMAGEPACK_S3_RETRY_SECONDS=3)
    cases = [("/tree/", (200, b"[" * 200000 + b"]" * 200000), "not a JSON list"),
             ("/tree/", (200, b"[" + b'{"path": "data/x", "type": "file"},' * 40000 + b"{}]"), "over 1048576 bytes"),
             ("/revision/", (200, b'{"sha": "main"}'), "names no commit")]
    try:
        for text, answer, says in cases:
            hub.answers = {text: answer}
            r = run(tool("pack_lmdb"), hf("org", "shards", "data"), tmp_path / "x.lmdb", "--split", "train", "-q",
                    env=env, ok=False)
            assert r.returncode > 0 and says in r.stderr, (says, r.returncode, r.stderr[-500:])
    finally:
        hub.answers = {}


def endless_listing(hub, per_page=15000):
    """Tree pages of fresh entries, each naming a next page: past the
    entry budget (a million) after 67 pages of 0.8 MB."""
    def answer(h, body):
        url = urllib.parse.urlsplit(h.path)
        page = int(urllib.parse.parse_qs(url.query).get("cursor", ["0"])[0])
        entries = ",".join('{"path":"data/f%09d.parquet","type":"file","size":1}' % (page * per_page + i)
                           for i in range(per_page))
        nxt = "%s%s?recursive=false&cursor=%d" % (hub.url, url.path, page + 1)
        h.answer(200, ("[" + entries + "]").encode(), [("Link", '<%s>; rel="next"' % nxt)], body)
    return answer


def redirect_loop(h, body):
    h.answer(302, b"", [("Location", urllib.parse.urlsplit(h.path).path)], body)


def serving(hub, how):
    """Files served by the Hub's host itself (no CDN redirect), each range
    answered wrongly: `cut` closes the connection half-way through the
    Content-Length it sent; `short` and `long` send a well-framed body of
    half the range, or of the range and 4 KiB more."""
    def answer(h, body):
        rest = urllib.parse.unquote(urllib.parse.urlsplit(h.path).path).split("/resolve/", 1)[1]
        data = hub.files[rest.split("/", 1)[1]]
        common = [("Accept-Ranges", "bytes"), ("ETag", '"%s"' % hashlib.sha1(data).hexdigest())]
        rng = h.headers.get("Range", "")
        if not body or not rng.startswith("bytes="):
            return h.answer(200, data, common, body, ctype="application/octet-stream")
        a, _, b = rng[6:].partition("-")
        a, b = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
        chunk = data[a:b + 1]
        common.append(("Content-Range", "bytes %d-%d/%d" % (a, b, len(data))))
        if how == "cut":
            h.send_response(206)
            for k, v in common:
                h.send_header(k, v)
            h.send_header("Content-Length", str(len(chunk)))
            h.end_headers()
            h.wfile.write(chunk[:len(chunk) // 2])
            h.close_connection = True
            return None
        sent = chunk[:len(chunk) // 2] if how == "short" else chunk + b"\0" * 4096
        return h.answer(206, sent, common, body, ctype="application/octet-stream")
    return answer


@pytest.mark.parametrize("case", ["listing of a million entries", "redirect loop", "body cut short of its length",
                                  "body shorter than its range", "body longer than its range"])
def test_tool_hostile_servers_are_bounded(hub, tmp_path, case):
    """A server that never stops listing, redirects to itself, or sends a
    body that is not the range it was asked for: each a named failure in
    bounded time and memory, and no database under the final name."""
    answers = {"listing of a million entries": ("/data?recursive", endless_listing(hub), "more than 1000000 entries"),
               "redirect loop": ("/resolve/", redirect_loop, "more than 5 redirects"),
               "body cut short of its length": ("/resolve/", serving(hub, "cut"), "train-0000"),
               "body shorter than its range": ("/resolve/", serving(hub, "short"), "bytes of a range of"),
               "body longer than its range": ("/resolve/", serving(hub, "long"), "+ bytes of a range of")}
    text, answer, says = answers[case]
    out = tmp_path / "x.lmdb"
    hub.answers = {text: answer}
    try:
        r = run(tool("pack_lmdb"), hf("org", "shards", "data"), out, "--split", "train", "-q",
                env=env_for(hub, IMAGEPACK_S3_RETRY_SECONDS=3), ok=False)
    finally:
        hub.answers = {}
    assert 0 < r.returncode < 128 and says in r.stderr, (case, r.returncode, r.stderr[-800:])
    assert "hf://datasets/org/shards" in r.stderr, r.stderr[-800:]
    assert not out.exists()
