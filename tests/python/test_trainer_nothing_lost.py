"""The C++ trainer (build/trainer/train) loses nothing in silence
(docs/USAGE.md, "Nothing lost in silence"): a run in --output is refused
without --resume auto or --overwrite; Ctrl-C checkpoints and says how to
resume; --evaluate rows stay out of the training curve; every option is
checked before any work or output; the small models say when they crop
small patches of large images; the threads a rank starts fit its CPUs."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np
import pytest
from PIL import Image

from conftest import SCRIPTS, TOOLS, pack

TRAIN = os.path.join(TOOLS, "..", "trainer", "train")
LAUNCH = os.path.join(SCRIPTS, "launch.sh")

pytestmark = pytest.mark.skipif(not os.path.exists(TRAIN), reason="the trainer is not built (no LibTorch)")


def gray_tree(root, classes="abcd", per_class=24, edge=12, seed=1):
    """Gray PNGs of noise over a class texture (stripes, checks, flat)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:edge, 0:edge]
    textures = [x % 2, y % 2, (x + y) % 2, np.zeros((edge, edge), dtype=np.int64)]
    for k, name in enumerate(classes):
        os.makedirs(root / name, exist_ok=True)
        for i in range(per_class):
            a = (60 + 120 * textures[k % 4] + rng.integers(0, 40, (edge, edge))).astype(np.uint8)
            Image.fromarray(a).save(root / name / ("%d.png" % i))
    return root


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = tmp_path_factory.mktemp("trainer_db")
    return pack(gray_tree(d / "tree"), d / "db.lmdb", "--encoding", "raw", "--channels", "1")


def env():
    e = dict(os.environ, OMP_NUM_THREADS="1")
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_JOB_ID"):
        e.pop(v, None)
    return e


def val_copy(db):
    """A copy of `db` for --val: the trainers refuse validation files that
    training reads (formats.h, SharedFiles)."""
    v = str(db) + ".val"
    if not os.path.exists(v):
        (shutil.copytree if os.path.isdir(db) else shutil.copy2)(str(db), v)
    return v


def args(db, out, *more, epochs=1):
    return ["--data", db, "--val", val_copy(db), "--arch", "mlp", "--size", "8", "--batch-size", "8", "--lr", "0.05",
            "--seed", "3", "--threads", "1", "--loader-threads", "1", "--print-freq", "1000", "--epochs",
            str(epochs), "--output", str(out), *more]


def run_group(cmd, timeout):
    """Runs cmd to its end; its whole process group is killed at the timeout."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return p.returncode, out, err


def train(*argv, timeout=120, launcher=()):
    """Runs the trainer to its end, as run_group."""
    return run_group([*launcher, TRAIN, *map(str, argv)], timeout)


def shell(command, timeout=120):
    """Runs a command line as a user's shell would, from this folder, as run_group."""
    return run_group(["sh", "-c", command], timeout)


def snapshot(folder):
    return {n: open(os.path.join(folder, n), "rb").read() for n in sorted(os.listdir(folder))}


def test_a_new_run_into_an_output_holding_a_run_is_refused_and_loses_nothing(db, tmp_path):
    out = tmp_path / "run"
    rc, o, e = train(*args(db, out))
    assert rc == 0, o + e
    before = snapshot(out)
    assert {"checkpoint.pt", "model_best.pt", "metrics.jsonl"} <= set(before)
    rc, o, e = train(*args(db, out, "--momentum", "0.8"))
    assert rc == 2, o + e
    assert "holds a run" in e and "--resume auto" in e and "--overwrite" in e, e
    assert snapshot(out) == before  # nothing touched
    # Another run's checkpoint as a start is refused into it too.
    rc, o, e = train(*args(db, tmp_path / "other"))
    assert rc == 0, o + e
    rc, o, e = train(*args(db, out, "--resume", tmp_path / "other" / "checkpoint.pt", epochs=2))
    assert rc == 2 and "another run's checkpoint" in e, e
    assert snapshot(out) == before
    # --resume auto continues it; --overwrite starts it again, alone in metrics.jsonl.
    rc, o, e = train(*args(db, out, epochs=2) + ["--resume", "auto"])
    assert rc == 0 and "resumed from" in o, o + e
    rc, o, e = train(*args(db, out, "--overwrite"))
    assert rc == 0 and "removed" in o, o + e
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    assert [r["epoch"] for r in rows if r["type"] == "eval"] == [0], rows
    assert sorted(os.listdir(out)) == ["checkpoint.pt", "metrics.jsonl", "model_best.pt"]
    # --overwrite with --resume auto contradicts itself.
    rc, o, e = train(*args(db, out, "--overwrite", "--resume", "auto"))
    assert rc == 2 and "give one" in e, e


def wait_for(path, lines, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and sum(1 for _ in open(path)) >= lines:
            return
        time.sleep(0.05)
    raise AssertionError("%s: fewer than %d lines after %d s" % (path, lines, timeout))


def start(argv, launcher=()):
    return subprocess.Popen([*launcher, TRAIN, *map(str, argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env(), start_new_session=True)


def finish(p, timeout=60):
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise


@pytest.mark.parametrize("ranks", [1, 2])
def test_ctrl_c_checkpoints_at_the_next_step_says_how_to_resume_and_exits_130(db, tmp_path, ranks):
    out, log = tmp_path / "run", tmp_path / "samples"
    launcher = (LAUNCH, "--nproc", str(ranks), "--") if ranks > 1 else ()
    p = start(args(db, out, "--log-samples", log, epochs=50), launcher)
    wait_for(str(log) + ".rank0", 3)
    os.kill(p.pid, signal.SIGINT)  # the trainer itself, or the launcher, which passes it on once
    o, e = finish(p)
    assert p.returncode == 130, o + e
    assert "interrupted (Ctrl-C)" in e and "checkpoint.pt" in e and "train --resume auto --output %s" % out in e, e
    m = re.search(r"checkpoint at epoch (\d+), position (\d+)", e)
    assert m and (int(m.group(1)), int(m.group(2))) != (0, 0), e
    assert not [n for n in os.listdir(out) if "ipk-tmp" in n]
    rc, o, e = train(*args(db, out, "--resume", "auto", "--max-steps", "1", epochs=int(m.group(1)) + 1),
                     launcher=launcher)
    assert rc == 0, o + e
    if int(m.group(2)) > 0:
        assert "continues at position %s" % m.group(2) in o, o


def digest(out):
    found = re.findall(r"final weights digest ([0-9a-f]{16})", out)
    return found[-1] if found else None


CONTINUE = re.compile(r"interrupted \(Ctrl-C\): .*? with:\r?\n  (.+?)\r?\n(?:  \((.+?)\)\r?\n)?")


def continue_command(text):
    """The command an interrupted run printed to continue it (the line
    after "... with:"), and the note after it if any."""
    m = CONTINUE.search(text)
    assert m, text
    return m.group(1), m.group(2)


def test_ctrl_c_of_two_processes_prints_the_command_that_continues_the_same_run(db, tmp_path):
    """Ctrl-C in the terminal of `launch.sh --nproc 2 -- train`: the command
    printed, run as printed (by a shell, from the same folder), ends with
    the weights of the uninterrupted two-process run. Resumed on one
    process instead, the run says that the checkpoint's world size and
    global batch are not this run's (and it ends with other weights)."""
    from test_scripts_nothing_lost import in_a_terminal
    launcher = (LAUNCH, "--nproc", "2", "--")
    rc, o, e = train(*args(db, tmp_path / "straight", epochs=6), launcher=launcher)  # 6 steps an epoch
    assert rc == 0, o + e
    want = digest(o)
    out, log = tmp_path / "run", tmp_path / "samples"
    p, master, chunks = in_a_terminal([*launcher, TRAIN, *args(db, out, "--log-samples", log, epochs=6)])
    try:
        wait_for(str(log) + ".rank0", 3)
        os.write(master, b"\x03")  # Ctrl-C, as typed
        rc = p.wait(timeout=60)
        end = time.time() + 10  # the rest of the terminal's output
        while not CONTINUE.search("".join(chunks)) and time.time() < end:
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        os.close(master)
    text = "".join(chunks)
    assert rc == 130, text
    assert re.search(r"Continue the run \(2 process\(es\), global batch 16;", text), text
    command, note = continue_command(text)
    assert command.startswith("%s --nproc 2 -- %s --resume auto --output %s" % (LAUNCH, TRAIN, out)), text
    assert note is None, text
    aside = tmp_path / "aside"  # the checkpoint's run, for a resume on one process
    shutil.copytree(out, aside)
    rc, o, e = shell(command)
    assert rc == 0, o + e
    assert "resumed from" in o and "was saved by" not in o, o
    assert digest(o) == want, o + e
    # On one process: allowed (elastic), and said, naming both.
    rc, o, e = train("--resume", "auto", "--output", aside)
    assert rc == 0, o + e
    assert "was saved by 2 process(es) x batch 8 = global batch 16; this run has 1 x 8 = 8. " in o, o
    assert "scripts/launch.sh --nproc 2 -- %s --resume auto --output %s" % (TRAIN, aside) in o, o
    assert digest(o) != want


def catches_sigint(pid):
    """True once the process has a handler for SIGINT (/proc/PID/status)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except OSError:
        pass
    return False


def test_a_second_ctrl_c_stops_at_once(db, tmp_path):
    # Rank 0 of 2 with no rank 1 waits in the rendezvous: the first Ctrl-C
    # is taken (a checkpoint is due at the next step, which never comes),
    # the second ends it at once.
    err = tmp_path / "stderr"
    e = dict(env(), RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
             MASTER_PORT=str(free_port()))
    with open(err, "w") as stderr:
        p = subprocess.Popen([TRAIN, *map(str, args(db, tmp_path / "run"))], stdout=subprocess.DEVNULL,
                             stderr=stderr, env=e, start_new_session=True)
    try:
        # Ctrl-C once the trainer catches it (its handler is installed:
        # SIGINT in SigCgt), not after a fixed sleep a loaded machine outlasts.
        end = time.time() + 120
        while not catches_sigint(p.pid):
            assert p.poll() is None and time.time() < end, open(err).read()
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGINT)
        end = time.time() + 60
        while "Ctrl-C again stops at once" not in open(err).read():
            assert p.poll() is None and time.time() < end, open(err).read()
            time.sleep(0.05)
        time.sleep(0.5)
        assert p.poll() is None  # the first one did not end it
        os.kill(p.pid, signal.SIGINT)
        assert p.wait(timeout=10) == 130, open(err).read()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert "stopped at once" in open(err).read()


def test_two_quick_ctrl_c_during_checkpoints_leave_no_temporary(db, tmp_path):
    out = tmp_path / "run"
    for attempt in range(3):
        # A checkpoint every step: the second signal often lands in a save.
        log = tmp_path / ("samples%d" % attempt)
        p = start(args(db, out, "--log-samples", log, "--checkpoint-every", "1", epochs=500) +
                  (["--resume", "auto"] if attempt else []))
        try:
            wait_for("%s.rank0" % log, 3)
            os.kill(p.pid, signal.SIGINT)
            time.sleep(0.002 * attempt)
            os.kill(p.pid, signal.SIGINT)
            o, e = finish(p)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        assert p.returncode == 130, o + e
        assert not [n for n in os.listdir(out) if "ipk-tmp" in n], os.listdir(out)
        assert os.path.exists(out / "checkpoint.pt")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_evaluate_rows_go_to_evaluations_jsonl_naming_the_val_set_and_epoch(db, tmp_path):
    out = tmp_path / "run"
    rc, o, e = train(*args(db, out, epochs=2))
    assert rc == 0, o + e
    curve = open(out / "metrics.jsonl").read()
    rc, o, e = train("--evaluate", "--resume", out / "checkpoint.pt", "--val", db)
    assert rc == 0, o + e
    assert open(out / "metrics.jsonl").read() == curve  # the training curve is untouched
    rows = [json.loads(line) for line in open(out / "evaluations.jsonl")]
    assert len(rows) == 1 and rows[0]["val"] == db and rows[0]["epoch"] == 2, rows
    assert rows[0]["checkpoint"] == str(out / "checkpoint.pt") and rows[0]["samples"] == 96, rows
    assert rows[0]["global_step"] == 24, rows
    # A checkpoint moved elsewhere: its row goes beside it, not to the run it came from.
    moved = tmp_path / "kept"
    moved.mkdir()
    os.link(out / "checkpoint.pt", moved / "epoch2.pt")
    rc, o, e = train("--evaluate", "--resume", moved / "epoch2.pt", "--val", db)
    assert rc == 0, o + e
    assert len(open(out / "evaluations.jsonl").readlines()) == 1
    assert json.loads(open(moved / "evaluations.jsonl").read())["checkpoint"] == str(moved / "epoch2.pt")


BAD_OPTIONS = [
    (["--schedule", "cosin"], "--schedule cosin: must be step, cosine"),
    (["--arch", "resnet19"], "unknown --arch 'resnet19'"),
    (["--weights", "0.5,0.5"], "--weights 0.5,0.5 has 2 values for 1 --data"),
    (["--res-schedule", "160,192"], "--res-schedule"),
    (["--device", "cuda"], "--device cuda"),
    (["--task", "detection"], "--task detection: must be"),
    (["--order", "sorted"], "--order sorted: must be"),
    (["--epochs", "0"], "--epochs 0"),
    (["--batch-size", "0"], "--batch-size 0"),
    (["--label-smoothing", "1.5"], "--label-smoothing"),
    (["--print-freq", "-3"], "--print-freq -3"),
    (["--seed", "-1"], "--seed -1"),
]


@pytest.mark.parametrize("extra,message", BAD_OPTIONS, ids=[b[0][0] for b in BAD_OPTIONS])
def test_a_bad_option_exits_2_before_any_output(db, tmp_path, extra, message):
    out = tmp_path / "run"
    base = args(db, out)
    for name in extra[::2]:  # the bad value replaces the good one
        if name in base:
            i = base.index(name)
            del base[i:i + 2]
    rc, o, e = train(*base, *extra, timeout=60)
    assert rc == 2, (rc, o, e)
    assert message in e and "Try" in e, e
    assert not out.exists()  # nothing made


def test_an_output_that_cannot_be_written_exits_1_before_any_work(db, tmp_path):
    rc, o, e = train(*args(db, "/proc/imagepack-run"), timeout=60)
    assert rc == 1, (rc, o, e)
    assert "--output /proc/imagepack-run" in e and "Epoch" not in o, e


def test_a_missing_database_exits_1_naming_it_before_any_output(db, tmp_path):
    rc, o, e = train(*args(db, tmp_path / "run")[:2], "--val", tmp_path / "nosuch.lmdb",
                     *args(db, tmp_path / "run")[4:], timeout=60)
    assert rc == 1 and o == "", (rc, o, e)
    assert "--val %s: no such database" % (tmp_path / "nosuch.lmdb") in e, e
    assert not (tmp_path / "run").exists()


def test_an_output_holding_only_evaluations_is_a_run_too(db, tmp_path):
    out = tmp_path / "run"
    rc, o, e = train(*args(db, out))
    assert rc == 0, o + e
    evals = tmp_path / "evals"
    rc, o, e = train("--evaluate", "--resume", out / "checkpoint.pt", "--val", db, "--output", evals)
    assert rc == 0 and os.listdir(evals) == ["evaluations.jsonl"], o + e
    rc, o, e = train(*args(db, evals))
    assert rc == 2 and "evaluations.jsonl" in e, e


def test_small_models_on_large_images_say_they_train_on_patches(tmp_path):
    big = pack(gray_tree(tmp_path / "tree", per_class=4, edge=96), tmp_path / "big.lmdb", "--encoding", "raw",
               "--channels", "1")
    rc, o, e = train("--data", big, "--val", val_copy(big), "--arch", "small_cnn", "--batch-size", "8", "--epochs", "1",
                     "--max-steps", "1", "--threads", "1", "--loader-threads", "1", "--output", tmp_path / "run")
    assert rc == 0, o + e
    assert "28-px crops" in o and "shorter edge of 96 px" in o, o


def test_default_threads_fit_the_rank_share_of_the_cpus(db, tmp_path):
    cpus = len(os.sched_getaffinity(0))
    rc, o, e = train("--data", db, "--val", val_copy(db), "--arch", "mlp", "--size", "8", "--batch-size", "8", "--epochs", "1",
                     "--max-steps", "1", "--output", tmp_path / "run")
    assert rc == 0, o + e
    m = re.search(r"threads (\d+) torch \+ (\d+) loader/rank", o)
    assert m, o
    torch_threads, loader_threads = int(m.group(1)), int(m.group(2))
    assert torch_threads + loader_threads <= max(2, cpus), (torch_threads, loader_threads, cpus)
