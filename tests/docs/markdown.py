"""What the docs runner reads from a Markdown file: fenced blocks (with the
not-run mark above them), code spans in prose and headings, each with its
line and the tools its section is about."""
import re

NOT_RUN = re.compile(r"^\*Not run by the tests: ([^*]+)\*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class Block:
    def __init__(self, doc, line, lang, text, not_run, context):
        self.doc, self.line, self.lang, self.text = doc, line, lang, text
        self.not_run = not_run        # the reason given in the doc, or None
        self.context = context        # tools the enclosing section names

    @property
    def where(self):
        return "%s:%d" % (self.doc, self.line)

    def kind(self):
        if self.lang in ("sh", "bash", "shell", "console"):
            return "sh"
        if self.lang in ("python", "py"):
            return "python"
        if self.lang in ("cpp", "c++", "cc"):
            return "cpp"
        if self.lang == "" and self.text.lstrip().startswith("$ "):
            return "transcript"
        return None                   # a figure, a table of output, JSON...


class Span:
    def __init__(self, doc, line, text, context, heading=False):
        self.doc, self.line, self.text, self.context, self.heading = doc, line, text, context, heading

    @property
    def where(self):
        return "%s:%d" % (self.doc, self.line)


def parse(path, doc, tools_named_in):
    """Blocks and prose spans of one file. tools_named_in(text) gives the
    tools a heading names; a section's context is that of its nearest
    heading naming any (a deeper heading naming none inherits it)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, spans = [], []
    stack = []                        # (level, tools) of the headings above
    context = lambda: next((t for _, t in reversed(stack) if t), ())
    para, para_line = [], 0

    def flush():
        nonlocal para
        if para:
            text = "\n".join(para)
            for m in re.finditer(r"(`+)(.+?)\1", text, re.S):
                line = para_line + text.count("\n", 0, m.start())
                spans.append(Span(doc, line, " ".join(m.group(2).split()), context()))
        para = []

    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            flush()
            indent, fence, lang = len(m.group(1)), m.group(2), m.group(3)
            body, j = [], i + 1
            while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                          and lines[j].strip().strip(fence[0]) == ""):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
                j += 1
            k = i - 1                   # the paragraph right above the fence
            while k >= 0 and not lines[k].strip():
                k -= 1
            top = k
            while top > 0 and lines[top - 1].strip() and not FENCE.match(lines[top - 1]):
                top -= 1
            mark = NOT_RUN.match(" ".join(l.strip() for l in lines[top:k + 1])) if k >= 0 else None
            blocks.append(Block(doc, i + 1, lang, "\n".join(body) + "\n",
                                mark.group(1) if mark else None, context()))
            i = j + 1
            continue
        h = HEADING.match(line)
        if h:
            flush()
            level, text = len(h.group(1)), h.group(2)
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, tuple(tools_named_in(text))))
            spans.append(Span(doc, i + 1, " ".join(text.replace("`", " ").split()), context(), heading=True))
            i += 1
            continue
        if not line.strip():
            flush()
        else:
            if not para:
                para_line = i + 1
            para.append(line)
        i += 1
    flush()
    return blocks, spans
