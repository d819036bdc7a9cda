"""The scripts keep the project's rule (docs/USAGE.md): nothing that
exists is overwritten or dropped without the user asking, and every
argument is checked before any work or output (exit 2 for usage, 1 for a
failure of the environment, 3 for partial results, 130 for Ctrl-C).

scripts/train_imagepack.py (a run in --output, Ctrl-C, --evaluate's rows,
usage errors, a two-rank exit), scripts/plot_metrics.py, scripts/read_db.py,
scripts/launch.sh and what docs/PYTHON.md says of load_state_dict. Every
process started here runs in its own session and is killed with its whole
group if it outlives its timeout."""
import fcntl
import glob
import json
import os
import re
import signal
import subprocess
import sys
import termios
import threading
import time

import shutil

import pytest
from PIL import Image

from conftest import SCRIPTS, TOOLS, pack
from test_train_script import cue_tree, digest

SCRIPT = os.path.join(SCRIPTS, "train_imagepack.py")
LAUNCH = os.path.join(SCRIPTS, "launch.sh")
PLOT = os.path.join(SCRIPTS, "plot_metrics.py")
READ_DB = os.path.join(SCRIPTS, "read_db.py")
DOCS = os.path.join(os.path.dirname(__file__), "../../docs")
SMALL = ["--arch", "small_cnn", "--size", "16", "--batch-size", "16", "--lr", "0.05", "--threads", "1", "--seed", "3"]


def env(**extra):
    """This environment without any rank variables, one thread each, unbuffered output."""
    e = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    for v in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_NTASKS",
              "SLURM_PROCID"):
        e.pop(v, None)
    return e


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def proc(cmd, timeout=120, **kw):
    """Runs `cmd` in a session of its own: (returncode, stdout, stderr);
    on timeout its whole group is killed and the test fails."""
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=kw.pop("env", env()), **kw)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, err = p.communicate()
        raise AssertionError("%s ran past %d s:\n%s%s" % (cmd[:3], timeout, out, err))
    finally:
        kill_group(p)  # nothing it started outlives it
    return p.returncode, out, err


def train(*args, timeout=120):
    return proc([sys.executable, SCRIPT, *SMALL, *args], timeout=timeout)


def rows(path):
    return [json.loads(line) for line in open(path)]


def cue_databases(d, tiny=True):
    """4-class training and validation databases of cue images in folder d
    (and a 2-class tiny one): {"dir", "train", "val"[, "tiny"]}."""
    raw = ("--encoding", "raw", "--channels", "1")
    out = {"dir": d, "train": pack(cue_tree(d / "train", "abcd", per_class=16), d / "train.lmdb", *raw),
           "val": pack(cue_tree(d / "val", "abcd", per_class=4, seed=7), d / "val.lmdb", *raw)}
    if tiny:
        out["tiny"] = pack(cue_tree(d / "tiny", "ab", per_class=8, seed=5), d / "tiny.lmdb", *raw)
    return out


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    return cue_databases(tmp_path_factory.mktemp("nothing_lost"))


@pytest.fixture(scope="module")
def two_epochs(dbs):
    """A finished two-epoch run (its folder), evaluated once with --evaluate."""
    out = dbs["dir"] / "two_epochs"
    rc, o, e = train("--data", dbs["train"], "--val", dbs["val"], "--epochs", "2", "--output", out)
    assert rc == 0, o + e
    return out


# ---------------------------------------------------------------- a run in --output

def test_an_output_holding_a_run_is_refused_unless_resumed_or_overwritten(dbs):
    d = dbs["dir"]
    out = d / "held"
    common = ["--data", dbs["train"], "--val", dbs["val"], "--output", out, "-q"]
    rc, o, e = train(*common, "--epochs", "1")
    assert rc == 0, o + e
    kept = {n: (out / n).read_bytes() for n in ("checkpoint.pt", "metrics.jsonl", "model.pt")}
    (out / "evaluations.jsonl").write_text('{"type": "eval", "epoch": 1}\n')

    rc, o, e = train(*common, "--epochs", "2")  # a new run: refused before any work
    assert rc == 2, o + e
    assert str(out) in e and "--resume auto" in e and "--overwrite" in e, e
    assert "Traceback" not in e and "Epoch" not in o
    assert {n: (out / n).read_bytes() for n in kept} == kept

    rc, o, e = train(*common, "--epochs", "2", "--overwrite", "--resume", "auto")
    assert rc == 2 and "--overwrite" in e and "Traceback" not in e, o + e
    assert {n: (out / n).read_bytes() for n in kept} == kept

    rc, o, e = train(*common, "--epochs", "2", "--overwrite")  # asked: the old run goes, the new one starts afresh
    assert rc == 0, o + e
    assert [r["epoch"] for r in rows(out / "metrics.jsonl") if r["type"] == "epoch"] == [0, 1]
    assert not (out / "evaluations.jsonl").exists()
    assert "--overwrite" in o

    rc, o, e = train("--resume", "auto", "--output", out, "--epochs", "3")  # continuing is never refused
    assert rc == 0, o + e
    assert [r["epoch"] for r in rows(out / "metrics.jsonl") if r["type"] == "epoch"] == [0, 1, 2]

    # Metrics of a run that stopped before its first checkpoint: nothing
    # for --resume auto to continue, so it is refused too.
    early = d / "early"
    early.mkdir()
    (early / "metrics.jsonl").write_text('{"type": "epoch", "epoch": 0}\n')
    rc, o, e = train("--data", dbs["train"], "--no-val", "--epochs", "1", "--resume", "auto", "--output", early)
    assert rc == 2 and "--overwrite" in e, o + e
    assert (early / "metrics.jsonl").read_text() == '{"type": "epoch", "epoch": 0}\n'

    # --evaluate's rows alone: a new run there would draw them as its own.
    evals = d / "evals_only"
    evals.mkdir()
    (evals / "evaluations.jsonl").write_text('{"type": "eval", "epoch": 1}\n')
    rc, o, e = train("--data", dbs["train"], "--no-val", "--epochs", "1", "--output", evals)
    assert rc == 2 and "evaluations.jsonl" in e, o + e


# ---------------------------------------------------------------- Ctrl-C

def start_training(cmd, **kw):
    """Starts `cmd` with its output read line by line in a thread; returns
    (process, lines list)."""
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, env=env(), **kw)
    lines = []
    threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")), daemon=True).start()
    return p, lines


def wait_for(predicate, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError("waited %d s for %s" % (timeout, what))


def ctrl_c_after_the_first_steps(cmd, start_timeout=60):
    """Starts a training, sends SIGINT once its second step is logged, and
    returns its exit status and output; its process group ends here."""
    p, lines = start_training(cmd)
    try:
        wait_for(lambda: any("Epoch: [0][1/" in x for x in lines), start_timeout, "training to start")
        p.send_signal(signal.SIGINT)
        rc = p.wait(timeout=60)
    finally:
        kill_group(p)
    return rc, "".join(lines)


def test_ctrl_c_checkpoints_at_the_next_step_exits_130_and_says_how_to_resume(dbs):
    out = dbs["dir"] / "ctrl_c"
    rc, text = ctrl_c_after_the_first_steps([sys.executable, SCRIPT, *SMALL, "--data", dbs["train"], "--val",
                                             dbs["val"], "--epochs", "500", "--print-freq", "1", "--output", out])
    assert rc == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    m = re.search(r"interrupted \(Ctrl-C\): checkpoint at epoch (\d+), position (\d+), step (\d+) in (\S+)\. ", text)
    assert m and m.group(4) == str(out / "checkpoint.pt"), text
    assert "--resume auto" in text
    assert os.path.exists(out / "checkpoint.pt") and not glob.glob(str(out / "*tmp*"))
    # The checkpoint holds the run: --resume auto --output continues it
    # where it stopped (to the end of that epoch here).
    rc, o, e = proc([sys.executable, SCRIPT, "--resume", "auto", "--output", out, "--epochs", int(m.group(1)) + 1])
    # (A Ctrl-C on an epoch's last step is the next epoch's start: position 0, not printed.)
    resumed_at = "at epoch %s" % m.group(1) + (", position %s" % m.group(2) if m.group(2) != "0" else "\n")
    assert rc == 0 and "resumed from" in o and resumed_at in o, o + e


def test_a_second_ctrl_c_during_the_save_stops_at_once_leaving_no_temporary(dbs):
    """The first Ctrl-C starts a checkpoint (resnet50's: ~200 MB, long
    enough to be caught while written); a second one while its temporary
    exists ends the process at once with 130 and removes the temporary."""
    out = dbs["dir"] / "second_ctrl_c"
    p, lines = start_training([sys.executable, SCRIPT, *SMALL, "--arch", "resnet50", "--data", dbs["train"],
                               "--no-val", "--epochs", "500", "--print-freq", "1", "--output", out])
    try:
        wait_for(lambda: any("Epoch: [0][1/" in x for x in lines), 90, "training to start")
        p.send_signal(signal.SIGINT)
        wait_for(lambda: glob.glob(str(out / "*tmp*")) or p.poll() is not None, 60, "the checkpoint's temporary")
        assert p.poll() is None, "the checkpoint was written before a second Ctrl-C could be sent: " + "".join(lines)
        p.send_signal(signal.SIGINT)
        t0 = time.time()
        rc = p.wait(timeout=30)
        took = time.time() - t0
    finally:
        kill_group(p)
    text = "".join(lines)
    assert rc == 130, text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text
    assert not glob.glob(str(out / "*tmp*")), os.listdir(out)
    assert not os.path.exists(out / "checkpoint.pt")  # the one being written was the first
    assert took < 10, took


def in_a_terminal(cmd):
    """Starts `cmd` as the foreground job of a terminal of its own (a pty),
    as a user's shell would: (process, master fd, output list)."""
    master, slave = os.openpty()

    def controlling_terminal():  # runs in the child, after setsid: the pty becomes its terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([str(c) for c in cmd], stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                         preexec_fn=controlling_terminal, env=env())
    os.close(slave)
    chunks = []

    def drain():
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:
                return
            if not b:
                return
            chunks.append(b.decode(errors="replace"))

    threading.Thread(target=drain, daemon=True).start()
    return p, master, chunks


CONTINUE = re.compile(r"interrupted \(Ctrl-C\): .*? with:\r?\n  (.+?)\r?\n(?:  \((.+?)\)\r?\n)?")


def test_ctrl_c_in_a_terminal_stops_both_ranks_together_at_a_checkpoint(dbs):
    """launch.sh --nproc 2 in a terminal: Ctrl-C reaches both ranks (once
    each), which agree to checkpoint at the next step and exit 130;
    launch.sh waits for them and exits 130. The command printed to continue
    names the launcher and its process count: run as printed (by a shell)
    it ends with the uninterrupted two-process run's weights. Resumed on
    one process instead, the run says the checkpoint's world size and
    global batch are not this run's (and it ends with other weights)."""
    out, aside = dbs["dir"] / "ctrl_c_ddp", dbs["dir"] / "ctrl_c_ddp_aside"
    run = [LAUNCH, "--nproc", "2", "--", sys.executable, SCRIPT, *SMALL, "--data", dbs["train"], "--val",
           dbs["val"], "--epochs", "6", "--print-freq", "1"]  # 2 steps an epoch
    rc, o, e = proc(run + ["--output", dbs["dir"] / "ddp_straight"], timeout=180)
    assert rc == 0, o + e
    want = digest(o)
    p, master, chunks = in_a_terminal(run + ["--output", out])
    try:
        wait_for(lambda: "Epoch: [0][1/" in "".join(chunks), 90, "training to start")
        os.write(master, b"\x03")  # Ctrl-C, as typed
        rc = p.wait(timeout=60)
        wait_for(lambda: CONTINUE.search("".join(chunks)), 10, "the terminal's last lines")
    finally:
        kill_group(p)
        os.close(master)
    text = "".join(chunks)
    assert rc == 130, text
    assert "Traceback" not in text and "stopped at once" not in text, text
    assert text.count("interrupted (Ctrl-C): checkpoint at epoch") == 1, text
    assert os.path.exists(out / "checkpoint.pt") and not glob.glob(str(out / "*tmp*"))
    assert "Continue the run (2 process(es), global batch 32;" in text, text
    command, note = CONTINUE.search(text).groups()
    assert command == "%s --nproc 2 -- %s %s --resume auto --output %s" % (LAUNCH, sys.executable, SCRIPT, out), text
    assert note is None, text
    shutil.copytree(out, aside)
    rc, o, e = proc(["sh", "-c", command], timeout=180)
    assert rc == 0 and "resumed from" in o and "was saved by" not in o, o + e
    assert digest(o) == want, o + e
    # On one process: allowed (elastic), and said, naming both.
    rc, o, e = proc([sys.executable, SCRIPT, "--resume", "auto", "--output", aside], timeout=180)
    assert rc == 0, o + e
    assert "was saved by 2 process(es) x batch 16 = global batch 32; this run has 1 x 16 = 16. " in o, o
    assert "e.g. scripts/launch.sh --nproc 2 -- %s %s --resume auto --output %s" % (sys.executable, SCRIPT, aside) in o
    assert digest(o) != want


def test_a_sigint_sent_to_launch_sh_alone_is_passed_on_once(dbs):
    """No terminal (a script's kill -INT): launch.sh passes the SIGINT on to
    each rank once, waits for them, and they stop as at a Ctrl-C."""
    out = dbs["dir"] / "kill_int_ddp"
    p, lines = start_training([LAUNCH, "--nproc", "2", "--", sys.executable, SCRIPT, *SMALL, "--data", dbs["train"],
                               "--no-val", "--epochs", "500", "--print-freq", "1", "--output", out])
    try:
        wait_for(lambda: any("Epoch: [0][1/" in x for x in lines), 90, "training to start")
        os.kill(p.pid, signal.SIGINT)  # launch.sh itself, not its group
        rc = p.wait(timeout=60)
    finally:
        kill_group(p)
    text = "".join(lines)
    assert rc == 130, text
    assert text.count("interrupted (Ctrl-C): checkpoint at epoch") == 1 and "stopped at once" not in text, text
    assert os.path.exists(out / "checkpoint.pt") and not glob.glob(str(out / "*tmp*"))


# ---------------------------------------------------------------- --evaluate

def test_evaluate_rows_go_to_evaluations_jsonl_with_val_checkpoint_and_epoch(dbs, two_epochs):
    ckpt = two_epochs / "checkpoint.pt"
    metrics = (two_epochs / "metrics.jsonl").read_text()
    rc, o, e = proc([sys.executable, SCRIPT, "--evaluate", "--resume", ckpt, "--val", dbs["val"]])
    assert rc == 0, o + e
    assert (two_epochs / "metrics.jsonl").read_text() == metrics  # the training curve is the training's
    (row,) = rows(two_epochs / "evaluations.jsonl")  # beside the checkpoint, without --output
    assert row["type"] == "eval" and row["val"] == dbs["val"] and row["checkpoint"] == str(ckpt)
    assert row["epoch"] == 2 and row["samples"] == 16 and 0 <= row["acc1"] <= 100, row
    elsewhere = dbs["dir"] / "evaluated"
    rc, o, e = proc([sys.executable, SCRIPT, "--evaluate", "--resume", ckpt, "--val", dbs["val"],
                     "--output", elsewhere])
    assert rc == 0, o + e
    assert [r["epoch"] for r in rows(elsewhere / "evaluations.jsonl")] == [2]
    assert not (elsewhere / "metrics.jsonl").exists() and len(rows(two_epochs / "evaluations.jsonl")) == 1
    # A checkpoint moved away from its run: its row goes beside it, not to the run it came from.
    zoo = dbs["dir"] / "zoo"
    zoo.mkdir()
    os.link(ckpt, zoo / "r.pt")
    rc, o, e = proc([sys.executable, SCRIPT, "--evaluate", "--resume", zoo / "r.pt", "--val", dbs["val"]])
    assert rc == 0, o + e
    assert [r["checkpoint"] for r in rows(zoo / "evaluations.jsonl")] == [str(zoo / "r.pt")]
    assert len(rows(two_epochs / "evaluations.jsonl")) == 1


# ---------------------------------------------------------------- plot_metrics.py

def test_plot_metrics_draws_a_train_imagepack_run_and_counts_a_torn_line(dbs, two_epochs, tmp_path):
    rc, o, e = proc([sys.executable, SCRIPT, "--evaluate", "--resume", two_epochs / "checkpoint.pt",
                     "--val", dbs["val"]])
    assert rc == 0, o + e
    png = tmp_path / "curves.png"
    rc, o, e = proc([sys.executable, PLOT, two_epochs / "metrics.jsonl", png])  # evaluations.jsonl beside it
    assert rc == 0 and "Traceback" not in e, o + e
    assert Image.open(png).size[0] > 100
    assert re.search(r"\d+ train, 2 validation, [1-9]\d* --evaluate rows", o), o
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "metrics.jsonl").write_text((two_epochs / "metrics.jsonl").read_text() + '{"type": "ev')
    rc, o, e = proc([sys.executable, PLOT, torn, tmp_path / "torn.png"])  # the folder given
    assert rc == 3 and "1 line(s) skipped" in e and "metrics.jsonl:" in e, o + e
    assert os.path.exists(tmp_path / "torn.png")
    # The C++ trainer's rows (train, epoch, eval, checkpoint), where it is built.
    cpp = os.path.join(TOOLS, "../trainer/train")
    if os.path.exists(cpp):
        run = tmp_path / "cpp"
        rc, o, e = proc([cpp, "--data", dbs["train"], "--val", dbs["val"], "--arch", "small_cnn", "--size", "16",
                         "--epochs", "1", "--batch-size", "16", "--print-freq", "1", "--output", run, "-q"])
        assert rc == 0, o + e
        rc, o, e = proc([sys.executable, PLOT, run / "metrics.jsonl", tmp_path / "cpp.png"])
        assert rc == 0 and "1 validation" in o, o + e
    # OUT is checked before anything is drawn: one line, no traceback, nothing made.
    for out, code in ((tmp_path / "nodir" / "c.png", 1), ("/proc/c.png", 1), (tmp_path / "c.txt", 2)):
        rc, o, e = proc([sys.executable, PLOT, two_epochs / "metrics.jsonl", out])
        assert rc == code and str(out) in e and "Traceback" not in e and o == "", (out, rc, o + e)
    assert not (tmp_path / "nodir").exists() and not (tmp_path / "c.txt").exists()


# ---------------------------------------------------------------- checked before any work

def cuda_available():
    import torch
    return torch.cuda.is_available()


USAGE = [  # (options, exit code, what stderr says)
    (["--arch", "resnet9000"], 2, "unknown --arch 'resnet9000'"),
    (["--schedule", "linear"], 2, "--schedule"),
    (["--res-schedule", "16,8,0,2"], 2, "--res-schedule"),
    (["--res-schedule", "16,x"], 2, "--res-schedule"),
    (["--data", "TRAIN", "--weights", "0.7,0.2,0.1"], 2, "--weights 0.7,0.2,0.1 has 3 values for 2 --data"),
    (["--device", "cuda"], 2, "--device cuda"),
    (["--blurpool"], 2, "--blurpool: for the ResNets"),
    (["--task", "segmentation", "--arch", "resnet18"], 2, "--arch resnet18"),
    (["--epochs", "0"], 2, "--epochs 0"),
    (["--print-freq", "-1"], 2, "--print-freq -1"),
    (["--seed", "-1"], 2, "--seed -1"),
]


def test_a_usage_error_exits_2_in_one_line_before_any_work_or_output(dbs):
    out = dbs["dir"] / "usage_out"
    wrong = []
    for options, code, said in USAGE:
        if options == ["--device", "cuda"] and cuda_available():
            continue  # a machine with CUDA takes it
        options = [dbs["train"] if o == "TRAIN" else o for o in options]
        rc, o, e = train("--data", dbs["train"], "--val", dbs["val"], "--epochs", "1", "--output", out, *options)
        if rc != code or said not in e or "Traceback" in e or out.exists() or "Epoch" in o:
            wrong.append("%s: exit %d, out %s, stderr:\n%s" % (" ".join(map(str, options)), rc, out.exists(), e))
    assert not wrong, "\n".join(wrong)


def test_environment_failures_exit_1_in_one_line_before_any_work(dbs, tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    missing = tmp_path / "nope.lmdb"
    for options, said in ((["--data", missing, "--val", dbs["val"]], str(missing)),
                          (["--data", dbs["train"], "--val", missing], str(missing)),
                          (["--data", "%s,%s" % (dbs["train"], missing), "--no-val"], str(missing)),
                          (["--data", dbs["train"], "--no-val", "--classes", missing], str(missing)),
                          (["--data", a_file, "--no-val"], str(a_file))):
        rc, o, e = train(*options, "--epochs", "1", "--output", tmp_path / "out")
        assert rc == 1, o + e
        assert said in e and "Traceback" not in e and len(e.strip().splitlines()) == 1, e
        assert not (tmp_path / "out").exists()
    # An --output that cannot be made (below a file; a folder without write
    # permission, where the user is not root).
    rc, o, e = train("--data", dbs["train"], "--val", dbs["val"], "--epochs", "1", "--output", a_file / "run")
    assert rc == 1 and str(a_file) in e and "Traceback" not in e and len(e.strip().splitlines()) == 1, o + e
    assert "Epoch" not in o
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        rc, o, e = train("--data", dbs["train"], "--no-val", "--epochs", "1", "--output", locked / "run")
        assert rc == 1 and str(locked) in e and "Traceback" not in e, o + e
    # --evaluate writes beside the checkpoint: the same check there.
    rc, o, e = proc([sys.executable, SCRIPT, "--evaluate", "--resume", missing, "--val", dbs["val"]])
    assert rc == 1 and str(missing) in e and "Traceback" not in e, o + e


# ---------------------------------------------------------------- a two-rank run always ends

def test_two_rank_runs_end_without_hanging_beside_a_cpu_hog(dbs, tmp_path):
    """Thirty two-rank launches on a loaded machine: each ends by itself
    (no hang in the process group's teardown) with 0. Before the teardown
    was fixed, 2 of 6 such launches hung."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
    took, hangs = [], 0
    try:
        for i in range(30):
            t0 = time.time()
            p = subprocess.Popen([LAUNCH, "--nproc", "2", "--", sys.executable, SCRIPT, *SMALL, "--data", dbs["tiny"],
                                  "--no-val", "--epochs", "1", "-q", "--output", tmp_path / ("r%d" % i)],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                 env=env())
            try:
                out, _ = p.communicate(timeout=25)
                assert p.returncode == 0, out
            except subprocess.TimeoutExpired:
                hangs += 1
                kill_group(p)
                p.communicate()
            finally:
                kill_group(p)
            took.append(time.time() - t0)
    finally:
        kill_group(hog)
        hog.wait()
    print("two-rank launches: %s s" % ", ".join("%.1f" % t for t in took))
    assert hangs == 0, "%d of 30 launches hung (%s s)" % (hangs, took)


# ---------------------------------------------------------------- read_db.py, launch.sh

def test_read_db_says_an_index_out_of_range_and_a_path_that_is_not_a_database(dbs, tmp_path):
    rc, o, e = proc([sys.executable, READ_DB, dbs["val"], "0", "16"])
    assert rc == 2 and e.strip() == "read_db.py: index 16 out of range: %s holds 16 records" % dbs["val"], o + e
    assert o == ""  # checked before any output
    rc, o, e = proc([sys.executable, READ_DB, dbs["val"], "-1"])
    assert rc == 2 and "index -1 out of range" in e, o + e
    rc, o, e = proc([sys.executable, READ_DB, dbs["val"], "x"])
    assert rc == 2 and "Traceback" not in e, o + e
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    for path in (text, tmp_path):
        rc, o, e = proc([sys.executable, READ_DB, path, "0"])
        assert rc == 1 and str(path) in e and "Traceback" not in e and len(e.strip().splitlines()) == 1, o + e
    rc, o, e = proc([sys.executable, READ_DB, dbs["val"], "15"])
    assert rc == 0 and o.startswith("count 16,"), o + e
    # Without python3-xxhash: read, and said that checksums were not checked.
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "xxhash.py").write_text("raise ImportError('hidden by the test')\n")
    rc, o, e = proc([sys.executable, READ_DB, dbs["val"], "3"], env=dict(os.environ, PYTHONPATH=str(stub)))
    assert rc == 0 and "checksums not checked" in e and "3: label" in o, o + e


def test_read_db_check_counts_every_damaged_record(dbs, tmp_path):
    import lmdb
    import shutil
    db = tmp_path / "damaged.lmdb"
    shutil.copy(dbs["val"], db)
    env = lmdb.open(str(db), subdir=False, lock=False)
    with env.begin(write=True) as txn:
        for key in (b"0000000004", b"0000000011"):
            value = bytearray(txn.get(key))
            value[-1] ^= 0xFF  # a flipped byte in the payload
            txn.put(key, bytes(value))
    env.close()
    rc, o, e = proc([sys.executable, READ_DB, db, "--check"])
    assert rc == 1 and "record 4:" in e and "record 11:" in e and "2 of 16 records damaged" in e, o + e


def test_launch_sh_help_and_a_command_without_double_dash(tmp_path):
    rc, o, e = proc([LAUNCH, "--help"])
    assert rc == 0 and "--nproc N" in o and e == "", o + e
    rc, o, e = proc([LAUNCH, "--nproc", "2", "train", "--data", "x"])
    assert rc == 2 and "launch.sh: put -- before the command, e.g. launch.sh --nproc 2 -- train --data x" in e, e
    rc, o, e = proc([LAUNCH, "--nproc"])
    assert rc == 2 and "--nproc needs a value" in e, e
    rc, o, e = proc([LAUNCH, "--nproc", "abc", "--", "true"])
    assert rc == 2 and "--nproc 'abc' is not a number" in e, e
    rc, o, e = proc([LAUNCH, "--nproc", "2", "--", tmp_path / "nosuch"])  # found before any rank starts
    assert rc == 2 and "nosuch: no such command" in e and "[rank" not in e, e
    rc, o, e = proc([LAUNCH, "--nproc", "2", "--", sys.executable, "-c",
                     "import os; print(os.environ['RANK'], os.environ['WORLD_SIZE'])"])
    assert rc == 0 and "0 2" in o and "[rank 1] 1 2" in e, o + e


# ---------------------------------------------------------------- docs/PYTHON.md

def test_load_state_dict_continues_at_the_saved_size_as_python_md_says(jpeg_db):
    """A state saved at 32 px restored into a loader made for 48 px: the
    rest of the epoch comes at 32 (the epoch's own size), and the doc says
    so, not that another size is refused."""
    import imagepack
    a = imagepack.Loader(jpeg_db, batch_size=8, size=32, threads=1, seed=1, rank=0, world_size=1)
    a.set_epoch(0)
    it = iter(a)
    next(it)
    state = a.state_dict()
    want = [b[0].shape for b in it]
    b = imagepack.Loader(jpeg_db, batch_size=8, size=48, threads=1, seed=1, rank=0, world_size=1)
    b.load_state_dict(state)
    b.set_epoch(0)
    got = [x[0].shape for x in b]
    assert got == want and got[0][-1] == 32, (got, want)
    b.set_epoch(1)  # the next epochs: the loader's own size
    assert {x[0].shape[-1] for x in b} == {48}
    doc = " ".join(open(os.path.join(DOCS, "PYTHON.md")).read().split())
    assert "continues the epoch at that size" in doc
    refusals = re.findall(r"`load_state_dict` refuses a state saved with another (.*?)(?:, and a (?:mid-epoch )?state of|\.)", doc)
    assert refusals and all("size" not in r for r in refusals), refusals
