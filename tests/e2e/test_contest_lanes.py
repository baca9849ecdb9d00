"""A metric task's training run does not hold the workers a quick task waits for: through
`grade contest serve --workers 1` on loopback, an lmbudget upload that sleeps out its wall-clock limit, then
two m1 uploads of other students: both m1 verdicts come while the training run is still being graded, and the
coach's health (``/api/coach``) shows the two lanes, the metric one busy. Before lanes, the one worker was the
training run's until its limit, and the m1 uploads waited behind it."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from grader.contest.submit import multipart
from grader.lmbudget.task import ENV_VAR, TASK_FILE, load_task, write_task
from helpers import SOLUTIONS, free_port, opened_a_minute_ago, serve_contest, stop_server, tokens

pytestmark = pytest.mark.slow  # a real server, real grading processes

TASKS = "[tasks.m1]\npoints = 30\n[tasks.lmbudget]\npoints = 10\n"

# Slept out to its wall-clock limit: max(budget_wall_seconds, wall_factor x budget_cpu_seconds) + margin = 62 s,
# far longer than two m1 gradings even on a busy machine.
SLEEPER = """
import time


def train_within_budget(text, vocab, budget_seconds, context=64):
    time.sleep(3600)
"""


def task_file(folder: Path) -> Path:
    """A tiny lmbudget task on a text of the test's own (``file:``: a contest refuses a corpus the worker can
    read), whose wall-clock limit a sleeping run reaches in about a minute."""
    folder.mkdir()
    words = random.Random(0).choices(["the", "model", "reads", "a", "text", "and", "guesses", "next", "char"], k=12000)
    (folder / "corpus.txt").write_text(" ".join(words))
    task = dataclasses.replace(
        load_task(TASK_FILE),
        corpus="file:corpus.txt",
        budget_cpu_seconds=2.0,
        wall_factor=2.0,
        budget_wall_seconds=60.0,
        margin_seconds=2.0,
        eval_windows=16,
        probe_windows=8,
    )
    write_task(task, folder / "task.toml")
    return folder / "task.toml"


def call(port: int, token: str, path: str, files: list[Path] | None = None) -> dict:
    body, kind = multipart(files) if files else (None, None)
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if kind:
        headers["Content-Type"] = kind
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def test_quick_uploads_get_their_verdict_while_a_training_run_holds_its_lane(tmp_path: Path, contest, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(task_file(tmp_path / "lmbudget")))  # the server's grading reads it
    folder = contest(TASKS, title="Lanes", start=opened_a_minute_ago(), scoreboard=None)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "lmbudget.py").write_text(SLEEPER)
    (tmp_path / "m1").mkdir()
    (tmp_path / "m1" / "m1_attention.py").write_bytes((SOLUTIONS / "m1_attention.py").read_bytes())
    keys = tokens(folder)
    port = free_port()
    server = serve_contest(folder, port, workers=1, wait=120)
    try:
        run = call(port, keys["ada"], "/submit/lmbudget", [tmp_path / "run" / "lmbudget.py"])["id"]
        time.sleep(2)  # handed out first: it holds the worker it gets
        quick = [
            call(port, keys[who], "/submit/m1", [tmp_path / "m1" / "m1_attention.py"])["id"]
            for who in ("alan", "grace")
        ]
        deadline = time.monotonic() + 180
        seen: dict[int, str] = {}
        while time.monotonic() < deadline and len(seen) < len(quick):
            for sid, who in zip(quick, ("alan", "grace")):
                status = call(port, keys[who], f"/api/submissions/{sid}")["status"]
                if status != "queued" and sid not in seen:
                    seen[sid] = status
                    training = call(port, keys["ada"], f"/api/submissions/{run}")["status"]
                    assert training == "queued", f"m1 {sid}'s verdict came only after the training run's ({training})"
            time.sleep(0.5)
        assert seen == {sid: "graded" for sid in quick}, seen
        health = call(port, keys["coach"], "/api/coach")["health"]
        lanes = {lane["lane"]: lane for lane in health["lanes"]}
        assert list(lanes) == ["quick", "metric"], health
        assert lanes["metric"]["busy"] == 1 and lanes["metric"]["alive"] == lanes["metric"]["workers"] == 1, health
        assert lanes["quick"]["busy"] == 0 and lanes["quick"]["alive"] == lanes["quick"]["workers"] == 1, health
        assert health["workers"] == 2 and health["queued"] == 1, health  # the training run, still graded
    finally:
        stop_server(server)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc: the sandbox's fork server, started by a warm-up)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # not a process, or gone
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def test_the_metric_lane_runs_at_a_lower_weight_than_the_quick_lane(contest):
    """The metric lane's grading processes, and the sandbox each starts, at METRIC_NICE more niceness than the
    server; the quick lane's at the server's own: a training run takes what the quick gradings leave."""
    from grader.contest.grading import METRIC, METRIC_NICE, QUICK, GradingQueue
    from grader.contest.store import Store
    from helpers import ContestClock

    folder = contest("[tasks.m1]\npoints = 30\n[tasks.lmbudget]\n", title="Lanes")
    store = Store(folder)
    queue = GradingQueue(store, ContestClock(), workers=1)
    queue.start()
    base = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        niceness = {}
        for name in (QUICK, METRIC):
            (process,) = getattr(queue.lanes[name].executor, "_processes", {}).values()
            deadline = time.monotonic() + 120
            while not children(process.pid) and time.monotonic() < deadline:  # its warm-up starts its sandbox
                time.sleep(0.2)
            niceness[name] = {os.getpriority(os.PRIO_PROCESS, pid) for pid in [process.pid, *children(process.pid)]}
        assert niceness == {QUICK: {base}, METRIC: {min(19, base + METRIC_NICE)}}, niceness
    finally:
        queue.close()
        store.close()


def test_a_dead_grading_process_replaces_its_own_lanes_pool_only(contest):
    """The quick lane's process killed under an m1 grading (the OOM killer): its pool is replaced and the upload
    graded again; the metric lane's pool, and a training run it may be holding, are left alone."""
    from grader.contest.grading import METRIC, QUICK, GradingQueue
    from grader.contest.store import Store
    from helpers import ContestClock

    folder = contest("[tasks.m1]\npoints = 30\n[tasks.lmbudget]\n", title="Lanes")
    store = Store(folder)
    queue = GradingQueue(store, ContestClock(), workers=1)
    queue.start()
    try:
        quick, metric = queue.lanes[QUICK], queue.lanes[METRIC]
        metric_pool = metric.executor
        m1 = (SOLUTIONS / "m1_attention.py").read_bytes()
        sid = store.accept("ada", "m1", ContestClock()(), lambda f: (f / "m1_attention.py").write_bytes(m1) and ".")
        queue.enqueue(sid)
        processes = list(getattr(quick.executor, "_processes", {}).values())
        assert processes and queue.lane_health()[QUICK]["busy"] == 1
        for process in processes:
            os.kill(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and store.get(sid).status == "queued":  # type: ignore[union-attr]
            time.sleep(0.5)
        row = store.get(sid)
        assert row is not None and row.status == "graded", (row.status, row.error) if row else None
        health = queue.lane_health()
        assert health[QUICK]["replaced"] == 1 and health[METRIC]["replaced"] == 0, health
        assert metric.executor is metric_pool and health[METRIC]["alive"] == 1, health
    finally:
        queue.close()
        store.close()


def test_the_metric_lane_on_a_dask_cluster_and_the_quick_lane_here(tmp_path: Path, contest, monkeypatch):
    """`--scheduler ADDR --scheduler-lanes metric`: a training run holds the cluster's one thread
    while two m1 uploads get their verdicts from the server's own process; the coach's health shows where each
    lane grades. Then the cluster goes away: the training run it held fails (the coach grades it again later),
    and the quick lane grades on."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv(ENV_VAR, str(task_file(tmp_path / "lmbudget")))  # the server's and the workers' grading
    students = ("ada", "alan", "grace", "linus")
    folder = contest(TASKS, title="Dask lane", start=opened_a_minute_ago(), scoreboard=None, students=students)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "lmbudget.py").write_text(SLEEPER)
    m1 = tmp_path / "m1" / "m1_attention.py"
    m1.parent.mkdir()
    m1.write_bytes((SOLUTIONS / "m1_attention.py").read_bytes())
    keys = tokens(folder)
    port = free_port()
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None)
    address = cluster.scheduler_address
    server = serve_contest(folder, port, 1, 120, address, ("--scheduler-lanes", "metric"))
    try:
        run = call(port, keys["ada"], "/submit/lmbudget", [tmp_path / "run" / "lmbudget.py"])["id"]
        time.sleep(2)
        quick = {who: call(port, keys[who], "/submit/m1", [m1])["id"] for who in ("alan", "grace")}
        for who, sid in quick.items():
            assert wait_for(port, keys[who], sid, 180) == "graded"
            assert call(port, keys["ada"], f"/api/submissions/{run}")["status"] == "queued", "the run still trains"
        lanes = {lane["lane"]: lane for lane in call(port, keys["coach"], "/api/coach")["health"]["lanes"]}
        assert lanes["quick"]["where"] == "local processes" and lanes["quick"]["threads"] is None, lanes
        assert lanes["quick"]["alive"] == lanes["quick"]["workers"] == 1 and lanes["quick"]["busy"] == 0, lanes
        assert lanes["metric"]["where"] == f"the Dask cluster at {address}" and lanes["metric"]["threads"] == 1, lanes
        assert lanes["metric"]["alive"] == lanes["metric"]["workers"] == 1 and lanes["metric"]["busy"] == 1, lanes
        page = urllib.request.Request(
            f"http://127.0.0.1:{port}/coach", headers={"Authorization": f"Bearer {keys['coach']}"}
        )
        with urllib.request.urlopen(page, timeout=60) as answer:
            assert f"the Dask cluster at {address}" in answer.read().decode()

        said = (folder / f"serve-{port}.log").read_text()
        assert f"the Dask cluster at {address} for the metric tasks and local processes for the quick tasks" in said

        cluster.close()  # the scheduler gone: only the metric lane's submission fails
        assert wait_for(port, keys["ada"], run, 120) == "failed"
        after = call(port, keys["linus"], "/submit/m1", [m1])["id"]
        assert wait_for(port, keys["linus"], after, 180) == "graded"
        lanes = {lane["lane"]: lane for lane in call(port, keys["coach"], "/api/coach")["health"]["lanes"]}
        assert lanes["metric"]["alive"] == 0 and lanes["quick"]["alive"] == 1, lanes
    finally:
        stop_server(server)
        cluster.close()


def test_a_metric_lane_sent_away_in_a_round_without_one_is_a_warning_and_everything_graded_here(contest):
    """`--scheduler-lanes metric` kept in a coach's command for a round of quick tasks only: the server says the
    cluster has nothing to grade and serves with its own processes (the address is never dialled: none answers)."""
    folder = contest("[tasks.m1]\npoints = 30\n", title="Quick round", start=opened_a_minute_ago())
    port = free_port()
    server = serve_contest(folder, port, 1, 120, "tcp://127.0.0.1:9", ("--scheduler-lanes", "metric"))
    try:
        health = call(port, tokens(folder)["coach"], "/api/coach")["health"]
        assert [(lane["lane"], lane["where"]) for lane in health["lanes"]] == [("quick", "local processes")], health
    finally:
        stop_server(server)
    said = (folder / f"serve-{port}.log").read_text()
    assert "the contest has no metric task, so --scheduler-lanes metric leaves the cluster nothing to grade" in said
    assert "with 1 grading worker(s)" in said and "Traceback" not in said


def wait_for(port: int, token: str, sid: int, seconds: float) -> str:
    """Submission ``sid``'s status once it is no longer queued (or "queued" after ``seconds``)."""
    deadline = time.monotonic() + seconds
    status = "queued"
    while time.monotonic() < deadline and status == "queued":
        time.sleep(0.5)
        status = call(port, token, f"/api/submissions/{sid}")["status"]
    return status
