"""Hostile parquet files (issue 57) through every tool that reads one and
through the Python package reading it in place, each run under the time
and peak-memory budget of test_outside_input.budgeted: a clear error
naming the file and the reason (or, for a bad label, its row skipped and
named), never an abort, a hang or gigabytes. The files are written by
hand from the specifications (hostile_parquet.py); the writer is proven
first on valid files that DuckDB and the tools read alike, so that what
the hostile files exercise is the budget, not a writer's mistake."""
import io
import os
import sys
import time

import pytest
from PIL import Image

import hostile_parquet as hp
from conftest import SCRIPTS, run, tool
from test_outside_input import budgeted
from test_parquet import duckdb  # noqa: F401 (fixture)

sys.path.insert(0, SCRIPTS)
import read_db  # noqa: E402

try:
    import imagepack
except ImportError:  # the sanitizer builds have no Python package: tool tests only
    imagepack = None

needs_package = pytest.mark.skipif(imagepack is None, reason="the Python package is not built here")

NAMES = ["cat", "dog", "fox"]


def jpeg(seed):
    b = io.BytesIO()
    Image.new("RGB", (16, 12), (40 * seed % 256, 90, 200)).save(b, "JPEG", quality=80)
    return b.getvalue()


JPG = jpeg(1)
BIG, SMALL = 2**63 - 1, -2**63
DEEP = {"list": "lists", "set": "sets", "map": "maps", "struct": "structures"}
OVER = "expand the file past its budget of"

# name: (the file, pack_lmdb's exit status, what its error says)
CASES = {}
for kind, word in DEEP.items():
    CASES["deep-footer-" + kind] = (lambda k=kind: hp.deep_footer(JPG, k), 1,
                                    "Thrift: %s nested deeper than 64 at byte" % word)
    CASES["deep-page-header-" + kind] = (lambda k=kind: hp.deep_page_header(JPG, k), 1,
                                         "page 0: page header: Thrift: %s nested deeper than 64" % word)
CASES.update({
    "deep-schema": (hp.deep_schema, 1, "a schema nested too deep"),
    "page-header-flood-index": (lambda: hp.header_flood(JPG, kind=hp.INDEX_PAGE), 1,
                                "page 1000000: more than 1000000 pages in a column chunk (budget)"),
    "page-header-flood-data": (lambda: hp.header_flood(JPG, kind=hp.DATA_PAGE), 1,
                               "page 1000000: more than 1000000 pages in a column chunk (budget)"),
    "million-row-groups-one-chunk": (lambda: hp.shared_chunk_groups(JPG, fits=False), 1,
                                     "its column chunks add up to more bytes than the file's"),
    # chunks small enough to pass that check: each row group really read,
    # the work linear in the file (1M of them took 19 s alone: 250k here)
    "row-groups-one-tiny-chunk": (lambda: hp.shared_chunk_groups(JPG, groups=250_000, fits=True), 1,
                                  "not an image"),
    "dictionary-16mib-every-row": (hp.dictionary_bomb, 1, "page 2: dictionary values " + OVER),
    "gigabyte-page-snappy": (lambda: hp.stated_gigabyte(hp.SNAPPY), 1,
                             "page 0: snappy: the page does not inflate to its stated 1073741824 bytes"),
    "gigabyte-page-gzip": (lambda: hp.stated_gigabyte(hp.GZIP), 1,
                           "page 0: gzip: the page does not inflate to its stated 1073741824 bytes"),
    "gigabyte-page-zstd": (lambda: hp.stated_gigabyte(hp.ZSTD), 1,
                           "page 0: zstd: the page does not inflate to its stated 1073741824 bytes"),
    "gigabyte-page-zstd-rle-blocks": (lambda: hp.stated_gigabyte(hp.ZSTD, bomb=True), 1,
                                      "page 0: inflated pages " + OVER),
    "footer-of-1-byte-column-chunks": (hp.chunk_flood, 1, "the footer's column chunks at byte"),
    "footer-of-many-columns": (hp.column_flood, 1, "the footer's column chunks at byte"),
    "delta-byte-array-800mb": (hp.delta_byte_array_bomb, 1, "page 0: DELTA_BYTE_ARRAY's rebuilt values " + OVER),
    # labels past int32 either way: without class names, past the sparse
    # classes' budget (the file refused naming the row), or not a class
    "label-int64-max": (lambda: hp.odd_labels(JPG, [0, BIG, 1]), 1,
                        "row 1: label 9223372036854775807 is far beyond the 3 distinct labels"),
    "label-int64-min": (lambda: hp.odd_labels(JPG, [0, SMALL, 1]), 3,
                        "row 1\tlabel -9223372036854775808 is not a class of the 2"),
    "label-2p31": (lambda: hp.odd_labels(JPG, [0, 2**31, 1]), 1,
                   "row 1: label 2147483648 is far beyond the 3 distinct labels"),
    "classlabel-int64-max": (lambda: hp.odd_labels(JPG, [0, BIG, 1], NAMES), 3,
                             "row 1\tlabel 9223372036854775807 is not a class of the 3"),
    "classlabel-int64-min": (lambda: hp.odd_labels(JPG, [0, SMALL, 1], NAMES), 3,
                             "row 1\tlabel -9223372036854775808 is not a class of the 3"),
    "classlabel-2p31": (lambda: hp.odd_labels(JPG, [0, 2**31, 1], NAMES), 3,
                        "row 1\tlabel 2147483648 is not a class of the 3"),
})


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A valid file in the Hub's layout and its database."""
    d = tmp_path_factory.mktemp("good")
    src = d / "good.parquet"
    src.write_bytes(hp.hub_file([jpeg(i) for i in range(6)], [0, 1, 2, 2, 1, 0], NAMES))
    run(tool("pack_lmdb"), src, d / "good.lmdb", "-q")
    return src, d / "good.lmdb"


def records_of(db):
    d = read_db.open_db(str(db))
    return d.meta, [read_db.read_record(d, i) for i in range(d.meta["count"])]


# ---- the writer, proven on valid files --------------------------------

@pytest.mark.parametrize("codec", [hp.UNCOMPRESSED, hp.SNAPPY, hp.GZIP, hp.ZSTD])
def test_valid_files_read_alike_by_duckdb_and_the_tools(duckdb, tmp_path, codec):  # noqa: F811
    """hub_file() in each codec (two row groups): DuckDB reads the rows the
    writer meant; pack_lmdb packs the same images, paths and classes, and
    verify_db --against the file passes."""
    images = [jpeg(i) for i in range(6)]
    labels = [0, 1, 2, 2, 1, 0]
    src = tmp_path / "v.parquet"
    src.write_bytes(hp.hub_file(images, labels, NAMES, codec=codec, groups=2))
    got = duckdb("SELECT hex(image.bytes), image.path, label FROM read_parquet('%s') ORDER BY image.path" % src)
    assert got == [[b.hex().upper(), "%05d.jpg" % i, c] for i, (b, c) in enumerate(zip(images, labels))]
    run(tool("pack_lmdb"), src, tmp_path / "v.lmdb", "-q")
    meta, recs = records_of(tmp_path / "v.lmdb")
    assert meta["classes"] == NAMES
    assert sorted((r["path"], bytes(r["payload"]), r["label"]) for r in recs) == \
        [("%05d.jpg" % i, b, c) for i, (b, c) in enumerate(zip(images, labels))]
    run(tool("verify_db"), tmp_path / "v.lmdb", "--against", src, "-q")


def test_hostile_shapes_small_are_valid_files(duckdb, tmp_path):  # noqa: F811
    """The encodings the bombs use, at a harmless size, are what DuckDB
    reads too: a gzipped dictionary of one entry repeated by RLE runs, a
    DELTA_BYTE_ARRAY whose values grow by one byte, and row groups that
    share one column chunk."""
    (tmp_path / "d.parquet").write_bytes(hp.dictionary_bomb(entry=10, rows=20, rows_per_page=8))
    assert duckdb("SELECT count(*), sum(octet_length(image.bytes)), min(hex(image.bytes)) FROM read_parquet('%s')"
                  % (tmp_path / "d.parquet")) == [[20, 200, "41" * 10]]
    (tmp_path / "b.parquet").write_bytes(hp.delta_byte_array_bomb(rows=300))
    assert duckdb("SELECT count(*), sum(octet_length(image.bytes)), max(octet_length(image.bytes)), sum(label) "
                  "FROM read_parquet('%s')" % (tmp_path / "b.parquet")) == [[300, 300 * 301 // 2, 300, 0]]
    (tmp_path / "s.parquet").write_bytes(hp.shared_chunk_groups(JPG, groups=5))
    assert duckdb("SELECT count(*), sum(octet_length(image)) FROM read_parquet('%s')"
                  % (tmp_path / "s.parquet")) == [[5, 10]]


# ---- hostile files through the tools ----------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_hostile_parquet_through_the_tools(good, tmp_path, name):
    make, code, why = CASES[name]
    src = tmp_path / (name + ".parquet")
    src.write_bytes(make())
    shown = str(src)
    t0 = time.monotonic()
    rc, _, err, peak = budgeted(tool("pack_lmdb"), src, tmp_path / "o.lmdb", "-q", "--errors", tmp_path / "e.txt")
    print("%s: pack_lmdb rc %d, peak %d MB, %.2f s" % (name, rc, peak, time.monotonic() - t0))
    errors = (tmp_path / "e.txt").read_text() if (tmp_path / "e.txt").exists() else ""
    assert rc == code, err[-2000:]
    # items are named FILE_NAME/ROW.EXT, the rest by the file's path
    assert src.name in err and why in err + errors, (err + errors)[-2000:]
    if rc == 3:  # the rest packed: the database matches the file
        budgeted(tool("verify_db"), tmp_path / "o.lmdb", "--against", src, "-q", ok_codes=(0,))
    else:
        assert not (tmp_path / "o.lmdb").exists()
    # the good database checked against the hostile file: refused or
    # mismatched, within budget
    rc, out, err, _ = budgeted(tool("verify_db"), good[1], "--against", src, "-q")
    assert rc == 1 and shown in out + err, out + err
    # read in place as a database: refused naming the file
    for args in ([tool("inspect_db"), src, "--out", tmp_path / "i", "--summary", "-q"],
                 [tool("export_db"), src, tmp_path / "x", "-q"]):
        rc, out, err, _ = budgeted(*args)
        assert rc == 1 and shown in err, err
        if code == 1 or "label" in name:
            assert why.replace("\t", ": ") in err, err


IN_PLACE = """
import sys, imagepack
try:
    d = imagepack.open(sys.argv[1]) if sys.argv[2] == "open" else imagepack.Loader(sys.argv[1], 8, 32, as_torch=False)
    print("read", len(d))
except Exception as e:
    print("refused", str(e))
"""


@needs_package
@pytest.mark.parametrize("name", list(CASES))
def test_hostile_parquet_in_place(tmp_path, name):
    make, code, why = CASES[name]
    src = tmp_path / (name + ".parquet")
    src.write_bytes(make())
    for how in ("open", "Loader"):
        rc, out, err, _ = budgeted(sys.executable, "-c", IN_PLACE, src, how)
        assert rc == 0 and out.startswith("refused") and str(src) in out, out + err
        assert why.replace("\t", ": ") in out, out
