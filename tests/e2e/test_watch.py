"""`grade watch`: a resident grader that regrades the milestones a save affects, and survives what it grades."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grader.watch import VERDICT_LINE, affected, changes, dependencies
from helpers import REPO, SOLUTIONS, watch_here

REFERENCE = (SOLUTIONS / "m1_attention.py").read_text()
HANG = "while True:\n    pass\n"
SEGFAULT = "import os\nos.kill(os.getpid(), 11)\n"


class Watching:
    """`grade watch` in a subprocess of its own session; its output read line by line as it comes."""

    def __init__(self, *args: str, cwd: Path = REPO):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader", "watch", *args],
            cwd=cwd,  # a built release's folder: its own grader, found first by -m
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.seen = 0  # lines already handed out by verdict()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def verdict(self, timeout: float = 90) -> str:
        """The output up to the next grading's end (the line that says it is watching again)."""
        ends = time.monotonic() + timeout
        while time.monotonic() < ends:
            for i in range(self.seen, len(self.lines)):
                if self.lines[i].startswith(VERDICT_LINE):
                    text, self.seen = "".join(self.lines[self.seen : i + 1]), i + 1
                    return text
            if self.proc.poll() is not None and not self._reader.is_alive():
                break
            time.sleep(0.05)
        pytest.fail(f"no verdict within {timeout} s; the output:\n{''.join(self.lines)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def processes() -> dict[int, tuple[int, int, int]]:
    """Every process: pid -> (parent, process group, session)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            found[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return found


def save(path: Path, text: str) -> None:
    """An editor's save: the new text, with an mtime that differs from the last one's."""
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    folder = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, folder)
    return folder


def test_a_milestone_depends_on_its_files_not_on_the_files_it_trusts(submission: Path) -> None:
    assert dependencies(submission, "m1") == {"m1_attention.py"}
    assert dependencies(submission, "m2") == {"m2_model.py"}  # m1_attention is the grader's while m2 is graded
    assert dependencies(submission, "lesson") == {"m1_attention.py", "m2_model.py", "m3_train.py", "m4_generate.py"}
    assert dependencies(submission, "padding") == {"m9_padding.py"}  # imports m3_train, which it trusts
    (submission / "m4_generate.py").write_text("from m2_model import TinyGPT\n" + "import helper, os\n")
    (submission / "helper.py").write_text("x = 1\n")
    # m4 trusts nothing: the student's m2_model runs, and with it their m1_attention
    assert dependencies(submission, "m4") == {"m4_generate.py", "m2_model.py", "m1_attention.py", "helper.py"}
    chosen = ["m1", "m2", "m4"]
    assert affected(submission, chosen, ["m1_attention.py"]) == ["m1", "m4"]
    assert affected(submission, chosen, ["m2_model.py"]) == ["m2", "m4"]
    assert affected(submission, chosen, ["helper.py"]) == ["m4"]
    assert affected(submission, chosen, ["notes.py"]) == []
    assert affected(submission, chosen, ["data.txt"]) == chosen  # a file the code may read: all of them
    assert changes({"a": (1, 1), "b": (1, 1)}, {"a": (2, 1), "c": (1, 1)}) == {
        "a": "changed",
        "b": "removed",
        "c": "added",
    }


def test_without_the_graders_own_copies_a_milestone_depends_on_the_students_files(submission: Path, monkeypatch):
    """A student release has no trusted copies: m2 to m4 run the student's m1, so saving m1 affects them."""
    monkeypatch.setattr("grader.sandbox.secrecy.trusted_source", lambda module: None)
    assert dependencies(submission, "m2") == {"m2_model.py", "m1_attention.py"}
    assert affected(submission, ["m1", "m2", "m3", "m4", "padding"], ["m1_attention.py"]) == [
        "m1",
        "m2",
        "m3",
        "m4",
        "padding",
    ]


@pytest.mark.slow
def test_in_the_release_saving_m1_regrades_what_runs_it(release: Path) -> None:
    """In a built release, a triu m1 saved while watching regrades m2 to m4 too, which run it."""
    work = release / "work"
    shutil.copytree(SOLUTIONS, work, ignore=shutil.ignore_patterns("__pycache__"))
    watching = Watching(str(work), *(a for m in ("m1", "m2", "m3", "m4") for a in ("-m", m)), cwd=release)
    try:
        watching.verdict(timeout=240)
        save(work / "m1_attention.py", REFERENCE.replace("torch.tril(", "torch.triu("))
        regraded = watching.verdict(timeout=240)
    finally:
        watching.stop()
    assert "saved: regrading m1, m2, m3, m4" in regraded, regraded


@pytest.mark.slow
def test_watch_regrades_on_save_survives_hangs_and_crashes_and_stops_cleanly(submission: Path) -> None:
    target = submission / "m1_attention.py"
    watching = Watching(str(submission), "-m", "m1", "--timeout", "5")
    try:
        first = watching.verdict(timeout=180)
        assert "watching m1_attention.py in" in first and "27 / 27" in first, first

        save(target, REFERENCE.replace("torch.tril(", "torch.triu("))  # (a) a bug
        broken = watching.verdict()
        assert "m1_attention.py saved: regrading m1" in broken, broken
        assert "m1 ✗" in broken and "tril" in broken and "27 / 27" not in broken, broken

        save(target, HANG + REFERENCE)  # (b) an infinite loop at import: the per-check timeout ends it
        hung = watching.verdict()
        assert "no answer within 5.0 s" in hung and "0 / 27" in hung, hung

        save(target, SEGFAULT + REFERENCE)  # (c) the worker crashes at import
        crashed = watching.verdict()
        assert "segmentation fault" in crashed and "0 / 27" in crashed, crashed

        save(target, REFERENCE)  # (d) fixed
        fixed = watching.verdict()
        assert "27 / 27" in fixed and "✗" not in fixed, fixed

        (submission / "notes.py").write_text("# not read by m1\n")  # a file no chosen milestone reads
        deadline = time.monotonic() + 30
        while "nothing to regrade" not in "".join(watching.lines[watching.seen :]):
            assert time.monotonic() < deadline, "".join(watching.lines)
            time.sleep(0.1)

        # The fork server dies (between gradings here): the next save starts a new one.
        servers = [pid for pid, (parent, _, _) in processes().items() if parent == watching.proc.pid]
        assert len(servers) == 1, servers
        os.kill(servers[0], signal.SIGKILL)
        save(target, REFERENCE)
        again = watching.verdict()
        assert "starting a new one" in again and "27 / 27" in again, again

        # Ctrl-C: a goodbye, exit code 0, and nothing left behind (the fork server has a session of its own).
        table = processes()
        children = [pid for pid, (parent, _, _) in table.items() if parent == watching.proc.pid]
        sessions = {watching.proc.pid} | {table[pid][2] for pid in children}
        os.kill(watching.proc.pid, signal.SIGINT)
        assert watching.proc.wait(timeout=10) == 0, "".join(watching.lines)
        watching._reader.join(timeout=5)
        assert "goodbye" in watching.lines[-1], "".join(watching.lines)
        left = {pid for pid, (_, group, session) in processes().items() if session in sessions or group in sessions}
        assert not left, left
        with pytest.raises(ProcessLookupError):
            os.killpg(watching.proc.pid, 0)
    finally:
        watching.stop()


@pytest.mark.slow
def test_a_save_while_grading_stops_the_grading_and_grades_the_newer_files(submission: Path) -> None:
    """A hang would hold the grading for the call's limit (20 s by default): the fix saved meanwhile is
    graded at once instead."""
    target = submission / "m1_attention.py"
    watching = Watching(str(submission), "-m", "m1")
    try:
        watching.verdict(timeout=180)
        save(target, HANG + REFERENCE)
        deadline = time.monotonic() + 30
        while "saved: regrading m1" not in "".join(watching.lines[watching.seen :]):
            assert time.monotonic() < deadline, "".join(watching.lines)
            time.sleep(0.05)
        time.sleep(1.0)  # the worker is in the loop now
        fixed_at = time.monotonic()
        save(target, REFERENCE)
        stopped = watching.verdict(timeout=30)
        assert "saved again while grading: stopped" in stopped and "no answer within" not in stopped, stopped
        fixed = watching.verdict(timeout=60)
        assert "27 / 27" in fixed and "✗" not in fixed, fixed
        assert time.monotonic() - fixed_at < 15, "the fix waited for the hang to run out its time"
    finally:
        watching.stop()


@pytest.mark.slow
def test_watch_once_grades_like_check(submission: Path) -> None:
    """`grade watch --once` grades once and exits as `grade check` does: its table, its exit code, no goodbye. It
    runs here, through click, on the session's warm Grader: a save, a signal and a process's end are the tests
    above's, which run the command itself."""
    done = watch_here(str(submission), "-m", "m1", "--once")
    assert done.returncode == 0, done.stderr
    assert "27 / 27" in done.stdout and "goodbye" not in done.stdout


def test_a_file_changed_while_it_was_read_is_graded_again(submission: Path, monkeypatch, capsys) -> None:
    """A save that lands while the files are copied, with the same size and time stamp (coarse clocks, editors
    that write in place): the verdict would be of a torn file and stay until another save, so it is regraded."""
    from grader.results import Report
    from grader.watch import Watcher

    target = submission / "m1_attention.py"
    graded: list[str] = []

    def grade(request, limits=None):
        folder = request.submission
        graded.append((folder / "m1_attention.py").read_text())
        if len(graded) == 1:  # the torn read: the file on disk is not what was copied
            stat = target.stat()
            target.write_text(REFERENCE.replace("import", "#mport", 1)[: len(REFERENCE)].ljust(len(REFERENCE)))
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        return Report(str(folder), [])

    watcher = Watcher(submission, None, public=False, verbose=False)  # type: ignore[arg-type]
    monkeypatch.setattr(watcher.grader, "grade", grade)
    watcher.color = False
    assert watcher.grade(["m1"]) is not None
    assert len(graded) == 2 and graded[1] == target.read_text(), "graded again, from the file as it now is"
    assert "changed while they were read" in capsys.readouterr().out
