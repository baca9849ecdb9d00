"""Hostile submissions: each one is the reference with ONE hostile change, graded through the CLI.

For every attack the grader must finish (exit 0, a JSON report) in bounded time, the attacked
milestone must lose points with a message that says what happened, and every other milestone
among m1..m4 must keep full marks (the ``lesson`` integration group runs the student's files
together, so it may drop; nothing here asserts on it). Only m1..m4 are graded: the later
exercises run in workers of their own exactly like these. The hostile texts live in attacks.py.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import attacks as A
from helpers import CORE, Graded, Variant, explain, grade

pytestmark = pytest.mark.slow  # every test here grades whole submissions

BOUND_S = 150.0  # wall time the whole grading may take, even for hang attacks
HANG_GUARD_S = 300.0  # the grading command is killed after this; the test then fails with a clear message
HANG = ("--timeout", "5")


@pytest.fixture
def attack(tmp_path):
    """Grade a Variant (built from the reference) through the CLI; a grader that hangs fails the test."""

    def run(variant: Variant, *args: str) -> Graded:
        submission = variant.build(tmp_path / "submission")
        try:
            return grade(submission, *args, *(a for m in CORE for a in ("-m", m)), timeout=HANG_GUARD_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{variant.name}: `grade check` was still running after {HANG_GUARD_S:.0f} s and was killed")

    return run


def assert_contained(result: Graded, milestone: str, expect: str, bound: float = BOUND_S) -> None:
    """The common verdict: graded, in time, the attacked milestone failed and said why, the others intact."""
    why = explain(result)
    assert result.returncode == 0, why
    assert result.report.get("milestones"), "no JSON report was written\n" + why
    assert result.seconds < bound, f"grading took {result.seconds:.0f} s (bound {bound:.0f} s)\n{why}"
    m = result.milestone(milestone)
    assert m["score"] < m["max_score"], f"{milestone} kept full marks\n{why}"
    messages = result.messages(milestone)
    assert any(expect in msg for msg in messages), f"no failing {milestone} check says {expect!r}\n{why}"
    for other in CORE:
        if other != milestone:
            assert result.full(other), f"{other} lost points\n{why}"


def all_messages(result: Graded) -> str:
    return "\n".join(c["message"] for m in result.report.get("milestones", []) for c in m["checks"])


def m1_variant(name: str, expect: str, *edits: tuple[str, str], files: dict[str, str] | None = None) -> Variant:
    return Variant(name, "m1", expect, edits={A.M1: list(edits)}, files=files or {})


SIGKILL_ITSELF = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"
LEAK = "information leaks from the future"  # what the leak checks say about the triu mask
UPPER = "upper-triangular"  # what causal_mask's check says about it

# ---------------------------------------------------------------- attacks with the common verdict

CONTAINED = [
    # 1. os._exit(0) while m1_attention.py is imported: the worker vanishes before any test runs.
    pytest.param(m1_variant("os-exit-at-import", "exit code 0", A.at_import(A.OS_EXIT)), (), id="1-os-exit-at-import"),
    # 2. sys.exit(0) while m1_attention.py is imported.
    pytest.param(
        m1_variant("sys-exit-at-import", "SystemExit", A.at_import(A.SYS_EXIT)), (), id="2-sys-exit-at-import"
    ),
    # 2b. while True: pass while m1_attention.py is imported, graded with --timeout 5: a time limit, as in a call.
    pytest.param(
        m1_variant("infinite-loop-at-import", "no answer within", A.at_import(A.INFINITE_LOOP)),
        HANG,
        id="2b-infinite-loop-at-import",
    ),
    # 3. os._exit(0) inside causal_attention: every call kills the worker.
    pytest.param(
        m1_variant("os-exit-in-call", "os._exit or sys.exit", A.in_call(A.OS_EXIT)), (), id="3-os-exit-in-call"
    ),
    # 3b. sys.exit(0) inside causal_attention (SystemExit, a BaseException).
    pytest.param(m1_variant("sys-exit-in-call", "SystemExit", A.in_call(A.SYS_EXIT)), (), id="3b-sys-exit-in-call"),
    # 4. raise KeyboardInterrupt inside causal_attention (a BaseException, not an Exception).
    pytest.param(
        m1_variant("keyboard-interrupt", "KeyboardInterrupt", A.in_call(A.KEYBOARD_INTERRUPT)),
        (),
        id="4-keyboard-interrupt-in-call",
    ),
    # 5. while True: pass inside causal_attention, graded with --timeout 5.
    pytest.param(
        m1_variant("infinite-loop", "no answer within", A.in_call(A.INFINITE_LOOP)), HANG, id="5-infinite-loop-in-call"
    ),
    # 5b. SIGKILL sent to itself inside causal_attention: a runtime error, never "memory limit exceeded" (the
    # worker's memory cgroup counted no OOM kill; without a cgroup nothing says it was memory either).
    pytest.param(
        m1_variant("sigkill-in-call", "was killed (SIGKILL)", A.in_call(SIGKILL_ITSELF)), (), id="5b-sigkill-in-call"
    ),
    # 6. ctypes.string_at(0) inside causal_attention: SIGSEGV.
    pytest.param(m1_variant("segfault", "segmentation fault", A.in_call(A.SEGFAULT)), (), id="6-segfault-in-call"),
    # 7. 150 MB of print() inside causal_attention.
    pytest.param(
        m1_variant("flood-output", "printed more than", A.in_call(A.FLOOD_OUTPUT)), (), id="7-flood-output-in-call"
    ),
    # 8. torch/numpy/unittest comparison helpers patched to always pass at import, with a leaking triu mask.
    pytest.param(
        m1_variant("monkeypatch-comparisons", LEAK, A.at_import(A.MONKEYPATCH_COMPARISONS), A.LEAKY_MASK),
        (),
        id="8-monkeypatched-comparisons-and-leaky-mask",
    ),
    # 12. a syntax error in m1_attention.py (m1 = 0 is asserted separately below).
    pytest.param(m1_variant("syntax-error", "SyntaxError", A.SYNTAX_ERROR), (), id="12-syntax-error"),
    # 13. m3_train.py is missing.
    pytest.param(Variant("missing-file", "m3", "there is no m3_train.py", drop=(A.M3,)), (), id="13-missing-file"),
    # 14. count_parameters is deleted from m2_model.py.
    pytest.param(
        Variant("missing-name", "m2", "count_parameters", edits={A.M2: [A.REMOVE_COUNT_PARAMETERS]}),
        (),
        id="14-missing-name",
    ),
    # 15. causal_attention(q, k): one parameter short.
    pytest.param(
        m1_variant("wrong-signature", "takes 2 positional arguments", A.WRONG_SIGNATURE), (), id="15-wrong-signature"
    ),
    # 16. a conftest.py (reports rewritten as passed, everything skipped, collection emptied) and a
    #     pytest.ini (--collect-only, no python plugin) in the submission folder, with a leaking triu mask.
    pytest.param(
        m1_variant("pytest-config", UPPER, A.LEAKY_MASK, files={"conftest.py": A.CONFTEST, "pytest.ini": A.PYTEST_INI}),
        (),
        id="16-conftest-and-pytest-ini-with-leaky-mask",
    ),
    # 17a. torch.empty(10**11) (400 GB) inside causal_attention.
    pytest.param(m1_variant("memory-empty", "memory", A.in_call(A.MEMORY_EMPTY)), (), id="17a-memory-bomb-empty"),
    # 17b. a list of 400 MB tensors growing without end inside causal_attention. Every call of m1's checks fills
    # the limit again, page by page: under a 1 GiB limit, not the default 3 GiB (the same attack, a third the time).
    pytest.param(
        m1_variant("memory-growing", "memory", A.in_call(A.MEMORY_GROWING)),
        ("--memory-mb", "1024"),
        id="17b-memory-bomb-growing-list",
    ),
    # 19. garbage bytes written to every socket in /proc/self/fd inside causal_attention (forging the protocol).
    pytest.param(
        m1_variant("socket-garbage", "malformed", A.in_call(A.SOCKET_GARBAGE)), (), id="19-garbage-on-every-socket"
    ),
    # 20. a passing pytest summary and JSON score printed to stdout, stderr and the raw fds, at import and
    #     in every call, with a leaking triu mask.
    pytest.param(
        m1_variant("spoofed-output", UPPER, A.at_import(A.SPOOFED_OUTPUT), A.in_call(A.SPOOFED_OUTPUT), A.LEAKY_MASK),
        (),
        id="20-spoofed-stdout-with-leaky-mask",
    ),
]


# The verdict of the check that says what went wrong, as a contest shows it under score-only feedback.
VERDICTS = {
    "os-exit-at-import": "runtime error",
    "sys-exit-at-import": "runtime error",
    "infinite-loop-at-import": "time limit exceeded",
    "os-exit-in-call": "runtime error",
    "sys-exit-in-call": "runtime error",
    "keyboard-interrupt": "runtime error",
    "infinite-loop": "time limit exceeded",
    "sigkill-in-call": "runtime error",
    "segfault": "runtime error",
    "flood-output": "runtime error",
    "monkeypatch-comparisons": "wrong answer",
    "syntax-error": "import error",
    "missing-file": "import error",
    "missing-name": "import error",
    "wrong-signature": "runtime error",
    "pytest-config": "wrong answer",
    "memory-empty": "memory limit exceeded",
    "memory-growing": "memory limit exceeded",
    "socket-garbage": "runtime error",
    "spoofed-output": "wrong answer",
}


@pytest.mark.parametrize("variant,args", CONTAINED)
def test_attack_is_contained(attack, variant: Variant, args: tuple[str, ...]):
    """One hostile change (see the comment on each case): a clean graded failure of its milestone only."""
    result = attack(variant, *args)
    assert_contained(result, variant.milestone, variant.expect)
    verdicts = {c["verdict"] for c in result.milestone(variant.milestone)["checks"] if variant.expect in c["message"]}
    assert verdicts == {VERDICTS[variant.name]}, f"verdicts {verdicts}\n{explain(result)}"
    if variant.name == "syntax-error":
        assert result.milestone("m1")["score"] == 0, explain(result)
    if variant.name == "missing-file":
        assert result.milestone("m3")["score"] == 0, explain(result)


# ---------------------------------------------------------------- 9. a tensor subclass that equals everything

ATTENTION_CHECKS = (  # the first lines of the docstrings of the checks that call causal_attention directly
    "the lesson's worked example",
    "outputs and weights equal the reference",
    "out is (..., T, d_k)",
    "weights are exactly 0 above the diagonal",
    "blocked weights stay exactly 0",
    "changing keys and values at later positions",
    "the mask is built on the inputs' device",
)


def test_tensor_subclass_that_equals_everything(attack):
    """causal_attention returns random values as a torch.Tensor subclass whose ==, !=, bool, allclose,
    equal, all/any and torch_function comparisons all say 'equal': it must earn nothing for those checks."""
    result = attack(m1_variant("tensor-subclass", "torch.Tensor", A.at_end(A.TENSOR_SUBCLASS)))
    assert_contained(result, "m1", "torch.Tensor")
    assert any(A.SUBCLASS_NAME in msg for msg in result.messages("m1")), explain(result)
    attention = [c for c in result.milestone("m1")["checks"] if c["name"].startswith(ATTENTION_CHECKS)]
    assert len(attention) >= len(ATTENTION_CHECKS), [c["name"] for c in result.milestone("m1")["checks"]]
    assert all(c["score"] == 0 for c in attention), [(c["name"], c["score"]) for c in attention if c["score"]]


# ---------------------------------------------------------------- 10. reaching the reference and the suites


def test_importing_the_reference_or_grader_fails(attack):
    """m1_attention.py tries `import solutions`, `from solutions import m1_attention`, `import grader.suites`
    (then grader.reference), importlib on the reference's absolute path, and the repo root on sys.path;
    if any works it re-exports the reference (full marks), else it falls back to a leaking triu mask."""
    variant = m1_variant(
        "import-reference", UPPER, A.at_import(A.import_the_reference()), A.REEXPORT_OR_LEAKY_MASK, A.REEXPORT_ATTENTION
    )
    assert_contained(attack(variant), "m1", UPPER)


def test_reading_the_reference_or_suite_fails(attack):
    """m1_attention.py opens the reference and the hidden M1 suite by absolute path at import, and raises
    an exception holding their first 200 characters if it can; else it falls back to a leaking triu mask.
    No message of the report may hold their text."""
    result = attack(m1_variant("read-grader-files", UPPER, A.at_import(A.read_grader_files()), A.LEAKY_MASK))
    text = all_messages(result)
    for path in (A.REFERENCE_FILE, A.SUITE_FILE):
        first_line = path.read_text().splitlines()[0]
        assert first_line not in text, f"the report shows {path}'s text\n{explain(result)}"
    assert A.LEAK_MARKER not in text, explain(result)
    assert "def causal_attention" not in text, explain(result)
    assert_contained(result, "m1", UPPER)


def test_reading_the_disk_cache_fails(attack):
    """m1_attention.py walks the grader's disk cache (grader/cache.py: the reference's answers) at import and
    raises an exception naming what it could read; the folder is hidden like the grader's own files."""
    from grader import cache

    cache.stored("a bait entry for test_attacks", lambda: [1.0, 2.0])  # the folder holds at least this
    folder = cache.folder()
    assert folder is not None and any(folder.rglob("*.pt"))
    result = attack(m1_variant("read-the-cache", UPPER, A.at_import(A.read_the_cache(str(folder))), A.LEAKY_MASK))
    assert A.LEAK_MARKER not in all_messages(result), explain(result)
    assert_contained(result, "m1", UPPER)


# Beyond the brief: two more routes to a correct M1 that the ones above do not try.


def test_reference_through_proc_root_fails(attack):
    """m1_attention.py imports the reference through /proc/<pid>/root/<repo>/solutions (or /proc/<pid>/cwd)
    of any process outside the worker's mount namespace, where the grader's files are not hidden; if it
    works it re-exports it, else it falls back to a leaking triu mask."""
    variant = m1_variant(
        "proc-root-escape", UPPER, A.at_import(A.proc_root_escape()), A.REEXPORT_OR_LEAKY_MASK, A.REEXPORT_ATTENTION
    )
    assert_contained(attack(variant), "m1", UPPER)


def test_reference_after_unmounting_the_hiding_fails(attack):
    """m1_attention.py unmounts (umount2, MNT_DETACH) whatever hides the solutions/ and grader/ folders,
    then imports the reference by absolute path; if that works it re-exports it, else it falls back to a
    leaking triu mask."""
    variant = m1_variant(
        "unmount-hiding", UPPER, A.at_import(A.unmount_the_hiding()), A.REEXPORT_OR_LEAKY_MASK, A.REEXPORT_ATTENTION
    )
    assert_contained(attack(variant), "m1", UPPER)


def test_trusted_m1_not_reachable_from_memory(attack):
    """m1_attention.py takes the grader's trusted M1 source (TRUSTED_SOURCES, read by the fork server
    and inherited by every worker) from sys.modules['__main__'] and execs it; if that works it
    re-exports it, else it falls back to a leaking triu mask."""
    variant = m1_variant(
        "trusted-source",
        UPPER,
        A.at_import(A.TRUSTED_SOURCE_FROM_MEMORY),
        A.REEXPORT_OR_LEAKY_MASK,
        A.REEXPORT_ATTENTION,
    )
    assert_contained(attack(variant), "m1", UPPER)


# ---------------------------------------------------------------- 11. hard-coding the lesson's numbers

TRAIN_CHECKS = ("train returns every step's loss", "after train, the model's weights", "train(model, data) defaults")

HARDCODED = [
    # causal_attention returns the seed-7 matrices for 4 x 4 inputs and random values otherwise.
    pytest.param(
        Variant("hardcoded-attention", "m1", "differs from the reference", edits={A.M1: [A.HARDCODED_ATTENTION]}),
        None,
        id="11a-attention-seed7",
    ),
    # train returns the lesson's 20 printed losses (cut or repeated to `steps`) without training.
    # train's checks are half of M3 (clm_inputs_targets and clm_loss, untouched, are the other half),
    # so the 40% applies to train's checks.
    pytest.param(
        Variant("hardcoded-train", "m3", "the loss curve", edits={A.M3: [A.HARDCODED_TRAIN]}),
        TRAIN_CHECKS,
        id="11b-train-lesson-losses",
    ),
    # generate returns the lesson's 8 tokens whatever the model and prompt.
    pytest.param(
        Variant("hardcoded-generate", "m4", "generate's result", edits={A.M4: [A.HARDCODED_GENERATE_ALWAYS]}),
        None,
        id="11c-generate-lesson-tokens",
    ),
    # generate returns the lesson's tokens for the lesson's prompt, else the prompt padded with zeros
    # (right shape and dtype, but the model is never run).
    pytest.param(
        Variant("hardcoded-generate-padded", "m4", "greedy choice", edits={A.M4: [A.HARDCODED_GENERATE_PADDED]}),
        None,
        id="11d-generate-lesson-tokens-else-zeros",
    ),
]


@pytest.mark.parametrize("variant,scope", HARDCODED)
def test_hardcoded_lesson_outputs_earn_little(attack, variant: Variant, scope: tuple[str, ...] | None):
    """A function that returns the lesson's printed numbers instead of computing them keeps at most 40%
    of its milestone (of the checks that exercise it, where the milestone also grades other functions)."""
    result = attack(variant)
    assert_contained(result, variant.milestone, variant.expect)
    checks = [c for c in result.milestone(variant.milestone)["checks"] if scope is None or c["name"].startswith(scope)]
    assert checks, explain(result)
    score, max_score = sum(c["score"] for c in checks), sum(c["max_score"] for c in checks)
    passed = [c["name"] for c in checks if c["passed"]]
    assert score <= 0.4 * max_score, f"{score:g}/{max_score:g} points; passed: {passed}\n{explain(result)}"


# ---------------------------------------------------------------- 18. processes left behind


def processes_with(marker: str) -> list[str]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{pid}: {cmdline.strip()}")
    return found


def test_process_tree_is_cleaned_up(attack):
    """At import, m1_attention.py starts a Popen child in its own session and a double-forked setsid
    daemon, both ignoring SIGTERM/SIGHUP and sleeping 1000 s; causal_mask checks they are alive (else it
    raises) and uses a leaking triu mask. After grading, no process with the attack's marker may remain."""
    marker = f"gptkit-attack-{uuid.uuid4().hex}"
    variant = m1_variant("process-tree", UPPER, A.at_import(A.process_tree(marker)), A.PROCESSES_ALIVE_OR_RAISE)
    try:
        result = attack(variant)
        deadline = time.monotonic() + 3
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = processes_with(marker)
        assert not left, f"processes left running after grading: {left}\n{explain(result)}"
        assert_contained(result, "m1", UPPER)  # UPPER: the processes were alive while M1 was graded
    finally:
        for line in processes_with(marker):  # never leave them to the next test
            try:
                os.kill(int(line.split(":")[0]), 9)
            except OSError:
                pass


# ---------------------------------------------------------------- beyond the brief: a reply that never ends


def test_slow_drip_reply_times_out(attack):
    """Inside causal_attention the code writes a frame header announcing 4096 bytes on every socket, then
    one byte every 2 s forever: each read returns within the --timeout 5, but the reply never completes.
    The call's time limit must still apply to the whole reply."""
    result = attack(m1_variant("slow-drip", "no answer within", A.in_call(A.SLOW_DRIP)), *HANG)
    assert_contained(result, "m1", "no answer within")
