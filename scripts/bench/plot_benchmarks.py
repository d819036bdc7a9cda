#!/usr/bin/python3
"""Draws the throughput tables of docs/BENCHMARKS.md as bar charts
(docs/img/bench-*.png), so the plots always show the recorded figures.

    plot_benchmarks.py [docs/BENCHMARKS.md] [docs/img]
"""
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# section heading prefix -> (file, x label, column holding the figure)
CHARTS = {
    "## resize_imagenet": ("bench-resize.png", "images/s (shorter edge -> 256)", 1),
    "## Loader": ("bench-loader.png", "images/s (RandomResizedCrop 224 + flip)", 1),
    "## pack_lmdb": ("bench-pack.png", "files/s", 2),
}


def tables(md):
    """The first table of each charted section."""
    section, rows = None, {}
    for line in md.splitlines():
        if line.startswith("## "):
            section = next((k for k in CHARTS if line.startswith(k)), None)
            continue
        if section and section in rows and not line.startswith("|"):
            section = None  # the first table ended
            continue
        if section and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
            col = CHARTS[section][2]
            if len(cells) > col and re.fullmatch(r"[0-9.]+", cells[col]):
                rows.setdefault(section, []).append((cells[0].replace("**", ""), float(cells[col])))
    return rows


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "docs/BENCHMARKS.md"
    out = sys.argv[2] if len(sys.argv) > 2 else "docs/img"
    os.makedirs(out, exist_ok=True)
    for section, rows in tables(open(src).read()).items():
        name, xlabel, _ = CHARTS[section]
        rows = rows[::-1]
        fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1))
        colors = ["#d62728" if r[0].startswith(("resize_imagenet", "bench_loader", "pack_lmdb")) else "#7f7f7f"
                  for r in rows]
        ax.barh([r[0][:70] for r in rows], [r[1] for r in rows], color=colors)
        for i, r in enumerate(rows):
            ax.text(r[1], i, " %.0f" % r[1], va="center", fontsize=8)
        ax.set_xlabel(xlabel)
        ax.tick_params(axis="y", labelsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=90)
        print("plot_benchmarks: wrote", os.path.join(out, name))


if __name__ == "__main__":
    main()
