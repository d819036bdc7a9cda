"""The library's house rules, read from its source (docs/ARCHITECTURE.md,
"Rooms"): every file of lib/src in a room; a room includes the internal
headers of its own room and of rooms below it, never above; a URL's scheme
is read only in storage/; the library never prints; no file past the size
bar. Each rule names the file and line that breaks it."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "lib", "src")

# Bottom to top, as ARCHITECTURE.md draws them; the three at the top may use
# each other's headers (inspect's verify uses pack's sources and fields).
ROOMS = ["base", "storage", "formats", "fields", "image", "stores", "sources", "loader", "pack", "inspect"]
TOP = {"loader", "pack", "inspect"}
MAX_LINES = 600


def sources():
    for folder, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith((".cc", ".h")):
                yield os.path.relpath(os.path.join(folder, f), SRC)


def lines_of(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8") as f:
        return f.read().split("\n")


def code_of(line):
    """The line without its // comment and string-free enough for greps."""
    return line.split("//", 1)[0] if not line.lstrip().startswith("#include") else line


def test_every_file_is_in_a_room():
    flat = [rel for rel in sources() if os.sep not in rel]
    assert not flat, "files outside the rooms of lib/src: %s" % flat
    rooms = {rel.split(os.sep)[0] for rel in sources()}
    assert rooms == set(ROOMS), "rooms on disk %s, in this test and ARCHITECTURE.md %s" % (sorted(rooms), ROOMS)


def test_a_room_includes_only_its_own_and_rooms_below():
    bad = []
    for rel in sources():
        room = rel.split(os.sep)[0]
        for n, line in enumerate(lines_of(rel), 1):
            m = re.match(r'\s*#include "([a-z_]+)/', line)
            if not m or m.group(1) == "imagepack" or m.group(1) == room:
                continue
            other = m.group(1)
            if other not in ROOMS:
                bad.append("%s:%d includes %s (not a room)" % (rel, n, other))
            elif ROOMS.index(other) > ROOMS.index(room) and not (room in TOP and other in TOP):
                bad.append("lib/src/%s:%d: %s includes %s, a room above it" % (rel, n, room, other))
    assert not bad, "\n".join(bad)


def test_the_rule_above_fails_on_an_upward_include(tmp_path, monkeypatch):
    """The check itself: a storage file that includes a pack header is found."""
    fake = tmp_path / "src"
    for room in ROOMS:
        (fake / room).mkdir(parents=True)
    (fake / "storage" / "x.cc").write_text('#include "pack/record_maker.h"\n')
    monkeypatch.setattr(sys.modules[__name__], "SRC", str(fake))
    try:
        test_a_room_includes_only_its_own_and_rooms_below()
    except AssertionError as e:
        assert "storage/x.cc:1: storage includes pack" in str(e)
    else:
        raise AssertionError("an upward include was not found")


SCHEME = re.compile(r'"(s3|https?)://|"://"|find\("://|rfind\("s3')


def test_no_url_scheme_is_read_outside_storage():
    """OpenStorage (storage/storage.cc) is the one place a scheme is
    looked at; the tools, the trainer and the Python package too ask the
    storage what it can do."""
    bad = []
    places = [(SRC, lambda rel: not rel.startswith("storage" + os.sep))]
    for top in ("tools", "trainer", os.path.join("lib", "python")):
        places.append((os.path.join(ROOT, top), lambda rel: True))
    for base, wanted in places:
        for folder, _, files in os.walk(base):
            for f in files:
                if not f.endswith((".cc", ".h", ".py")):
                    continue
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, base)
                if not wanted(rel):
                    continue
                with open(path, encoding="utf-8") as fh:
                    for n, line in enumerate(fh, 1):
                        # a // comment (not the "//" of "://") or a # comment cut off
                        code = re.split(r"(?<!:)//", line, 1)[0] if f.endswith((".cc", ".h")) else line.split("#", 1)[0]
                        if "po::value" in code or "help" in code:  # an option's help text names schemes
                            continue
                        if SCHEME.search(code):
                            bad.append("%s:%d: %s" % (os.path.relpath(path, ROOT), n, line.strip()))
    assert not bad, "URL scheme checks outside lib/src/storage:\n" + "\n".join(bad)


PRINTS = re.compile(r"std::(cout|cerr|clog)\b|\b(printf|puts|perror)\(|fprintf\(\s*(stderr|stdout)|"
                    r"\bwrite\(\s*(1|2|STDOUT_FILENO|STDERR_FILENO)\s*,")


def test_the_library_never_prints():
    """Warnings reach the tools through SetWarningHandler (status.h)."""
    bad = []
    for rel in sources():
        for n, line in enumerate(lines_of(rel), 1):
            if PRINTS.search(code_of(line)):
                bad.append("lib/src/%s:%d: %s" % (rel, n, line.strip()))
    assert not bad, "\n".join(bad)


def test_no_file_past_the_size_bar():
    big = ["lib/src/%s: %d lines" % (rel, len(lines_of(rel))) for rel in sources() if len(lines_of(rel)) > MAX_LINES]
    assert not big, "split by meaning (docs/ARCHITECTURE.md, \"Rooms\"):\n" + "\n".join(big)


def test_the_trainer_and_the_binding_keep_the_same_size_bar():
    """trainer/ and lib/python (the extension) are held to lib/src's bar."""
    big = []
    for top in ("trainer", os.path.join("lib", "python")):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".cc", ".h")):
                    path = os.path.join(folder, f)
                    with open(path, encoding="utf-8") as fh:
                        n = sum(1 for _ in fh)
                    if n > MAX_LINES:
                        big.append("%s: %d lines" % (os.path.relpath(path, ROOT), n))
    assert not big, "split by meaning (docs/ARCHITECTURE.md, \"Rooms\"):\n" + "\n".join(big)
