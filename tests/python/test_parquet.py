"""Parquet imports (pack_lmdb) in the Hugging Face image layout, from files
writers no one here wrote: DuckDB (the npm package @duckdb/node-api, run
by node) writes most files below with COPY ... (FORMAT parquet), its
image column a struct<bytes: BLOB, path: VARCHAR> read by DuckDB's own
read_blob from the JPEG files, the label a BIGINT, and the "huggingface"
key-value metadata a ClassLabel's names, as the Hub's converter writes
them; parquet-wasm (the Rust arrow-rs writer compiled to WebAssembly, fed
an apache-arrow table) writes the same layout as a second, independent
writer. The database is read back with scripts/read_db.py (python3-lmdb).

The packages are found in IMAGEPACK_DUCKDB_NODE_MODULES (a node_modules
folder holding them), else build/npm/node_modules, else installed there
with `npm install` (the npm registry must be reachable); without them the
tests are skipped, or fail where IMAGEPACK_REQUIRE_DUCKDB=1."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import SCRIPTS, run, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLASSES = ["class0", "class1", "class2"]
HF = json.dumps({"info": {"features": {"image": {"_type": "Image"},
                                       "label": {"names": CLASSES, "_type": "ClassLabel"}}}})


PACKAGES = ("@duckdb/node-api", "parquet-wasm", "apache-arrow")


def node_modules():
    given = os.environ.get("IMAGEPACK_DUCKDB_NODE_MODULES")
    cands = [given] if given else []
    local = os.path.join(ROOT, "build", "npm")
    cands.append(os.path.join(local, "node_modules"))
    for c in cands:
        if c and all(os.path.isdir(os.path.join(c, p)) for p in PACKAGES):
            return c
    why = None
    if shutil.which("node") is None or shutil.which("npm") is None:
        why = "node and npm are not installed"
    else:
        os.makedirs(local, exist_ok=True)
        r = subprocess.run(["npm", "install", "--prefix", local, "--no-audit", "--no-fund", *PACKAGES],
                           capture_output=True, text=True, timeout=600)
        if r.returncode == 0 and all(os.path.isdir(os.path.join(local, "node_modules", p)) for p in PACKAGES):
            return os.path.join(local, "node_modules")
        why = "npm install %s failed: %s" % (" ".join(PACKAGES), (r.stderr or r.stdout)[-300:])
    if os.environ.get("IMAGEPACK_REQUIRE_DUCKDB") == "1":
        pytest.fail(why + " (IMAGEPACK_REQUIRE_DUCKDB=1)", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def duckdb(tmp_path_factory):
    """Runs SQL statements in one DuckDB connection; returns the last
    statement's rows."""
    mods = node_modules()
    script = tmp_path_factory.mktemp("duckdb") / "run.mjs"
    script.write_text("""
import { DuckDBInstance } from '@duckdb/node-api';
const sql = JSON.parse(process.argv[2]);
const c = await (await DuckDBInstance.create(':memory:')).connect();
let rows = [];
for (const s of sql) rows = (await c.runAndReadAll(s)).getRows();
console.log(JSON.stringify(rows, (k, v) => typeof v === 'bigint' ? Number(v) : v));
""")

    def sql(*statements):
        env = dict(os.environ, NODE_PATH=mods)
        # ESM resolves packages from the script's folder up: link them there.
        link = script.parent / "node_modules"
        if not link.exists():
            os.symlink(mods, link)
        # DuckDB keeps a .tmp folder in its working folder: the script's, not the caller's.
        r = subprocess.run(["node", str(script), json.dumps(list(statements))], capture_output=True, text=True,
                           env=env, timeout=300, cwd=str(script.parent))
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    return sql


@pytest.fixture(scope="module")
def jpegs(tree, tmp_path_factory):
    """The tree's JPEGs in one folder as CLASS_NAME.jpg: (name, bytes, label)."""
    d = tmp_path_factory.mktemp("flat")
    out = []
    for c, name in enumerate(CLASSES):
        for f in sorted(os.listdir(tree / name)):
            data = (tree / name / f).read_bytes()
            (d / ("%s_%s" % (name, f))).write_bytes(data)
            out.append(("%s_%s" % (name, f), data, c))
    return d, sorted(out)


def write_parquet(duckdb, jpegs, path, options, kv=True):
    d, _ = jpegs
    meta = ", KV_METADATA {huggingface: '%s'}" % HF if kv else ""
    duckdb("CREATE TABLE t AS SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label, "
           "'a photo of ' || parse_filename(filename) AS caption "
           "FROM read_blob('%s/*.jpg') ORDER BY filename" % d,
           "COPY t TO '%s' (FORMAT parquet, %s%s)" % (path, options, meta))
    return duckdb("SELECT path_in_schema, encodings, compression FROM parquet_metadata('%s')" % path)


def captions(db):
    d = read_db.open_db(str(db))
    out = {}
    for i in range(d.meta["count"]):
        r = read_db.read_record(d, i)
        (f,) = r["fields"]
        out[r["path"]] = f["value"]
    return out


def records_of(db):
    d = read_db.open_db(str(db))
    out = []
    for i in range(d.meta["count"]):
        r = read_db.read_record(d, i)
        out.append((r["path"], bytes(r["payload"]), r["label"]))
    return d.meta, out


CASES = [
    ("uncompressed", "COMPRESSION uncompressed, ROW_GROUP_SIZE 100, DICTIONARY_SIZE_LIMIT 0", "PLAIN"),
    ("snappy", "COMPRESSION snappy, ROW_GROUP_SIZE 100", "PLAIN"),
    ("zstd", "COMPRESSION zstd, ROW_GROUP_SIZE 10000", "PLAIN"),
    ("gzip", "COMPRESSION gzip", "PLAIN"),
    ("dictionary", "COMPRESSION snappy, DICTIONARY_COMPRESSION_RATIO_THRESHOLD 0, DICTIONARY_SIZE_LIMIT 1000000",
     "PLAIN_DICTIONARY"),
    ("v2", "COMPRESSION zstd, PARQUET_VERSION V2, ROW_GROUP_SIZE 100", "DELTA_LENGTH_BYTE_ARRAY"),
]


@pytest.mark.parametrize("name,options,encoding", CASES, ids=[c[0] for c in CASES])
def test_duckdb_hf_layout_imports_byte_exact(duckdb, jpegs, tmp_path, name, options, encoding):
    src = tmp_path / ("train-00000-of-00001-%s.parquet" % name)
    meta = write_parquet(duckdb, jpegs, src, options)
    assert ["image, bytes", encoding] in [m[:2] for m in meta], meta  # DuckDB wrote what the case says
    r = run(tool("pack_lmdb"), src, tmp_path / "x.lmdb", "-q")
    assert "90 records in 3 classes" in r.stdout, r.stdout
    m, recs = records_of(tmp_path / "x.lmdb")
    assert m["classes"] == CLASSES
    assert sorted(recs) == [(n, b, c) for n, b, c in jpegs[1]]
    # the other columns are fields by the manifest's kind rules: a string is text
    assert [(f["name"], f["kind"]) for f in m["fields"]] == [("caption", "text")]
    assert captions(tmp_path / "x.lmdb") == {n: "a photo of " + n for n, _, _ in jpegs[1]}


def test_several_files_a_pattern_and_no_metadata(duckdb, jpegs, tmp_path):
    """Two files by a brace pattern; without the huggingface metadata the
    struct's bytes are the image, the integer "label" the label (classes
    0..2)."""
    d = tmp_path / "data"
    d.mkdir()
    for part, cond in ((0, "label < 2"), (1, "label = 2")):
        write_parquet(duckdb, jpegs, d / "all.parquet", "COMPRESSION zstd", kv=False)
        duckdb("COPY (SELECT * FROM read_parquet('%s') WHERE %s) TO '%s' (FORMAT parquet)"
               % (d / "all.parquet", cond, d / ("train-%05d-of-00002.parquet" % part)))
    os.remove(d / "all.parquet")
    run(tool("pack_lmdb"), str(d / "train-{00000..00001}-of-00002.parquet"), tmp_path / "p.lmdb", "-q")
    m, recs = records_of(tmp_path / "p.lmdb")
    assert m["classes"] == ["0", "1", "2"]
    assert sorted(recs) == [(n, b, c) for n, b, c in jpegs[1]]


def test_null_images_and_damaged_pages_are_skipped_and_named(duckdb, jpegs, tmp_path):
    """A row whose image is null is skipped as FILE: row N; a damaged page
    header skips its row group, named (exit 3); the other row group
    imports. DuckDB cuts row groups at 2048 rows at least: the 90
    JPEGs are written 25 times over (2250 rows: row groups of 2048 and
    202)."""
    src = tmp_path / "n.parquet"
    d, items = jpegs
    duckdb("CREATE TABLE t AS SELECT CASE WHEN k = 0 AND parse_filename(filename) LIKE 'class1_img03%%' THEN NULL "
           "ELSE {'bytes': content, 'path': k || '/' || parse_filename(filename)} END AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label "
           "FROM read_blob('%s/*.jpg'), range(25) r(k) ORDER BY k, filename" % d,
           "COPY t TO '%s' (FORMAT parquet, COMPRESSION uncompressed, ROW_GROUP_SIZE 100)" % src)
    r = run(tool("pack_lmdb"), src, tmp_path / "a.lmdb", "--errors", tmp_path / "e.txt", "-q", ok=False)
    assert r.returncode == 3, r.stderr
    assert str(src) + ": row 33\tno image (null)" in (tmp_path / "e.txt").read_text()
    m, recs = records_of(tmp_path / "a.lmdb")
    assert len(recs) == 2249 and m["classes"] == ["0", "1", "2"]
    assert recs[0] == ("0/" + items[0][0], items[0][1], 0)
    # damage the first data page header of row group 0's image column,
    # where DuckDB's own metadata says it starts
    groups = duckdb("SELECT row_group_id, data_page_offset FROM parquet_metadata('%s') WHERE "
                    "path_in_schema = 'image, bytes' ORDER BY row_group_id" % src)
    assert len(groups) == 2, groups
    data = bytearray(src.read_bytes())
    data[groups[0][1]:groups[0][1] + 4] = b"\xff\xff\xff\xff"
    (tmp_path / "bad.parquet").write_bytes(bytes(data))
    r = run(tool("pack_lmdb"), tmp_path / "bad.parquet", tmp_path / "b.lmdb", "--errors", tmp_path / "e2.txt",
            "-q", ok=False)
    errors = (tmp_path / "e2.txt").read_text()
    assert r.returncode == 3, r.stderr + errors
    assert "bad.parquet: row group 0\tcolumn image.bytes, page " in errors
    assert ": page header: Thrift: unknown type 15 at byte 1" in errors
    assert len(records_of(tmp_path / "b.lmdb")[1]) == 2250 - 2048


def test_a_file_without_an_image_column_names_its_columns(duckdb, tmp_path):
    src = tmp_path / "x.parquet"
    duckdb("COPY (SELECT 1::BIGINT AS label, 'x' AS caption) TO '%s' (FORMAT parquet)" % src)
    r = run(tool("pack_lmdb"), src, tmp_path / "x.lmdb", ok=False)
    assert r.returncode == 1 and "no image column" in r.stderr and "label, caption" in r.stderr, r.stderr


def test_classes_option_relabels_by_classlabel_names(duckdb, jpegs, tmp_path):
    src = tmp_path / "c.parquet"
    write_parquet(duckdb, jpegs, src, "COMPRESSION snappy")
    (tmp_path / "order.txt").write_text("class2\nclass0\nclass1\n")
    run(tool("pack_lmdb"), src, tmp_path / "c.lmdb", "-q", "--classes", tmp_path / "order.txt")
    m, recs = records_of(tmp_path / "c.lmdb")
    assert m["classes"] == ["class2", "class0", "class1"]
    assert sorted(recs) == [(n, b, [1, 2, 0][c]) for n, b, c in jpegs[1]]


def test_other_columns_are_fields_by_kind(duckdb, jpegs, tmp_path):
    """Integers are ints, doubles floats, strings text (null: empty), a
    list column is named as not packed."""
    d, items = jpegs
    src = tmp_path / "f.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label, "
           "octet_length(content)::INTEGER AS size, 0.5::DOUBLE AS score, "
           "CASE WHEN parse_filename(filename) LIKE 'class0%%' THEN NULL ELSE 'x' END AS note, "
           "[1, 2] AS tags FROM read_blob('%s/*.jpg') ORDER BY filename) TO '%s' (FORMAT parquet)" % (d, src))
    r = run(tool("pack_lmdb"), src, tmp_path / "f.lmdb")
    assert "columns not packed: tags.list.element" in r.stderr, r.stderr
    db = read_db.open_db(str(tmp_path / "f.lmdb"))
    assert [(f["name"], f["kind"]) for f in db.meta["fields"]] == [("size", "ints"), ("score", "floats"),
                                                                    ("note", "text")]
    by_name = {n: b for n, b, _ in items}
    for i in range(db.meta["count"]):
        rec = read_db.read_record(db, i)
        size, score, note = (f["value"] for f in rec["fields"])
        assert list(size) == [len(by_name[rec["path"]])] and list(score) == [0.5]
        assert note == ("" if rec["path"].startswith("class0") else "x")


def test_image_and_label_columns_by_name(duckdb, jpegs, tmp_path):
    """Two binary columns and an integer column not named "label", no
    metadata: the guess fails naming the columns; --image-column and
    --label-column choose."""
    d, items = jpegs
    src = tmp_path / "two.parquet"
    duckdb("COPY (SELECT content AS photo, content[1:10] AS thumb, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS INTEGER) AS cls "
           "FROM read_blob('%s/*.jpg') ORDER BY filename) TO '%s' (FORMAT parquet)" % (d, src))
    r = run(tool("pack_lmdb"), src, tmp_path / "a.lmdb", ok=False)
    assert r.returncode == 1 and "several image columns: photo, thumb (--image-column NAME chooses)" in r.stderr
    r = run(tool("pack_lmdb"), src, tmp_path / "a.lmdb", "--image-column", "nope", ok=False)
    assert r.returncode == 1 and "--image-column nope is not a struct<bytes, path> or binary column; " \
                                 "the columns: photo, thumb, cls" in r.stderr, r.stderr
    r = run(tool("pack_lmdb"), src, tmp_path / "a.lmdb", "--image-column", "photo", "--no-class", "-q")
    assert "no label column (--label-column NAME takes one of cls)" in r.stderr, r.stderr
    run(tool("pack_lmdb"), src, tmp_path / "b.lmdb", "--image-column", "photo", "--label-column", "cls", "-q")
    m, recs = records_of(tmp_path / "b.lmdb")
    assert m["classes"] == ["0", "1", "2"]
    assert sorted((b, c) for _, b, c in recs) == sorted((b, c) for _, b, c in items)


PARQUET_WASM = """
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tableToIPC, vectorFromArray, Table, Struct, Field, Binary, Utf8, Int64 } from 'apache-arrow';
import * as pw from 'parquet-wasm/node';
const [dir, out, codec, version, hf] = process.argv.slice(2);
const names = readdirSync(dir).filter(n => n.endsWith('.jpg')).sort();
const image = vectorFromArray(names.map(n => ({bytes: new Uint8Array(readFileSync(dir + '/' + n)), path: n})),
  new Struct([new Field('bytes', new Binary(), true), new Field('path', new Utf8(), true)]));
const label = vectorFromArray(names.map(n => BigInt(/class(\\d)/.exec(n)[1])), new Int64());
const props = new pw.WriterPropertiesBuilder().setCompression(pw.Compression[codec])
  .setWriterVersion(pw.WriterVersion[version]).setMaxRowGroupSize(40)
  .setKeyValueMetadata(new Map([['huggingface', hf]])).build();
writeFileSync(out, pw.writeParquet(pw.Table.fromIPCStream(tableToIPC(new Table({image, label}), 'stream')), props));
"""


@pytest.mark.parametrize("codec,version", [("SNAPPY", "V1"), ("ZSTD", "V2"), ("GZIP", "V1"), ("UNCOMPRESSED", "V2")])
def test_parquet_wasm_hf_layout_imports_byte_exact(duckdb, jpegs, tmp_path, codec, version):
    """arrow-rs (parquet-wasm) with row groups of 40 rows: three row groups,
    RLE_DICTIONARY, data pages v1 or v2."""
    d, items = jpegs
    script = tmp_path / "pw.mjs"
    script.write_text(PARQUET_WASM)
    os.symlink(node_modules(), tmp_path / "node_modules")
    src = tmp_path / "train.parquet"
    r = subprocess.run(["node", str(script), str(d), str(src), codec, version, HF], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    groups = duckdb("SELECT DISTINCT row_group_id FROM parquet_metadata('%s')" % src)
    assert len(groups) == 3
    run(tool("pack_lmdb"), src, tmp_path / "w.lmdb", "-q")
    m, recs = records_of(tmp_path / "w.lmdb")
    assert m["classes"] == CLASSES
    assert sorted(recs) == [(n, b, c) for n, b, c in items]


def test_verify_against_the_parquet_file(duckdb, jpegs, tmp_path):
    src = tmp_path / "v.parquet"
    write_parquet(duckdb, jpegs, src, "COMPRESSION zstd")
    run(tool("pack_lmdb"), src, tmp_path / "v.lmdb", "-q")
    r = run(tool("verify_db"), tmp_path / "v.lmdb", "--against", src)
    assert r.returncode == 0, r.stdout + r.stderr
    other = tmp_path / "w.parquet"
    duckdb("COPY (SELECT * FROM read_parquet('%s') WHERE label < 2) TO '%s' (FORMAT parquet, KV_METADATA "
           "{huggingface: '%s'})" % (src, other, HF))
    r = run(tool("verify_db"), tmp_path / "v.lmdb", "--against", other, ok=False)
    assert r.returncode == 1 and "not in the source tree" in r.stdout + r.stderr, r.stdout + r.stderr
