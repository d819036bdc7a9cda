"""Parquet files written by hand from the specifications, no parquet
library involved: the Thrift compact protocol (Apache Thrift's
doc/specs/thrift-compact-protocol.md: field headers as a delta and a type
in one byte, zigzag varints, list / set headers of a size and an element
type, map headers, STOP ending a structure) and Apache Parquet's file
layout (parquet-format's README and parquet.thrift: "PAR1", column
chunks of page headers and pages, the FileMetaData footer, its 4-byte
little-endian length, "PAR1"; PLAIN, RLE / bit-packed hybrid,
RLE_DICTIONARY, DELTA_BINARY_PACKED and DELTA_BYTE_ARRAY encodings). The
zstd frames (RFC 8878: raw and RLE blocks) and snappy streams (snappy's
format_description.txt: literals) are written by hand too.

hub_file() writes a valid file in the Hugging Face Hub's image layout (an
image struct<bytes, path> and an INT64 label, the "huggingface" key-value
metadata naming the classes); the other functions write the hostile
files of issue 57, each aimed at one budget of lib/src/base/limits.h.
Used by test_hostile_parquet.py and tests/fuzz/make_format_seeds.py."""
import struct
import zlib

# ---- Thrift compact protocol ------------------------------------------

STOP, TRUE, FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)


def varint(n):
    assert n >= 0
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(n):
    return (n << 1) ^ (n >> 63) if n < 0 else n << 1


def struct_(*fields):
    """A structure: (id, type, encoded value) fields in order, then STOP."""
    out = bytearray()
    last = 0
    for fid, t, payload in fields:
        if 0 < fid - last <= 15:
            out.append((fid - last) << 4 | t)
        else:
            out.append(t)
            out += varint(zigzag(fid))
        out += payload
        last = fid
    out.append(STOP)
    return bytes(out)


def i32(fid, v):
    return fid, I32, varint(zigzag(v))


def i64(fid, v):
    return fid, I64, varint(zigzag(v))


def binary(fid, b):
    b = b.encode() if isinstance(b, str) else b
    return fid, BINARY, varint(len(b)) + b


def boolean(fid, v):
    return fid, TRUE if v else FALSE, b""


def sub(fid, *fields):
    return fid, STRUCT, struct_(*fields)


def list_header(etype, n):
    return bytes([n << 4 | etype]) if n < 15 else bytes([0xF0 | etype]) + varint(n)


def list_(fid, etype, elems):
    """A list of encoded elements (structures, varints, strings)."""
    return fid, LIST, list_header(etype, len(elems)) + b"".join(elems)


def raw(fid, t, payload):
    """A field whose value is given already encoded (a hostile one)."""
    return fid, t, payload


# ---- parquet.thrift ----------------------------------------------------

BOOLEAN_T, INT32_T, INT64_T, INT96_T, FLOAT_T, DOUBLE_T, BYTE_ARRAY_T, FIXED_T = range(8)
REQUIRED, OPTIONAL, REPEATED = range(3)
PLAIN, PLAIN_DICTIONARY, RLE, DELTA_BINARY_PACKED, DELTA_BYTE_ARRAY, RLE_DICTIONARY = 0, 2, 3, 5, 7, 8
UNCOMPRESSED, SNAPPY, GZIP, ZSTD = 0, 1, 2, 6
DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE = 0, 1, 2
UTF8 = 0  # ConvertedType


def schema_element(name, type=None, repetition=None, children=None, converted=None):
    f = []
    if type is not None:
        f.append(i32(1, type))
    if repetition is not None:
        f.append(i32(3, repetition))
    f.append(binary(4, name))
    if children is not None:
        f.append(i32(5, children))
    if converted is not None:
        f.append(i32(6, converted))
    return struct_(*f)


def page_header(kind, uncompressed, compressed, num_values=0, encoding=PLAIN, extra=()):
    """PageHeader: DataPageHeader (field 5, levels RLE) or
    DictionaryPageHeader (field 7) as `kind` says."""
    f = [i32(1, kind), i32(2, uncompressed), i32(3, compressed)]
    if kind == DATA_PAGE:
        f.append(sub(5, i32(1, num_values), i32(2, encoding), i32(3, RLE), i32(4, RLE)))
    elif kind == DICTIONARY_PAGE:
        f.append(sub(7, i32(1, num_values), i32(2, PLAIN)))
    return struct_(*f, *extra)


def column_meta(type, path, codec, num_values, uncompressed, compressed, data_page_offset,
                dictionary_page_offset=None, encodings=(PLAIN, RLE)):
    f = [i32(1, type), list_(2, I32, [varint(zigzag(e)) for e in encodings]),
         list_(3, BINARY, [varint(len(p)) + p.encode() for p in path]), i32(4, codec), i64(5, num_values),
         i64(6, uncompressed), i64(7, compressed), i64(9, data_page_offset)]
    if dictionary_page_offset is not None:
        f.append(i64(11, dictionary_page_offset))
    return struct_(*f)


def column_chunk(offset, meta):
    return struct_(i64(2, offset), (3, STRUCT, meta))


def row_group(chunks, total_bytes, num_rows):
    return struct_(list_(1, STRUCT, chunks), i64(2, total_bytes), i64(3, num_rows))


def file_metadata(schema, num_rows, row_groups, kv=(), extra=()):
    f = [i32(1, 1), list_(2, STRUCT, schema), i64(3, num_rows), list_(4, STRUCT, row_groups)]
    if kv:
        f.append(list_(5, STRUCT, [struct_(binary(1, k), binary(2, v)) for k, v in kv]))
    f.append(binary(6, "hostile_parquet.py (tests/python)"))
    return struct_(*f, *extra)


def file_bytes(body, footer):
    """PAR1, the column chunks (`body`, placed at byte 4), the footer, its
    length, PAR1."""
    return b"PAR1" + body + footer + struct.pack("<I", len(footer)) + b"PAR1"


# ---- encodings and codecs ----------------------------------------------

def plain(type, values):
    if type == BYTE_ARRAY_T:
        return b"".join(struct.pack("<I", len(v)) + v for v in values)
    if type == INT64_T:
        return b"".join(struct.pack("<q", v) for v in values)
    if type == INT32_T:
        return b"".join(struct.pack("<i", v) for v in values)
    raise ValueError(type)


def rle_run(count, value, bit_width):
    """One RLE run of the hybrid: a header (count << 1), then the value in
    ceil(bit_width / 8) bytes."""
    return varint(count << 1) + value.to_bytes((bit_width + 7) // 8, "little")


def gzip_(data):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    return z.compress(data) + z.flush()


def snappy_(data):
    """A snappy stream of literals only (valid, uncompressed in effect)."""
    out = bytearray(varint(len(data)))
    for i in range(0, len(data), 60):
        chunk = data[i:i + 60]
        out.append((len(chunk) - 1) << 2)
        out += chunk
    return bytes(out)


ZSTD_MAGIC = struct.pack("<I", 0xFD2FB528)
ZSTD_BLOCK = 128 << 10


def zstd_header():
    # Frame_Header_Descriptor 0 (no content size, no checksum, not single
    # segment), then a Window_Descriptor of 2^17 bytes (exponent 7).
    return ZSTD_MAGIC + b"\x00" + bytes([7 << 3])


def zstd_block(last, kind, size):
    return (size << 3 | kind << 1 | int(last)).to_bytes(3, "little")


def zstd_(data):
    """A zstd frame of raw blocks."""
    out = bytearray(zstd_header())
    pieces = [data[i:i + ZSTD_BLOCK] for i in range(0, len(data), ZSTD_BLOCK)] or [b""]
    for k, p in enumerate(pieces):
        out += zstd_block(k == len(pieces) - 1, 0, len(p)) + p
    return bytes(out)


def zstd_rle_bomb(size, byte=0):
    """A zstd frame of RLE blocks: 4 bytes per 128 KiB of `byte`."""
    out = bytearray(zstd_header())
    blocks = size // ZSTD_BLOCK
    for k in range(blocks):
        out += zstd_block(k == blocks - 1, 1, ZSTD_BLOCK) + bytes([byte])
    return bytes(out)


COMPRESS = {UNCOMPRESSED: lambda d: d, SNAPPY: snappy_, GZIP: gzip_, ZSTD: zstd_}


def data_page(values_bytes, num_values, codec=UNCOMPRESSED, encoding=PLAIN, levels=b""):
    """A v1 data page of a required column (no levels) or of one whose
    `levels` are given (with their 4-byte length)."""
    body = levels + values_bytes
    packed = COMPRESS[codec](body)
    return page_header(DATA_PAGE, len(body), len(packed), num_values, encoding) + packed


# ---- the Hub's layout --------------------------------------------------

def hub_schema():
    return [schema_element("schema", children=2),
            schema_element("image", repetition=REQUIRED, children=2),
            schema_element("bytes", BYTE_ARRAY_T, REQUIRED),
            schema_element("path", BYTE_ARRAY_T, REQUIRED, converted=UTF8),
            schema_element("label", INT64_T, REQUIRED)]


def hf_metadata(names):
    import json
    return ("huggingface", json.dumps({"info": {"features": {
        "image": {"_type": "Image"}, "label": {"names": list(names), "_type": "ClassLabel"}}}}))


LEAVES = ((BYTE_ARRAY_T, ["image", "bytes"]), (BYTE_ARRAY_T, ["image", "path"]), (INT64_T, ["label"]))


def assemble(groups, schema=None, kv=(), extra=()):
    """A file of row groups, each (num_rows, [(type, path, codec, num_values,
    pages, dictionary_bytes)]): the pages of each chunk placed one after
    another (a dictionary page first, its `dictionary_bytes` long)."""
    body = bytearray()
    rgs = []
    total = 0
    for rows, chunks in groups:
        metas = []
        size = 0
        for type, path, codec, nv, pages, dict_len in chunks:
            at = 4 + len(body)
            body += pages
            meta = column_meta(type, path, codec, nv, len(pages), len(pages), at + dict_len,
                               at if dict_len else None,
                               (PLAIN, RLE, RLE_DICTIONARY) if dict_len else (PLAIN, RLE))
            metas.append(column_chunk(at, meta))
            size += len(pages)
        rgs.append(row_group(metas, size, rows))
        total += rows
    footer = file_metadata(schema or hub_schema(), total, rgs, kv, extra)
    return file_bytes(bytes(body), footer)


def hub_file(images, labels, names=None, paths=None, codec=UNCOMPRESSED, groups=1):
    """The Hub's layout: image struct<bytes, path>, INT64 label, one data
    page per column per row group, `codec` for every page."""
    paths = paths or ["%05d.jpg" % i for i in range(len(images))]
    kv = [hf_metadata(names)] if names else []
    out = []
    per = -(-len(images) // groups)
    for g in range(0, len(images), per):
        im, pa, la = images[g:g + per], paths[g:g + per], labels[g:g + per]
        chunks = []
        for (type, path), vals in zip(LEAVES, ([bytes(x) for x in im], [p.encode() for p in pa], la)):
            chunks.append((type, path, codec, len(vals), data_page(plain(type, vals), len(vals), codec), 0))
        out.append((len(im), chunks))
    return assemble(out, kv=kv)


def label_chunk(labels, codec=UNCOMPRESSED):
    return (INT64_T, ["label"], codec, len(labels), data_page(plain(INT64_T, labels), len(labels), codec), 0)


def path_chunk(n, codec=UNCOMPRESSED):
    vals = [("%05d.jpg" % i).encode() for i in range(n)]
    return (BYTE_ARRAY_T, ["image", "path"], codec, n, data_page(plain(BYTE_ARRAY_T, vals), n, codec), 0)


# ---- hostile files (issue 57) ------------------------------------------

def nested(kind, depth):
    """A Thrift value of type LIST, SET, MAP or STRUCT holding one of its
    own kind, `depth` deep: its type and its bytes."""
    if kind == "list":
        return LIST, bytes([1 << 4 | LIST]) * (depth - 1) + bytes([0 << 4 | I32])
    if kind == "set":
        return SET, bytes([1 << 4 | SET]) * (depth - 1) + bytes([0 << 4 | I32])
    if kind == "map":  # one entry, i32 key 0, its value the next map
        return MAP, (varint(1) + bytes([I32 << 4 | MAP]) + b"\x00") * (depth - 1) + b"\x00"
    if kind == "struct":  # field 1 a structure, STOPs at the end
        return STRUCT, bytes([1 << 4 | STRUCT]) * (depth - 1) + b"\x00" * depth
    raise ValueError(kind)


def deep_footer(jpg, kind, depth=50_000):
    """A valid file whose footer carries an unknown field 20 holding
    `kind` containers nested `depth` deep (a reader skips unknown fields:
    a recursive skip is a stack overflow)."""
    t, payload = nested(kind, depth)
    good = [jpg, jpg]
    chunks = [(BYTE_ARRAY_T, ["image", "bytes"], UNCOMPRESSED, 2, data_page(plain(BYTE_ARRAY_T, good), 2), 0),
              path_chunk(2), label_chunk([0, 1])]
    return assemble([(2, chunks)], extra=[raw(20, t, payload)])


def deep_schema(depth=50_000):
    """Schema groups nested `depth` deep, each of one child, a leaf at the
    bottom."""
    schema = [schema_element("schema", children=1)]
    schema += [schema_element("g%d" % i, repetition=OPTIONAL, children=1) for i in range(depth)]
    schema.append(schema_element("bytes", BYTE_ARRAY_T, OPTIONAL))
    return file_bytes(b"", file_metadata(schema, 0, []))


def deep_page_header(jpg, kind, depth=50_000):
    """The image column's page header carries an unknown field 20 of
    `kind` containers nested `depth` deep."""
    t, payload = nested(kind, depth)
    vals = plain(BYTE_ARRAY_T, [jpg, jpg])
    page = page_header(DATA_PAGE, len(vals), len(vals), 2, PLAIN, extra=[raw(20, t, payload)]) + vals
    chunks = [(BYTE_ARRAY_T, ["image", "bytes"], UNCOMPRESSED, 2, page, 0), path_chunk(2), label_chunk([0, 1])]
    return assemble([(2, chunks)])


def header_flood(jpg, pages=1_200_000, kind=INDEX_PAGE):
    """The image column chunk begins with `pages` page headers of 3 bytes
    (an index page, or a data page of no values, of no bytes), then a
    real page."""
    tiny = struct_(i32(1, kind))  # 0x15 kind STOP: sizes 0
    vals = plain(BYTE_ARRAY_T, [jpg])
    page = tiny * pages + data_page(vals, 1)
    chunks = [(BYTE_ARRAY_T, ["image", "bytes"], UNCOMPRESSED, 1, page, 0), path_chunk(1), label_chunk([0])]
    return assemble([(1, chunks)])


def shared_chunk_groups(jpg, groups=1_000_000, fits=True):
    """`groups` row groups of one row each, all of them pointing at the same
    two column chunks (the image and the label). With `fits`, the chunks are
    small enough that their sizes, counted once per row group, still add up
    to less than the file; else a chunk of the image's size."""
    img = jpg if not fits else b"\xff\xd8"
    schema = [schema_element("schema", children=2), schema_element("image", BYTE_ARRAY_T, REQUIRED),
              schema_element("label", INT64_T, REQUIRED)]
    body = bytearray()
    metas = []
    for type, path, vals in ((BYTE_ARRAY_T, ["image"], [img]), (INT64_T, ["label"], [0])):
        at = 4 + len(body)
        pages = data_page(plain(type, vals), 1)
        body += pages
        metas.append(column_chunk(at, column_meta(type, path, UNCOMPRESSED, 1, len(pages), len(pages), at)))
    rg = row_group(metas, len(body), 1)
    footer = struct_(i32(1, 1), list_(2, STRUCT, schema), i64(3, groups),
                     (4, LIST, list_header(STRUCT, groups) + rg * groups))
    return file_bytes(bytes(body), footer)


def dictionary_bomb(entry=16 << 20, rows=64, rows_per_page=8):
    """A dictionary of one `entry`-byte string (its page gzip-compressed),
    and data pages whose values are one RLE run of index 0 (bit width 0):
    `rows` rows, each the whole entry."""
    d = plain(BYTE_ARRAY_T, [b"A" * entry])
    dpage = gzip_(d)
    pages = page_header(DICTIONARY_PAGE, len(d), len(dpage), 1) + dpage
    dict_len = len(pages)
    for k in range(0, rows, rows_per_page):
        n = min(rows_per_page, rows - k)
        pages += data_page(b"\x00" + rle_run(n, 0, 0), n, GZIP, RLE_DICTIONARY)
    chunks = [(BYTE_ARRAY_T, ["image", "bytes"], GZIP, rows, pages, dict_len), path_chunk(rows), label_chunk([0] * rows)]
    return assemble([(rows, chunks)])


def stated_gigabyte(codec, bomb=False):
    """A data page whose header states 1 GiB uncompressed over a body of a
    few bytes (a real page of 2 values, compressed), or with `bomb` (zstd)
    a body that really makes 1 GiB: 8192 RLE blocks in 32 KB."""
    vals = plain(BYTE_ARRAY_T, [b"\xff\xd8", b"\xff\xd8"])
    body = zstd_rle_bomb(1 << 30) if bomb else COMPRESS[codec](vals)
    page = page_header(DATA_PAGE, 1 << 30, len(body), 2, PLAIN) + body
    chunks = [(BYTE_ARRAY_T, ["image", "bytes"], codec, 2, page, 0), path_chunk(2, codec), label_chunk([0, 1], codec)]
    return assemble([(2, chunks)])


def chunk_flood(row_groups=50, chunks=100_000):
    """A ~5 MB footer: row groups of `chunks` column chunks of one byte each
    (an empty structure)."""
    rg = struct_((1, LIST, list_header(STRUCT, chunks) + b"\x00" * chunks), i64(3, 0))
    schema = hub_schema()
    return file_bytes(b"", struct_(i32(1, 1), list_(2, STRUCT, schema), i64(3, 0),
                                   (4, LIST, list_header(STRUCT, row_groups) + rg * row_groups)))


def column_flood(row_groups=50, columns=99_999):
    """A ~5 MB footer: `columns` leaf columns (3 bytes each: a BYTE_ARRAY of
    no name) and row groups of as many 1-byte column chunks."""
    leaf = struct_(i32(1, BYTE_ARRAY_T))
    schema = [schema_element("schema", children=columns)] + [leaf] * columns
    rg = struct_((1, LIST, list_header(STRUCT, columns) + b"\x00" * columns), i64(3, 0))
    return file_bytes(b"", struct_(i32(1, 1), list_(2, STRUCT, schema), i64(3, 0),
                                   (4, LIST, list_header(STRUCT, row_groups) + rg * row_groups)))


def delta_ints(values):
    """DELTA_BINARY_PACKED of `values` whose deltas are all equal: blocks of
    128 in 4 miniblocks, every miniblock bit width 0."""
    out = bytearray(varint(128) + varint(4) + varint(len(values)) + varint(zigzag(values[0] if values else 0)))
    if len(values) > 1:
        step = values[1] - values[0]
        assert all(b - a == step for a, b in zip(values, values[1:]))
        for _ in range(-(-(len(values) - 1) // 128)):
            out += varint(zigzag(step)) + b"\x00" * 4
    return bytes(out)


def delta_byte_array_bomb(rows=40_000):
    """DELTA_BYTE_ARRAY: value k keeps all of value k - 1 (prefix k) and adds
    one byte, so `rows` bytes of suffixes rebuild rows^2 / 2 bytes (800 MB
    from 40 KB at 40,000)."""
    prefixes = delta_ints(list(range(rows)))
    suffixes = delta_ints([1] * rows) + b"x" * rows
    body = prefixes + suffixes
    page = page_header(DATA_PAGE, len(body), len(body), rows, DELTA_BYTE_ARRAY) + body
    labels = delta_ints([0] * rows)
    chunks = [(BYTE_ARRAY_T, ["image", "bytes"], UNCOMPRESSED, rows, page, 0),
              (INT64_T, ["label"], UNCOMPRESSED, rows, data_page(labels, rows, encoding=DELTA_BINARY_PACKED), 0)]
    schema = [schema_element("schema", children=2), schema_element("image", repetition=REQUIRED, children=1),
              schema_element("bytes", BYTE_ARRAY_T, REQUIRED), schema_element("label", INT64_T, REQUIRED)]
    return assemble([(rows, chunks)], schema=schema)


def odd_labels(jpg, labels, names=None):
    """A valid file whose label column holds `labels` (INT64_MAX and the like
    among good ones)."""
    return hub_file([jpg] * len(labels), labels, names=names)
