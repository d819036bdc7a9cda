"""Parquet imports (pack_lmdb) in the Hugging Face image layout, from files
writers no one here wrote: DuckDB (the npm package @duckdb/node-api, run
by node) writes most files below with COPY ... (FORMAT parquet), its
image column a struct<bytes: BLOB, path: VARCHAR> read by DuckDB's own
read_blob from the JPEG files, the label a BIGINT, and the "huggingface"
key-value metadata a ClassLabel's names, as the Hub's converter writes
them; parquet-wasm (the Rust arrow-rs writer compiled to WebAssembly, fed
an apache-arrow table) writes the same layout as a second, independent
writer. LIST columns (number lists, bbox lists) are compared with
DuckDB's own reading of the same file. The database is read back with scripts/read_db.py (python3-lmdb).

The packages (tests/python/npm_packages.txt) are found by
conftest.node_modules(): IMAGEPACK_DUCKDB_NODE_MODULES, else
build/npm/node_modules (scripts/setup.sh installs them there; else the
first test that needs them does, when the npm registry is reachable);
without them the tests are skipped, or fail where
IMAGEPACK_REQUIRE_DUCKDB=1 (scripts/test.sh sets it)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import SCRIPTS, node_modules, run, tool

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402

CLASSES = ["class0", "class1", "class2"]
HF = json.dumps({"info": {"features": {"image": {"_type": "Image"},
                                       "label": {"names": CLASSES, "_type": "ClassLabel"}}}})


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
    list of integers ints; a list of strings is named as not packed."""
    d, items = jpegs
    src = tmp_path / "f.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label, "
           "octet_length(content)::INTEGER AS size, 0.5::DOUBLE AS score, "
           "CASE WHEN parse_filename(filename) LIKE 'class0%%' THEN NULL ELSE 'x' END AS note, "
           "[1, 2] AS tags, ['a', 'b'] AS words FROM read_blob('%s/*.jpg') ORDER BY filename) TO '%s' "
           "(FORMAT parquet)" % (d, src))
    r = run(tool("pack_lmdb"), src, tmp_path / "f.lmdb")
    assert "columns not packed: words.list.element" in r.stderr, r.stderr
    db = read_db.open_db(str(tmp_path / "f.lmdb"))
    assert [(f["name"], f["kind"]) for f in db.meta["fields"]] == [("size", "ints"), ("score", "floats"),
                                                                    ("note", "text"), ("tags", "ints")]
    by_name = {n: b for n, b, _ in items}
    for i in range(db.meta["count"]):
        rec = read_db.read_record(db, i)
        size, score, note, tags = (f["value"] for f in rec["fields"])
        assert list(size) == [len(by_name[rec["path"]])] and list(score) == [0.5] and list(tags) == [1, 2]
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


def unlist(v):
    """DuckDB's node values: a list is {"items": [...]}; null stays None."""
    if isinstance(v, dict) and "items" in v:
        return [unlist(x) for x in v["items"]]
    return v


def fields_by_path(db):
    d = read_db.open_db(str(db))
    out = {}
    for i in range(d.meta["count"]):
        r = read_db.read_record(d, i)
        out[r["path"]] = [f["value"] for f in r["fields"]]
    return d.meta, out


LISTS_SQL = ("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, "
             "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label, "
             "CASE WHEN n %% 7 = 0 THEN NULL WHEN n %% 7 = 1 THEN []::INTEGER[] "
             "ELSE [n, -n, n * 1000, 2147483647][1:n %% 5]::INTEGER[] END AS ids, "
             "CASE WHEN n %% 4 = 0 THEN NULL ELSE [n + 0.25, n / 3, -n / 7][1:n %% 4]::FLOAT[] END AS emb, "
             "[n / 3, 1e10]::DOUBLE[] AS dbl, [true, n %% 2 = 0] AS flags, "
             "[[n, n + 1], []]::BIGINT[][] AS pairs, ['x'] AS words "
             "FROM (SELECT *, row_number() OVER (ORDER BY filename) - 1 AS n FROM read_blob('%s/*.jpg'))) "
             "TO '%s' (FORMAT parquet, %s, KV_METADATA {huggingface: '%s'})")


@pytest.mark.parametrize("options", ["COMPRESSION snappy", "COMPRESSION zstd, PARQUET_VERSION V2"],
                         ids=["v1-snappy", "v2-zstd"])
def test_list_columns_are_ints_and_floats_fields(duckdb, jpegs, tmp_path, options):
    """DuckDB's LIST columns: integers (null lists, empty lists, longer
    ones) ints, floats and doubles floats, booleans ints; a list of lists
    and a list of strings are named as not packed. Every value is the one
    DuckDB reads back from the same file."""
    d, items = jpegs
    src = tmp_path / "l.parquet"
    duckdb(LISTS_SQL % (d, src, options, HF))
    want = {p: [unlist(x) for x in rest] for p, *rest in duckdb(
        "SELECT image.path, ids, emb, dbl, flags FROM read_parquet('%s')" % src)}
    assert sum(v[0] is None for v in want.values()) > 0 and sum(v[0] == [] for v in want.values()) > 0
    r = run(tool("pack_lmdb"), src, tmp_path / "l.lmdb", "-q")
    assert "columns not packed: pairs.list.element.list.element, words.list.element" in r.stderr, r.stderr
    m, got = fields_by_path(tmp_path / "l.lmdb")
    assert [(f["name"], f["kind"]) for f in m["fields"]] == [("ids", "ints"), ("emb", "floats"), ("dbl", "floats"),
                                                              ("flags", "ints")]
    assert sorted(got) == sorted(n for n, _, _ in items)
    for path, (ids, emb, dbl, flags) in got.items():
        w_ids, w_emb, w_dbl, w_flags = want[path]
        assert list(ids) == (w_ids or []), path  # a null list is an empty field
        assert emb.dtype == np.float32 and list(emb) == [np.float32(x) for x in (w_emb or [])], path
        assert list(dbl) == [np.float32(x) for x in w_dbl], path
        assert list(flags) == [int(x) for x in w_flags], path
    # a null element skips its row, named
    bad = tmp_path / "bad.parquet"
    first = items[0][0]
    duckdb("COPY (SELECT * REPLACE (CASE WHEN image.path = '%s' THEN [1, NULL] ELSE ids END AS ids) "
           "FROM read_parquet('%s')) TO '%s' (FORMAT parquet, %s)" % (first, src, bad, options))
    r = run(tool("pack_lmdb"), bad, tmp_path / "b.lmdb", "-q", "--errors", tmp_path / "e.txt", ok=False)
    assert r.returncode == 3, r.stderr
    assert "bad.parquet: row 0\tcolumn ids: a null in a list" in (tmp_path / "e.txt").read_text()
    assert len(fields_by_path(tmp_path / "b.lmdb")[1]) == len(items) - 1


HF_OBJECTS = json.dumps({"info": {"features": {
    "image": {"_type": "Image"}, "label": {"names": CLASSES, "_type": "ClassLabel"},
    "objects": {"feature": {"bbox": {"feature": {"dtype": "float32", "_type": "Value"}, "length": 4,
                                     "_type": "Sequence"},
                            "category": {"names": ["cat", "dog"], "_type": "ClassLabel"}},
                "_type": "Sequence"}}}})
# Per row n: n % 3 boxes inside the image, exact in float32, valid as
# [x, y, w, h] and as [x0, y0, x1, y1].
BOXES = "[[n % 10, n % 10 + 0.5, n % 10 + 2, n % 10 + 4], [0.25, 0.75, 1 + n % 7, 1]][1:n % 3]"
CATEGORIES = "[n % 2, 1][1:n % 3]"
BOX_LAYOUTS = {
    # datasets' Sequence of a dict: a struct of lists
    "struct-of-lists": ("{'bbox': %s::FLOAT[][], 'category': %s::BIGINT[]} AS objects" % (BOXES, CATEGORIES),
                        "objects.bbox", "objects.bbox, objects.category", HF_OBJECTS, "", False),
    # datasets' List of a dict: a list of structs
    "list-of-structs": ("list_transform(list_zip(%s::DOUBLE[][], %s::INTEGER[]), lambda z: {'bbox': z[1], "
                        "'category': z[2]}) AS objects" % (BOXES, CATEGORIES), "objects.bbox",
                        "list_transform(objects, lambda x: x.bbox), list_transform(objects, lambda x: x.category)",
                        HF_OBJECTS, "", False),
    # top-level lists, the file saying [x0, y0, x1, y1]
    "top-level-xyxy": ("%s::FLOAT[][] AS bbox, %s::BIGINT[] AS category" % (BOXES, CATEGORIES), "bbox",
                       "bbox, category", HF, ", bbox_format: 'xyxy'", True),
}


@pytest.mark.parametrize("layout", sorted(BOX_LAYOUTS))
def test_bbox_lists_are_boxes(duckdb, jpegs, tmp_path, layout):
    """A list of [4 numbers] named bbox beside an integer category list is
    a boxes field: [x, y, w, h] (COCO's, the default) as x0 = x, y0 = y,
    x1 = x + w, y1 = y + h; [x0, y0, x1, y1] kept where the file's
    key-value bbox_format says xyxy. The category's ClassLabel names are
    the boxes' classes. Expected values: DuckDB's reading of the file;
    verify_db --against the file passes."""
    column, name, select, hf, kv, xyxy = BOX_LAYOUTS[layout]
    d, items = jpegs
    src = tmp_path / "o.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label, %s "
           "FROM (SELECT *, row_number() OVER (ORDER BY filename) - 1 AS n FROM read_blob('%s/*.jpg'))) "
           "TO '%s' (FORMAT parquet, KV_METADATA {huggingface: '%s'%s})" % (column, d, src, hf, kv))
    want = {p: (unlist(b), unlist(c)) for p, b, c in duckdb("SELECT image.path, %s FROM read_parquet('%s')"
                                                           % (select, src))}
    assert max(len(b) for b, _ in want.values()) == 2
    r = run(tool("pack_lmdb"), src, tmp_path / "o.lmdb", "-q")
    assert "not packed" not in r.stderr, r.stderr
    m, got = fields_by_path(tmp_path / "o.lmdb")
    assert [(f["name"], f["kind"]) for f in m["fields"]] == [(name, "boxes")]
    if hf == HF_OBJECTS:
        assert m["fields"][0]["classes"] == ["cat", "dog"]
    assert sorted(got) == sorted(n for n, _, _ in items)
    for path, ((xy, cls),) in got.items():
        boxes, cats = want[path]
        if not xyxy:
            boxes = [[x, y, x + w, y + h] for x, y, w, h in boxes]
        assert xy.tolist() == boxes and cls.tolist() == cats, path
    r = run(tool("verify_db"), tmp_path / "o.lmdb", "--against", src)
    assert r.returncode == 0, r.stdout + r.stderr


def test_bad_boxes_skip_their_rows(duckdb, jpegs, tmp_path):
    """A box of 3 numbers, or more boxes than categories, skips its row
    (named); an unknown bbox_format leaves the column out, said."""
    d, items = jpegs
    src = tmp_path / "b.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label, "
           "CASE n WHEN 1 THEN [[1, 2, 3]] ELSE [[1, 2, 3, 4], [5, 6, 7, 8]] END::FLOAT[][] AS bbox, "
           "CASE n WHEN 2 THEN [1] ELSE [0, 1] END::BIGINT[] AS category "
           "FROM (SELECT *, row_number() OVER (ORDER BY filename) - 1 AS n FROM read_blob('%s/*.jpg'))) "
           "TO '%s' (FORMAT parquet)" % (d, src))
    r = run(tool("pack_lmdb"), src, tmp_path / "b.lmdb", "-q", "--errors", tmp_path / "e.txt", ok=False)
    errors = (tmp_path / "e.txt").read_text()
    assert r.returncode == 3, r.stderr
    assert "b.parquet: row 1\tcolumn bbox: a box of 3 numbers (4 expected)" in errors, errors
    assert "b.parquet: row 2\tcolumn bbox: 2 boxes for 1 categories" in errors, errors
    m, got = fields_by_path(tmp_path / "b.lmdb")
    assert len(got) == len(items) - 2
    assert got[items[0][0]][0][0].tolist() == [[1, 2, 4, 6], [5, 6, 12, 14]]
    odd = tmp_path / "odd.parquet"
    duckdb("COPY (SELECT * FROM read_parquet('%s')) TO '%s' (FORMAT parquet, KV_METADATA {bbox_format: 'cxcywh'})"
           % (src, odd))
    r = run(tool("pack_lmdb"), odd, tmp_path / "c.lmdb", "-q")
    assert "column bbox not packed as boxes: key-value bbox_format is not xywh, coco, xyxy or pascal_voc" in r.stderr
    assert "columns not packed: bbox.list.element.list.element\n" in r.stderr, r.stderr
    assert [(f["name"], f["kind"]) for f in read_db.open_db(str(tmp_path / "c.lmdb")).meta["fields"]] == \
        [("category", "ints")]


def test_long_lists_over_pages_and_row_groups(duckdb, jpegs, tmp_path):
    """2,250 rows (the 90 JPEGs 25 times: row groups of 2,048 and 202) of
    integer lists 0 to 1,999 long, over 2M values, most in the first row
    group. Each row's length, sum and ends are DuckDB's."""
    d, _ = jpegs
    src = tmp_path / "long.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': k || '/' || parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label, "
           "list_transform(range((k * 90 + row_number() OVER (PARTITION BY k ORDER BY filename)) %% 2000), "
           "lambda i: (i * 7 + k)::INTEGER) AS ids "
           "FROM read_blob('%s/*.jpg'), range(25) r(k) ORDER BY k, filename) TO '%s' "
           "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 100)" % (d, src))
    pages = duckdb("SELECT count(*), count(DISTINCT row_group_id) FROM parquet_metadata('%s') "
                   "WHERE path_in_schema = 'ids, list, element'" % src)
    assert pages == [[2, 2]], pages  # one chunk a row group, as parquet_metadata lists them
    want = {p: (n, s, a, b) for p, n, s, a, b in duckdb(
        "SELECT image.path, len(ids), list_sum(ids), ids[1], ids[-1] FROM read_parquet('%s')" % src)}
    assert sum(n for n, _, _, _ in want.values()) > 2000000
    run(tool("pack_lmdb"), src, tmp_path / "long.lmdb", "-q")
    _, got = fields_by_path(tmp_path / "long.lmdb")
    assert len(got) == 2250
    for path, (ids,) in got.items():
        n, s, a, b = want[path]
        assert (len(ids), int(ids.astype(np.int64).sum()) if n else None) == (n, s), path
        if n:
            assert (ids[0], ids[-1]) == (a, b), path


PARQUET_WASM_LISTS = """
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tableToIPC, vectorFromArray, Table, Struct, Field, Binary, Utf8, Int64, Float32, List } from 'apache-arrow';
import * as pw from 'parquet-wasm/node';
const [dir, out, version, hf] = process.argv.slice(2);
const names = readdirSync(dir).filter(n => n.endsWith('.jpg')).sort();
const image = vectorFromArray(names.map(n => ({bytes: new Uint8Array(readFileSync(dir + '/' + n)), path: n})),
  new Struct([new Field('bytes', new Binary(), true), new Field('path', new Utf8(), true)]));
const label = vectorFromArray(names.map(n => BigInt(/class(\\d)/.exec(n)[1])), new Int64());
const f32 = new List(new Field('item', new Float32(), true));
const emb = vectorFromArray(names.map((n, i) => i % 5 == 0 ? null : Array.from({length: i % 4}, (_, k) => i + k / 4)), f32);
const objects = vectorFromArray(names.map((n, i) => ({
    bbox: Array.from({length: i % 3}, (_, k) => [k, k + 0.5, 2 + i % 9, 3]),
    category: Array.from({length: i % 3}, (_, k) => BigInt((i + k) % 2))})),
  new Struct([new Field('bbox', new List(new Field('item', f32, true)), true),
              new Field('category', new List(new Field('item', new Int64(), true)), true)]));
const props = new pw.WriterPropertiesBuilder().setWriterVersion(pw.WriterVersion[version]).setMaxRowGroupSize(40)
  .setKeyValueMetadata(new Map([['huggingface', hf]])).build();
const t = new Table({image, label, emb, objects});
writeFileSync(out, pw.writeParquet(pw.Table.fromIPCStream(tableToIPC(t, 'stream')), props));
"""


@pytest.mark.parametrize("version", ["V1", "V2"])
def test_parquet_wasm_lists_and_boxes(duckdb, jpegs, tmp_path, version):
    """arrow-rs (parquet-wasm) writes the lists (three row groups of 40
    rows): a list<float> floats field and objects' bbox / category boxes,
    every value DuckDB's reading of the same file."""
    d, items = jpegs
    script = tmp_path / "pw.mjs"
    script.write_text(PARQUET_WASM_LISTS)
    os.symlink(node_modules(), tmp_path / "node_modules")
    src = tmp_path / "w.parquet"
    r = subprocess.run(["node", str(script), str(d), str(src), version, HF_OBJECTS], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    want = {p: (unlist(e), unlist(b), unlist(c)) for p, e, b, c in duckdb(
        "SELECT image.path, emb, objects.bbox, objects.category FROM read_parquet('%s')" % src)}
    assert any(e is None for e, _, _ in want.values()) and max(len(b) for _, b, _ in want.values()) == 2
    run(tool("pack_lmdb"), src, tmp_path / "w.lmdb", "-q")
    m, got = fields_by_path(tmp_path / "w.lmdb")
    assert [(f["name"], f["kind"]) for f in m["fields"]] == [("emb", "floats"), ("objects.bbox", "boxes")]
    assert sorted(got) == sorted(n for n, _, _ in items)
    for path, (emb, (xy, cls)) in got.items():
        e, boxes, cats = want[path]
        assert list(emb) == [np.float32(x) for x in (e or [])], path
        assert xy.tolist() == [[x, y, x + w, y + h] for x, y, w, h in boxes] and cls.tolist() == cats, path


def by_bytes(recs):
    """(payload, label) of each record, sorted: what was packed, whatever its path."""
    return sorted((b, c) for _, b, c in recs)


# The dataset card's list form of the features (issue 57): each entry a
# name and a dtype (a string, or {"class_label": {"names": {"0": ...}}}),
# a struct, or a sequence of entries.
HF_CARD_LIST = json.dumps({"info": {"features": [
    {"name": "image", "dtype": "image"},
    {"name": "species", "dtype": {"class_label": {"names": {"2": "class2", "0": "class0", "1": "class1"}}}},
    {"name": "objects", "sequence": [{"name": "bbox", "sequence": "float32", "length": 4},
                                     {"name": "category", "dtype": {"class_label": {"names": {"0": "cat",
                                                                                               "1": "dog"}}}}]},
    {"name": "thumb", "dtype": "binary"}]}})


def test_hub_features_in_the_card_list_form(duckdb, jpegs, tmp_path):
    """Features as the dataset card lists them mean what the dict form
    means: the Image column is the image (a second binary column beside
    it is not), the ClassLabel "species" the label with its names in
    index order, the sequence's category names the boxes' classes."""
    d, items = jpegs
    src = tmp_path / "card.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS species, "
           "{'bbox': [[1, 2, 3, 4]]::FLOAT[][], 'category': [n %% 2]::BIGINT[]} AS objects, "
           "content[1:10] AS thumb "
           "FROM (SELECT *, row_number() OVER (ORDER BY filename) - 1 AS n FROM read_blob('%s/*.jpg'))) "
           "TO '%s' (FORMAT parquet, KV_METADATA {huggingface: '%s'})" % (d, src, HF_CARD_LIST))
    r = run(tool("pack_lmdb"), src, tmp_path / "c.lmdb", "-q")
    assert "no label column" not in r.stderr, r.stderr
    m, recs = records_of(tmp_path / "c.lmdb")
    assert m["classes"] == CLASSES
    assert sorted(recs) == [(n, b, c) for n, b, c in items]
    assert [(f["name"], f["kind"], f.get("classes")) for f in m["fields"]] == \
        [("objects.bbox", "boxes", ["cat", "dog"])]
    # names with an index missing are no names: the classes are numbered
    gap = HF_CARD_LIST.replace('"1": "class1"', '"3": "class1"')
    duckdb("COPY (SELECT * FROM read_parquet('%s')) TO '%s' (FORMAT parquet, KV_METADATA {huggingface: '%s'})"
           % (src, tmp_path / "gap.parquet", gap))
    run(tool("pack_lmdb"), tmp_path / "gap.parquet", tmp_path / "g.lmdb", "-q")
    m, recs = records_of(tmp_path / "g.lmdb")
    assert m["classes"] == ["0", "1", "2"] and by_bytes(recs) == sorted((b, c) for _, b, c in items)


HF_VALUES_STRUCT = json.dumps({"info": {"features": {
    "image": {"bytes": {"dtype": "binary", "_type": "Value"}, "path": {"dtype": "string", "_type": "Value"}},
    "mask": {"bytes": {"dtype": "binary", "_type": "Value"}, "path": {"dtype": "string", "_type": "Value"}},
    "label": {"names": CLASSES, "_type": "ClassLabel"}}}})


def test_an_image_saved_as_a_struct_of_values(duckdb, jpegs, tmp_path):
    """A dataset saved without the Image feature: its image a struct of
    Values bytes and path. With no column declared Image, the struct whose
    bytes are an image by their magic is the image; a struct of the same
    shape holding other bytes is not."""
    d, items = jpegs
    src = tmp_path / "values.parquet"
    duckdb("COPY (SELECT {'bytes': 'not an image, '::BLOB || content, 'path': 'm'} AS mask, "
           "{'bytes': content, 'path': parse_filename(filename)} AS image, "
           "CAST(regexp_extract(parse_filename(filename), 'class(\\d)', 1) AS BIGINT) AS label "
           "FROM read_blob('%s/*.jpg') ORDER BY filename) TO '%s' (FORMAT parquet, KV_METADATA {huggingface: '%s'})"
           % (d, src, HF_VALUES_STRUCT))
    run(tool("pack_lmdb"), src, tmp_path / "v.lmdb", "-q")
    m, recs = records_of(tmp_path / "v.lmdb")
    assert m["classes"] == CLASSES
    assert sorted(recs) == [(n, b, c) for n, b, c in items]
    # neither struct an image: no image column, named
    duckdb("COPY (SELECT * REPLACE ({'bytes': 'text'::BLOB, 'path': 'p'} AS image) FROM read_parquet('%s')) "
           "TO '%s' (FORMAT parquet, KV_METADATA {huggingface: '%s'})" % (src, tmp_path / "no.parquet",
                                                                          HF_VALUES_STRUCT))
    r = run(tool("pack_lmdb"), tmp_path / "no.parquet", tmp_path / "n.lmdb", ok=False)
    assert r.returncode == 1 and "no image column" in r.stderr, r.stderr


def test_a_file_without_labels_is_one_entry_naming_no_class(duckdb, jpegs, tmp_path):
    """A file without a label column: one entry for the file counting its
    90 rows and naming --no-class (alone, nothing is packed: exit 1);
    --no-class packs every row. A file whose label column is null in every
    row, beside a labelled one of its schema: one entry too, the other
    file packed (exit 3). Read in place, the error names the file,
    --no-class and --label-column; no_class=True reads the rows unlabelled.""" 
    import imagepack
    d, items = jpegs
    want_items = sorted((b, c) for _, b, c in items)
    nolabel = tmp_path / "nolabel.parquet"
    duckdb("COPY (SELECT {'bytes': content, 'path': parse_filename(filename)} AS image FROM read_blob('%s/*.jpg') "
           "ORDER BY filename) TO '%s' (FORMAT parquet, KV_METADATA {huggingface: '%s'})"
           % (d, nolabel, json.dumps({"info": {"features": {"image": {"_type": "Image"}}}})))
    said = (": no label in any of its 90 rows (no ClassLabel or integer label column): its rows are skipped; "
            "--no-class (no_class=True in Python) reads them without classes, --label-column NAME names the label "
            "column")
    r = run(tool("pack_lmdb"), nolabel, tmp_path / "y.lmdb", "--errors", tmp_path / "e.txt", ok=False)
    assert r.returncode == 1, r.stderr
    assert (tmp_path / "e.txt").read_text().splitlines() == [str(nolabel) + said.replace(": ", "\t", 1)]
    assert [ln for ln in r.stderr.splitlines() if "skipped " + str(nolabel) in ln] == \
        ["pack_lmdb: skipped " + str(nolabel) + said], r.stderr
    assert "every input was skipped" in r.stderr and "row 0" not in r.stderr, r.stderr
    run(tool("pack_lmdb"), nolabel, tmp_path / "z.lmdb", "-q", "--no-class")
    m, recs = records_of(tmp_path / "z.lmdb")
    assert m["classes"] == [] and sorted((b, c) for _, b, c in recs) == sorted((b, -1) for _, b, _ in items)
    for opener in (imagepack.open, lambda p: imagepack.Loader(p, 8, 32)):
        with pytest.raises(Exception) as e:
            opener(str(nolabel))
        text = str(e.value)
        assert str(nolabel) + said in text, text
    assert len(imagepack.open(str(nolabel), no_class=True)) == 90
    loader = imagepack.Loader(str(nolabel), 10, 32, train=False, no_class=True, as_torch=False)
    assert loader.meta["classes"] == []
    assert sorted(int(x) for b in loader for x in (b["label"] if isinstance(b, dict) else b[1])) == [-1] * 90
    # a labelled file and one whose labels are all null, one source
    data = tmp_path / "data"
    data.mkdir()
    write_parquet(duckdb, jpegs, data / "a.parquet", "COMPRESSION snappy")
    duckdb("COPY (SELECT * REPLACE (NULL::BIGINT AS label) FROM read_parquet('%s')) TO '%s' "
           "(FORMAT parquet, KV_METADATA {huggingface: '%s'})" % (data / "a.parquet", data / "b.parquet", HF))
    r = run(tool("pack_lmdb"), data, tmp_path / "x.lmdb", "--errors", tmp_path / "e2.txt", ok=False)
    assert r.returncode == 3, r.stderr
    assert (tmp_path / "e2.txt").read_text().splitlines() == [
        str(data / "b.parquet") + "\tno label in any of its 90 rows (column label is null in each): its rows are "
        "skipped; --no-class (no_class=True in Python) reads them without classes, --label-column NAME names the "
        "label column"]
    assert r.stderr.count("skipped " + str(data / "b.parquet")) == 1, r.stderr
    assert "90 records in 3 classes" in r.stdout and "90 skipped" in r.stdout, r.stdout
    m, recs = records_of(tmp_path / "x.lmdb")
    assert m["classes"] == CLASSES and by_bytes(recs) == want_items
