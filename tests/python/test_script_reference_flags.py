"""imagepack.train (scripts/train_imagepack.py runs it) takes
torchvision's reference training flags (references/classification/
train.py) with the reference's semantics, held to torch's own pieces: the
warm-up against torch.optim.lr_scheduler's SequentialLR / LinearLR /
ConstantLR / CosineAnnealingLR / StepLR, the EMA against
torch.optim.swa_utils.AveragedModel with the EMA average, clipping against
the clipped norm, mixup / cutmix against their published formula, the
weight-decay groups against the modules' types. Runs repeat bit for bit
and resume exactly with every flag on; bad values exit 2 before any work;
recipe files are flags, the command line winning."""
import json
import math
import os
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn
from PIL import Image

import imagepack
import imagepack.train
from conftest import SCRIPTS, pack
from imagepack.train import cli, models
from imagepack.train import recipe as train_recipe

SCRIPT = os.path.join(SCRIPTS, "train_imagepack.py")
RECIPES = os.path.join(os.path.dirname(__file__), "..", "..", "trainer", "recipes")
# Every new flag on: 4 steps per epoch (64 samples, batches of 16).
ALL_ON = ["--epochs", "2", "--schedule", "cosine", "--lr-warmup-epochs", "1", "--lr-warmup-method", "linear",
          "--lr-warmup-decay", "0.1", "--mixup-alpha", "0.2", "--cutmix-alpha", "1.0", "--model-ema",
          "--model-ema-steps", "2", "--model-ema-decay", "0.999", "--norm-weight-decay", "0", "--clip-grad-norm", "1",
          "--auto-augment", "ta_wide", "--random-erase", "0.5", "--interpolation", "bicubic", "--tta-flip",
          "--label-smoothing", "0.1"]


def cue_tree(root, per_class, seed):
    """16-px colour PNGs: noise over one of four textures per class."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:16, 0:16]
    textures = [x % 2, y % 2, (x + y) % 2, np.zeros((16, 16), dtype=np.int64)]
    for k, name in enumerate("abcd"):
        os.makedirs(root / name)
        for i in range(per_class):
            a = (60 + 120 * textures[k] + rng.integers(0, 40, (16, 16))).astype(np.uint8)
            Image.fromarray(np.stack([a, a // 2, 255 - a], -1)).save(root / name / ("%d.png" % i))
    return root


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    d = tmp_path_factory.mktemp("refflags")
    return {"dir": d, "train": pack(cue_tree(d / "train", 16, 1), d / "train.lmdb", "--encoding", "raw"),
            "val": pack(cue_tree(d / "val", 4, 2), d / "val.lmdb", "--encoding", "raw")}


def train(dbs, *args, ranks=1):
    """The script on the small data (ranks > 1: under scripts/launch.sh);
    its process group killed at a timeout."""
    launch = [os.path.join(SCRIPTS, "launch.sh"), "--nproc", str(ranks), "--"] if ranks > 1 else []
    cmd = launch + [sys.executable, SCRIPT, "--data", dbs["train"], "--val", dbs["val"], "--arch", "small_cnn",
                    "--size", "16", "--batch-size", "16", "--lr", "0.05", "--threads", "1", "--seed", "3", "-q", *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_NTASKS",
              "SLURM_PROCID"):
        env.pop(v, None)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError("train_imagepack.py %s: no end in 240 s" % " ".join(args))
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def digest(out):
    return [line.split()[-1] for line in out.splitlines() if "final weights digest" in line][-1]


def rows(output):
    with open(os.path.join(output, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def ckpt(output):
    return torch.load(os.path.join(output, "checkpoint.pt"), map_location="cpu")


def reference_lrs(base, epochs, warmup, method, decay, schedule, step_size=1):
    """torch.optim.lr_scheduler's lr of each epoch, stepped per epoch as torchvision's train.py steps it."""
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=base)
    main = (torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs - warmup) if schedule == "cosine" else
            torch.optim.lr_scheduler.StepLR(opt, step_size=step_size, gamma=0.1))
    first = (torch.optim.lr_scheduler.LinearLR(opt, start_factor=decay, total_iters=warmup) if method == "linear" else
             torch.optim.lr_scheduler.ConstantLR(opt, factor=decay, total_iters=warmup))
    out = []
    with warnings.catch_warnings():  # torch 1.13's SequentialLR steps its schedulers with an epoch, and says so
        warnings.simplefilter("ignore", UserWarning)
        sched = torch.optim.lr_scheduler.SequentialLR(opt, [first, main], milestones=[warmup])
        for _ in range(epochs):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
    return out


@pytest.fixture(scope="module")
def all_on(dbs):
    """Every flag on: two runs, and a third stopped mid-epoch 1 then resumed."""
    d = dbs["dir"]
    runs = {}
    for name, extra in (("a", []), ("b", []), ("c", ["--stop-at-step", "6"])):
        runs[name] = ok(train(dbs, *ALL_ON, "--print-freq", "1", "--output", str(d / name), *extra))
    runs["c2"] = ok(train(dbs, "--resume", "auto", "--output", str(d / "c")))
    return runs


def test_every_flag_on_repeats_bit_for_bit_and_resumes_exactly(dbs, all_on):
    d = dbs["dir"]
    assert digest(all_on["a"]) == digest(all_on["b"])
    assert "--stop-at-step reached: checkpoint at epoch 1, position 32, step 6" in all_on["c"], all_on["c"]
    assert digest(all_on["c2"]) == digest(all_on["a"]), all_on["c2"]
    whole, resumed = ckpt(d / "a"), ckpt(d / "c")
    for key, value in whole["recipe"]["ema"]["module"].items():  # the EMA kept in the checkpoint, resumed too
        assert torch.equal(value, resumed["recipe"]["ema"]["module"][key]), key
    assert whole["recipe"]["ema"]["n_averaged"] == resumed["recipe"]["ema"]["n_averaged"] == 2


def test_two_ranks_resume_exactly_with_mixing_and_the_ema(dbs):
    """Each rank mixes its own batches (the rank in the draw); the EMA is
    rank 0's at each evaluation: stopped mid-epoch 1 and resumed, both
    digests are the uninterrupted run's."""
    d, flags = dbs["dir"], ALL_ON + ["--print-freq", "100"]
    whole = ok(train(dbs, *flags, "--output", str(d / "ddp"), ranks=2))
    stopped = ok(train(dbs, *flags, "--output", str(d / "ddp_c"), "--stop-at-step", "3", ranks=2))
    assert "checkpoint at epoch 1, position 32, step 3" in stopped, stopped
    resumed = ok(train(dbs, "--resume", "auto", "--output", str(d / "ddp_c"), ranks=2))
    for line in ("final weights digest", "final EMA weights digest"):
        want = [w.split()[-1] for w in whole.splitlines() if line in w]
        assert want and want == [w.split()[-1] for w in resumed.splitlines() if line in w], (line, whole, resumed)


def test_the_ema_is_evaluated_beside_the_model(dbs, all_on):
    """metrics.jsonl: an eval_ema row after each eval row (the C++ trainer's
    rows); --evaluate of the checkpoint gives the last epoch's figures again."""
    run = dbs["dir"] / "a"
    evals = [r for r in rows(run) if r["type"].startswith("eval")]
    assert [(r["type"], r["epoch"]) for r in evals] == [("eval", 0), ("eval_ema", 0), ("eval", 1), ("eval_ema", 1)]
    assert " * Epoch 1 EMA  Acc@1" in all_on["a"] and "final EMA weights digest" in all_on["a"]
    out = ok(train(dbs, "--evaluate", "--resume", str(run / "checkpoint.pt")))
    assert " * %s (the checkpoint of epoch 2) EMA  Acc@1" % dbs["val"] in out, out
    with open(run / "evaluations.jsonl") as f:
        again = [json.loads(line) for line in f]
    assert [r["type"] for r in again] == ["eval", "eval_ema"]
    for before, after in zip(evals[2:], again):
        assert (after["acc1"], after["acc5"], after["samples"]) == (before["acc1"], before["acc5"], before["samples"])
        assert after["loss"] == pytest.approx(before["loss"], rel=1e-6)


def test_per_epoch_lr_is_torchvisions_sequential_warmup(dbs, all_on):
    steps = [r for r in rows(dbs["dir"] / "a") if r["type"] == "train"]
    assert len(steps) == 8
    got = [[r["lr"] for r in steps if r["epoch"] == e] for e in range(2)]
    want = reference_lrs(0.05, 2, 1, "linear", 0.1, "cosine")
    for e in range(2):  # constant through the epoch, the reference's value
        assert got[e] == pytest.approx([want[e]] * 4, rel=1e-12), (e, got, want)


@pytest.mark.parametrize("method", ["linear", "constant"])
@pytest.mark.parametrize("schedule,warmup,decay", [("cosine", 5, 0.01), ("step", 3, 0.5), ("cosine", 1, 1.0),
                                                   ("step", 7, 0.2)])
def test_epoch_lr_against_torch_schedulers(method, schedule, warmup, decay):
    class Args:
        pass
    a = Args()
    a.epochs, a.lr_warmup_epochs, a.lr_warmup_method, a.lr_warmup_decay = 20, warmup, method, decay
    a.schedule, a.step_size = schedule, 4
    want = reference_lrs(0.5, 20, warmup, method, decay, schedule, step_size=4)
    got = [train_recipe.epoch_lr(a, 0.5, e) for e in range(20)]
    assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_clipping_and_the_ema_step_against_torch(dbs):
    """Two checkpoints a step apart (6 and 7, epoch 1 after a 1-epoch warm-up):
    the update of the parameters (plain SGD, lr 0.05) has the norm lr * M of a gradient
    clipped to M, and the EMA is AveragedModel's step from the first's."""
    out = str(dbs["dir"] / "clip")
    flags = ["--epochs", "3", "--momentum", "0", "--wd", "0", "--clip-grad-norm", "0.005",
             "--model-ema", "--model-ema-steps", "1", "--model-ema-decay", "0.9", "--lr-warmup-epochs", "1",
             "--lr-warmup-method", "constant", "--lr-warmup-decay", "0.5", "--schedule", "step", "--step-size", "5",
             "--mixup-alpha", "0.4", "--print-freq", "1", "--output", out]
    ok(train(dbs, *flags, "--stop-at-step", "6"))
    first = ckpt(out)
    ok(train(dbs, "--resume", "auto", "--output", out, "--stop-at-step", "7"))
    second = ckpt(out)
    lrs = {(r["epoch"], r["step"]): r["lr"] for r in rows(out) if r["type"] == "train"}
    assert lrs[(0, 0)] == pytest.approx(0.025) and lrs[(1, 2)] == pytest.approx(0.05)  # ConstantLR, then StepLR
    model = models.make_model("small_cnn", 3, 4, False)
    names = [n for n, _ in model.named_parameters()]
    change = torch.cat([(second["model"][n] - first["model"][n]).flatten().double() for n in names])
    assert change.norm().item() == pytest.approx(0.05 * 0.005, rel=1e-3)
    # torchvision's ExponentialMovingAverage: AveragedModel, its buffers too,
    # decay adjusted by world * batch * steps / epochs (1 * 16 * 1 / 3).
    decay = 1 - min(1.0, (1 - 0.9) * 16 * 1 / 3)
    reference = torch.optim.swa_utils.AveragedModel(
        model, avg_fn=lambda avg, value, n: decay * avg + (1 - decay) * value, use_buffers=True)
    reference.module.load_state_dict(first["recipe"]["ema"]["module"])
    reference.n_averaged.fill_(first["recipe"]["ema"]["n_averaged"])
    assert reference.n_averaged.item() >= 1  # epoch 1: past the warm-up, the average is not reset
    model.load_state_dict(second["model"])
    reference.update_parameters(model)
    for key, value in reference.module.state_dict().items():
        assert torch.allclose(value.double(), second["recipe"]["ema"]["module"][key].double(), rtol=1e-6,
                              atol=1e-7), key


def test_ema_decay_adjustment_and_warmup_reset():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))

    class Args:
        model_ema, model_ema_steps, model_ema_decay, batch_size, epochs = True, 4, 0.99, 8, 10
        lr_warmup_epochs, mixup_alpha, cutmix_alpha, clip_grad_norm, seed = 2, 0.0, 0.0, None, 0
    r = train_recipe.Recipe(Args, model, 2, 0, 2)
    assert r.ema.decay == pytest.approx(1 - 0.01 * 2 * 8 * 4 / 10)
    Args.model_ema_decay = 0.5
    assert train_recipe.Recipe(Args, model, 2, 0, 2).ema.decay == 0.0  # alpha capped at 1
    reference = torch.optim.swa_utils.AveragedModel(
        model, avg_fn=lambda avg, value, n: r.ema.decay * avg + (1 - r.ema.decay) * value, use_buffers=True)
    for epoch, index in ((0, 0), (1, 4), (2, 0), (2, 3), (2, 4), (3, 8)):
        with torch.no_grad():
            for q in model.parameters():
                q.add_(torch.randn_like(q))
        model.train()(torch.randn(5, 3))  # moves the BN statistics
        r.after_step(model, epoch, index)
        if index % 4 == 0:
            reference.update_parameters(model)
            if epoch < 2:  # torchvision's reset during the warm-up epochs
                reference.n_averaged.fill_(0)
    assert r.ema.n_averaged == reference.n_averaged.item() == 3
    for key, value in reference.module.state_dict().items():
        assert torch.allclose(value.double(), r.ema.module.state_dict()[key].double(), rtol=1e-6), key


def test_mixup_and_cutmix_follow_their_formula():
    x = torch.rand(6, 3, 10, 14)
    y = torch.tensor([0, 3, 1, 2, 2, 0])
    onehot = torch.eye(4)[y]
    kinds, betas = [], []
    for k in range(400):
        draw = train_recipe.draw_mix(train_recipe.batch_rng(7, 1, k, 0), 0.2, 1.0, 10, 14)
        kinds.append(draw["kind"])
        mixed, target = train_recipe.mix_batch(x, y, 4, draw)
        b = draw["beta"]
        if draw["kind"] == "mixup":
            betas.append(b)
            assert draw["lam"] == b
            assert torch.allclose(mixed, b * x + (1 - b) * x.roll(1, 0))
        else:
            cx, cy = draw["centre"]
            rw, rh = int(0.5 * math.sqrt(1 - b) * 14), int(0.5 * math.sqrt(1 - b) * 10)
            x1, y1, x2, y2 = max(cx - rw, 0), max(cy - rh, 0), min(cx + rw, 14), min(cy + rh, 10)
            want = x.clone()
            want[:, :, y1:y2, x1:x2] = x.roll(1, 0)[:, :, y1:y2, x1:x2]
            assert torch.equal(mixed, want)
            assert draw["lam"] == pytest.approx(1 - (x2 - x1) * (y2 - y1) / 140)
        lam = draw["lam"]
        assert torch.allclose(target, lam * onehot + (1 - lam) * onehot.roll(1, 0))
    assert 150 < kinds.count("mixup") < 250  # one of the two, probability 1/2 each
    # lambda ~ Beta(0.2, 0.2): its mean 1/2 and variance 1 / (4 (2a + 1)) = 0.1786
    assert abs(np.mean(betas) - 0.5) < 0.12 and abs(np.var(betas) - 1 / 5.6) < 0.05
    again = train_recipe.draw_mix(train_recipe.batch_rng(7, 1, 3, 0), 0.2, 1.0, 10, 14)
    assert again == train_recipe.draw_mix(train_recipe.batch_rng(7, 1, 3, 0), 0.2, 1.0, 10, 14)
    for place in ((8, 1, 3, 0), (7, 2, 3, 0), (7, 1, 4, 0), (7, 1, 3, 1)):  # seed, epoch, step, rank
        assert train_recipe.draw_mix(train_recipe.batch_rng(*place), 0.2, 1.0, 10, 14) != again


NORM_TYPES = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.LayerNorm, nn.GroupNorm,
              nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d, nn.LocalResponseNorm)


@pytest.mark.parametrize("arch", ["resnet18", "mixed"])
def test_norm_weight_decay_groups_hold_exactly_the_norm_layers(arch):
    import torchvision
    model = torchvision.models.resnet18(num_classes=5) if arch == "resnet18" else nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.GroupNorm(2, 4), nn.Conv2d(4, 4, 1), nn.InstanceNorm2d(4, affine=True),
        nn.Flatten(), nn.LayerNorm(4), nn.Linear(4, 2))
    norm = {id(q) for m in model.modules() if type(m) in NORM_TYPES for q in m.parameters(recurse=False)}
    groups = train_recipe.param_groups(model, 2e-5, 0.0)
    assert [g["weight_decay"] for g in groups] == [2e-5, 0.0]
    assert {id(q) for q in groups[1]["params"]} == norm and len(groups[1]["params"]) == len(norm)
    assert {id(q) for q in groups[0]["params"]} == {id(q) for q in model.parameters()} - norm


def test_the_run_s_optimizer_holds_the_norm_groups(dbs, all_on):
    model = models.make_model("small_cnn", 3, 4, False)
    norm = [q for m in model.modules() if type(m) in NORM_TYPES for q in m.parameters(recurse=False)]
    groups = ckpt(dbs["dir"] / "a")["optimizer"]["param_groups"]
    assert [g["weight_decay"] for g in groups] == [1e-4, 0.0]
    assert len(groups[1]["params"]) == len(norm)
    assert len(groups[0]["params"]) == len(list(model.parameters())) - len(norm)


def parse(dbs, *argv):
    return cli.parse(["--data", dbs["train"], "--no-val", "--arch", "small_cnn", *argv])[0]


BAD = [(["--mixup-alpha", "-1"], "--mixup-alpha"), (["--cutmix-alpha", "-0.5"], "--cutmix-alpha"),
       (["--model-ema-decay", "1"], "--model-ema-decay"), (["--model-ema-decay", "0"], "--model-ema-decay"),
       (["--model-ema-steps", "0"], "--model-ema-steps"), (["--lr-warmup-decay", "0"], "--lr-warmup-decay"),
       (["--lr-warmup-decay", "1.5"], "--lr-warmup-decay"), (["--lr-warmup-epochs", "-1"], "--lr-warmup-epochs"),
       (["--lr-warmup-method", "cubic"], "--lr-warmup-method"), (["--norm-weight-decay", "-1"], "--norm-weight-decay"),
       (["--clip-grad-norm", "-1"], "--clip-grad-norm"), (["--ra-magnitude", "31"], "--ra-magnitude"),
       (["--augmix-severity", "0"], "--augmix-severity"), (["--random-erase", "2"], "--random-erase"),
       (["--auto-augment", "bogus"], "--auto-augment"), (["--interpolation", "nearest"], "--interpolation"),
       (["--train-crop-size", "32", "--size", "16"], "--train-crop-size"),
       (["--val-crop-size", "32", "--val-size", "16"], "--val-crop-size"),
       (["--val-resize-size", "40", "--val-resize", "36"], "--val-resize-size"),
       (["--lr-warmup-epochs", "2", "--warmup-epochs", "1"], "--lr-warmup-epochs"),
       (["--lr-warmup-epochs", "2", "--schedule", "triangular"], "--lr-warmup-epochs"),
       (["--norm-weight-decay", "0", "--no-bn-wd"], "--norm-weight-decay"),
       (["--recipe", "no_such_recipe"], "--recipe")]


def test_bad_values_exit_2_naming_the_flag(dbs, capsys):
    for argv, flag in BAD:
        with pytest.raises(SystemExit) as e:
            parse(dbs, *argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and flag in err, (argv, e.value.code, err)


def test_a_bad_value_exits_2_before_any_work(dbs):
    out = dbs["dir"] / "never"
    r = train(dbs, "--model-ema", "--model-ema-decay", "1.5", "--output", str(out))
    assert r.returncode == 2 and "--model-ema-decay 1.5: must be in (0, 1)" in r.stderr, r.stderr
    assert not out.exists() and r.stdout == ""


def test_a_recipe_file_is_flags_and_the_command_line_wins(dbs, tmp_path, capsys, monkeypatch):
    recipe = tmp_path / "mine.flags"
    recipe.write_text("# a recipe\n\n--lr 0.3\n--mixup-alpha 0.2   # trailing comment\n--train-crop-size 24\n"
                      "--model-ema\n--val-resize-size 30\n")
    monkeypatch.chdir(tmp_path.parent)  # the path as given, relative to the working directory
    a = parse(dbs, "--recipe", os.path.join(tmp_path.name, "mine.flags"), "--lr", "0.1", "--size", "16")
    assert (a.lr, a.mixup_alpha, a.size, a.model_ema, a.val_resize) == (0.1, 0.2, 16, True, 30)
    a = parse(dbs, "--recipe=" + str(recipe), "--val-resize", "20")  # the other spellings
    assert (a.lr, a.size, a.val_resize, a.val_resize_size) == (0.3, 24, 20, 0)
    recipe.write_text("--lr 0.3\n--no-such-flag 1\n")
    with pytest.raises(SystemExit) as e:
        parse(dbs, "--recipe", str(recipe))
    assert e.value.code == 2 and "line 2: unknown option --no-such-flag" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["torchvision_resnet50", "ffcv_resnet50_88"])
def test_the_shipped_recipes_parse_from_any_directory(dbs, name, tmp_path, monkeypatch):
    path = os.path.join(RECIPES, name + ".flags")
    if not os.path.exists(path):
        pytest.fail("%s is missing" % path)
    monkeypatch.chdir(tmp_path)  # NAME is found beside the script, not the working directory
    a = parse(dbs, "--recipe", name, "--epochs", "1", "--arch", "resnet18")
    assert (a.epochs, a.arch) == (1, "resnet18")
    parser = cli.make_parser()
    for _, words in train_recipe.read_recipe(path):
        if words[0] in ("--epochs", "--arch"):
            continue
        alone = vars(parser.parse_args(["--data", "x"] + words))
        dest = parser._option_string_actions[words[0]].dest
        own = train_recipe.ALIASES.get(dest, dest)
        assert getattr(a, own) == alone[dest], (name, words)


class Built(Exception):
    pass


def test_the_augmentation_flags_reach_the_loaders(dbs, monkeypatch):
    """The Loaders the script makes take the reference's augmentation flags
    (the training one) and --interpolation (both); stopped once both exist."""
    made, real = [], imagepack.Loader

    def loader(*args, **kw):
        made.append(kw)
        if len(made) == 3:  # the metadata's, the training and the validation Loader
            raise Built()
        return real(*args, **kw)
    monkeypatch.setattr(imagepack, "Loader", loader)
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    handler = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit):  # the Loader's failure, reported as the script reports one
            imagepack.train.main(["--data", dbs["train"], "--val", dbs["val"], "--arch", "small_cnn", "--size", "16",
                                  "--threads", "1", "--auto-augment", "augmix", "--augmix-severity", "5",
                                  "--ra-magnitude", "12", "--random-erase", "0.25", "--interpolation", "bicubic"])
    finally:
        signal.signal(signal.SIGINT, handler)
    train_kw, val_kw = made[1], made[2]
    assert {k: train_kw[k] for k in ("auto_augment", "augmix_severity", "ra_magnitude", "random_erase",
                                     "interpolation")} == dict(auto_augment="augmix", augmix_severity=5,
                                                               ra_magnitude=12, random_erase=0.25,
                                                               interpolation="bicubic")
    # torchvision erases after Normalize(mean, std) with 0: the mean colour, in grey levels
    mean = real(dbs["train"], batch_size=1, size=8, threads=1, as_torch=False).meta["mean"]
    assert len(mean) == 3 and train_kw["random_erase_value"] == [round(255 * m) for m in mean]
    assert val_kw["interpolation"] == "bicubic" and "auto_augment" not in val_kw and "random_erase" not in val_kw
