"""Which project tool a command names, and whether the options it passes
are ones the tool's --help lists."""
import os
import re
import shlex
import subprocess

# build/tools/*, then the trainer.
TOOLS = ["resize_imagenet", "pack_lmdb", "verify_db", "shuffle_quality", "export_db", "inspect_db",
         "bench_loader", "bench_jpeg_ceiling"]
# Programs that are not ours: their options are not checked.
FOREIGN = {"torchrun", "pip", "pip3", "cmake", "ctest", "sbatch", "srun", "perf", "dd", "tar", "cjpeg",
           "vipsthumbnail", "git", "ninja", "apt-get", "sudo", "ulimit", "setpriv", "taskset", "mount",
           "export", "cd", "ls", "rm", "mkdir", "cp", "mv", "cat", "du", "env", "time", "python", "clang",
           "clang++", "gcc", "g++", "ccache", "free", "ssh", "scp"}
OPTION = re.compile(r"^(--[A-Za-z][\w-]*|-[A-Za-z])(=.*)?$")


class Tool:
    def __init__(self, key, argv, source=None):
        self.key, self.argv, self.source = key, argv, source
        self._options = None
        self.how = None               # how the option list was read

    def has_help(self):
        """Only a script that handles --help is asked for it: others would
        run (a benchmark, the set-up) with it."""
        src = open(self.source, encoding="utf-8", errors="replace").read()
        if self.source.endswith(".py"):  # its own argparse, or a package module's entry that has it
            return "argparse" in src or re.search(r"^from imagepack\.[\w.]+ import entry$", src, re.M) is not None
        return re.search(r"(^|[\s|(])--help\)", src, re.M) is not None

    def options(self):
        """The options the tool documents: those its --help prints, or for a
        script without --help those its source names (its case labels or
        argparse calls), which a rename changes just the same."""
        if self._options is None:
            text = ""
            try:
                if self.source and not self.has_help():
                    raise OSError("no --help")
                p = subprocess.run(self.argv + ["--help"], capture_output=True, text=True, timeout=60,
                                   stdin=subprocess.DEVNULL)
                if p.returncode == 0:
                    text = p.stdout + p.stderr
                    self.how = "`%s --help`" % self.key
                elif not self.source:
                    raise RuntimeError("`%s --help` exited %d: %s" % (" ".join(self.argv), p.returncode,
                                                                       (p.stdout + p.stderr).strip()[-300:]))
            except (OSError, subprocess.TimeoutExpired) as e:
                if not self.source:
                    raise RuntimeError("`%s --help` could not run: %s" % (" ".join(self.argv), e))
            if not text and self.source:
                text = open(self.source, encoding="utf-8", errors="replace").read()
                self.how = "%s's source (it has no --help)" % self.key
            self.text = text
            self._options = set(re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*|-[A-Za-z])(?![\w-])", text))
        return self._options


class Registry:
    def __init__(self, root, build):
        self.root, self.build = root, build
        self.tools = {}
        for t in TOOLS:
            self.tools[t] = Tool(t, [os.path.join(build, "tools", t)])
        self.tools["train"] = Tool("train", [os.path.join(build, "trainer", "train")])
        for sub in ("scripts", "scripts/bench"):
            for name in sorted(os.listdir(os.path.join(root, sub))):
                path = os.path.join(root, sub, name)
                if name.endswith(".sh") or name.endswith(".sbatch"):
                    argv = ["bash", path]
                elif name.endswith(".py"):
                    argv = ["/usr/bin/python3", path]
                else:
                    continue
                self.tools["%s/%s" % (sub, name)] = Tool("%s/%s" % (sub, name), argv, path)

    def resolve(self, word):
        """The tool a command word names, 'foreign', or None."""
        word = word.strip("()[]")
        base = os.path.basename(word)
        if base in TOOLS and (word == base or word.endswith("tools/" + base)):
            return self.tools[base]
        if base == "train" and (word == "train" or word.endswith("trainer/train")):
            return self.tools["train"]
        m = re.match(r"^(?:\S*/)?(scripts/(?:bench/)?[\w.-]+\.(?:sh|py|sbatch))$", word)
        if m and m.group(1) in self.tools:
            return self.tools[m.group(1)]
        for sub in ("scripts", "scripts/bench"):
            if word == base and "%s/%s" % (sub, base) in self.tools:
                return self.tools["%s/%s" % (sub, base)]
        if base in FOREIGN or word.startswith("python3") or word.startswith("/usr/bin/python"):
            return "foreign"
        return None

    def all_options(self):
        """Every option of every tool, for a span that names none: the
        built tools' --help, the scripts' sources (asking each script for
        --help would import torch a dozen times)."""
        if not hasattr(self, "_all"):
            self._all = set()
            for t in self.tools.values():
                if t.source:
                    src = open(t.source, encoding="utf-8", errors="replace").read()
                    self._all |= set(re.findall(r"(?<![\w-])(--[A-Za-z][\w-]*|-[A-Za-z])(?![\w-])", src))
                else:
                    self._all |= t.options()
        return self._all

    def named_in(self, text):
        """The tools a heading names (its words, code spans included)."""
        found = []
        for w in re.split(r"[\s`,()]+", text):
            t = self.resolve(w)
            if t not in (None, "foreign") and (w.strip("[]") != "train" or "`train`" in text):
                found.append(t.key)
        return found


def choices(text):
    """(option, [values]) for each `--opt a|b|c` in a command or span."""
    ws = words(text)
    out = []
    for a, b in zip(ws, ws[1:]):
        a = a.strip("[](),")
        if a.startswith("--") and "|" in b and re.match(r"^[a-z0-9_.]+(\|[a-z0-9_.]+)+$", b.strip("[](),")):
            out.append((a.split("=")[0], b.strip("[](),").split("|")))
    return out


def words(text):
    try:
        return shlex.split(text, comments=True)
    except ValueError:
        return text.split()


def commands(text, registry):
    """(tool, [option words]) for each command in one command line: a
    launcher's options, then the command after its `--`."""
    out = []
    ws = words(text)
    while ws and (re.match(r"^[A-Z_][A-Z0-9_]*=", ws[0]) or ws[0] in ("time", "sudo", "exec", "nice")):
        ws = ws[1:]
    if ws and (ws[0] in ("python3", "python", "bash", "sh") or ws[0].startswith("/usr/bin/python")) \
            and len(ws) > 1 and not ws[1].startswith("-"):
        ws = ws[1:]
    if not ws:
        return out
    tool = registry.resolve(ws[0])
    if tool is None or tool == "foreign":
        return out
    opts, rest = [], ws[1:]
    for k, w in enumerate(rest):
        if w == "--":
            out.append((tool, opts))
            return out + commands(shlex.join(rest[k + 1:]), registry)
        w = w.strip("[](),")
        alts = w.split("|")
        if w.startswith("--") and "=" not in w and "/" in w:      # `--data/--val`
            alts = w.split("/")
        for alt in alts:
            m = OPTION.match(alt)
            if m:
                opts.append(m.group(1))
    out.append((tool, opts))
    return out
