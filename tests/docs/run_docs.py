#!/usr/bin/python3
"""Runs the shell blocks and Python snippets of README.md and docs/*.md, and
checks every option a doc names against the tool's --help (tests/docs/README.md).

    run_docs.py --root SRC --build BUILD [--cpp-example EXE] [--only DOC[:LINE]] [--keep] [--list]

Exit 0 when every block ran as its doc says and every option exists; 1
otherwise, with one line per finding naming the doc and line.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixtures  # noqa: E402
import hub  # noqa: E402
import markdown  # noqa: E402
import options  # noqa: E402
import specs  # noqa: E402

# Python blocks run with this first: a CPU stand-in for .cuda() (no GPU in
# CI; tensors stay where they are) and the working folder on sys.path.
PY_PRELUDE = '''\
import sys, os
sys.path.insert(0, os.getcwd())
try:
    import torch
    if not torch.cuda.is_available():
        torch.Tensor.cuda = lambda self, *a, **k: self
except ImportError:
    pass
'''


class Result:
    def __init__(self, block):
        self.block = block
        self.status = "PASS"          # PASS, FAIL, XFAIL, XPASS, NOT RUN, SKIP
        self.messages = []
        self.seconds = 0.0

    def fail(self, msg):
        self.status = "FAIL"
        self.messages.append(msg)


class Ctx:
    """What a spec's check sees: the block's folder and each command's run."""
    def __init__(self, scratch, runner=None):
        self.runner = runner
        self.dir = scratch
        self.dirs = [scratch]         # with fresh_each, one per command
        self.runs = []                # (command, rc, stdout, stderr)
        self.env = {}                 # variables the block exported, and the Hub's for hf:// blocks

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def run(self, cmd, rc=0, timeout=120):
        """Runs a command in the block's folder as the block's own commands
        run; its stdout + stderr. A claim's check uses it."""
        got, out, err = self.runner.run_cmd(self, cmd, timeout)
        assert got == rc, "`%s` exited %s, not %s:\n%s" % (cmd, got, rc, tail(out + err))
        return out + err

    def out(self, needle):
        """stdout + stderr of the first command containing needle."""
        for cmd, rc, out, err in self.runs:
            if needle in cmd:
                return out + err
        raise AssertionError("no command containing %r ran" % needle)


class Runner:
    def __init__(self, args):
        self.root = os.path.abspath(args.root)
        self.build = os.path.abspath(args.build)
        self.python_dir = os.path.abspath(args.python_dir or os.path.join(self.build, "python"))
        self.cpp_example = args.cpp_example
        self.keep = args.keep
        self.work = tempfile.mkdtemp(prefix="imagepack-docs-")
        self.data = os.path.join(self.work, "data")
        self.bin = os.path.join(self.work, "bin")
        self.registry = options.Registry(self.root, self.build)
        self.findings = []            # option findings: (where, message)
        self.xfail_options = []
        self.option_spans = 0         # inline spans with at least one option checked
        self.options_checked = 0
        self.block_commands = 0       # commands of blocks (run or not) whose options were checked
        self.block_options = 0
        self.used_specs = set()
        self.used_known = set()
        self.hub = None               # the Hub emulator, started for the first hf:// block

    # -- set-up -----------------------------------------------------------
    def setup(self):
        os.makedirs(self.bin)
        for t in options.TOOLS:
            os.symlink(os.path.join(self.build, "tools", t), os.path.join(self.bin, t))
        os.symlink(os.path.join(self.build, "trainer", "train"), os.path.join(self.bin, "train"))
        for py in ("python", "python3"):
            os.symlink("/usr/bin/python3", os.path.join(self.bin, py))
        t0 = time.time()
        fixtures.make(self.data, os.path.join(self.build, "tools"), os.path.join(self.root, "scripts"))
        print("docs: fixtures made in %.1f s (%s)" % (time.time() - t0, self.data), flush=True)

    def hub_env(self):
        """What an hf:// block's commands see (tests/docs/hub.py)."""
        if self.hub is None:
            t0 = time.time()
            self.hub = hub.DocsHub(os.path.join(self.work, "hub"), self.data, fixtures.SYNSETS)
            print("docs: Hub emulator with ORG/NAME up in %.1f s (%s)" % (time.time() - t0, self.hub.hub.url),
                  flush=True)
        return self.hub.env()

    def env(self, scratch):
        e = dict(os.environ)
        e.update(HOME=os.path.join(scratch, "home"), PATH=self.bin + ":/usr/bin:/bin",
                 PYTHONPATH=self.python_dir, PYTHONDONTWRITEBYTECODE="1",
                 IMAGEPACK_BUILD_DIR=self.build, OMP_NUM_THREADS="1")
        for k in ("PYENV_VERSION", "VIRTUAL_ENV", "PYTHONHOME"):
            e.pop(k, None)
        return e

    def scratch(self, name, omit=()):
        """A fresh folder holding (hard links to) every fixture, and `build`
        and `scripts` pointing at the real ones."""
        d = os.path.join(self.work, "blocks", name)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        subprocess.run(["cp", "-al", self.data, d], check=True)
        for f in ["src"] + list(omit):
            p = os.path.join(d, f)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        os.symlink(self.build, os.path.join(d, "build"))
        os.symlink(os.path.join(self.root, "scripts"), os.path.join(d, "scripts"))
        return d

    # -- options ----------------------------------------------------------
    def check_options(self, where, doc, tool, opts, fallback_tools=()):
        """Each option must be in the tool's --help (or, with no tool, in
        some tool's). Returns how many were checked."""
        try:
            return self._check_options(where, doc, tool, opts, fallback_tools)
        except RuntimeError as e:     # a tool whose --help does not run
            self.findings.append((where, str(e)))
            return 0

    def _check_options(self, where, doc, tool, opts, fallback_tools):
        n = 0
        for o in opts:
            if o in ("--", "-"):
                continue
            exc = specs.option_exception(doc, tool.key if tool else None, o)
            if exc is not None:
                continue
            n += 1
            if tool is not None:
                known = tool.options()
                if o in known:
                    continue
                if any(o in self.registry.tools[t].options() for t in fallback_tools):
                    continue
                msg = "%s has no option %s (checked against %s)" % (tool.key, o, tool.how or tool.key)
            else:
                if o in self.registry.all_options():
                    continue
                msg = "no tool has the option %s (no tool named here; checked against every tool's --help)" % o
            key = specs.known_option_failure(doc, tool.key if tool else None, o)
            if key:
                self.used_known.add(key)
                self.xfail_options.append((where, msg + " [known: %s]" % specs.KNOWN_OPTION_FAILURES[key]))
            else:
                self.findings.append((where, msg))
        return n

    def check_choices(self, where, doc, tool, text):
        """`--dct accurate|fast`: each value a doc offers is one the tool's
        --help (or source) names."""
        try:
            tool.options()
        except RuntimeError:
            return
        for opt, values in options.choices(text):
            if opt not in tool.options():
                continue
            for v in values:
                if re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(v), tool.text):
                    continue
                msg = "%s %s: the value %s is not in %s" % (tool.key, opt, v, tool.how)
                key = specs.known_option_failure(doc, tool.key, "%s %s" % (opt, v))
                if key:
                    self.used_known.add(key)
                    self.xfail_options.append((where, msg + " [known: %s]" % specs.KNOWN_OPTION_FAILURES[key]))
                else:
                    self.findings.append((where, msg))

    def check_command_options(self, where, doc, text, in_block=False):
        n = 0
        for tool, opts in options.commands(text, self.registry):
            n += self.check_options(where, doc, tool, opts)
            self.check_choices(where, doc, tool, text)
            if in_block:
                self.block_commands += 1
                self.block_options += len(opts)
        return n

    def check_comment_options(self, where, doc, cmd):
        """`pack_lmdb A B --shuffle 0   # or --format blob`: the options a
        command's trailing comment offers are its tool's too."""
        m = re.search(r"\s#\s(.*)$", cmd)
        found = options.commands(cmd, self.registry)
        if not m or not found:
            return 0
        opts = [o.group(1) for o in (options.OPTION.match(w.strip("[](),")) for w in m.group(1).split()) if o]
        return self.check_options(where, doc, found[-1][0], opts)

    def check_spans(self, doc, spans):
        for s in spans:
            ws = options.words(s.text)
            if not ws:
                continue
            n = 0
            first = ws[0]
            if self.registry.resolve(first) not in (None, "foreign") or \
                    (first in ("python3", "/usr/bin/python3") and len(ws) > 1 and
                     self.registry.resolve(ws[1]) not in (None, "foreign")):
                if first == "train" and not any(w.startswith("-") for w in ws[1:]):
                    continue            # the English word
                n = self.check_command_options(s.where, doc, s.text)
            elif not s.heading and options.OPTION.match(first.strip("[(")):
                opts = [m.group(1) for m in (options.OPTION.match(w.strip("[](),")) for w in ws) if m]
                opts = [o for o in opts if o.startswith("--")] or opts[:1]
                ctx = [self.registry.tools[t] for t in s.context]
                if ctx:
                    n = self.check_options(s.where, doc, ctx[0], opts, fallback_tools=s.context[1:])
                    self.check_choices(s.where, doc, ctx[0], s.text)
                else:
                    n = self.check_options(s.where, doc, None, opts)
            if n:
                self.option_spans += 1
                self.options_checked += n

    def line_of(self, doc, text):
        for k, line in enumerate(open(os.path.join(self.root, doc), encoding="utf-8"), 1):
            if text in line:
                return "%s:%d" % (doc, k)
        return doc

    def check_every_tool(self):
        """README: every tool has --help and -q; USAGE.md: --version, and a
        bad option prints the usage to stderr and exits 2."""
        readme = self.line_of("README.md", "`-q` silences it")
        usage = self.line_of("docs/USAGE.md", "prints `--version`")
        for t in options.TOOLS:
            tool = self.registry.tools[t]
            self.check_options(readme, "README.md", tool, ["--help", "-q"])
            self.check_options(usage, "docs/USAGE.md", tool, ["--version"])
            p = subprocess.run(tool.argv + ["--no-such-option"], capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
            if p.returncode != 2 or "Usage" not in p.stderr:
                self.findings.append((usage, "`%s --no-such-option` exited %d with %r on stderr: the doc says the "
                                             "usage on stderr and exit 2" % (t, p.returncode, p.stderr[:200])))

    # -- running ----------------------------------------------------------
    def run_cmd(self, ctx, cmd, timeout):
        t0 = time.time()
        env = self.env(ctx.dir)
        for k, v in ctx.env.items():
            env.pop(k, None) if v is None else env.__setitem__(k, v)
        # `export NAME=VALUE` holds for the rest of its block, as in the
        # user's shell (each command runs in a bash of its own).
        m = re.match(r"^export (\w+)=(\S+)(\s+#.*)?$", cmd.strip())
        if m:
            ctx.env[m.group(1)] = os.path.expandvars(m.group(2))
        try:
            p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ctx.dir, env=env,
                               capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) \
                else (e.stdout or ""), "timed out after %d s" % timeout
        ctx.runs.append((cmd, rc, out, err))
        if os.environ.get("DOCS_VERBOSE"):
            print("    $ %s  -> %s (%.1f s)" % (cmd, rc, time.time() - t0), flush=True)
        return rc, out, err

    def ctx(self, name, spec):
        ctx = Ctx(self.scratch(name, spec.omit if spec else ()), self)
        if spec and spec.hub:
            ctx.env.update(self.hub_env())
        return ctx

    def run_block(self, block, spec, res):
        kind = block.kind()
        name = "%s-%d" % (os.path.basename(block.doc).replace(".md", ""), block.line)
        text = specs.apply_overrides(block.text, spec)
        timeout = spec.timeout if spec else 120
        if kind in ("sh", "transcript"):
            cmds, expected = split_commands(text, transcript=(kind == "transcript"))
            fresh = spec is not None and spec.fresh_each
            ctx = self.ctx(name, spec)
            for k, cmd in enumerate(cmds):
                if fresh and k:
                    ctx.dir = self.scratch("%s-%d" % (name, k), spec.omit)
                    ctx.dirs.append(ctx.dir)
                want = spec.rc.get(cmd_key(cmd), 0) if spec else 0
                rc, out, err = self.run_cmd(ctx, cmd, timeout)
                if rc != want:
                    res.fail("`%s` exited %s (the doc expects %s):\n%s" % (cmd, rc, want, tail(out + err)))
                    if not fresh:
                        return ctx
                elif kind == "transcript" and expected[k]:
                    bad = compare_transcript(expected[k], out)
                    if bad:
                        res.fail("`%s` printed other than the doc shows: %s" % (cmd, bad))
            return ctx
        if kind == "python":
            ctx = self.ctx(name, spec)
            for cmd in python_comment_commands(text, self.registry):
                rc, out, err = self.run_cmd(ctx, cmd, timeout)
                if rc != 0:
                    res.fail("`%s` (the command in the snippet's comment) exited %s:\n%s" % (cmd, rc, tail(out + err)))
                    return ctx
            code = (PY_PRELUDE + "".join(block.imports) + (spec.prelude if spec else "") + "\n" + text + "\n"
                    + (spec.post if spec else ""))
            path = os.path.join(ctx.dir, "_snippet.py")
            with open(path, "w") as f:
                f.write(code)
            rc, out, err = self.run_cmd(ctx, "/usr/bin/python3 _snippet.py", timeout)
            if rc != 0:
                res.fail("the snippet exited %s:\n%s" % (rc, tail(out + err)))
            return ctx
        if kind == "cpp":
            ctx = Ctx(self.scratch(name, spec.omit if spec else ()), self)
            if not self.cpp_example:
                res.status, res.messages = "SKIP", ["no --cpp-example given (the C++ block is compiled by CMake)"]
                return ctx
            rc, out, err = self.run_cmd(ctx, self.cpp_example, timeout)
            if rc != 0:
                res.fail("the C++ example (compiled from the block) exited %s:\n%s" % (rc, tail(out + err)))
            return ctx
        raise AssertionError(kind)

    def claim(self, claim):
        """A sentence of prose that says what a command does, checked by
        running it (specs.CLAIMS)."""
        where = self.line_of(claim.doc, claim.text)
        res = Result(None)
        res.where = where
        if where == claim.doc:
            res.fail("specs.py: the claim %r is no longer in %s" % (claim.text, claim.doc))
            return res
        t0 = time.time()
        ctx = Ctx(self.scratch("claim-" + re.sub(r"\W+", "_", claim.text)[:40]), self)
        try:
            claim.check(ctx)
        except AssertionError as e:
            res.fail("%s: the doc says otherwise: %s" % (claim.text, e))
        except Exception as e:  # noqa: BLE001
            res.fail("%s: check failed: %s: %s" % (claim.text, type(e).__name__, e))
        res.seconds = time.time() - t0
        key = (claim.doc, claim.text)
        if key in specs.KNOWN_CLAIM_FAILURES:
            self.used_known.add(key)
            if res.status == "FAIL":
                res.status = "XFAIL"
                res.messages.insert(0, "known: %s" % specs.KNOWN_CLAIM_FAILURES[key])
            else:
                res.status = "XPASS"
                res.messages = ["now holds: remove it from KNOWN_CLAIM_FAILURES in tests/docs/specs.py"]
        return res

    def block(self, block, run=True):
        res = Result(block)
        kind = block.kind()
        spec = specs.find(block)
        if spec:
            self.used_specs.add(spec.key)
        # Options first, whether the block runs or not.
        if kind in ("sh", "transcript"):
            cmds, _ = split_commands(block.text, transcript=(kind == "transcript"))
            for cmd in cmds:
                self.check_command_options(block.where, block.doc, cmd, in_block=True)
                self.check_comment_options(block.where, block.doc, cmd)
        elif kind == "python":
            for cmd in python_comment_commands(block.text, self.registry):
                self.check_command_options(block.where, block.doc, cmd, in_block=True)
            for cmd in python_subprocess_commands(block.text):
                self.check_command_options(block.where, block.doc, cmd, in_block=True)
        if kind is None:
            res.status = "FIGURE"
            return res
        if block.not_run:
            res.status = "NOT RUN"
            res.messages.append(block.not_run)
            if spec and not spec.options_only:
                res.fail("marked not run in the doc, but tests/docs/specs.py has checks for it")
            return res
        if spec and spec.options_only:
            res.fail("specs.py says options only, but the doc does not mark the block "
                     "(*Not run by the tests: REASON.*)")
            return res
        if not run:
            res.status = "SKIP"
            return res
        t0 = time.time()
        ctx = self.run_block(block, spec, res)
        if res.status == "PASS" and spec and spec.check:
            try:
                spec.check(ctx)
            except AssertionError as e:
                res.fail("the doc says otherwise: %s" % e)
            except Exception as e:  # noqa: BLE001 - a check that cannot read what it expects
                res.fail("check failed: %s: %s" % (type(e).__name__, e))
        res.seconds = time.time() - t0
        known = specs.known_block_failure(block)
        if known:
            self.used_known.add(known)
            if res.status == "FAIL":
                res.status = "XFAIL"
                res.messages.insert(0, "known: %s" % specs.KNOWN_BLOCK_FAILURES[known])
            else:
                res.status = "XPASS"
                res.messages = ["now runs as its doc says: remove it from KNOWN_BLOCK_FAILURES in "
                                "tests/docs/specs.py (%s)" % specs.KNOWN_BLOCK_FAILURES[known]]
        return res


def cmd_key(cmd):
    return " ".join(cmd.split())


def tail(text, n=15):
    lines = text.rstrip().split("\n")
    return "\n".join("      " + l for l in lines[-n:])


def split_commands(text, transcript=False):
    """Command lines (continuations joined); for a transcript (`$ ` lines)
    also the output lines shown under each."""
    cmds, expected, cur = [], [], None
    for line in text.split("\n"):
        if transcript:
            if line.startswith("$ "):
                cmds.append(line[2:])
                expected.append([])
            elif cmds and line.strip():
                expected[-1].append(line)
            continue
        if cur is not None:
            cur += "\n" + line
        elif line.strip() and not line.lstrip().startswith("#"):
            cur = line
        else:
            continue
        if not cur.rstrip().endswith("\\"):
            cmds.append(cur)
            cur = None
    if cur:
        cmds.append(cur)
    return cmds, expected


NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")


def compare_transcript(expected, out):
    """Each shown line has a line of the same shape in what was printed, in
    order: the same words, any numbers (the doc's data is not the test's)."""
    got = [l for l in out.split("\n") if l.strip()]
    pos = 0
    for want in expected:
        pat = re.compile(r"^\s*" + r"\s+".join(shape(w) for w in want.split()) + r"\s*$")
        while pos < len(got) and not pat.match(got[pos]):
            pos += 1
        if pos == len(got):
            return "no line shaped like %r" % want.strip()
        pos += 1
    return None


def shape(word):
    """A word as a regex: numbers match any number, the rest literally."""
    parts = NUMBER.split(word)
    nums = NUMBER.findall(word)
    out = re.escape(parts[0])
    for n, p in zip(nums, parts[1:]):
        out += r"-?\d+(?:[.,]\d+)*" + re.escape(p)
    return out


def python_comment_commands(text, registry):
    """A snippet's leading comment lines that are commands (`# pack_lmdb
    images/ seg.lmdb ...`): they make what the snippet reads."""
    out = []
    for line in text.split("\n"):
        s = line.strip()
        if not s.startswith("#"):
            break
        cmd = s[1:].strip()
        w = cmd.split()
        if w and registry.resolve(w[0]) not in (None, "foreign"):
            out.append(cmd)
    return out


def python_subprocess_commands(text):
    """`subprocess.run(["tool", "--opt", ...])` calls as command lines."""
    import ast
    import shlex
    out = []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.List):
            items = node.args[0].elts
            if items and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items):
                out.append(shlex.join(e.value for e in items))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(HERE, "..", ".."))
    ap.add_argument("--build", default=None)
    ap.add_argument("--python-dir", help="the built package's folder (default BUILD/python)")
    ap.add_argument("--cpp-example", help="the program built from docs/LOADER.md's C++ block")
    ap.add_argument("--only", action="append", default=[],
                    help="DOC, DOC:LINE, or 'claims' (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folders")
    ap.add_argument("--list", action="store_true", help="list the blocks and what happens to each")
    ap.add_argument("--no-run", action="store_true", help="check the options only")
    ap.add_argument("--extract-cpp", nargs=2, metavar=("DOC", "OUT"),
                    help="write DOC's C++ block as a program to OUT (used by CMake)")
    args = ap.parse_args()
    if args.extract_cpp:
        return extract_cpp(*args.extract_cpp)
    args.build = args.build or os.path.join(args.root, "build")
    r = Runner(args)
    docs = ["README.md"] + sorted(os.path.relpath(p, r.root) for p in glob.glob(os.path.join(r.root, "docs", "*.md")))
    parsed = []
    for d in docs:
        blocks, spans = markdown.parse(os.path.join(r.root, d), d, r.registry.named_in)
        imports = []                  # a snippet sees the imports of those above it in its doc
        for b in blocks:
            b.imports = list(imports)
            if b.kind() == "python":
                imports += [l + "\n" for l in b.text.split("\n") if re.match(r"^(import|from) \w", l)]
        parsed.append((d, blocks, spans))

    def selected(block):
        if not args.only:
            return True
        for o in args.only:
            doc, _, line = o.partition(":")
            if block.doc == doc and (not line or int(line) == block.line):
                return True
        return False

    if args.list:
        for d, blocks, _ in parsed:
            for b in blocks:
                spec = specs.find(b)
                what = "not run: " + b.not_run if b.not_run else ("figure" if b.kind() is None else "runs")
                print("%-24s %-10s %s%s" % (b.where, b.kind() or "-", what, " (spec)" if spec else ""))
        return 0

    t_start = time.time()
    results = []
    try:
        runs_any = not args.no_run and any(selected(b) and b.kind() and not b.not_run for _, bl, _ in parsed for b in bl)
        if runs_any:
            r.setup()
        for d, blocks, spans in parsed:
            if not args.only:
                r.check_spans(d, spans)
            for b in blocks:
                if not selected(b):
                    continue
                res = r.block(b, run=not args.no_run)
                results.append(res)
                if res.status == "FIGURE":
                    continue
                print("%-7s %s %s%s" % (res.status, b.where, b.kind(),
                                        " (%.1f s)" % res.seconds if res.seconds else ""), flush=True)
                for m in res.messages:
                    print("        " + m.replace("\n", "\n        "), flush=True)
        if not args.only:
            r.check_every_tool()
        if (not args.only or "claims" in args.only) and not args.no_run:
            if not os.path.isdir(r.data):
                r.setup()
            for c in specs.CLAIMS:
                res = r.claim(c)
                results.append(res)
                print("%-7s %s claim (%.1f s)" % (res.status, res.where, res.seconds), flush=True)
                for m in res.messages:
                    print("        " + m.replace("\n", "\n        "), flush=True)
    finally:
        if r.hub:
            r.hub.stop()
        if r.keep:
            print("docs: scratch kept in %s" % r.work)
        else:
            shutil.rmtree(r.work, ignore_errors=True)

    stale = []
    if not args.only and not args.no_run:
        stale += ["specs.py: %s matches no block of %s" % (k, k[0]) for k in specs.all_keys() - r.used_specs]
        stale += ["specs.py: known failure %s was not met (remove it)" % (k,)
                  for k in specs.all_known() - r.used_known]
    for where, msg in r.xfail_options:
        print("XFAIL   %s: %s" % (where, msg))
    for where, msg in r.findings:
        print("FAIL    %s: %s" % (where, msg))
    for s in stale:
        print("FAIL    %s" % s)
    count = lambda st: sum(1 for x in results if x.status == st)
    ran = sum(1 for x in results if x.block and x.status in ("PASS", "FAIL", "XFAIL", "XPASS"))
    claims = [x for x in results if not x.block]
    print("docs: %d blocks run (%d passed, %d known failures), %d marked not run, %d figures; %d prose claims run "
          "(%d known failures); options checked in %d block commands (%d options) and %d inline spans (%d "
          "options): %d findings, %d known; %.0f s"
          % (ran, sum(1 for x in results if x.block and x.status == "PASS"),
             sum(1 for x in results if x.block and x.status == "XFAIL"), count("NOT RUN"), count("FIGURE"),
             len(claims), sum(1 for x in claims if x.status == "XFAIL"), r.block_commands,
             r.block_options, r.option_spans, r.options_checked, len(r.findings), len(r.xfail_options),
             time.time() - t_start))
    bad = count("FAIL") + count("XPASS") + len(r.findings) + len(stale)
    return 1 if bad else 0


def extract_cpp(doc, out):
    """docs/LOADER.md's C++ block as a program: its #includes at the top,
    the rest in main() after the names it leaves to the reader."""
    blocks, _ = markdown.parse(doc, doc, lambda t: [])
    cpp = [b for b in blocks if b.kind() == "cpp"]
    if len(cpp) != 1:
        sys.exit("%s: expected one C++ block, found %d" % (doc, len(cpp)))
    lines = cpp[0].text.split("\n")
    includes = [l for l in lines if l.startswith("#include")]
    body = [l for l in lines if not l.startswith("#include")]
    src = ("// Generated by tests/docs/run_docs.py from %s:%d; do not edit.\n" % (doc, cpp[0].line)
           + "\n".join(includes) + "\n#include <cstdint>\n#include <cstdio>\n\n"
           + "int main() {\n  int rank = 0, world = 1;\n  int64_t epochs = 2;\n"
           + "\n".join("  " + l if l else l for l in body)
           + "\n  std::printf(\"loader example: %lld images\\n\", static_cast<long long>(l.stats().images));\n"
           + "  return 0;\n}\n")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(src)
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
