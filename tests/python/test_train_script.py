"""scripts/train_imagepack.py, the PyTorch recipe people copy: the data
contract of the C++ trainer (validation classes matched by name or refused
by name), and checkpoints that describe themselves and resume exactly."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, pack

SCRIPT = os.path.join(SCRIPTS, "train_imagepack.py")


def cue_tree(root, classes, per_class=32, seed=1):
    """16-px gray PNGs of noise over one of four textures (vertical,
    horizontal stripes, a checkerboard, flat) for class names "abcd"[k]:
    learnable whatever the crop's shift and flip."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:16, 0:16]
    textures = [x % 2, y % 2, (x + y) % 2, np.zeros((16, 16), dtype=np.int64)]
    for name in classes:
        k = "abcdefgh".index(name)
        os.makedirs(root / name, exist_ok=True)
        for i in range(per_class):
            a = (60 + 120 * textures[k % 4] + rng.integers(0, 40, (16, 16))).astype(np.uint8)
            Image.fromarray(a).save(root / name / ("%d.png" % i))
    return root


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    d = tmp_path_factory.mktemp("script")
    train = pack(cue_tree(d / "train", "abcd"), d / "train.lmdb", "--encoding", "raw", "--channels", "1")
    out = {"train": train, "dir": d}
    for name, classes in (("same", "abcd"), ("missing", "cab"), ("extra", "abce")):
        out[name] = pack(cue_tree(d / name, classes, per_class=8, seed=7), d / (name + ".lmdb"),
                         "--encoding", "raw", "--channels", "1")
    # The same samples as "same", packed with the classes in another order.
    order = d / "reversed.txt"
    order.write_text("d\nc\nb\na\n")
    out["reordered"] = pack(d / "same", d / "reordered.lmdb", "--encoding", "raw", "--channels", "1",
                            "--classes", str(order))
    return out


def train(*args, env=None):
    cmd = [sys.executable, SCRIPT, "--arch", "small_cnn", "--size", "16", "--batch-size", "16", "--lr", "0.05",
           "--threads", "1", "--print-freq", "1000", "--seed", "3", *args]
    e = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    for v in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_PROCID"):
        e.pop(v, None)
    return subprocess.run(cmd, capture_output=True, text=True, env=e)


def accuracy(out):
    m = re.search(r"train_imagepack: test accuracy ([0-9.]+)%", out)
    assert m, out
    return float(m.group(1))


def digest(out):
    return re.findall(r"final weights digest ([0-9a-f]{16})", out)[-1]


def test_validation_classes_are_matched_by_name_or_refused(dbs):
    d = dbs["dir"]
    same = train("--data", dbs["train"], "--val", dbs["same"], "--epochs", "3", "--output", str(d / "same_run"))
    assert same.returncode == 0, same.stderr
    want = accuracy(same.stdout)
    assert want > 90, same.stdout  # far above chance (25%)
    assert "the same 4 classes" in same.stdout
    reordered = train("--data", dbs["train"], "--val", dbs["reordered"], "--epochs", "3")
    assert reordered.returncode == 0, reordered.stderr
    assert accuracy(reordered.stdout) == want
    assert "4 of the 4 classes, matched by name (order differs)" in reordered.stdout
    missing = train("--data", dbs["train"], "--val", dbs["missing"], "--epochs", "3")
    assert missing.returncode == 0, missing.stderr
    assert "absent: 'd'" in missing.stdout and "24 val samples" in missing.stdout and accuracy(missing.stdout) > 90
    extra = train("--data", dbs["train"], "--val", dbs["extra"], "--epochs", "1")
    assert extra.returncode != 0
    assert re.search(r"'e' \(label 3 of 4\) is not among the 4 classes of .*train.lmdb", extra.stderr), extra.stderr
    assert "Epoch: [" not in extra.stdout and "out of bounds" not in extra.stderr


def test_a_stopped_run_resumes_exactly_and_checkpoints_need_nothing_repeated(dbs):
    d = dbs["dir"]
    common = ["--data", dbs["train"], "--val", dbs["reordered"], "--epochs", "3", "--checkpoint-every", "2"]
    straight = train(*common, "--output", str(d / "straight"))
    assert straight.returncode == 0, straight.stderr
    cut = train(*common, "--output", str(d / "cut"), "--stop-at-step", "11")  # 8 steps an epoch: mid epoch 1
    assert cut.returncode == 0, cut.stderr
    assert "--stop-at-step reached: checkpoint at epoch 1, position 48" in cut.stdout
    # Only --resume auto and --output: the run's own options.
    resumed = subprocess.run([sys.executable, SCRIPT, "--resume", "auto", "--output", str(d / "cut")],
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "position 48" in resumed.stdout
    assert digest(resumed.stdout) == digest(straight.stdout)
    assert accuracy(resumed.stdout) == accuracy(straight.stdout)
    ckpt = str(d / "cut" / "checkpoint.pt")
    ev = subprocess.run([sys.executable, SCRIPT, "--evaluate", "--resume", ckpt, "--val", dbs["missing"]],
                        capture_output=True, text=True)
    assert ev.returncode == 0, ev.stderr
    assert "test accuracy" in ev.stdout and "absent: 'd'" in ev.stdout
    bad = subprocess.run([sys.executable, SCRIPT, "--evaluate", "--resume", ckpt, "--val", dbs["same"],
                          "--arch", "resnet18"], capture_output=True, text=True)
    assert bad.returncode != 0
    assert "--arch resnet18 contradicts %s, whose model was trained with --arch small_cnn" % ckpt in bad.stderr


def test_amp_on_a_cpu_without_native_bf16_trains_in_fp32_and_says_so(dbs):
    r = train("--data", dbs["train"], "--val", dbs["same"], "--epochs", "1", "--amp", env={"IMAGEPACK_CPU_BF16": "0"})
    assert r.returncode == 0, r.stderr
    assert "this CPU has no native bf16" in r.stdout and "AMP bfloat16" not in r.stdout
    r = train("--data", dbs["train"], "--val", dbs["same"], "--epochs", "1", "--amp=bf16",
              env={"IMAGEPACK_CPU_BF16": "0"})
    assert r.returncode == 0, r.stderr
    assert "AMP bfloat16" in r.stdout


def test_a_mix_with_a_resolution_schedule_logs_res_and_sources_and_resumes_exactly(dbs):
    """--data A --data B --weights 0.7,0.3 with --res-schedule: each epoch's
    row has its size and each source's samples; a run cut inside the ramp
    resumes to the uninterrupted weights; other weights are refused by name."""
    d = dbs["dir"]
    common = ["--data", dbs["train"], "--data", dbs["same"], "--weights", "0.7,0.3", "--no-val",
              "--res-schedule", "8,16,0,2,4", "--schedule", "triangular", "--lr-peak-epoch", "1", "--epochs", "3"]
    straight = train(*common, "--output", str(d / "mix_straight"))
    assert straight.returncode == 0, straight.stderr
    rows = [json.loads(line) for line in open(d / "mix_straight" / "metrics.jsonl")]
    epochs = [r for r in rows if r["type"] == "epoch"]
    assert [r["res"] for r in epochs] == [8, 12, 16]
    assert all(r["sources"] == {dbs["train"]: 112, dbs["same"]: 48} for r in epochs), epochs
    cut = train(*common, "--output", str(d / "mix_cut"), "--stop-at-step", "14")  # 10 steps an epoch
    assert cut.returncode == 0, cut.stderr
    other = subprocess.run([sys.executable, SCRIPT, "--resume", "auto", "--output", str(d / "mix_cut"),
                            "--weights", "0.5,0.5"], capture_output=True, text=True)
    assert other.returncode != 0
    assert re.search(r"source 1 \(.*train.lmdb\): weight 0.7 in the state, weight 0.5 now", other.stderr), other.stderr
    resumed = subprocess.run([sys.executable, SCRIPT, "--resume", "auto", "--output", str(d / "mix_cut")],
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert digest(resumed.stdout) == digest(straight.stdout)
    rows = [json.loads(line) for line in open(d / "mix_cut" / "metrics.jsonl")]
    assert [r["res"] for r in rows if r["type"] == "epoch"] == [8, 12, 16]


def test_resnet_with_blurpool_a_ramp_and_evaluation_at_its_own_size(dbs):
    """FFCV's recipe on a ResNet: --blurpool puts a fixed blur before the 6
    strided convolutions of >= 16 channels (buffers, no parameters), the
    ramp gives each epoch's size, evaluation runs at --val-size."""
    d = dbs["dir"]
    r = train("--data", dbs["train"], "--val", dbs["same"], "--arch", "resnet18", "--blurpool", "--epochs", "2",
              "--res-schedule", "16,24,0,1,8", "--val-size", "24", "--val-resize", "28", "--output", str(d / "r18"))
    assert r.returncode == 0, r.stderr
    assert "evaluation at 24 px" in r.stdout, r.stdout
    rows = [json.loads(line) for line in open(d / "r18" / "metrics.jsonl")]
    assert [x["res"] for x in rows if x["type"] == "epoch"] == [16, 24]
    assert [x["samples"] for x in rows if x["type"] == "eval"] == [32, 32]
    import torch
    state = torch.load(d / "r18" / "checkpoint.pt", map_location="cpu")["model"]
    blurs = [k for k in state if k.endswith(".blur")]
    assert len(blurs) == 6 and all(torch.allclose(state[k][0, 0].sum(), torch.tensor(1.0)) for k in blurs), blurs
    refused = train("--data", dbs["train"], "--no-val", "--blurpool", "--epochs", "1")
    assert refused.returncode != 0 and "--blurpool: for the ResNets" in refused.stderr
