"""docs/RELIABILITY.md's "Budgets" table is lib/src/base/limits.h's:
every constant there has a row, every row a constant, and the values are
equal (the doc's "16 MiB", "10M", "100,000", "2^24" read as numbers, the
header's "16 << 20", "10'000'000", "uint64_t(1) << 30" evaluated)."""
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
LIMITS = os.path.join(ROOT, "lib", "src", "base", "limits.h")
DOC = os.path.join(ROOT, "docs", "RELIABILITY.md")

CONSTANT = re.compile(r"inline\s+constexpr\s+[\w:]+\s+(k\w+)\s*=\s*([^;]+);")
UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
         "K": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9}


def header_value(expr):
    """An initializer of limits.h as a number: integer literals (with '
    separators), casts to an integer type, <<, *, +, parentheses."""
    e = re.sub(r"\b(?:u?int(?:8|16|32|64)_t|size_t|int)\s*\(", "(", expr)
    e = e.replace("'", "")
    if not re.fullmatch(r"[0-9\s()<*+]+", e):
        raise ValueError("limits.h: %r is not a constant this test reads" % expr)
    return int(eval(e, {"__builtins__": {}}))  # digits and operators only, checked above


def doc_value(text):
    """A value cell of the doc as a number: 4096, 100,000, 10M, 16 MiB,
    2^24; text after the value in parentheses is ignored."""
    t = text.strip().strip("`").split(" (")[0].strip()
    m = re.fullmatch(r"2\^(\d+)", t)
    if m:
        return 1 << int(m.group(1))
    m = re.fullmatch(r"([0-9][0-9,]*)\s*(KiB|MiB|GiB|TiB|K|M|G)?", t)
    if not m:
        raise ValueError("RELIABILITY.md: budget value %r is not a number this test reads" % text)
    return int(m.group(1).replace(",", "")) * UNITS[m.group(2) or ""]


def constants(text):
    return {name: header_value(expr) for name, expr in CONSTANT.findall(text)}


def budgets_table(text):
    """The rows of the first table under the "### Budgets" heading:
    constant -> its value cell."""
    m = re.search(r"^### Budgets\s*$", text, re.M)
    assert m, "docs/RELIABILITY.md has no '### Budgets' section"
    rows = {}
    lines = text[m.end():].splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), len(lines))
    for line in lines[start:]:
        if not line.startswith("|"):
            break  # the table's end
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set(cells[0]) <= set("-: ") or cells[0] == "constant":
            continue
        name = cells[0].strip("`")
        assert name not in rows, "docs/RELIABILITY.md lists %s twice" % name
        rows[name] = cells[1]
    assert rows, "docs/RELIABILITY.md's Budgets section has no table"
    return rows


def differences(header_text, doc_text):
    """What differs between the header and the doc's table, one line each."""
    have, rows = constants(header_text), budgets_table(doc_text)
    out = []
    for name, value in have.items():
        if name not in rows:
            out.append("%s = %d (limits.h) has no row in RELIABILITY.md's Budgets table" % (name, value))
        elif doc_value(rows[name]) != value:
            out.append("%s: RELIABILITY.md says %s (%d), limits.h %d" % (name, rows[name], doc_value(rows[name]),
                                                                      value))
    for name in rows:
        if name not in have:
            out.append("%s is in RELIABILITY.md's Budgets table but not in limits.h" % name)
    return out


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_every_budget_of_limits_h_is_in_the_doc_with_its_value():
    header = read(LIMITS)
    assert len(constants(header)) >= 30, "limits.h: the constants were not found"
    assert differences(header, read(DOC)) == []


@pytest.mark.parametrize("expr, value", [("1 << 20", 1 << 20), ("10'000'000", 10 ** 7),
                                         ("uint64_t(1) << 30", 1 << 30), ("uint64_t(256) << 20", 256 << 20),
                                         ("1 << 24", 1 << 24), ("4096", 4096)])
def test_header_values_are_read(expr, value):
    assert header_value(expr) == value


@pytest.mark.parametrize("cell, value", [("1 MiB", 1 << 20), ("256 MiB", 256 << 20), ("64 GiB", 64 << 30),
                                         ("10M", 10 ** 7), ("100,000", 10 ** 5), ("2^24", 1 << 24),
                                         ("`4096`", 4096), ("1000 (then one more)", 1000)])
def test_doc_values_are_read(cell, value):
    assert doc_value(cell) == value


def test_a_changed_missing_or_stale_budget_is_found():
    """The check itself: a value changed in either file, a constant with no
    row and a row with no constant are each reported by name (beyond what
    the files as they are report, which the test above says)."""
    header, doc = read(LIMITS), read(DOC)
    before = set(differences(header, doc))
    new = lambda h, d: sorted(set(differences(h, d)) - before)
    changed = re.sub(r"(kJsonDepth\s*=\s*)64", r"\g<1>65", header)
    assert changed != header
    assert new(changed, doc) == ["kJsonDepth: RELIABILITY.md says 64 (64), limits.h 65"]
    doc_changed = doc.replace("| `kTarHeaderBody` | 1 MiB |", "| `kTarHeaderBody` | 2 MiB |")
    assert doc_changed != doc
    assert new(header, doc_changed) == ["kTarHeaderBody: RELIABILITY.md says 2 MiB (2097152), limits.h 1048576"]
    added = header.replace("namespace imagepack::internal::limits {",
                           "namespace imagepack::internal::limits {\ninline constexpr size_t kNewBudget = 7;")
    assert new(added, doc) == ["kNewBudget = 7 (limits.h) has no row in RELIABILITY.md's Budgets table"]
    removed = re.sub(r"inline constexpr \w+ kWholeFile = [^;]+;", "", header)
    assert new(removed, doc) == ["kWholeFile is in RELIABILITY.md's Budgets table but not in limits.h"]
