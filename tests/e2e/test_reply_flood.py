"""A worker's replies cost the grading process little, whatever their size: an m1 whose every function returns
hundreds of MB of tensors is refused before a byte of them is read, its grading ends at the first reply refused,
and the grading process stays small and quick (it took 117 s and 6.5 GB with 508 MB replies, and 54 s and 51
workers one after another with 600 MB replies). In a contest, two such uploads hold the grading workers for
seconds, not minutes; stopping the server, or starting it, leaves none of its fork servers' scratch folders.

Each grading runs through the real command in a process of its own (`grade check`, `grade contest serve`), with
its temporary files in a folder of the test's own (TMPDIR), so that what it leaves there is counted exactly; the
grading process's own peak memory (VmHWM) is read in that process once it has graded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from grader.contest.submit import multipart
from helpers import REPO, SOLUTIONS, free_port, opened_a_minute_ago, serve_contest, stop_server, tokens

pytestmark = [
    pytest.mark.slow,  # whole gradings, contest servers
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the grading process's memory in /proc"),
]

M1 = "m1_attention.py"
MiB = 1 << 20
PEAK_RSS = 2 << 30  # the grading process's own peak resident memory, at most
SECONDS = 60  # the whole `grade check -m m1`, at most (an honest one: about 10 s on a busy two-core machine)


def flood(mib: float) -> str:
    """m1_attention.py whose every function (and the module's forward) returns a float32 tensor of ``mib`` MB."""
    text = (SOLUTIONS / M1).read_text()
    return text.replace(
        'if __name__ == "__main__":\n',
        f"""
_VALUES = int({mib} * (1 << 18))  # float32 values: {mib} MB


def _flood(*args, **kwargs):
    return torch.zeros(_VALUES)


def causal_mask(T, device=None):
    return _flood()


def causal_attention(q, k, v):
    return _flood(), torch.zeros(1)


CausalSelfAttention.forward = _flood


if __name__ == "__main__":
""",
    )


# `grade check ARGS` in this (a fresh) process; then its own peak resident memory, as JSON on the last line of stderr.
MEASURED = """
import json, sys
from grader.cli import main
try:
    main(sys.argv[1:], prog_name="grade", standalone_mode=False)
finally:
    peak = next(int(line.split()[1]) << 10 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"peak_rss": peak}), file=sys.stderr)
"""


def measured_check(tmp_path: Path, submission: Path, *args: str) -> tuple[dict, int, float]:
    """`grade check SUBMISSION --format json ARGS` in a process of its own: (its report, the grading process's
    peak resident memory, its wall time); its temporary files under tmp_path/scratch."""
    scratch, out = tmp_path / "scratch", tmp_path / "report.json"
    scratch.mkdir(exist_ok=True)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", MEASURED, "check", str(submission), "--format", "json", "-o", str(out), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SECONDS * 3,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    seconds = time.monotonic() - started
    assert out.exists(), proc.stderr[-3000:]
    peak = json.loads(proc.stderr.strip().splitlines()[-1])["peak_rss"]
    return json.loads(out.read_text()), peak, seconds


def checks(report: dict) -> list[dict]:
    return [c for m in report["milestones"] for c in m["checks"]]


@pytest.mark.parametrize(
    "mib, refused",
    [
        (508, "508 MB in one reply, more than the 64 MB the grader reads in one"),
        (600, "600 MB in one reply, more than the 64 MB the grader reads in one"),
        (63.9, "its replies came to more than the 512 MB the grader reads from one submission in all"),
    ],
    ids=["508-MB-replies", "600-MB-replies", "64-MB-replies-until-512-MB"],
)
def test_replies_flooding_the_grading_process_end_its_grading_quickly_and_small(tmp_path, mib, refused):
    """Every m1 function returns `mib` MB: at the old wire limit (508), past it (600), and just under one reply's
    limit (63.9), where the submission's 512 MB in all stops it after 8 replies. Each ends within 60 s with the
    grading process under 2 GB, one failed check saying what was refused and what to return instead, and every
    later check not run at once, saying why; no worker after it, nothing left in the temporary folder."""
    sub = tmp_path / "sub"
    shutil.copytree(SOLUTIONS, sub, ignore=shutil.ignore_patterns("__pycache__"))
    (sub / M1).write_text(flood(mib))
    report, peak, seconds = measured_check(tmp_path, sub, "-m", "m1")
    print(f"{mib} MB replies: {seconds:.1f} s, the grading process's peak {peak / MiB:.0f} MB")  # pytest -s: figures
    assert seconds < SECONDS, f"grade check took {seconds:.0f} s"
    assert peak < PEAK_RSS, f"the grading process held {peak / MiB:.0f} MB at its peak"
    found = checks(report)
    assert report["score"] == 0 and all(c["counted"] for c in found), "what the submission sent is its own failure"
    first = [c["message"] for c in found if c["message"].startswith("your code sent back too much")]
    assert len(first) == 1 and refused in first[0], [c["message"] for c in found][:12]
    assert "return tensors of the shapes each check asks for" in first[0], first[0]
    assert "its later checks are not run" in first[0], first[0]
    not_run = [c for c in found if c["message"].startswith("not run: an earlier check's reply was too large")]
    assert len(not_run) >= len(found) // 2 and all(refused in c["message"] for c in not_run), found[-1]["message"]
    assert all(c["seconds"] < 1 for c in not_run), "a check not run must cost nothing"
    assert report["workers"] == 1, f"{report['workers']} workers: a refused reply must end the grading"
    assert "grading-memory-limit" in report["protections"], report["protections"]
    assert sorted(p.name for p in (tmp_path / "scratch").iterdir() if p.name.startswith("gptkit-")) == []


# ---------------------------------------------------------------- a contest


def scratch_folders(tmp: Path) -> list[str]:
    """The fork servers' scratch folders in ``tmp`` (each holds its owner's record)."""
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("gptkit-") and (p / "owner.json").exists())


def call(port: int, token: str, path: str, files: list[Path] | None = None) -> dict:
    """The contest server's JSON answer to ``path``, as ``token``'s (an upload of ``files``, where given)."""
    body, kind = multipart(files) if files else (None, None)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if kind:
        headers["Content-Type"] = kind
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def status(port: int, token: str, sid: int) -> str:
    return call(port, token, f"/api/submissions/{sid}")["status"]


def submit(port: int, token: str, file: Path) -> int:
    return call(port, token, "/submit/m1", [file])["id"]


def wait_graded(port: int, keys: dict[str, str], sids: dict[str, int], seconds: float) -> dict[str, float]:
    """When (time.monotonic) each of ``sids`` (by student) stopped being queued, within ``seconds``."""
    done: dict[str, float] = {}
    ends = time.monotonic() + seconds
    while time.monotonic() < ends and len(done) < len(sids):
        for who, sid in sids.items():
            if who not in done and status(port, keys[who], sid) != "queued":
                done[who] = time.monotonic()
        time.sleep(0.1)
    return done


@pytest.fixture
def short_tmp():
    """A temporary folder for the server with a short path: multiprocessing's fork server binds a Unix socket in
    it, and a socket's path holds 107 bytes at most (a test's own tmp_path, under xdist, runs longer)."""
    folder = Path(tempfile.mkdtemp(prefix="rf-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_two_floods_leave_a_third_students_verdict_within_10_s_and_sigterm_leaves_no_scratch(
    tmp_path, contest, monkeypatch, short_tmp
):
    """`grade contest serve --workers 2`: two students upload an m1 of 508 MB replies, holding both quick workers;
    a third student's honest m1, uploaded right after, has its verdict within 10 s (it waited about two minutes
    behind them). Then SIGTERM stops the server: none of its fork servers' scratch folders is left."""
    tmp = short_tmp
    monkeypatch.setenv("TMPDIR", str(tmp))  # the server's temporary folder: what it leaves is counted there
    students = ("ada", "alan", "grace", "linus", "barbara")
    folder = contest(students=students, title="Reply flood", start=opened_a_minute_ago(), scoreboard=None)
    files = tmp_path / "files"
    (files / "flood").mkdir(parents=True)
    (files / "honest").mkdir()
    (files / "flood" / M1).write_text(flood(508))
    (files / "honest" / M1).write_bytes((SOLUTIONS / M1).read_bytes())
    keys = tokens(folder)
    port = free_port()
    server = serve_contest(folder, port, workers=2, wait=120)
    try:
        # Both quick workers graded once first: their fork servers started, as in a contest under way.
        warm = {who: submit(port, keys[who], files / "honest" / M1) for who in ("linus", "barbara")}
        assert len(wait_graded(port, keys, warm, 180)) == 2, "the warm-up uploads were not graded"
        floods = {who: submit(port, keys[who], files / "flood" / M1) for who in ("ada", "alan")}
        time.sleep(0.5)  # handed out first: each holds a worker
        uploaded = time.monotonic()
        honest = {"grace": submit(port, keys["grace"], files / "honest" / M1)}
        done = wait_graded(port, keys, honest, 60)
        assert "grace" in done, "the honest upload had no verdict within 60 s"
        waited = done["grace"] - uploaded
        print(f"the honest m1's verdict {waited:.1f} s after its upload")  # pytest -s: the figure
        assert waited < 10, f"the honest m1's verdict came {waited:.1f} s after its upload"
        assert status(port, keys["grace"], honest["grace"]) == "graded"
        ended = wait_graded(port, keys, floods, 60)
        assert len(ended) == 2, "the floods were still being graded a minute later"
        assert scratch_folders(tmp), "the server's grading processes each have a fork server, with its folder"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                stop_server(server)
    assert scratch_folders(tmp) == [], "a clean stop (SIGTERM) left its fork servers' scratch folders"


def test_ctrl_c_leaves_no_scratch_and_a_start_removes_only_stale_ones(tmp_path, contest, monkeypatch, short_tmp):
    """Folders planted in the server's temporary folder: a scratch folder whose owner is gone (a server killed
    with -9 left it), one whose owner lives (this test process), one with no owner record and one of another
    user. The server's start removes the first alone; Ctrl-C then leaves none of the server's own."""
    tmp = short_tmp
    monkeypatch.setenv("TMPDIR", str(tmp))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid_gone = int(gone.stdout)
    planted = {
        "gptkit-stale": pid_gone,
        "gptkit-alive": os.getpid(),
        "gptkit-norecord": None,
    }
    for name, pid in planted.items():
        (tmp / name / "sub1").mkdir(parents=True)
        (tmp / name / "sub1" / "m1_attention.py").write_text("x")
        if pid is not None:
            owner = {"pid": pid, "started": _start(os.getpid()) if pid == os.getpid() else "1", **_machine()}
            (tmp / name / "owner.json").write_text(json.dumps(owner))
    theirs = tmp / "gptkit-theirs"
    theirs.mkdir()
    (theirs / "owner.json").write_text(json.dumps({"pid": pid_gone, "started": "1", **_machine()}))
    if os.getuid() == 0:
        os.chown(theirs, 4242, 4242)  # another user's: never ours to remove, whatever it says
    folder = contest(title="Scratch sweep")
    port = free_port()
    server = serve_contest(folder, port, workers=1, wait=120)
    try:
        left = sorted(p.name for p in tmp.iterdir() if p.name in planted or p.name == theirs.name)
        expected = ["gptkit-alive", "gptkit-norecord"] + (["gptkit-theirs"] if os.getuid() == 0 else [])
        assert left == expected, left
        deadline = time.monotonic() + 120  # the pool's fork servers start in the background (warm_up)
        while time.monotonic() < deadline and len(scratch_folders(tmp)) < 3:
            time.sleep(0.2)
        assert len(scratch_folders(tmp)) >= 3, scratch_folders(tmp)  # the planted live one, and the server's
    finally:
        stop_server(server)  # Ctrl-C, as a coach stops it
    remaining = scratch_folders(tmp)
    assert remaining == ["gptkit-alive"] + (["gptkit-theirs"] if os.getuid() == 0 else []), remaining


def _start(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _machine() -> dict[str, str]:
    return {
        "boot": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
        "pids": os.readlink("/proc/self/ns/pid"),
    }
