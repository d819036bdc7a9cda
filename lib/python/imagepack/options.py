"""The trainers' and the Loader's options, as the library's one table
declares them (imagepack/option_table.h): name, type, default, range or
choices, help, and which surfaces take each (the C++ trainer `train`,
scripts/train_imagepack.py, imagepack.Loader). The script's argparse flags,
its range checks and the Loader's keyword list and docstring are made here
from the rows, so that nothing is declared twice.
"""

from . import _imagepack

# One dict a row: name, short, kind (int, real, text, choice, switch, list),
# default (text; "" none), choices, range (how a refusal words it, or
# None), help, train / script / loader (the surfaces), implicit, keyword.
TABLE = tuple(_imagepack.option_table())


def rows(surface):
    """The rows a surface takes: "train", "script" or "loader"."""
    return [r for r in TABLE if r[surface]]


def dest(row):
    """The attribute argparse gives the row: its name with '_' for '-'."""
    return row["name"].replace("-", "_")


def default(row):
    """The row's default as a Python value (None where it has none)."""
    text, kind = row["default"], row["kind"]
    if kind == "switch":
        return text == "True"
    if kind == "list" or (text == "" and kind in ("int", "real")):
        return None
    if kind == "int":
        return int(float(text))
    if kind == "real":
        return float(text)
    return text


def help_text(row):
    """The row's help as `--help` shows it: its text, its choices, range
    and default (as the C++ trainer's --help shows them)."""
    parts = [row["help"]]
    if row["choices"]:
        parts.append("one of " + ", ".join(row["choices"]))
    if row["range"]:
        parts.append(row["range"])
    if row["kind"] not in ("switch", "list") and row["default"] != "":
        parts.append("default %s" % row["default"])
    return parts[0] + ("" if len(parts) == 1 else " [%s]" % "; ".join(parts[1:]))


def add_arguments(parser, surface="script"):
    """Every row of `surface` as an argparse option of `parser`. Choices and
    ranges are checked by problem(), in the trainers' words, not by
    argparse."""
    types = {"int": int, "real": float}
    for row in rows(surface):
        flags = ["--" + row["name"]] + (["-" + row["short"]] if row["short"] else [])
        kw = dict(dest=dest(row), help=help_text(row).replace("%", "%%"))
        if row["kind"] == "switch":
            kw["action"] = "store_true"
        elif row["kind"] == "list":
            kw["action"] = "append"
        else:
            kw["default"] = default(row)
            if row["kind"] in types:
                kw["type"] = types[row["kind"]]
            if row["choices"]:
                kw["metavar"] = "{%s}" % ",".join(row["choices"])
            if row["implicit"]:
                kw.update(nargs="?", const=row["implicit"])
        parser.add_argument(*flags, **kw)


def problem(args, surface="script", skip=()):
    """The first value of `args` outside its row's range or choices, in the
    C++ trainer's words ("--ra-magnitude 31: must be 0 to 30"); "" if none.
    Values of None, and "" for a choice with no default, are not given."""
    for row in rows(surface):
        if row["name"] in skip or not (row["range"] or row["choices"]):
            continue
        value = getattr(args, dest(row), None)
        if value is None or (row["choices"] and value == ""):
            continue
        said = _imagepack.option_problem(row["name"], value if row["choices"] else float(value))
        if said:
            return said
    return ""


def loader_keywords():
    """The Loader's keyword options that go to the C++ LoaderOptions as
    they are, in the table's order."""
    return tuple(r["keyword"] for r in rows("loader"))


def loader_doc():
    """The Loader's keyword options as its docstring lists them."""
    lines = []
    for row in rows("loader"):
        shown = default(row)
        lines.append("    %s=%r: %s" % (row["keyword"], shown if shown is not None else None, row["help"]))
        if row["choices"]:
            lines.append("        one of %s" % ", ".join(repr(c) for c in row["choices"]))
        if row["range"]:
            lines.append("        %s" % row["range"])
    return "\n".join(lines)
