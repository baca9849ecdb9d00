"""A submission pays for itself: its replies, its files and its time are bounded, and what they cost is its own.

Each attack runs through the real command (``grade check``, ``grade batch``) with the grader's temporary
files in a folder of the test's own (TMPDIR), so that "nothing left on disk" is counted there exactly, and
with small limits, to keep the tests quick:

* functions that return multi-megabyte strings: the grading side reads none of them (a failed check that says
  why), and the whole grading ends within its ``--submission-timeout`` plus 10 s;
* an import that writes a 5,000-deep folder tree: both commands end normally, with their summary, and the tree
  is gone;
* an import that writes 1 GB: stopped at the worker copy's cap, nothing of it on the machine's disk, its
  failure counted against the submission; a worker killed while it writes leaves nothing either;
* every check sleeping just under the per-call limit: the grading ends within its limit plus 10 s.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from attacks import at_import, in_call
from helpers import REPO, SOLUTIONS

pytestmark = pytest.mark.slow  # every test here grades whole submissions

M1 = "m1_attention.py"
MASK_BODY = "    return torch.tril(torch.ones(T, T, device=device))\n"  # causal_mask's body
# 3.9 MB (3.7 MiB) of short tokens: the text that costs the trusted-code redaction the most per character
HUGE_STRING = "'a( ' * 1_300_000"
# 4.5 MB: past the 4 MB a reply's plain data may hold, so it is not even read
OVERSIZE_STRING = "'a( ' * 1_500_000"
DEEP_TREE = """
import os as _os
_fd = _os.open('.', _os.O_RDONLY)
for _ in range(5000):
    _os.mkdir('d', dir_fd=_fd)
    _next = _os.open('d', _os.O_RDONLY, dir_fd=_fd)
    _os.close(_fd)
    _fd = _next
_os.close(_fd)
"""
# 1 GB in files of 4 MB (each under the worker's per-file limit of 8 MB)
GIGABYTE = """
for _i in range(256):
    with open(f'fill{_i}.bin', 'wb') as _f:
        _f.write(b'x' * (4 << 20))
"""
# writes on and on, past any cap, until the grader kills it
WRITE_FOREVER = """
import itertools as _it
for _i in _it.count():
    try:
        with open(f'fill{_i % 1000}.bin', 'wb') as _f:
            _f.write(b'x' * (1 << 20))
    except OSError:
        pass
"""


def submission(folder: Path, *edits: tuple[str, str], file: str = M1) -> Path:
    shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    path = folder / file
    text = path.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text)
    return folder


def run(scratch: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m grader ARGS`` with its temporary files (the fork server's scratch, every worker's copy) in
    ``scratch``; and how long it took."""
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(scratch)}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "grader", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
    )
    return proc, time.monotonic() - started


def left_in(scratch: Path) -> list[str]:
    """What is left in ``scratch``, but torch's own compile cache (``torchinductor_USER``), which the grading
    processes of a batch make and keep on purpose: nothing of a worker."""
    return sorted(p.name for p in scratch.iterdir() if not p.name.startswith("torchinductor_"))


def check(
    tmp_path: Path, sub: Path, *args: str, timeout: float = 600
) -> tuple[subprocess.CompletedProcess, dict, float]:
    out = tmp_path / "report.json"
    proc, seconds = run(
        tmp_path / "scratch", "check", str(sub), "--format", "json", "-o", str(out), *args, timeout=timeout
    )
    return proc, json.loads(out.read_text()) if out.exists() else {}, seconds


def milestone(report: dict, m: str) -> dict:
    return next(x for x in report["milestones"] if x["id"] == m)


def failed(report: dict, m: str) -> list[dict]:
    return [c for c in milestone(report, m)["checks"] if not c["passed"]]


class DiskWatch:
    """The most bytes ever held under ``folder`` while the grading ran, polled (as root: every worker's files)."""

    def __init__(self, folder: Path):
        self.folder, self.peak, self._stop = folder, 0, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            total = 0
            for root, _dirs, files in os.walk(self.folder):
                for name in files:
                    try:
                        total += os.lstat(os.path.join(root, name)).st_size
                    except OSError:
                        pass
            self.peak = max(self.peak, total)
            self._stop.wait(0.05)

    def __enter__(self) -> DiskWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.serial  # bounds the grading's wall time: a second busy core would stretch it
def test_multi_megabyte_strings_are_not_read_and_the_grading_ends_in_time(tmp_path):
    """m1's functions return 3.9 and 4.5 MB strings: each such reply is a failed check that says why, the honest m2
    (graded on the grader's own m1) keeps full marks, and `grade check` ends within its limit + 10 s (it took
    minutes: the grading side redacted every reply, about a microsecond a character)."""
    sub = submission(
        tmp_path / "sub",
        in_call(f"return {OVERSIZE_STRING}"),
        (MASK_BODY, f"    return {HUGE_STRING}\n"),
    )
    limit = 60
    proc, report, seconds = check(
        tmp_path, sub, "-m", "m1", "-m", "m2", "--submission-timeout", str(limit), timeout=limit + 30
    )
    assert report, proc.stderr
    assert seconds < limit + 10, f"grade check took {seconds:.0f} s with a {limit} s limit"
    assert milestone(report, "m2")["score"] == milestone(report, "m2")["max_score"], failed(report, "m2")
    messages = [c["message"] for c in failed(report, "m1")]
    assert milestone(report, "m1")["score"] < milestone(report, "m1")["max_score"] / 2
    assert any("returned a 3.7 MB string; the grader reads at most 64 KB in one string" in m for m in messages)
    assert any("sent back a reply of 4.3 MB of plain data; the grader reads at most 4 MB" in m for m in messages)
    assert all(c["counted"] for c in failed(report, "m1")), "an over-size reply is the submission's failure"
    assert left_in(tmp_path / "scratch") == []


def test_a_deep_tree_ends_normally_and_is_deleted(tmp_path):
    """The import writes 5,000 nested folders into the worker's copy: `grade check` and `grade batch` end
    normally with their summary (they died of a RecursionError in the clean-up), and nothing is left."""
    sub = submission(tmp_path / "class" / "deep", at_import(DEEP_TREE))
    proc, report, _ = check(tmp_path, sub, "-m", "m1")
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert milestone(report, "m1")["score"] == milestone(report, "m1")["max_score"], failed(report, "m1")
    assert left_in(tmp_path / "scratch") == []

    scratch = tmp_path / "b"  # short: multiprocessing binds a Unix socket under it (108 bytes at most)
    proc, _ = run(scratch, "batch", str(tmp_path / "class"), "-m", "m1", "--workers", "1")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "1 graded" in proc.stderr, proc.stderr[-3000:]
    with sqlite3.connect(tmp_path / "class" / "grades.sqlite") as con:
        ((score, top),) = con.execute("SELECT score, max_score FROM submissions WHERE student = 'deep'")
    assert score == top
    assert left_in(scratch) == []


def test_a_gigabyte_written_is_stopped_at_the_cap_off_the_disk(tmp_path):
    """The import writes 1 GB into the worker's copy: stopped at the copy's cap (a tmpfs in the worker's own
    mount namespace), none of it on the machine's disk, the import failure counted against the submission."""
    sub = submission(tmp_path / "sub", at_import(GIGABYTE))
    with DiskWatch(tmp_path / "scratch") as disk:
        proc, report, _ = check(tmp_path, sub, "-m", "m1")
    assert report, proc.stderr
    if "private-tmp" not in report["protections"]:  # the worker's own mount namespace, which the cap needs
        pytest.skip("no mount namespace for the worker here: its copy is on disk, each file capped")
    assert disk.peak < 64 << 20, f"{disk.peak >> 20} MB of the worker's files were on the disk at once"
    assert "capped-copy" in report["protections"]
    checks = failed(report, "m1")
    assert milestone(report, "m1")["score"] == 0 and all(c["counted"] for c in checks)
    assert "No space left on device" in checks[0]["message"], checks[0]["message"]
    assert left_in(tmp_path / "scratch") == []


def test_a_worker_killed_while_writing_leaves_nothing(tmp_path):
    """Every call writes without end (past the cap, errors ignored) until its time-out kills the worker: nothing
    of it is left under the grader's temporary folder, and the next checks still run."""
    sub = submission(tmp_path / "sub", in_call(WRITE_FOREVER))
    with DiskWatch(tmp_path / "scratch") as disk:
        proc, report, _ = check(tmp_path, sub, "-m", "m1", "--timeout", "3", "--submission-timeout", "40")
    assert report, proc.stderr
    assert milestone(report, "m1")["score"] < milestone(report, "m1")["max_score"]
    if "private-tmp" in report["protections"]:
        assert disk.peak < 64 << 20, f"{disk.peak >> 20} MB of the worker's files were on the disk at once"
    assert left_in(tmp_path / "scratch") == []


@pytest.mark.serial  # bounds the grading's wall time: a second busy core would stretch it
def test_every_check_sleeping_ends_within_the_submission_limit(tmp_path):
    """Each call sleeps just under the per-call limit (3 s, with --timeout 3): the grading ends within the
    submission's 20 s plus 10, the checks past it failing at once, saying the submission's time is up."""
    sub = submission(tmp_path / "sub", in_call("__import__('time').sleep(2.8)"))
    limit = 20
    proc, report, seconds = check(
        tmp_path, sub, "-m", "m1", "--timeout", "3", "--submission-timeout", str(limit), timeout=limit + 30
    )
    assert report, proc.stderr
    assert seconds < limit + 10, f"grade check took {seconds:.0f} s with a {limit} s limit"
    assert any("used up its time limit of 20 s" in c["message"] for c in failed(report, "m1"))
    assert left_in(tmp_path / "scratch") == []


def test_in_a_contest_what_the_submission_caused_is_its_own_graded_failure(tmp_path):
    """The contest grades the same uploads: the deep tree is graded (it was a grader failure that "costs you
    nothing"), and the over-size replies are the upload's own failed checks, not a failure of the grader."""
    from grader.contest.grading import GradingQueue
    from grader.contest.store import Store
    from helpers import ContestClock, contest_folder, open_contest

    folder = contest_folder(tmp_path / "round", open_contest("Bounds test"))
    uploads = {
        "ada": submission(tmp_path / "deep", at_import(DEEP_TREE)),
        "alan": submission(tmp_path / "huge", (MASK_BODY, f"    return {HUGE_STRING}\n")),
    }
    store = Store(folder)
    queue = GradingQueue(store, ContestClock())
    queue.start()
    try:
        sids = {}
        for who, sub in uploads.items():
            m1 = (sub / M1).read_bytes()
            sids[who] = store.accept(who, "m1", ContestClock()(), lambda f, m1=m1: (f / M1).write_bytes(m1) and ".")
            queue.enqueue(sids[who])
        ends = time.monotonic() + 300
        while time.monotonic() < ends and queue.pending():
            time.sleep(0.2)
        rows = {who: store.get(sid) for who, sid in sids.items()}
    finally:
        queue.close()
        store.close()
    assert all(row.status == "graded" for row in rows.values()), {w: (r.status, r.error) for w, r in rows.items()}
    assert rows["ada"].score == rows["ada"].max_score
    huge = rows["alan"]
    assert huge.score is not None and huge.max_score is not None and huge.score < huge.max_score
    messages = [c["message"] for m in huge.report["milestones"] for c in m["checks"] if not c["passed"]]
    assert any("MB string; the grader reads at most 64 KB" in m for m in messages), messages[:3]
