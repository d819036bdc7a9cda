#!/usr/bin/python3
"""Draws the training curves of a `train` run as a PNG.

    plot_metrics.py RUN/metrics.jsonl OUT.png

Left: training loss per logged step and validation loss per epoch.
Right: the task's figure, training (per logged step) and validation (per
epoch): top-1 error (classification), mIoU (segmentation), PSNR
(restoration).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def key_in(key, rows):
    return any(key in r for r in rows)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    train = [r for r in rows if r.get("type") == "train"]
    evals = [r for r in rows if r.get("type") == "eval"]
    if not train and not evals:
        sys.exit("plot_metrics: %s holds no train or eval rows" % sys.argv[1])
    steps_per_epoch = max((r["step"] for r in train), default=0) + 1
    x_train = [r["epoch"] + r["step"] / steps_per_epoch for r in train]
    x_eval = [r["epoch"] + 1 for r in evals]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax1.plot(x_train, [r["loss"] for r in train], label="train", lw=1)
    ax1.plot(x_eval, [r["loss"] for r in evals], "o-", label="validation")
    ax1.set_xlabel("epoch")
    ax1.set_ylabel("loss")
    ax1.legend()
    key, label, title = next((k, l, t) for k, l, t in (
        ("error1", "top-1 error (%)", "final validation top-1 accuracy %.2f%%"),
        ("miou", "mIoU (%)", "final validation mIoU %.2f%%"),
        ("psnr", "PSNR (dB)", "final validation PSNR %.2f dB")) if key_in(k, train + evals))
    ax2.plot(x_train, [r[key] for r in train], label="train", lw=1)
    ax2.plot(x_eval, [r[key] for r in evals], "o-", label="validation")
    if key == "psnr" and evals:
        ax2.plot(x_eval, [r["psnr_input"] for r in evals], "--", label="degraded input")
    ax2.set_xlabel("epoch")
    ax2.set_ylabel(label)
    ax2.legend()
    if evals:
        fig.suptitle(title % (evals[-1]["acc1"] if key == "error1" else evals[-1][key]))
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)
    print("plot_metrics: wrote %s" % sys.argv[2])


if __name__ == "__main__":
    main()
