"""Hostile lmbudget submissions, each graded as `grade check SUBMISSION -m lmbudget` grades it, with a
tiny task file on the default corpus (named by GPTKIT_LMBUDGET_TASK while it is graded: each grading reads its suites
and so its task file afresh, grader/runner.py's ``_forget_suites``).

* a model that reads the answer from its input (``idx[:, t + 1]``), or does so only on rows that read like
  text, or only on the calls where split B used to come, or at one position only: "not causal", a counted 0;
* an evaluation that raises with the held-out text in its message and in its place: a fixed message;
* the default corpus: out of a worker's reach (a real worker tries to open it), but students have it (the
  grader's sources ship in the release): `grade contest check` and `grade contest serve` refuse it, any other
  text students have (a file in the kit, ``python``) and a corpus the worker can read; `grade check` warns;
* CPU used at import, by a child the code does not wait for, inside forward, or behind a patched
  ``time.process_time``: all the sandbox's count, so "time limit exceeded", a counted 0.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from grader.contest.commands import contest as contest_group
from grader.lmbudget.corpus import corpus_files
from grader.lmbudget.task import ENV_VAR, TASK_FILE, Task, load_task, write_task
from helpers import REPO, cli, free_port, grade

# Not serial: the budgets are CPU time, which a busy neighbour does not stretch, and the wall-clock limits are
# wall_factor times them

BUDGET, WALL, MARGIN, EVAL_CPU = 2.0, 12.0, 1.0, 1.0
BURN = 7.0  # CPU seconds each cheat spends, against a budget of 2 (+ 1)
SHAKESPEARE = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "tinyshakespeare.txt"

BIGRAM = (Path(__file__).resolve().parents[2] / "grader" / "lmbudget" / "baseline.py").read_text()
# A real CPU clock the submission cannot fool itself with (time.process_time may be patched below).
BURNER = """
import resource


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def burn(seconds):
    end = cpu() + seconds
    while cpu() < end:
        pass
"""


def tiny(tmp_path: Path, **changes) -> Path:
    task = dataclasses.replace(
        load_task(TASK_FILE),
        budget_cpu_seconds=BUDGET,
        budget_wall_seconds=WALL,
        margin_seconds=MARGIN,
        eval_windows=64,
        probe_windows=32,
        eval_cpu_seconds=EVAL_CPU,
        **changes,
    )
    path = tmp_path / "task.toml"
    write_task(task, path)
    return path


def check(tmp_path: Path, source: str, task: Path | None = None) -> tuple[dict, dict, str]:
    """(split A's check, split B's check, the whole JSON report) of `grade check -m lmbudget`, graded in this
    process on the session's warm grader (helpers.grade): the command's runner, suites and sandbox."""
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "lmbudget.py").write_text(textwrap.dedent(source))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_VAR, str(task or tiny(tmp_path)))
        result = grade(folder, "-m", "lmbudget")
    assert result.returncode == 0, result.stderr
    a, b = result.report["milestones"][0]["checks"]
    return a, b, json.dumps(result.report)


def zero(check: dict, verdict: str, start: str) -> None:
    """A counted 0 with this verdict and message."""
    assert not check["passed"] and check["counted"] and check["score"] == 0 and check["value"] is None, check
    assert check["verdict"] == verdict and check["message"].startswith(start), check


# --- 3. a model that reads the answer from its input ------------------------------------------------------------

LEAK = (
    BIGRAM
    + """

class Leak(torch.nn.Module):
    def __init__(self, inner, V):
        super().__init__()
        self.inner, self.V = inner, V

    def forward(self, idx):
        logits = self.inner(idx).clone()
        ahead = torch.nn.functional.one_hot(idx[:, 1:], self.V).float() * 30.0
        logits[:, :-1] += ahead * self.cheat(idx)[:, None, None]  # the answer for position t is idx[:, t + 1]
        return logits

    def cheat(self, idx):
        return torch.ones(len(idx))


_honest = train_within_budget


def train_within_budget(text, vocab, budget_seconds, context=64):
    return {model}(_honest(text, vocab, budget_seconds, context), len(vocab))
"""
)

# Leaks only on rows that read like text to its own bigram (a probe of random tokens would not).
TEXT_ONLY = """

class TextOnly(Leak):
    def cheat(self, idx):
        table = self.inner.table
        likely = table[idx[:, :-1], idx[:, 1:]].mean(1)  # the mean log-probability of each row's next characters
        return (likely > -4.0).float()
"""

# Leaks only on later calls, where the old evaluation's split B came (A's windows first, 32 a call); each copy of
# the model now counts its own calls, so from the second one on.
B_ONLY = """

class BOnly(Leak):
    calls = 0

    def cheat(self, idx):
        BOnly.calls += 1
        return torch.full((len(idx),), float(BOnly.calls > 1))
"""

# Leaks, but remembers the output it gave for each prefix and gives it again: a probe and its window then agree
# on everything before the cut, whichever came first, unless they go to different copies of the model.
MEMO = """

class Memo(Leak):
    seen = {}

    def forward(self, idx):
        logits = super().forward(idx)
        for r in range(len(idx)):
            for t in range(idx.shape[1]):
                key = tuple(idx[r, : t + 1].tolist())
                if key in Memo.seen:
                    logits[r, t] = Memo.seen[key]
                else:
                    Memo.seen[key] = logits[r, t].clone()
        return logits
"""


# Leaks always, and adds 1e6 to every logit, which a softmax ignores: the probe's tolerance was a share of
# the logits' size (1e-4 x 1e6 = 100 > the lookahead's 30), and this scored 10/10 at about 0.06 bits/char.
SHIFTED = """

class Shifted(Leak):
    def forward(self, idx):
        return super().forward(idx) + 1e6
"""


# Leaks at one position only: output PLACE reads the answer at idx[:, PLACE + 1], which only a probe cut at PLACE + 1
# sees. Cuts drawn at random missed it on about a third of the runs with 64 probes ((62/63)^64), 60 % with this
# file's 32, so with the best of many uploads kept it scored; the cuts now take every place on every run
# (grader/lmbudget/evaluate.py), and this file's 32 probes are raised to the 63 that takes.
ONE_PLACE = """

class OnePlace(Leak):
    def forward(self, idx):
        logits = self.inner(idx).clone()
        logits[:, PLACE] += torch.nn.functional.one_hot(idx[:, PLACE + 1], self.V).float() * 30.0
        return logits


PLACE = {place}
"""


@pytest.mark.slow
@pytest.mark.parametrize("place", [0, 31, 62], ids=["first", "middle", "last"])
def test_a_model_that_looks_ahead_at_one_position_only_is_not_causal(tmp_path, place):
    a, b, _ = check(tmp_path, LEAK.replace("{model}", "OnePlace") + ONE_PLACE.replace("{place}", str(place)))
    for split in (a, b):
        zero(split, "wrong answer", "not causal: on the grader's probes")


@pytest.mark.slow
@pytest.mark.parametrize(
    "model,extra",
    [("Leak", ""), ("TextOnly", TEXT_ONLY), ("BOnly", B_ONLY), ("Memo", MEMO), ("Shifted", SHIFTED)],
    ids=["always", "on-rows-that-read-like-text", "on-split-b-only", "remembering-each-prefix", "under-a-huge-shift"],
)
def test_a_model_that_reads_the_answer_from_its_input_is_not_causal(tmp_path, model, extra):
    a, b, _ = check(tmp_path, LEAK.replace("{model}", model) + extra)
    for split in (a, b):
        zero(split, "wrong answer", "not causal: on the grader's probes")


# An honest bigram whose logits are shifted by 1e4 (a softmax ignores it): causal, so scored as the bigram is.
HONEST_SHIFTED = (
    BIGRAM
    + """

class Shifted(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, idx):
        return self.inner(idx) + 1e4


_honest = train_within_budget


def train_within_budget(text, vocab, budget_seconds, context=64):
    return Shifted(_honest(text, vocab, budget_seconds, context))
"""
)


def _bigram_loss(task: Path) -> float:
    """The shipped bigram's loss on the task's split A, worked out here as the grader does (no probes)."""
    from grader.lmbudget.corpus import load_splits
    from grader.lmbudget.evaluate import evaluate, plan

    settings = load_task(task)
    splits = load_splits(settings.corpus, settings.block_chars)
    namespace: dict = {}
    exec(compile(BIGRAM, "baseline.py", "exec"), namespace)
    model = namespace["train_within_budget"](splits.train, list(splits.vocab), BUDGET, settings.context)
    rows = plan(splits, settings.eval_windows, 0, settings.context, seed=0)
    with torch.no_grad():
        return evaluate(model, rows, len(splits.vocab), [list(range(len(rows)))])["A"]


@pytest.mark.slow
def test_an_honest_model_whose_logits_are_shifted_is_causal_and_scored_as_without(tmp_path):
    task = tiny(tmp_path)
    a, b, _ = check(tmp_path, HONEST_SHIFTED, task)
    for split in (a, b):
        assert split["counted"] and split["verdict"] == "OK" and split["value"] is not None, split
        assert "not causal" not in split["message"], split
    assert abs(a["value"] - _bigram_loss(task)) < 0.01, a


# --- 4. nothing of the held-out text leaves through a failed run --------------------------------------------------

# Raises on its second call with the decoded batch as the message and as the file name of the place it raised.
TELLS = (
    BIGRAM
    + """

class Tells(torch.nn.Module):
    calls = 0

    def __init__(self, inner, vocab):
        super().__init__()
        self.inner, self.vocab = inner, vocab

    def forward(self, idx):
        Tells.calls += 1
        if Tells.calls == 2:  # each copy of the model counts its own calls
            text = "".join(self.vocab[i] for i in idx[:4].flatten().tolist())
            exec(compile("raise RuntimeError(TEXT)", text, "exec"), {"TEXT": "LEAKED " + text})
        return self.inner(idx)


_honest = train_within_budget


def train_within_budget(text, vocab, budget_seconds, context=64):
    return Tells(_honest(text, vocab, budget_seconds, context), vocab)
"""
)


@pytest.mark.slow
def test_an_evaluation_that_raises_with_the_held_out_text_shows_none_of_it(tmp_path):
    a, b, report = check(tmp_path, TELLS)
    for split in (a, b):
        zero(split, "runtime error", "runtime error while evaluating your model")
        said, _, warning = split["message"].partition("; ")  # then the default corpus's warning, in fixed words
        assert said == "runtime error while evaluating your model" and not split.get("traceback"), split
        assert warning.startswith("warning: students have this task's held-out text (the 'grader' corpus"), split
    assert "LEAKED" not in report  # (the corpus is the grader's own code, so its words are in any report)


# --- 5. the held-out text is out of the worker's reach ------------------------------------------------------------

OPENS = """
import torch


def train_within_budget(text, vocab, budget_seconds, context=64):
    opened = 0
    for path in {paths!r}:
        try:
            with open(path, "rb") as f:
                opened += len(f.read(1)) > 0
        except OSError:
            pass
    raise RuntimeError(f"OPENED {{opened}} OF {{len({paths!r})}}")
"""


@pytest.mark.slow
def test_a_worker_cannot_open_the_default_corpus(tmp_path):
    paths = [str(p) for p in corpus_files(load_task(TASK_FILE).corpus)]
    a, _, _ = check(tmp_path, OPENS.format(paths=paths))
    assert f"OPENED 0 OF {len(paths)}" in a["message"], a["message"]


LMBUDGET = "[tasks.lmbudget]\npoints = 10\n"


def contest_check(contest, name: str, task: Path):
    """`grade contest check` of a contest of lmbudget (``contest``'s folder ``name``), on the task file ``task``."""
    folder = contest(LMBUDGET, title="t", name=name, scoreboard=None)
    saved = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = str(task)
    try:
        return CliRunner().invoke(contest_group, ["check", str(folder)])
    finally:
        if saved is None:
            os.environ.pop(ENV_VAR)
        else:
            os.environ[ENV_VAR] = saved


def private_text(folder: Path) -> Path:
    """A coach's own text, made up here (outside the kit's folder, out of a worker's sight): 60,000 characters."""
    words = ["alpha", "brook", "cinder", "dune", "ember", "fjord", "glade", "heath", "inlet", "juniper"]
    path = _mkdir(folder) / "private.txt"
    path.write_text(" ".join(words[(i * i + 3 * i) % len(words)] for i in range(10_000)) + "\n")
    return path


@pytest.mark.slow
def test_contest_check_refuses_a_held_out_text_students_have_or_a_worker_can_read(tmp_path, contest):
    """The default corpus is the grader's own sources, which the release ships; a model that carries them
    scored 10/10 with a lookup. A contest takes a text of the coach's own outside the kit, and nothing else."""
    refused = {
        "default": tiny(_mkdir(tmp_path / "default")),
        "python": tiny(_mkdir(tmp_path / "python"), corpus="python"),
        "in-the-kit": tiny(_mkdir(tmp_path / "in-the-kit"), corpus=f"file:{REPO / 'docs' / 'exercises.md'}"),
        "a-link-to-the-kit": tiny(_mkdir(tmp_path / "a-link-to-the-kit"), corpus="file:link.txt"),
        "readable": tiny(_mkdir(tmp_path / "readable"), corpus=f"file:{os.__file__}"),
    }
    (tmp_path / "a-link-to-the-kit" / "link.txt").symlink_to(REPO / "grader" / "lmbudget" / "corpus.py")
    said = {name: contest_check(contest, f"{name}/contest", task) for name, task in refused.items()}
    for name, result in said.items():
        assert result.exit_code == 2, (name, result.output)
        assert 'corpus = "file:PATH"' in result.output and "students have not seen" in result.output, result.output
    assert "students have the held-out text (the 'grader' corpus is a snapshot of the grader's own sources, which the "
    "student release ships)" in said["default"].output, said["default"].output
    assert "scores full marks with a lookup" in said["default"].output, said["default"].output
    assert f"into the task file ({refused['default']};" in said["default"].output, "the task file in use is named"
    assert "students have the held-out text" in said["python"].output, said["python"].output
    for name in ("in-the-kit", "a-link-to-the-kit"):
        assert "lies in the kit's folder" in said[name].output or "lies in the grader package" in said[name].output
    readable = said["readable"].output
    assert "a worker can read" in readable and "which every worker sees" in readable, readable
    private = tiny(_mkdir(tmp_path / "private"), corpus=f"file:{private_text(tmp_path / 'private')}")
    taken = contest_check(contest, "private-contest/contest", private)
    assert taken.exit_code == 0, taken.output


@pytest.mark.slow
def test_contest_serve_refuses_the_default_corpus_before_it_listens(tmp_path, contest):
    folder = contest(LMBUDGET, title="t", scoreboard=None)
    env = {**os.environ, ENV_VAR: str(tiny(_mkdir(tmp_path / "task")))}
    try:  # a server that starts serves until it is stopped: 60 s is far more than a refusal takes
        proc = cli("contest", "serve", str(folder), "--port", str(free_port()), env=env, timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"grade contest serve started on the default corpus: {e.stdout!r}")
    assert proc.returncode == 2 and "students have the held-out text" in proc.stderr, (proc.stdout, proc.stderr)
    assert "serving" not in proc.stdout and "Traceback" not in proc.stderr


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.mark.slow
def test_grade_check_warns_that_students_have_the_default_corpus(tmp_path):
    a, b, _ = check(tmp_path, BIGRAM)
    assert a["passed"] and a["counted"], a
    for split in (a, b):
        assert "warning: students have this task's held-out text (the 'grader' corpus" in split["message"], split
        assert 'set corpus = "file:PATH"' in split["message"], split


@pytest.mark.slow
def test_grade_check_warns_of_a_corpus_the_worker_can_read(tmp_path):
    a, b, _ = check(tmp_path, BIGRAM, tiny(tmp_path, corpus="python"))
    assert a["passed"] and "warning: a worker can read this task's held-out text" in a["message"], a
    assert "warning: a worker can read" in b["message"], b


@pytest.mark.slow
@pytest.mark.skipif(not SHAKESPEARE.is_file(), reason=f"no {SHAKESPEARE} (the tests' copy of tiny Shakespeare)")
def test_a_private_text_file_of_the_coachs_is_a_corpus(tmp_path, contest):
    """`corpus = "file:NAME"`, relative to the task file: scored, no warning, and a contest takes it."""
    shutil.copyfile(SHAKESPEARE, tmp_path / "private.txt")
    task = tiny(tmp_path, corpus="file:private.txt")
    assert load_task(task).corpus == f"file:{tmp_path / 'private.txt'}"
    a, _, _ = check(tmp_path, BIGRAM, task)
    assert a["passed"] and a["counted"] and "warning" not in a["message"], a
    assert 3.0 < a["value"] < 3.6, "a bigram on Shakespeare: about 3.3 bits/char"
    assert contest_check(contest, "contest", task).exit_code == 0


# --- 6. the CPU budget is the sandbox's count --------------------------------------------------------------------

TRAIN = """
import os
import time
import torch
{burner}
{before}


def train_within_budget(text, vocab, budget_seconds, context=64):
    {body}
    return model
"""
AT_IMPORT = dict(before=f"burn({BURN})", body="model = torch.nn.Embedding(len(vocab), len(vocab))")
# A child that trains (burns) and says so down a pipe; train waits on the pipe, and nobody waits for the child.
# (A model that waited for such a child in forward gains nothing now: it is evaluated as copies in fresh workers,
# which no child of the trained worker outlives.)
IN_A_CHILD = dict(
    before=f"""
def start_child():
    read, write = os.pipe()
    if os.fork() == 0:
        burn({BURN})
        os.write(write, b"x")
        os._exit(0)
    return read
""",
    body="os.read(start_child(), 1)\n    model = torch.nn.Embedding(len(vocab), len(vocab))",
)
IN_FORWARD = dict(
    before=f"""
class Lazy(torch.nn.Embedding):
    trained = False

    def forward(self, idx):
        if not Lazy.trained:
            burn({BURN})  # the training, moved into the evaluation
            Lazy.trained = True
        return super().forward(idx)
""",
    body="model = Lazy(len(vocab), len(vocab))",
)
# time.process_time patched to run ten times slow; train trusts it for the budget, and burns 7 s.
PATCHED_CLOCK = dict(
    before="_real = time.process_time\ntime.process_time = lambda: _real() / 10",
    body="start = time.process_time()\n"
    f"    while time.process_time() - start < 0.9 * budget_seconds and cpu() < {BURN}:\n"
    "        pass\n    model = torch.nn.Embedding(len(vocab), len(vocab))",
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "parts",
    [AT_IMPORT, IN_A_CHILD, IN_FORWARD, PATCHED_CLOCK],
    ids=["at-import", "in-a-child-nobody-waits-for", "inside-forward", "behind-a-patched-process-time"],
)
def test_cpu_spent_anywhere_counts_against_the_budget(tmp_path, parts):
    a, b, _ = check(tmp_path, TRAIN.format(burner=BURNER, **parts))
    for split in (a, b):
        zero(split, "time limit exceeded", "time limit exceeded: ")


def test_the_tiny_task_is_a_task(tmp_path):
    task = load_task(tiny(tmp_path))
    assert isinstance(task, Task) and task.eval_cpu_seconds == EVAL_CPU and task.corpus == "grader"


# --- the copies: a model must survive torch.save and torch.load ----------------------------------------------------

LOCAL_CLASS = """
import torch


def train_within_budget(text, vocab, budget_seconds, context=64):
    class Local(torch.nn.Embedding):  # defined inside the function: pickle cannot find it again
        pass

    return Local(len(vocab), len(vocab))
"""


@pytest.mark.slow
def test_a_model_that_cannot_be_copied_is_told_why(tmp_path):
    a, b, _ = check(tmp_path, LOCAL_CLASS)
    for split in (a, b):
        zero(split, "runtime error", "runtime error while copying your model for the evaluation")
