"""Nothing survives a worker, and no worker sees what another wrote; its CPU is measured, not told.

A class of two is graded with `grade batch` in one fork server, one after the other: ``a-donor``, the reference
whose m1 copies itself to /tmp, /dev/shm, its home and the folder above its copy, and into a System V shared
memory segment; then ``b-thief``, the m1 stub, which looks in all those places and re-exports what it finds.
When workers shared /tmp, the thief scored full marks. Each test is skipped on a machine that lacks the
protection it tests (the worker's own mount, network and IPC namespaces, which ``private-tmp`` needs).
"""

from __future__ import annotations

import shutil
import sqlite3

import pytest

import attacks as A
from helpers import EXERCISES, Variant, cli, grade

pytestmark = pytest.mark.slow  # every test here grades whole submissions


@pytest.fixture(scope="module")
def protections() -> list[str]:
    """What this machine gives a worker, as `grade check` reports it."""
    return grade(EXERCISES, "-m", "quiz").report["protections"]


def test_one_workers_files_are_never_seen_by_the_next(tmp_path, protections):
    """The thief, a stub, scores 0 though the donor left its m1 everywhere a worker can write."""
    if "own-pid-namespace" not in protections:  # the namespaces a private /tmp is made in
        pytest.skip("this machine gives the worker no namespaces of its own, so no private /tmp")
    Variant("donor", edits={A.M1: [A.at_import(A.DROP_EVERYWHERE)]}).build(tmp_path / "class" / "a-donor")
    thief = tmp_path / "class" / "b-thief"
    shutil.copytree(EXERCISES, thief, ignore=shutil.ignore_patterns("__pycache__"))
    with (thief / A.M1).open("a") as stub:  # at the end: what it steals replaces the stub's definitions
        stub.write(A.STEAL_FROM_EVERYWHERE)
    db = tmp_path / "grades.sqlite"
    proc = cli("batch", str(tmp_path / "class"), "--workers", "1", "-m", "m1", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(db) as con:
        scores = dict(con.execute("SELECT student, score FROM submissions"))
        tops = dict(con.execute("SELECT student, max_score FROM submissions"))
    assert scores["a-donor"] == tops["a-donor"] > 0, "the donor (the reference) should keep full marks"
    assert scores["b-thief"] == 0, f"the thief found the donor's m1: {scores['b-thief']} of {tops['b-thief']}"


def test_a_child_never_waited_for_is_counted(tmp_path, protections):
    """m1 forks a child that burns CPU until the worker ends: the report's CPU includes it."""
    if not {"cgroup-cpu", "own-pid-namespace"} & set(protections):
        pytest.skip("this machine counts no worker's process tree (no cgroup, no PID namespace)")
    folder = Variant("orphan", edits={A.M1: [A.at_import(A.BURN_IN_AN_ORPHAN)]}).build(tmp_path / "orphan")
    report = grade(folder, "-m", "m1").report
    # The child ran for at least the 4 s its parent slept, on at least half a core of a busy 2-core machine.
    assert report["worker_cpu_seconds"] >= 2.0, report["worker_cpu_seconds"]


def test_home_and_tmp_are_empty_and_writable(tmp_path, protections):
    """A worker starts with an empty /tmp of its own, and may write there (torch.compile's cache lives in it)."""
    if "own-pid-namespace" not in protections:  # the namespaces a private /tmp is made in
        pytest.skip("this machine gives the worker no namespaces of its own, so no private /tmp")
    probe = """
import os as _os
import sys as _sys
# given back: its own copy of the submission and the Python installation, either of which may lie under /tmp
_mine = [_os.getcwd(), _sys.executable, _sys.prefix, _sys.exec_prefix, *_sys.path]
_seen = [n for n in _os.listdir("/tmp") if not any(p.startswith(f"/tmp/{n}/") for p in _mine)]
_seen += _os.listdir("/dev/shm")
if _seen:
    raise RuntimeError(f"a new worker found {_seen} in /tmp and /dev/shm")
open("/tmp/mine", "w").write("x")
"""
    folder = Variant("tmp", edits={A.M1: [A.at_import(probe)]}).build(tmp_path / "tmp")
    report = grade(folder, "-m", "m1").report
    (m1,) = report["milestones"]
    assert m1["score"] == m1["max_score"], [c["message"] for c in m1["checks"] if not c["passed"]][:3]
