"""The batch worker's sandbox: a hostile submission graded beside an honest one in `grade batch`.

Each test grades a class of two, ``a-attack`` first and then ``b-honest`` (the reference), one at
a time in the same fork server, and checks that the attack failed only its own submission, that
nothing outside it changed, and that it left no process behind. The strong checks need the
protections they test; each is skipped, saying which, on a machine that lacks it (no root, no
cgroups, not Linux). The protections in force are listed in every gradebook row.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

import attacks as A
from grader.sandbox.client import FORK_SERVER
from helpers import REPO, SOLUTIONS, Variant, cli, grade, proc_fields

pytestmark = pytest.mark.slow  # every test here grades whole submissions

WORKER_UIDS = range(2_000_000, 3_000_000)  # jail.WORKER_UID_BASE and up: the ids workers run under as root
GUARDED = [REPO / "grader", REPO / "solutions", REPO / "exercises", REPO / "tests"]


def digest(*roots: Path) -> dict[str, str]:
    """Content and mode of every file under ``roots`` (a gradebook is read through SQLite, not here)."""
    out = {}
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest() + oct(path.stat().st_mode)
    return out


def gradebook(db: Path) -> dict[str, tuple]:
    with sqlite3.connect(db) as con:
        subs = {
            r[0]: r[1:]
            for r in con.execute("SELECT student, score, max_score, status, graded_at, hash FROM submissions")
        }
        checks = con.execute("SELECT COUNT(*), SUM(score) FROM checks").fetchone()
    return {"submissions": subs, "checks": checks}


def worker_processes() -> list[str]:
    """Processes left running under a worker's user id (only a worker ever has one): those that no grading owns
    any more. A live worker's parent is its fork server's copy (root, the fork server's command line) or another
    worker process; a process whose chain up ends anywhere else (init, once its grading ended) was left behind.
    Another test's live workers beside this one (``-n 2``) are not counted, so this test need not run alone."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}").stat().st_uid in WORKER_UIDS and not _owned(_parent(pid)):
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            continue
    return found


def _parent(pid: str) -> str:
    return proc_fields(pid)[1]


def _owned(pid: str) -> bool:
    """Is ``pid`` a worker process or one of a fork server's (the server, or a worker's copy before it drops
    privileges)? Such a parent belongs to a grading still running."""
    try:
        if Path(f"/proc/{pid}").stat().st_uid in WORKER_UIDS:
            return True
        return str(FORK_SERVER).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False  # gone: its children are being reparented, and will be looked at again


class Class:
    """A class of two graded with `grade batch`: the attack and an honest reference submission."""

    def __init__(self, root: Path, attack: Variant):
        self.root, self.db = root, root / "grades.sqlite"
        attack.build(root / "a-attack")
        shutil.copytree(SOLUTIONS, root / "b-honest", ignore=shutil.ignore_patterns("__pycache__"))

    def grade(self, *args: str, env: dict[str, str] | None = None) -> dict[str, dict]:
        started = time.monotonic()
        proc = cli("batch", str(self.root), "--workers", "1", "-m", "m1", *args, timeout=600, env=env)
        self.seconds = time.monotonic() - started
        assert proc.returncode == 0 and "2 graded" in proc.stderr, proc.stderr
        with sqlite3.connect(self.db) as con:
            rows = {
                s: {"score": score, "max": top, "protections": json.loads(prot or "[]"), "messages": []}
                for s, score, top, prot in con.execute("SELECT student, score, max_score, protections FROM submissions")
            }
            for student, message in con.execute("SELECT student, message FROM checks WHERE NOT passed"):
                rows[student]["messages"].append(message)
        return rows

    @staticmethod
    def messages(rows: dict[str, dict]) -> str:
        return "\n".join(rows["a-attack"]["messages"])


def attack_at_import(code: str, name: str = "attack") -> Variant:
    return Variant(name, "m1", "", edits={A.M1: [A.at_import(code)]})


def assert_contained(rows: dict[str, dict], expect: str) -> None:
    messages = Class.messages(rows)
    assert rows["a-attack"]["score"] < rows["a-attack"]["max"], f"the attack kept full marks:\n{messages}"
    assert expect in messages, f"no message of the attack's says {expect!r}:\n{messages}"
    assert rows["b-honest"]["score"] == rows["b-honest"]["max"], (
        f"the honest submission graded after the attack lost points: {rows['b-honest']}"
    )


@pytest.fixture(scope="module")
def protections() -> list[str]:
    """What this machine gives a worker, as `grade check` reports it (checked before an attack that needs it)."""
    return grade(SOLUTIONS, "-m", "quiz").report["protections"]


def needs_one_of(protections: list[str], *wanted: str) -> None:
    """Attacks that write outside the worker run only where something stops them (else they would succeed)."""
    if not set(wanted) & set(protections):
        pytest.skip(f"this machine gives the worker none of {', '.join(wanted)}: the attack would succeed")


def needs(protections: list[str], *wanted: str) -> None:
    missing = [p for p in wanted if p not in protections]
    if missing:
        pytest.skip(f"this machine does not give the worker {', '.join(missing)}")


@pytest.fixture
def no_worker_left():
    yield
    deadline = time.monotonic() + 5
    while worker_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not worker_processes(), f"processes left running under a worker's user id: {worker_processes()}"


# ---------------------------------------------------------------- what the attacks do


def overwrite_everything(paths: list[Path]) -> str:
    """Truncate, append to, replace and delete every file under ``paths``; report how many changed."""
    return f"""
import os
_changed = []
for _root in {[str(p) for p in paths]!r}:
    for _dir, _subdirs, _files in os.walk(_root):
        for _name in _files:
            _path = os.path.join(_dir, _name)
            for _how in ("append", "replace", "delete"):
                try:
                    if _how == "append":
                        open(_path, "a").write("pwned = True\\n")
                    elif _how == "replace":
                        open(_path + ".tmp", "w").write("pwned")
                        os.replace(_path + ".tmp", _path)
                    else:
                        os.remove(_path)
                    _changed.append(_how + " " + _path)
                except OSError:
                    pass
raise RuntimeError(f"overwrote {{len(_changed)}} files: {{_changed[:3]}}")
"""


DELAYED_DAEMON = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3)  # long after the grader has moved on, if it let this live
        for _root in ("/", {roots!r}):
            for _dir, _subdirs, _files in os.walk(_root):
                for _name in _files:
                    if _name.endswith((".json", ".sqlite", ".sqlite-wal", ".py")):
                        try:
                            open(os.path.join(_dir, _name), "w").write("{{}}")
                        except OSError:
                            pass
        os._exit(0)
    os._exit(0)
raise RuntimeError("the daemon is started")
"""

FORK_BOMB = """
import os, time
_made = 0
try:
    while True:
        if os.fork() == 0:
            while True:  # every child forks too, and holds on once refused
                try:
                    os.fork()
                except OSError:
                    time.sleep(60)
        _made += 1
except OSError as e:
    raise RuntimeError(f"fork refused after {_made} children: {e}")
"""

MEMORY_BOMB = """
import os, select, time
import torch
_read, _write = os.pipe()
for _ in range(4):  # 4 x 1 GiB, each under the per-process limit, 4 GiB together
    if os.fork() == 0:
        _hoard = torch.ones(1 << 28)  # every page touched
        os.write(_write, b"x")
        time.sleep(60)
        os._exit(0)
_got, _end = 0, time.monotonic() + 8
while _got < 4 and select.select([_read], [], [], max(0, _end - time.monotonic()))[0]:
    _got += len(os.read(_read, 4))
raise RuntimeError(f"the memory bomb: {_got} of 4 children hold their GiB")
"""

FIND_SECRET = """
import os
_found = [k for k, v in os.environ.items() if {secret!r} in v]
for _pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    for _what in ("environ", "cmdline"):
        try:
            if {secret!r}.encode() in open(f"/proc/{{_pid}}/{{_what}}", "rb").read():
                _found.append(f"/proc/{{_pid}}/{{_what}}")
        except OSError:
            pass
raise RuntimeError(f"secrets found: {{_found}}")
"""

# ---------------------------------------------------------------- the tests


def test_overwriting_the_grader_and_others_changes_nothing(tmp_path, protections, no_worker_left):
    """The attack tries to rewrite the grader, the reference, the suites, the other submission and the
    gradebook by absolute path: it changes nothing and the honest submission after it keeps full marks."""
    needs_one_of(protections, "private-root", "unprivileged-user")
    root = tmp_path / "class"
    targets = [*GUARDED, root / "b-honest", root]
    klass = Class(root, attack_at_import(overwrite_everything(targets)))
    before = digest(*GUARDED, root / "b-honest")
    rows = klass.grade()
    assert_contained(rows, "overwrote 0 files")
    assert digest(*GUARDED, root / "b-honest") == before, "a file of the grader or of another submission changed"


def test_a_delayed_daemon_changes_nothing(tmp_path, protections, no_worker_left):
    """A double-forked setsid daemon waits 3 s, then rewrites every *.json, *.sqlite and *.py it can find:
    it must be gone with its worker, and the gradebook and the grader stay as they were."""
    needs_one_of(protections, "own-pid-namespace", "private-root", "unprivileged-user")
    root = tmp_path / "class"
    klass = Class(root, attack_at_import(DELAYED_DAEMON.format(roots=str(REPO))))
    before = digest(*GUARDED)
    rows = klass.grade()
    assert_contained(rows, "the daemon is started")
    book = gradebook(klass.db)
    time.sleep(5)  # past the daemon's wake-up
    assert gradebook(klass.db) == book, "the gradebook changed after the batch ended"
    assert digest(*GUARDED) == before, "a grader file changed"


def test_a_fork_bomb_fails_only_its_submission(tmp_path, protections, no_worker_left):
    """Processes that fork without end: the process-count limits stop them, the grader carries on."""
    needs(protections, "unprivileged-user", "cgroup-pids")
    klass = Class(tmp_path / "class", attack_at_import(FORK_BOMB))
    rows = klass.grade("--timeout", "10")
    assert_contained(rows, "fork refused after")
    assert klass.seconds < 120, f"the batch took {klass.seconds:.0f} s"


def test_a_memory_bomb_of_4_gib_is_stopped(tmp_path, protections, no_worker_left):
    """Four processes of 1 GiB each, under a 2 GiB per-process cap: the worker's cgroup (2.5 GiB for the
    whole tree) stops them before all four hold their memory."""
    needs(protections, "cgroup-memory")
    klass = Class(tmp_path / "class", attack_at_import(MEMORY_BOMB))
    rows = klass.grade("--memory-mb", "2048", "--timeout", "40")
    messages = Class.messages(rows)
    assert "4 of 4" not in messages, f"all four children got their memory:\n{messages}"
    assert_contained(rows, "memory")


def test_secrets_never_reach_the_worker(tmp_path, no_worker_left):
    """A secret in the grader's environment is in neither the worker's environment nor any /proc it sees."""
    secret = "gptkit-secret-" + os.urandom(8).hex()
    klass = Class(tmp_path / "class", attack_at_import(FIND_SECRET.format(secret=secret)))
    rows = klass.grade(env={**os.environ, "GPTKIT_TEST_TOKEN": secret})
    assert_contained(rows, "secrets found: []")


def test_the_worker_runs_unprivileged_in_a_private_root(tmp_path, protections, no_worker_left):
    """As root, each worker has its own user id, sees no project, no other submission and no gradebook."""
    probe = """
import os
_seen = {"uid": os.getuid(), "root": sorted(os.listdir("/")), "project": any(map(os.path.exists, %r)),
         "class": os.path.exists(%r), "processes": sorted(p for p in os.listdir("/proc") if p.isdigit())}
raise RuntimeError(f"seen: {_seen}")
"""
    root = tmp_path / "class"
    needs(protections, "unprivileged-user", "private-root", "own-pid-namespace")
    grader = [str(REPO / name) for name in ("grader", "solutions", "tests", "exercises", "README.md")]
    klass = Class(root, attack_at_import(probe % (grader, str(root))))
    rows = klass.grade()
    seen = Class.messages(rows)
    assert "'project': False" in seen and "'class': False" in seen, seen
    assert "'processes': ['1', '2']" in seen, f"the worker sees processes other than its own:\n{seen}"
    uid = int(seen.split("'uid': ")[1].split(",")[0])
    assert uid in WORKER_UIDS, f"the worker ran as uid {uid}"
