"""The registry of other tools' formats (lib/src/sources/registry.cc) is
the one list: the tools' --help prints its rows, docs/USAGE.md's table
says the same, and a format touches the files docs/ARCHITECTURE.md says
("what a change touches": its source file, its opener declared in
sources.h and its rules in registry.h, its row in the registry), found by
where its opener and rules are named; the chooser takes the strongest
match, whatever the rows' order."""
import os
import re
import subprocess

from conftest import tool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROW = re.compile(r"^  (\S+)\s+(.*) \[(pack_lmdb[^\]]*)\]$")


def help_rows(name):
    out = subprocess.run([tool(name), "--help"], capture_output=True, text=True, timeout=60).stdout
    rows = {}
    for line in out.split("Other tools' formats", 1)[1].splitlines()[1:]:
        m = ROW.match(line)
        if not m:
            break
        uses = m.group(3)
        rows[m.group(1)] = (m.group(2), "verify_db --against" in uses, "in place" in uses, "local only" not in uses)
    return rows


def usage_rows():
    text = open(os.path.join(ROOT, "docs", "USAGE.md")).read()
    table = text.split("| format | files | pack_lmdb SRC |", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert cells[2] == "yes", line
        rows[cells[0].strip("`")] = (cells[1], cells[3] == "yes", cells[4] == "yes", cells[5] == "yes")
    return rows


def test_help_and_usage_list_the_registry_rows_alike():
    pack, verify = help_rows("pack_lmdb"), help_rows("verify_db")
    assert list(pack) == ["parquet", "tfrecord", "webdataset", "folder2lmdb"], pack
    assert verify == pack
    assert list(usage_rows().items()) == list(pack.items())


def registered():
    """(name, [its rules: XNameIs, XBytesSay, XLooks], OpenXSource) per row of registry.cc."""
    text = open(os.path.join(ROOT, "lib", "src", "sources", "registry.cc")).read()
    rows = re.findall(r'\{\{"(\w+)",.*?\},\s*(\w+), (\w+), (?:true|false), (\w+), (Open\w+Source)\}', text, re.S)
    return [(name, [r for r in (names, byte_rule, looks) if r != "nullptr"], opener)
            for name, names, byte_rule, looks, opener in rows]


def code_files():
    for top in ("lib", "tools", "trainer"):
        for d, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith((".cc", ".h")):
                    yield os.path.relpath(os.path.join(d, n), ROOT)


def test_a_format_touches_its_source_file_its_declaration_and_its_row():
    rows = registered()
    assert [r[0] for r in rows] == ["parquet", "tfrecord", "webdataset", "folder2lmdb"], rows
    files = {f: open(os.path.join(ROOT, f), errors="replace").read() for f in code_files()}
    arch = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
    assert "| an import format | 8 + docs + tests |" in arch
    registry = ("lib/src/sources/sources.h", "lib/src/sources/registry.h", "lib/src/sources/registry.cc")
    for name, rules, opener in rows:
        assert rules, name
        naming = sorted(f for f, text in files.items()
                        if re.search(r"\b(%s)\b" % "|".join(rules + [opener]), text))
        own = [f for f in naming if f not in registry]
        # the opener declared in sources.h, the rules in registry.h, all
        # three in the row
        assert re.search(r"\b%s\(" % opener, files["lib/src/sources/sources.h"]), (name, opener)
        for rule in rules:
            assert re.search(r"\b%s\(" % rule, files["lib/src/sources/registry.h"]), (name, rule)
        # its own source file (split by subject into files of its name:
        # tfrecord_source.cc, tfrecord_sniff.cc, ...) and nothing else
        # outside the registry
        main = [f for f in own if f.startswith("lib/src/sources/") and f.endswith("_source.cc")]
        assert len(main) == 1, (name, naming)
        prefix = main[0][:-len("source.cc")]
        assert all(f.startswith(prefix) for f in own), (name, naming)


def test_a_storage_backend_touches_its_file_its_constructor_and_the_scheme_table():
    """docs/ARCHITECTURE.md: a backend is its Storage in storage/, its
    constructor in backends.h and its row in storage.cc's scheme table;
    nothing else names it (callers ask OpenStorage)."""
    files = {f: open(os.path.join(ROOT, f), errors="replace").read() for f in code_files()}
    arch = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
    assert "| a storage backend (a URL scheme) | 4 + tests |" in arch
    table = files["lib/src/storage/storage.cc"]
    constructors = sorted(set(re.findall(r"\binternal::(New\w+Storage)\b", table)))
    assert constructors == ["NewHttpStorage", "NewHubStorage", "NewLocalStorage", "NewS3Storage"], constructors
    for ctor in constructors:
        naming = sorted(f for f, text in files.items() if re.search(r"\b%s\b" % ctor, text))
        own = [f for f in naming if f not in ("lib/src/storage/backends.h", "lib/src/storage/storage.cc")]
        assert len(own) == 1 and re.match(r"lib/src/storage/\w+_storage\.cc$", own[0]), (ctor, naming)
