"""The library's house rules, read from its source (docs/ARCHITECTURE.md,
"Rooms"): every file of lib/src in a room; a room includes the internal
headers of its own room and of rooms below it, never above; a URL's scheme
is read only in storage/; the library never prints; no file past the size
bar and no function past its own (every .py, .cc and .h of lib/, tools/,
trainer/ and scripts/). Each rule names the file and line that breaks it."""
import ast
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
                        # an option's help text names schemes (a flag's, or a row of the option table)
                        if "po::value" in code or "help" in code or "K::k" in code:
                            continue
                        if SCHEME.search(code):
                            bad.append("%s:%d: %s" % (os.path.relpath(path, ROOT), n, line.strip()))
    assert not bad, "URL scheme checks outside lib/src/storage:\n" + "\n".join(bad)


def public_definitions():
    """Each function declared in a public header (lib/include/imagepack/)
    -> the room whose .cc defines it at namespace level (names defined in
    more than one room, overloads of common words, are left out)."""
    declared = set()
    include = os.path.join(ROOT, "lib", "include", "imagepack")
    for f in os.listdir(include):
        with open(os.path.join(include, f), encoding="utf-8") as fh:
            for line in fh:
                m = re.match(r"^(?:[\w:<>,*& ]+?)\s[*&]?(\w+)\(", code_of(line))
                if m and not line.startswith((" ", "#", "//")):
                    declared.add(m.group(1))
    rooms = {}
    for rel in sources():
        if not rel.endswith(".cc"):
            continue
        for line in lines_of(rel):
            m = re.match(r"^(?=\w)(?:[\w:<>,*& ]+?)\s[*&]?(?:\w+::)*(\w+)\(", line)
            if m and m.group(1) in declared and not line.rstrip().endswith(";"):
                rooms.setdefault(m.group(1), set()).add(rel.split(os.sep)[0])
    return {name: r.pop() for name, r in rooms.items() if len(r) == 1}


def test_no_room_calls_up_into_a_room_above():
    """Calls, not only includes: a public function defined in a room may
    be called from its room and the rooms above, never below (a public
    header declared in a low room's reach hides such a cycle from the
    include rule: OpenDatabase, defined in pack/, was called by sources/)."""
    bad = []
    defined = public_definitions()
    assert {"OpenDatabase", "OpenStorage", "DecodeImage"} <= set(defined), sorted(defined)[:20]
    for rel in sources():
        room = rel.split(os.sep)[0]
        for n, line in enumerate(lines_of(rel), 1):
            for name in re.findall(r"(?<![\w.:>])(\w+)\(", code_of(line)):
                home = defined.get(name)
                if home and ROOMS.index(home) > ROOMS.index(room) and not (room in TOP and home in TOP):
                    bad.append("lib/src/%s:%d: %s (defined in %s/)" % (rel, n, name, home))
    assert not bad, "calls into a room above:\n" + "\n".join(bad)


# The environment variables the library reads outside storage/, each with
# why: storage's (docs/OBJECT_STORAGE.md, "Configuration") are read by
# StorageSettings::FromEnvironment, in storage/storage.cc, and nowhere
# else; every open takes StorageSettings::ForProcess, remade when one of
# them changes.
ENV_OUTSIDE_STORAGE = {"SOURCE_DATE_EPOCH": "fields/meta.cc: the reproducible-build time stamp"}


def test_no_storage_variable_is_read_outside_storage():
    bad = []
    for rel in sources():
        if rel.startswith("storage" + os.sep):
            continue
        for n, line in enumerate(lines_of(rel), 1):
            for name in re.findall(r"getenv\(\s*\"([A-Z0-9_]+)\"", code_of(line)):
                if name not in ENV_OUTSIDE_STORAGE:
                    bad.append("lib/src/%s:%d: %s" % (rel, n, line.strip()))
            if "getenv(" in code_of(line) and not re.search(r"getenv\(\s*\"", code_of(line)):
                bad.append("lib/src/%s:%d: a variable named at run time: %s" % (rel, n, line.strip()))
    assert not bad, "environment read outside lib/src/storage (StorageSettings):\n" + "\n".join(bad)


def test_the_process_settings_watch_every_variable_they_read():
    """ForProcess remakes the settings when a variable changes: its list
    (kVariables) names every variable FromEnvironment and the functions
    of storage.cc it calls read, and no other."""
    text = open(os.path.join(ROOT, "lib", "src", "storage", "storage.cc")).read()
    read = set(re.findall(r'Env(?:Number)?\("([A-Z0-9_]+)"', text))
    listed = set(re.findall(r'"([A-Z0-9_]+)"', text.split("kVariables[] = {", 1)[1].split("};", 1)[0]))
    assert read and read == listed, (sorted(read - listed), sorted(listed - read))


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


# The size rule (docs/ARCHITECTURE.md, "Rooms"): every .py, .cc and .h file
# under these folders (not tests/, not build folders) has at most MAX_LINES
# lines, and every function in it at most MAX_FUNCTION_LINES.
SIZE_TOPS = ("lib", "tools", "trainer", "scripts")
MAX_FUNCTION_LINES = 100

# Let through until the split named lands; remove an entry with its split.
# Files: path -> why. Functions: (path, name) -> why.
EXEMPT_FILES = {
}
EXEMPT_FUNCTIONS = {
}


def sized_files(root=None):
    """Paths (relative to the root, with /) of every .py, .cc and .h file under SIZE_TOPS."""
    root = root or ROOT
    for top in SIZE_TOPS:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "build", "__pycache__")))
            for f in sorted(files):
                if f.endswith((".py", ".cc", ".h")):
                    yield os.path.relpath(os.path.join(folder, f), root).replace(os.sep, "/")


def python_functions(text):
    """(name, first line, lines) of every function and method, nested ones
    too: from its def line to its last line (ast's span; decorators not
    counted)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def blank_cxx(text):
    """The C++ text with comments, string and character literals (raw ones
    too) and preprocessor lines blanked, newlines kept: braces and
    parentheses left are the code's."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i) or (c == "#" and text[text.rfind("\n", 0, i) + 1:i].strip() == ""):
            j = i
            while True:  # to the line's end; a directive goes on past a backslash
                k = text.find("\n", j)
                k = n if k < 0 else k
                if c == "#" and text[j:k].rstrip().endswith("\\") and k < n:
                    j = k + 1
                    continue
                break
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            j = text.find(")" + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'" and not (c == "'" and i and text[i - 1].isalnum()):  # not a digit separator (1'000)
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _closing(code, i):
    depth = 0
    for j in range(i, len(code)):
        depth += {"{": 1, "}": -1}.get(code[j], 0)
        if depth == 0:
            return j
    raise ValueError("unbalanced braces")


_BODY_AFTER = re.compile(r"(\)|\}|\bconst|\bnoexcept|\boverride|\bfinal|\bmutable)\s*$")


def cxx_functions(text):
    """(name, first line, lines) of every function defined at namespace level
    or in a class body there: the brace-matched body counted from the first
    line of its declaration (template line included) to its closing brace.
    A scan, not a parser: after comments, strings and directives are
    blanked, each `{` at that level either opens a namespace, extern "C" or
    class body (looked into), an enum (skipped), or closes a head since the
    last `;` or `}`: a head with balanced parentheses, no `=` before them
    and ending in `)`, `}` (a constructor's initialisers), a qualifier or a
    trailing return type is a function, whose body (lambdas and local
    classes in it included) is one span; anything else (an initialiser, a
    default argument, a lambda within parentheses) is skipped as part of
    the head."""
    code = blank_cxx(text)
    head, i = 0, 0
    while i < len(code):
        c = code[i]
        if c in ";}" or (c == ":" and re.search(r"\b(public|private|protected)\s*$", code[head:i])):
            head = i + 1
        elif c == "{":
            h = code[head:i].strip()
            end = _closing(code, i)
            bare = re.sub(r"^template\s*<[^{]*?>\s*", "", h)
            if re.match(r"(namespace|extern)\b", h) and "(" not in h or \
                    re.match(r"(class|struct|union)\b", bare) and "(" not in h:
                head = i + 1  # looked into
            elif re.match(r"enum\b", bare):
                i, head = end + 1, end + 1
                continue
            elif ("(" in h and h.count("(") == h.count(")") and "=" not in bare.split("(")[0]
                  and (_BODY_AFTER.search(h) or "->" in h)):
                first = head + len(code[head:i]) - len(code[head:i].lstrip())
                names = re.findall(r"([~\w:]+)\s*\(", bare)
                line = code.count("\n", 0, first) + 1
                yield (names[0] if names else h[:40]), line, code.count("\n", 0, end) + 2 - line
                i, head = end + 1, end + 1
                continue
            else:
                i = end + 1  # part of the head
                continue
        i += 1


def size_offenders(root=None):
    """(files over MAX_LINES, functions over MAX_FUNCTION_LINES), each a list
    of (key, message): key the path, or (path, name)."""
    root = root or ROOT
    files, functions = [], []
    for rel in sized_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        n = len(text.splitlines())
        if n > MAX_LINES:
            files.append((rel, "%s: %d lines" % (rel, n)))
        found = python_functions(text) if rel.endswith(".py") else cxx_functions(text)
        for name, line, span in found:
            if span > MAX_FUNCTION_LINES:
                functions.append(((rel, name), "%s:%d: %s, %d lines" % (rel, line, name, span)))
    return files, functions


def test_no_file_or_function_past_the_size_bar():
    files, functions = size_offenders()
    big = [m for key, m in files if key not in EXEMPT_FILES]
    long_ = [m for key, m in functions if key not in EXEMPT_FUNCTIONS]
    assert not big and not long_, ("split by meaning (docs/ARCHITECTURE.md, \"Rooms\"): files over %d lines:\n%s\n"
                                   "functions over %d lines:\n%s" % (MAX_LINES, "\n".join(big) or "none",
                                                                      MAX_FUNCTION_LINES, "\n".join(long_) or "none"))
    # An exemption whose split has landed is said (not failed: the split may
    # land before this list is edited); remove it from the list.
    stale = sorted(set(EXEMPT_FILES) - {k for k, _ in files}) + \
        sorted("%s %s" % k for k in set(EXEMPT_FUNCTIONS) - {k for k, _ in functions})
    if stale:
        import warnings
        warnings.warn("size-rule exemptions no longer needed (remove them): %s" % ", ".join(stale))


def test_the_size_scan_measures_functions(tmp_path):
    """The scan itself: a long C++ function (past a constructor's
    initialisers, a lambda, a string with a brace and a class body) and a
    long Python method are found; declarations, initialisers and enums are
    not functions."""
    body = "\n".join("  x += %d;" % k for k in range(MAX_FUNCTION_LINES))
    cc = ('#include <string>\n#define BRACE {\nnamespace a {\nnamespace {\nenum class E { kA, kB };\n'
          'constexpr int kTable[] = {1, 2};\nint Declared(int x = {});\n'
          'struct S {\n  S() : v_{1}, f_([] { return 1; }) {}\n  int Long() const {\n' + body + '\n  }\n'
          '  int v_; int (*f_)();\n};\n}  // namespace\n'
          'int Fine(int x) {\n  const char* s = "}";  // }\n  return x;\n}\n'
          'template <int N = 1>\nint Long2(int x)\n{\n' + body + '\n  return x;\n}\n}  // namespace a\n')
    assert [(n, s) for n, _, s in cxx_functions(cc)] == [
        ("S", 1), ("Long", MAX_FUNCTION_LINES + 2), ("Fine", 4), ("Long2", MAX_FUNCTION_LINES + 5)]
    for top in SIZE_TOPS:
        (tmp_path / top).mkdir()
    (tmp_path / "lib" / "x.cc").write_text(cc)
    py = "class C:\n    def m(self):\n" + "\n".join("        x = %d" % k for k in range(MAX_FUNCTION_LINES)) + "\n"
    (tmp_path / "tools" / "y.py").write_text(py)
    (tmp_path / "scripts" / "build").mkdir()
    (tmp_path / "scripts" / "build" / "z.py").write_text("x = 1\n" * (MAX_LINES + 1))  # a build folder: not read
    (tmp_path / "trainer" / "big.h").write_text("// a line\n" * (MAX_LINES + 1))
    files, functions = size_offenders(str(tmp_path))
    assert [k for k, _ in files] == ["trainer/big.h"]
    assert [k for k, _ in functions] == [("lib/x.cc", "Long"), ("lib/x.cc", "Long2"), ("tools/y.py", "m")]


def test_every_public_header_has_its_row_and_its_code():
    """docs/ARCHITECTURE.md, "Modules": a row per public header, and the
    files its last cell names exist, below lib/src/ or the root (a reader
    finds a header's code from its name)."""
    text = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md")).read()
    table = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w]+\.h)` \|.*\|([^|]*)\|$", table, re.M)}
    headers = sorted(f for f in os.listdir(os.path.join(ROOT, "lib", "include", "imagepack")) if f.endswith(".h"))
    assert [h for h in headers if h not in rows] == [], "headers without a row in ARCHITECTURE.md's Modules"
    missing = []
    for h, cell in rows.items():
        for f in re.findall(r"\b([a-z_]+/[\w/]+\.(?:cc|h))\b", cell):
            if not any(os.path.exists(os.path.join(ROOT, *at, f)) for at in (("lib", "src"), ())):
                missing.append("%s: %s" % (h, f))
    assert not missing, "code files named in ARCHITECTURE.md's Modules that do not exist: %s" % missing
