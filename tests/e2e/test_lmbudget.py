"""The metric-scored task lmbudget with a tiny budget (6 CPU seconds), on the Python corpus.

The Python corpus, which the worker can read (so every message here carries the warning), because in 6 CPU
seconds the reference gains a clear margin on it and almost nothing on the default corpus (the grader's
sources), which needs the task's 30 s; test_lmbudget_attacks.py uses the default.

The test's task file takes the shipped one's settings with a tiny budget; its baseline is the shipped
baseline's exact loss (a counted bigram: deterministic, computed here) and its best 0.1 bits/char below it,
a little over what the reference recipe gains in 6 CPU seconds: it takes a fixed 90 steps
there (15 per CPU second), its schedule on the step count, with torch seeded by the grader, so it gains the
same on a quiet machine and a busy one (on an AVX512 CPU, 64 windows of A: 3.467 -> 3.383, in 2.9 to 4.7 CPU
seconds; before, a schedule on the CPU clock gave 3.125 and 3.132 on a quiet machine, 3.204 to 3.310 on busy
ones). A run without a score is a counted 0 with its verdict. The hostile submissions are in
test_lmbudget_attacks.py.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import torch

from grader.grading import Grader, Request
from grader.lmbudget.corpus import load_splits
from grader.lmbudget.evaluate import deal, evaluate, plan
from grader.lmbudget.task import ENV_VAR, TASK_FILE, load_task, write_task
from grader.sandbox.client import Limits
from helpers import cli

# Not serial: the budget is CPU time, which a busy neighbour does not stretch, and the wall-clock limit is
# wall_factor times it (an honest run beside another test gets a core of its own on two, or half of one)

REPO = Path(__file__).resolve().parents[2]
BUDGET, WALL, MARGIN, EVAL_CPU = 6.0, 20.0, 3.0, 3.0
GAIN = 0.1  # the reference's gain over the baseline in BUDGET CPU seconds (0.085), and a little more

BIGRAM = (REPO / "grader" / "lmbudget" / "baseline.py").read_text()


CORPUS = "python"


def _baseline_loss() -> float:
    task = load_task(TASK_FILE)
    splits = load_splits(CORPUS, task.block_chars)
    spec = importlib.util.spec_from_file_location("lmbudget_baseline", REPO / "grader" / "lmbudget" / "baseline.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.train_within_budget(splits.train, list(splits.vocab), BUDGET, task.context)
    rows = plan(splits, 64, 0, task.context, seed=0)  # the scored windows alone, as the grader makes them
    with torch.no_grad():
        return evaluate(model, rows, len(splits.vocab), [list(range(len(rows)))])["A"]


@pytest.fixture(scope="module")
def tiny_task(tmp_path_factory) -> Path:
    """The test's task file, named by the environment variable the suite reads."""
    baseline = _baseline_loss()
    task = dataclasses.replace(
        load_task(TASK_FILE),
        corpus=CORPUS,
        budget_cpu_seconds=BUDGET,
        budget_wall_seconds=WALL,
        margin_seconds=MARGIN,
        eval_windows=64,
        probe_windows=32,
        eval_cpu_seconds=EVAL_CPU,
        baseline=round(baseline, 6),
        best=round(baseline - GAIN, 6),
    )
    path = tmp_path_factory.mktemp("lmbudget") / "task.toml"
    write_task(task, path)
    saved = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(path)
    yield path
    if saved is None:
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = saved


_module_grader: list[Grader] = []


@pytest.fixture(scope="module", autouse=True)
def module_grader():
    """A Grader of this file's own, not the session's: its CPU-budget runs read the worker's CPU from a fork server
    that has served nothing else."""
    with Grader() as grader:
        _module_grader.append(grader)
        yield grader
        _module_grader.clear()


def graded(tmp_path: Path, source: str) -> tuple[dict, dict]:
    """(split A's check, split B's check) of a submission whose lmbudget.py is ``source``."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "lmbudget.py").write_text(source)
    report = _module_grader[0].grade(Request(folder, ("lmbudget",)), Limits()).to_json()
    (milestone,) = report["milestones"]
    a, b = milestone["checks"]
    assert a["name"].startswith("loss on split A") and b["name"].startswith("loss on split B")
    return a, b


def test_task_file_is_valid_and_calibrated():
    task = load_task(TASK_FILE)
    assert task.threads == 1 and task.budget_cpu_seconds < task.budget_wall_seconds
    # the wall-clock limits leave a busy machine room, a multiple of the CPU they allow
    assert task.train_wall_seconds >= 4 * task.budget_cpu_seconds + task.margin_seconds
    assert task.eval_wall_seconds >= 4 * task.eval_cpu_seconds
    assert task.baseline > task.best > 0, "the shipped task is not calibrated: python -m grader.calibrate --write"
    assert task.cpu_capability and task.date and "grader.calibrate" in task.command
    assert task.score(task.baseline) == 0 and task.score(task.best) == task.points
    assert task.score(task.best - 1) == task.points and task.score(float("inf")) == 0


def test_splits_are_deterministic_and_disjoint():
    task = load_task(TASK_FILE)
    splits = load_splits(task.corpus, task.block_chars)
    n = len(splits.train) + len(splits.a) + len(splits.b)
    assert 0.79 < len(splits.train) / n < 0.81 and 0.09 < len(splits.a) / n < 0.11
    assert splits.vocab[-1] == "\ufffd" and list(splits.vocab[:-1]) == sorted(set(splits.train))
    assert splits.a[:200] not in splits.train and splits.b[:200] not in splits.train


def test_the_loss_does_not_depend_on_the_order_the_rows_are_dealt_in():
    """Each run shuffles and deals the rows afresh (evaluate.py): the loss is summed in the rows' order, so
    identical logits give the identical loss, to the last bit, whatever the seed."""
    task = load_task(TASK_FILE)
    splits = load_splits(CORPUS, task.block_chars)
    torch.manual_seed(0)
    table = torch.randn(len(splits.vocab), len(splits.vocab))

    def model(idx: torch.Tensor) -> torch.Tensor:
        return table[idx]

    rows = plan(splits, 64, 16, task.context, seed=1)
    runs = [evaluate([model] * 3, rows, len(splits.vocab), deal(rows, 3, seed)) for seed in (1, 2, 3)]
    assert runs[0] == runs[1] == runs[2], runs


@pytest.mark.slow
def test_baseline_scores_near_zero(tiny_task, tmp_path):
    a, b = graded(tmp_path, BIGRAM)
    assert a["passed"] and a["counted"] and a["score"] <= 0.5, a
    assert a["message"].startswith(f"loss on split A: {a['value']:.4f} bits/char"), a["message"]
    assert b["message"].startswith(f"loss on split B: {b['value']:.4f} bits/char") and b["max_score"] == 0, b


@pytest.fixture(scope="module")
def reference_run(tiny_task, tmp_path_factory) -> tuple[dict, dict]:
    """The reference recipe, graded once on this (quiet or not) machine."""
    return graded(tmp_path_factory.mktemp("reference"), (REPO / "solutions" / "lmbudget.py").read_text())


@pytest.fixture
def loaded_machine():
    """Two processes that burn a core each, as long as the test runs (a busy two-core machine)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for burner in burners:
        burner.kill()
        burner.wait()


@pytest.mark.slow
def test_reference_scores_well_above_the_baseline(tiny_task, reference_run):
    """A grader that took the budget's CPU time for itself, or ran the training on no data, fails here."""
    a, b = reference_run
    task = load_task(tiny_task)
    # A quarter of the points is a gain of 0.025 bits/char: under a third of the reference's (the same on every run).
    assert a["passed"] and a["counted"] and a["score"] >= 0.25 * task.points, a
    assert a["value"] < task.baseline - 0.05 and b["value"] < task.baseline, (a, b)


@pytest.mark.slow
def test_an_honest_run_on_a_loaded_machine_finishes_and_scores_the_same(
    tiny_task, reference_run, tmp_path, loaded_machine
):
    """With two busy loops on the machine the reference gets a share of a core, so its wall time
    stretches; the wall-clock limit (a multiple of the CPU budget) leaves it room, and with torch seeded and one
    thread its step count and schedule are the same, so it scores what it scored on a quieter machine."""
    started = os.getloadavg()
    a, b = graded(tmp_path, (REPO / "solutions" / "lmbudget.py").read_text())
    assert a["verdict"] != "time limit exceeded" and a["passed"] and a["counted"], (a, started, os.getloadavg())
    quiet_a, quiet_b = reference_run
    budget = load_task(tiny_task).budget_cpu_seconds
    if all(_cpu_used(check) < 0.75 * budget for check in (a, quiet_a)):  # both took all their steps (no guard)
        same = [f"{x['value']:.4f}" == f"{y['value']:.4f}" for x, y in ((a, quiet_a), (b, quiet_b))]
        assert all(same), (a, quiet_a, b, quiet_b)


def _cpu_used(check: dict) -> float:
    """The CPU seconds the sandbox counted for import and train, from a scored check's message."""
    found = re.search(r"import and train used ([0-9.]+) of", check["message"])
    assert found, check["message"]
    return float(found.group(1))


@pytest.mark.slow
def test_split_b_is_measured_but_not_printed_where_the_task_says_so(tiny_task, tmp_path):
    """show_b = false: `grade check` keeps B's loss for a contest (the check's value) and prints none."""
    hidden = tmp_path / "task.toml"
    write_task(dataclasses.replace(load_task(tiny_task), show_b=False), hidden)
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "lmbudget.py").write_text(BIGRAM)
    # Through the command, as a user runs it: the one test here of what `grade check -m lmbudget` prints.
    proc = cli(
        "check",
        str(tmp_path / "submission"),
        "-m",
        "lmbudget",
        "--format",
        "json",
        env={**os.environ, ENV_VAR: str(hidden)},
    )
    assert proc.returncode == 0, proc.stderr
    a, b = json.loads(proc.stdout)["milestones"][0]["checks"]
    assert a["message"].startswith("loss on split A: ") and isinstance(b["value"], float)
    assert f"{b['value']:.4f}" not in b["message"] and "not shown here" in b["message"], b["message"]


BROKEN = {  # name: (the body of train, the verdict, the message it must start with)
    "raises": (
        "raise RuntimeError('out of ideas')",
        "runtime error",
        "runtime error: your code raised RuntimeError: out of ideas",
    ),
    "returns-none": ("return None", "wrong answer", "no model: train_within_budget returned a None"),
    "returns-a-dict": ("return {'weights': 1}", "wrong answer", "no model: train_within_budget returned a dict"),
    "wrong-logits": (
        "return torch.nn.Embedding(len(vocab), 3)",
        "wrong answer",
        "no model: the model's forward must return a floating-point logits tensor of shape (B, T, len(vocab))",
    ),
    # what went wrong while the model saw held-out text is told in fixed words, nothing of the exception
    "forward-raises": ("return torch.nn.Linear(1, 2)", "runtime error", "runtime error while evaluating your model"),
    "no-logits-tensor": ("return torch.nn.Identity()", "wrong answer", "no model: the model's forward must return"),
    # a run that sleeps meets the wall-clock limit (a multiple of the budget: room for a busy machine)
    "sleeps": (
        "time.sleep(3600)",
        "time limit exceeded",
        "time limit exceeded: train_within_budget returned no model within",
    ),
    # one that spins is ended once the sandbox counts it over the budget and the margin, not at the wall limit
    "spins": (
        "while True:\n        pass",
        "time limit exceeded",
        "time limit exceeded: importing lmbudget.py and train_within_budget used",
    ),
    "over-the-cpu-budget": (
        "end = time.process_time() + budget_seconds + 4\n    while time.process_time() < end:\n        pass\n"
        "    return torch.nn.Embedding(len(vocab), len(vocab))",
        "time limit exceeded",
        "time limit exceeded: importing lmbudget.py and train_within_budget used",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_run_gets_its_verdict_and_counts_as_zero(tiny_task, tmp_path, case):
    """A run with no score costs a run: a counted 0 with its verdict, never set aside."""
    body, verdict, message = BROKEN[case]
    signature = "def train_within_budget(text, vocab, budget_seconds, context=64):"
    source = f"import time\nimport torch\n\n\n{signature}\n    {body}\n"
    a, b = graded(tmp_path, source)
    for check in (a, b):
        assert not check["passed"] and check["counted"] and check["score"] == 0, check
        assert check["verdict"] == verdict and check["message"].startswith(message), check
        assert check["value"] is None
    assert a["max_score"] == load_task(tiny_task).points, "a failed run keeps the task's points in the denominator"


@pytest.mark.slow
def test_an_untouched_stub_scores_zero_and_counts(tiny_task, tmp_path):
    a, _ = graded(tmp_path, (REPO / "exercises" / "lmbudget.py").read_text())
    assert not a["passed"] and a["counted"] and a["message"].startswith("not implemented yet"), a


@pytest.mark.slow
def test_a_file_that_does_not_import_is_a_counted_runtime_error(tiny_task, tmp_path):
    a, _ = graded(tmp_path, "def train_within_budget(:\n")
    assert not a["passed"] and a["counted"] and a["verdict"] == "runtime error", a
    assert a["message"].startswith("runtime error: the submission's files could not be imported"), a


# A submission that looks, while it trains, for the held-out text (a line of A and of B, given to it here)
# in every file it can read outside the standard library (which the worker needs to run at all: see
# grader/lmbudget/corpus.py), and for the network. It must find its own file, and nothing else.
SNOOP = """
import os, socket, sysconfig, time
import torch

MARKERS = {markers!r}
ROOTS = [os.getcwd(), "/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"), "/run", "/home", "/root", {repo!r}]
SKIP = {skip!r}


def scan():
    found, seen, start = [], 0, time.monotonic()
    for root in ROOTS:
        for folder, dirs, files in os.walk(root, onerror=lambda e: None):
            if any(folder.startswith(s) for s in SKIP) or time.monotonic() - start > 8:
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(folder, name)
                try:
                    if os.path.islink(path) or os.path.getsize(path) > 50_000_000:
                        continue
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                seen += 1
                if not name.startswith("lmbudget."):  # itself (and its copies) holds the markers
                    found += [path for m in MARKERS if m.encode() in data]
    return found, seen


def network():
    for address in [("1.1.1.1", 80), ("8.8.8.8", 53), ("pypi.org", 443)]:
        try:
            socket.create_connection(address, timeout=1).close()
            return str(address)
        except OSError:
            pass
    return ""


def train_within_budget(text, vocab, budget_seconds, context=64):
    found, seen = scan()
    if found:
        raise RuntimeError("LEAK: the held-out text is in " + ", ".join(found[:5]))
    if seen == 0 or not os.path.isfile("lmbudget.py"):
        raise RuntimeError("SCAN SAW NOTHING: not even its own file")
    if network():
        raise RuntimeError("LEAK: the network answered at " + network())
    return torch.nn.Embedding(len(vocab), len(vocab))
"""


@pytest.mark.slow
def test_the_held_out_splits_and_the_network_are_out_of_reach(tiny_task, tmp_path):
    task = load_task(tiny_task)
    splits = load_splits(task.corpus, task.block_chars)
    markers = [s[i : i + 80] for s in (splits.a, splits.b) for i in (1000, len(s) // 2)]
    markers = [m for m in markers if m not in splits.train]
    assert len(markers) >= 2
    stdlib = sysconfig.get_paths()["stdlib"]
    source = SNOOP.format(markers=markers, repo=str(REPO), skip=[stdlib, "/proc", "/sys", "/dev/"])
    a, _ = graded(tmp_path, textwrap.dedent(source))
    assert "LEAK" not in a["message"] and "SAW NOTHING" not in a["message"], a["message"]
    assert a["passed"] and a["counted"], a
