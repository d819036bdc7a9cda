"""The Hub that the docs' hf:// blocks read: tests/python/hub_emulator.py
(the Hub's API behind nginx with TLS, parquet redirected to a second host
serving ranges) holding one dataset repository named as the docs name it,
ORG/NAME, its shards written by DuckDB (@duckdb/node-api) from the
fixtures' JPEG trees:

- main (tag v1.0 too): README.md, .gitattributes, and in data/ the
  train split in two shards and the validation split in one, as the
  Hub's uploader names them (train-00000-of-00002.parquet);
- refs/convert/parquet: the same rows as the Hub's parquet conversion
  lays them out (default/train/0000.parquet, default/validation/...).

Started once per docs run, for the blocks whose spec says `hub=True`;
`env()` is what such a block's commands see (HF_ENDPOINT and the CA)."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def _node_modules():
    """The npm packages of the tests (conftest.node_modules installs them
    under build/npm); an error, not a skip, where they cannot be had."""
    import conftest
    try:
        return conftest.node_modules()
    except BaseException as e:  # noqa: BLE001 - pytest's skip outside pytest
        raise RuntimeError("the docs' hf:// blocks need DuckDB from npm: %s" % e) from None


def _duckdb(folder, statements):
    mods = _node_modules()
    script = os.path.join(folder, "run.mjs")
    with open(script, "w") as f:
        f.write("import { DuckDBInstance } from '@duckdb/node-api';\n"
                "const c = await (await DuckDBInstance.create(':memory:')).connect();\n"
                "for (const s of JSON.parse(process.argv[2])) await c.run(s);\n")
    link = os.path.join(folder, "node_modules")
    if not os.path.exists(link):
        os.symlink(mods, link)
    subprocess.run(["node", script, json.dumps(statements)], check=True, cwd=folder, timeout=300,
                   env=dict(os.environ, NODE_PATH=mods))


def _shards(folder, data, synsets):
    """{path in the repo: bytes} of both layouts, from DATA/src/{train,val}."""
    names = "[%s]" % ", ".join("'%s'" % s for s in synsets)
    meta = json.dumps({"info": {"features": {"image": {"_type": "Image"},
                                             "label": {"names": synsets, "_type": "ClassLabel"}}}})
    out = {"train-00000-of-00002": ("train", "label < 2"), "train-00001-of-00002": ("train", "label >= 2"),
           "validation-00000-of-00001": ("val", "true")}
    sql = []
    for name, (tree, cond) in out.items():
        sql.append("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, label FROM "
                   "(SELECT *, CAST(list_position(%s, regexp_extract(filename, '/(n\\d+)/', 1)) - 1 AS BIGINT) "
                   "AS label FROM read_blob('%s/src/%s/*/*')) WHERE %s ORDER BY filename) TO '%s/%s.parquet' "
                   "(FORMAT parquet, KV_METADATA {huggingface: '%s'})"
                   % (names, data, tree, cond, folder, name, meta))
    _duckdb(folder, sql)
    read = lambda n: open(os.path.join(folder, n + ".parquet"), "rb").read()
    main = {"README.md": b"---\nlicense: cc0-1.0\n---\n# A small dataset\n",
            ".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}
    main.update({"data/%s.parquet" % n: read(n) for n in out})
    converted = {"default/train/0000.parquet": read("train-00000-of-00002"),
                 "default/train/0001.parquet": read("train-00001-of-00002"),
                 "default/validation/0000.parquet": read("validation-00000-of-00001")}
    return main, converted


class DocsHub:
    def __init__(self, folder, data, synsets):
        from hub_emulator import Hub, Repo
        os.makedirs(folder)
        main, converted = _shards(folder, data, synsets)
        self.hub = Hub(__import__("pathlib").Path(folder) / "hub")
        try:
            repo = Repo("ORG/NAME")
            sha = repo.commit(main)
            repo.refs["v1.0"] = sha
            repo.commit(converted, branch="refs/convert/parquet")
            self.hub.add(repo)
        except BaseException:
            self.hub.stop()
            raise

    def env(self):
        """Variables a block's commands see: the emulator as the Hub, its CA,
        and none of the machine's Hub settings."""
        return {"HF_ENDPOINT": self.hub.url, "SSL_CERT_FILE": self.hub.ca, "CURL_CA_BUNDLE": "",
                "SSL_CERT_DIR": "", "HF_TOKEN": None, "HF_TOKEN_PATH": None, "HF_HUB_OFFLINE": None,
                "IMAGEPACK_CACHE_DIR": None}

    def stop(self):
        self.hub.stop()


def _count(ctx, db):
    out = subprocess.run(["/usr/bin/python3", "scripts/read_db.py", db], cwd=ctx.dir, capture_output=True,
                         text=True, check=True).stdout
    return int(out.split("count ", 1)[1].split(",", 1)[0])


def check_tools(ctx):
    """OBJECT_STORAGE.md's hf:// block: the train split's two shards (24
    rows), validation's one (10), the conversion's train split (24), verify
    OK, and the node cache written where IMAGEPACK_CACHE_DIR said."""
    got = {db: _count(ctx, db) for db in ("train.lmdb", "val.lmdb", "converted.lmdb")}
    assert got == {"train.lmdb": 24, "val.lmdb": 10, "converted.lmdb": 24}, got
    assert "OK" in ctx.out("verify_db train.lmdb --against"), ctx.out("verify_db train.lmdb --against")
    cache = ctx.path("scratch", "ipk-cache")
    assert os.path.isdir(cache) and any(files for _, _, files in os.walk(cache)), "nothing cached in %s" % cache


# PYTHON.md's hf:// snippet, after it ran: both splits' sizes, and one
# epoch of each read through the emulator with every label in range.
LOADER_POST = """
assert (train.dataset_size, val.dataset_size) == (24, 10), (train.dataset_size, val.dataset_size)
seen = [int(l) for _, labels in val for l in labels]
assert len(seen) == 10 and set(seen) <= {0, 1, 2}, seen
assert sum(int(images.shape[0]) for images, _ in train) > 0
import os
assert any(f for _, _, f in os.walk("scratch/ipk-cache")), "nothing in the node cache"
"""
