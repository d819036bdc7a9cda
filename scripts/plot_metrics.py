#!/usr/bin/python3
"""Draws the training curves of a run as a PNG.

    plot_metrics.py RUN/metrics.jsonl OUT.png     (or RUN, the folder)

Reads the rows of either trainer, build/trainer/train or
scripts/train_imagepack.py ("type": train, epoch, eval, checkpoint; other
types are passed over). Left: training loss per logged step and
validation loss per epoch. Right: the task's figure, training (per logged
step, where the rows hold it) and validation (per epoch): top-1 error
(classification), mIoU (segmentation), PSNR (restoration). The rows of
--evaluate runs (evaluations.jsonl beside metrics.jsonl, or the file
itself given) are drawn as separate points at their checkpoint's epoch.

A line that is not a JSON object (a run killed while writing it) is left
out, counted and said on stderr, and the exit code is then 3; a file with
nothing to draw exits 1.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# (key, axis label, title) per task; a row holds its task's key (or, for
# classification, acc1 alone: the validation rows of train_imagepack.py).
FIGURES = (("error1", "top-1 error (%)", "final validation top-1 accuracy %.2f%%"),
           ("miou", "mIoU (%)", "final validation mIoU %.2f%%"),
           ("psnr", "PSNR (dB)", "final validation PSNR %.2f dB"))


def read_rows(path, skipped):
    """The JSON objects of a JSON Lines file; the lines that are not one
    are appended to `skipped` as (path, line number, reason)."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                skipped.append((path, n, "not JSON (%s)" % e))
                continue
            if not isinstance(row, dict):
                skipped.append((path, n, "not a JSON object"))
                continue
            rows.append(row)
    return rows


def figure(row, key):
    """The row's value of `key`; error1 from acc1 where only that is held."""
    if key in row:
        return row[key]
    if key == "error1" and "acc1" in row:
        return 100 - row["acc1"]
    return None


def number(row, key):
    v = row.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def main():
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        sys.stderr.write(__doc__.strip() + "\n")
        return 2
    src, out = sys.argv[1], sys.argv[2]
    # OUT is checked before anything is read or drawn: a PNG into a folder
    # that exists and takes files (written atomically below).
    if not out.lower().endswith(".png"):
        sys.stderr.write("plot_metrics: %s: the picture is a PNG; give a name ending in .png\n" % out)
        return 2
    out_dir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK | os.X_OK):
        sys.stderr.write("plot_metrics: cannot write %s: %s is not a folder this user can write\n" % (out, out_dir))
        return 1
    if os.path.isdir(src):
        src = os.path.join(src, "metrics.jsonl")
    evaluations = os.path.join(os.path.dirname(src), "evaluations.jsonl")
    if not os.path.exists(src):
        sys.stderr.write("plot_metrics: %s: no such file\n" % src)
        return 1
    skipped = []
    try:
        rows = read_rows(src, skipped)
        extra = (read_rows(evaluations, skipped)
                 if os.path.basename(src) != "evaluations.jsonl" and os.path.exists(evaluations) else [])
    except (OSError, UnicodeDecodeError) as e:
        sys.stderr.write("plot_metrics: %s\n" % e)
        return 1
    # An --evaluate row names its checkpoint; its epoch is the checkpoint's
    # count of completed epochs. A training run's eval row follows epoch E
    # (0-based), drawn at E + 1.
    train = [r for r in rows if r.get("type") == "train" and number(r, "epoch") is not None
             and number(r, "loss") is not None]
    evals = [r for r in rows if r.get("type") == "eval" and "checkpoint" not in r and number(r, "epoch") is not None]
    checked = [r for r in rows + extra if r.get("type") == "eval" and "checkpoint" in r
               and number(r, "epoch") is not None]
    if not train and not evals and not checked:
        sys.stderr.write("plot_metrics: %s holds no train or eval rows: nothing to draw\n" % src)
        return 1
    steps_per_epoch = max((number(r, "step") or 0 for r in train), default=0) + 1
    x_train = [r["epoch"] + (number(r, "step") or 0) / steps_per_epoch for r in train]
    x_eval = [r["epoch"] + 1 for r in evals]
    x_checked = [r["epoch"] for r in checked]
    every = train + evals + checked
    key, label, title = next(((k, lb, t) for k, lb, t in FIGURES if any(figure(r, k) is not None for r in every)),
                             (None, None, None))
    fig, axes = plt.subplots(1, 2 if key else 1, figsize=(10 if key else 5, 4), squeeze=False)
    ax1 = axes[0][0]
    if train:
        ax1.plot(x_train, [r["loss"] for r in train], label="train", lw=1)
    if evals:
        ax1.plot(x_eval, [r.get("loss") for r in evals], "o-", label="validation")
    if checked:
        ax1.plot(x_checked, [r.get("loss") for r in checked], "s", label="--evaluate")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("loss")
    ax1.legend()
    if key:
        ax2 = axes[0][1]
        points = [(x, figure(r, key)) for x, r in zip(x_train, train) if figure(r, key) is not None]
        if points:
            ax2.plot(*zip(*points), label="train", lw=1)
        if evals:
            ax2.plot(x_eval, [figure(r, key) for r in evals], "o-", label="validation")
            if key == "psnr" and all("psnr_input" in r for r in evals):
                ax2.plot(x_eval, [r["psnr_input"] for r in evals], "--", label="degraded input")
        if checked:
            ax2.plot(x_checked, [figure(r, key) for r in checked], "s", label="--evaluate")
        ax2.set_xlabel("epoch")
        ax2.set_ylabel(label)
        ax2.legend()
        last = (evals or checked)[-1:] if (evals or checked) else []
        if last and figure(last[0], key) is not None:
            value = figure(last[0], key)
            fig.suptitle(title % (100 - value if key == "error1" else value))
    fig.tight_layout()
    tmp = os.path.join(out_dir, ".%s.tmp.%d" % (os.path.basename(out), os.getpid()))
    try:
        fig.savefig(tmp, dpi=100, format="png")
        os.replace(tmp, out)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        sys.stderr.write("plot_metrics: cannot write %s: %s\n" % (out, e.strerror or e))
        return 1
    print("plot_metrics: wrote %s (%d train, %d validation, %d --evaluate rows)" % (
        out, len(train), len(evals), len(checked)))
    if skipped:
        sys.stderr.write("plot_metrics: %d line(s) skipped:\n" % len(skipped))
        for path, n, why in skipped[:10]:
            sys.stderr.write("  %s:%d: %s\n" % (path, n, why))
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
