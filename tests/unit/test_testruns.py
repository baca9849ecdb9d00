"""Test runs' pure parts (grader/contest/testruns.py, grader/sandbox/testrun.py): who may send one, which files it
takes, the output's tail, the verdict of a worker's end, and contest.toml's ``test_runs``."""

from __future__ import annotations

import pytest

from grader.contest.config import ContestFileError, Task, parse
from grader.contest.testruns import MAX_SCRIPT_BYTES, check_files, refusal, used
from grader.contest.uploads import UploadError
from grader.sandbox.client import StudentError, WorkerCrash
from grader.sandbox.testrun import CRASHED, ERROR, MEMORY, OUTPUT, SCRIPT, TIME, read_tail, tail, verdict_of
from helpers import open_contest


def run(task: str, status: str = "done", verdict: str | None = "ok") -> dict:
    return {"task": task, "status": status, "verdict": verdict}


def test_a_student_may_send_up_to_the_tasks_limit_one_at_a_time():
    task = Task("m1", 10, test_runs=2)
    assert refusal(task, []) is None
    assert refusal(task, [run("m1"), run("m2"), run("m2")]) is None  # another task's do not count
    assert refusal(task, [run("m1"), run("m1")]) == (429, "you have used your 2 test runs of m1")
    assert refusal(task, [run("m2", "queued")])[0] == 409  # type: ignore[index]
    assert refusal(Task("m1", 10, test_runs=0), []) == (403, "test runs are off for m1 in this contest")


def test_a_test_run_the_grader_failed_on_costs_nothing():
    """The page says so ("it costs you nothing; send it again"): the limit must agree."""
    task = Task("m1", 10, test_runs=2)
    assert refusal(task, [run("m1"), run("m1", verdict="failed")]) is None
    assert refusal(task, [run("m1"), run("m1", verdict="error")]) == (429, "you have used your 2 test runs of m1")
    assert used("m1", [run("m1", verdict="failed"), run("m1", verdict="time limit"), run("m2")]) == 1


def test_a_test_run_takes_exercise_files_and_a_script():
    files = check_files([("m1_attention.py", b"x = 1\n"), ("m2_model.py", b"y = 2\n")], b"print(1)\n")
    assert files == {"m1_attention.py": b"x = 1\n", "m2_model.py": b"y = 2\n", SCRIPT: b"print(1)\n"}
    assert check_files([], b"print(1)\n") == {SCRIPT: b"print(1)\n"}


@pytest.mark.parametrize(
    ("files", "script", "said"),
    [
        ([], b"  \n", "no script"),
        ([], b"#" * (MAX_SCRIPT_BYTES + 1), "over 64 KB"),
        ([(SCRIPT, b"x")], b"print(1)", "not an exercise file"),
        ([("../m1_attention.py", b"x")], b"print(1)", "not an exercise file"),
        ([("m1_attention.py", b"x"), ("m1_attention.py", b"y")], b"print(1)", "uploaded twice"),
        ([("m1_attention.py", b"\xff")], b"print(1)", "m1_attention.py is not UTF-8"),
        ([], b"\xff", "the script is not UTF-8"),
    ],
)
def test_a_bad_test_run_is_refused_with_its_reason(files, script, said):
    with pytest.raises(UploadError, match=said):
        check_files(files, script)


def test_the_output_kept_is_its_end_and_says_when_it_was_cut():
    assert tail(b"hello\n", 6, kept=10) == ("hello\n", False)
    assert tail(b"0123456789", 20, kept=4) == ("6789", True)
    text, cut = tail("é".encode() * 3, 6, kept=5)  # a character split by the cut is replaced, not an error
    assert cut and text.endswith("éé") and "\ufffd" in text


def test_the_output_file_is_read_from_its_end_and_never_through_a_link(tmp_path):
    out = tmp_path / "out.txt"
    out.write_bytes(b"x" * 100 + b"the end\n")
    assert read_tail(out, kept=8) == ("the end\n", True)
    (tmp_path / "link.txt").symlink_to(out)  # a worker that swapped its output for a link reads as nothing
    assert read_tail(tmp_path / "link.txt") == ("", False)
    assert read_tail(tmp_path / "gone.txt") == ("", False)


def test_the_verdict_names_the_limit_met():
    assert verdict_of(WorkerCrash("no answer within 8.0 s", limit="time")) == TIME
    assert verdict_of(WorkerCrash("killed", limit="memory")) == MEMORY
    assert verdict_of(WorkerCrash("your code printed more than 8 MB of output")) == OUTPUT
    assert verdict_of(WorkerCrash("the worker crashed with a segmentation fault")) == CRASHED
    assert verdict_of(StudentError("MemoryError", "", [])) == MEMORY
    assert verdict_of(StudentError("ValueError", "bad", [])) == ERROR


def test_contest_toml_sets_test_runs_per_task_or_for_all():
    both = "[tasks.m1]\npoints = 10\n[tasks.m2]\npoints = 10\ntest_runs = 0\n"
    assert [t.test_runs for t in parse(open_contest(tasks=both, more="[defaults]\ntest_runs = 5\n")).tasks] == [5, 0]
    assert parse(open_contest()).tasks[0].test_runs == 20
    with pytest.raises(ContestFileError, match="test_runs"):
        parse(open_contest(tasks="[tasks.m1]\npoints = 10\ntest_runs = -1\n"))


def test_a_grader_failure_mid_run_leaves_no_output_file_on_disk(tmp_path):
    """The worker's output is kept past its end for the tail to be read; a failure of the grader's own between
    the two must not leave it on the host's disk (one file per failed run)."""
    from grader.sandbox.testrun import run_script

    class Worker:
        output = tmp_path / "output"
        closed = False

        def request(self, header, timeout):
            self.output.write_text("printed\n")
            raise RuntimeError("the grading side failed")

        def close(self):
            self.closed = True

    worker = Worker()
    server = type("Server", (), {"spawn": lambda self, folder: worker})()
    with pytest.raises(RuntimeError):
        run_script(server, tmp_path, 5.0)  # type: ignore[arg-type]
    assert worker.closed and not worker.output.exists()
