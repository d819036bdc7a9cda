"""The kind table in its three places: the library's (IMAGEPACK_FIELD_KINDS
in lib/include/imagepack/fields.h, through the Python package),
docs/FORMAT.md's "Kinds" table and scripts/read_db.py's copy agree; and a
dataset's format version comes from its kinds' first formats.

Adding a kind of an existing layout is a row in the library's table and in
FORMAT.md, and a case here; read_db.py's copy is generated:

    PYTHONPATH=build/python python3 tests/python/test_kinds.py --update
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
READ_DB = os.path.join(ROOT, "scripts", "read_db.py")
FORMAT_MD = os.path.join(ROOT, "docs", "FORMAT.md")
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def library_kinds():
    import imagepack._imagepack as ext
    return ext.kinds()


def generated_block(kinds):
    """read_db.py's table, as generated from the library's."""
    rows = "".join('    %d: ("%s", "%s", %d),\n' % (k["byte"], k["name"], k["layout"], k["first_format"])
                   for k in kinds)
    floats = ", ".join('"%s"' % k["name"] for k in kinds if k["floats"])
    return ("# BEGIN KINDS (generated from the library's kind table: tests/python/test_kinds.py --update)\n"
            "KINDS = {\n" + rows + "}\nFLOAT_LISTS = {" + floats + "}\n# END KINDS\n")


def current_block(text):
    m = re.search(r"# BEGIN KINDS.*?# END KINDS\n", text, re.S)
    assert m, "read_db.py has no generated KINDS block"
    return m


def format_md_kinds():
    text = open(FORMAT_MD, encoding="utf-8").read()
    section = text[text.index("### Kinds"):]
    section = section[:section.index("Data per kind")]
    rows = re.findall(r"^\| (\d+) \| (\w+) \| (\w+) \| (\d+) \|$", section, re.M)
    return [dict(byte=int(b), name=n, layout=l, first_format=int(f)) for b, n, l, f in rows]


def test_the_three_kind_tables_agree():
    imagepack = pytest.importorskip("imagepack")  # noqa: F841 (the library's table comes through it)
    kinds = library_kinds()
    assert [k["byte"] for k in kinds] == list(range(1, len(kinds) + 1))
    text = open(READ_DB, encoding="utf-8").read()
    assert current_block(text).group(0) == generated_block(kinds), (
        "scripts/read_db.py's KINDS differ from the library's table: run "
        "`PYTHONPATH=build/python python3 tests/python/test_kinds.py --update`")
    assert format_md_kinds() == [{k: d[k] for k in ("byte", "name", "layout", "first_format")} for d in kinds], (
        "docs/FORMAT.md's Kinds table differs from the library's")


def test_read_db_reads_every_kind_of_its_table():
    import read_db
    for byte, (name, layout, first) in read_db.KINDS.items():
        assert layout in ("picture", "map", "boxes", "list", "text") and first >= 3, (byte, name)


# One field of each kind, declared in a manifest (a file kind: from a
# PNG written next to it), and the format each gives the dataset.
CASES = {
    "image": ("target", "image", 4),
    "mask": ("mask", "mask", 4),
    "ints": ("tags", "ints", 4),
    "boxes": ("boxes", "boxes", 4),
    "floats": ("vec", "floats", 4),
    "text": ("caption", "text", 4),
    "depth": ("depth", "depth", 5),
}


def value_of(kind, folder):
    from PIL import Image
    if kind in ("image", "mask", "depth"):
        arr = {"image": np.full((8, 8, 3), 90, np.uint8), "mask": np.ones((8, 8), np.uint8),
               "depth": np.full((8, 8), 1000, np.uint16)}[kind]
        name = "%s.png" % kind
        Image.fromarray(arr).save(folder / name)
        return name
    return {"ints": [1, 2], "boxes": [[1, 1, 4, 4, 0]], "floats": [0.5], "text": "a caption"}[kind]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_kind_sets_the_format_version_it_needs(kind, tmp_path):
    """Every kind of the table has a case here; a dataset with one field of
    it is written in its first format (4 at least), and reads back."""
    from conftest import tool
    imagepack = pytest.importorskip("imagepack")
    assert sorted(CASES) == sorted(k["name"] for k in library_kinds()), "a kind without a case here"
    from PIL import Image
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.jpg")
    name, declared, version = CASES[kind]
    row = {"image": "a.jpg", "label": 0, name: value_of(kind, tmp_path)}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    db = tmp_path / "o.blob"
    r = subprocess.run([tool("pack_lmdb"), "--manifest", str(tmp_path / "m.jsonl"), str(db), "-q", "--format", "blob",
                        "--field", "%s:%s" % (name, declared)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import read_db
    meta = read_db.open_db(str(db)).meta
    first = [k["first_format"] for k in library_kinds() if k["name"] == kind][0]
    assert meta["format_version"] == version == max(4, first)
    assert [f["kind"] for f in meta["fields"]] == [kind]
    assert len(imagepack.open(str(db))) == 1


def update():
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    text = open(READ_DB, encoding="utf-8").read()
    m = current_block(text)
    new = text[:m.start()] + generated_block(library_kinds()) + text[m.end():]
    if new != text:
        open(READ_DB, "w", encoding="utf-8").write(new)
        print("scripts/read_db.py: KINDS regenerated")
    else:
        print("scripts/read_db.py: KINDS already match the library's")


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
    else:
        print(__doc__)
