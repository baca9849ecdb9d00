"""One lane on a Dask cluster, the other on the server's own processes: which executor grades
each lane and how many at once (``lane_plan``), the coach's view of both (``lane_health``), and a cluster that
fails (its scheduler gone) failing only its own lane's submissions. The executors are the test's: ``Jobs``."""

from __future__ import annotations

import re
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grader.contest.commands import cluster_lanes
from grader.contest.commands import contest as contest_group
from grader.contest.config import load
from grader.contest.grading import LANES, LOCAL, METRIC, QUICK, GradingQueue, Remote, lane_plan, queue_slots
from grader.contest.store import Store
from helpers import ContestClock, contest_folder, open_contest

CONTEST = open_contest("Dask lane", "[tasks.m1]\npoints = 30\n[tasks.lmbudget]\npoints = 10\n")
CLUSTER = "the Dask cluster at tcp://10.0.0.2:8786"


class Jobs:
    """An executor whose futures the test completes (as test_lane_scheduling's): ``handed`` (sid, future)."""

    def __init__(self) -> None:
        self.handed: list[tuple[int, Future]] = []

    def submit(self, fn, path: str, *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        self.handed.append((int(re.search(r"uploads/(\d+)", path).group(1)), future))  # type: ignore[union-attr]
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass

    def running(self) -> list[int]:
        return [sid for sid, future in self.handed if not future.done()]

    def future(self, sid: int) -> Future:
        return next(future for s, future in self.handed if s == sid)

    def finish(self, sid: int) -> None:
        self.future(sid).set_result({"milestones": [{"id": "m1", "score": 1, "max_score": 1, "checks": []}]})


def accept(store: Store, student: str, task: str) -> int:
    name = "lmbudget.py" if task == "lmbudget" else "m1_attention.py"
    return store.accept(student, task, ContestClock()(), lambda target: (target / name).write_text("x = 1") and ".")


@pytest.mark.parametrize(
    "workers, metric, threads, remote, plan",
    [
        (2, None, None, (), {QUICK: (2, 2), METRIC: (1, 1)}),  # all local, as without --scheduler
        (2, None, 4, {METRIC}, {QUICK: (2, 2), METRIC: (0, 4)}),  # the cluster's every thread for training runs
        (2, 3, 4, {METRIC}, {QUICK: (2, 2), METRIC: (0, 3)}),  # --metric-workers caps the metric lane's share
        (2, 9, 4, {METRIC}, {QUICK: (2, 2), METRIC: (0, 4)}),  # never more than the cluster has
        (2, None, 4, {QUICK}, {QUICK: (0, 4), METRIC: (1, 1)}),  # the other way round
        (2, 0, 4, {METRIC}, {QUICK: (2, 2)}),  # no metric lane: nothing to send
        (1, None, 4, set(LANES), {QUICK: (0, 2), METRIC: (0, 2)}),  # every lane: they share it, as before
    ],
)
def test_each_lane_gets_its_own_processes_or_the_clusters_threads(
    workers: int, metric: int | None, threads: int | None, remote: set[str], plan: dict[str, tuple[int, int]]
):
    assert lane_plan(workers, metric, threads, remote) == plan
    if remote == set(LANES):
        assert {name: n for name, (_, n) in plan.items()} == queue_slots(workers, metric, True, threads)


@pytest.fixture
def store(tmp_path: Path):
    store = Store(contest_folder(tmp_path / "round", CONTEST, ("ada", "alan", "grace", "linus")))
    yield store
    store.close()


def split_queue(store: Store, monkeypatch, threads: int | None = 2) -> tuple[GradingQueue, Jobs, Jobs]:
    """A queue whose metric lane goes to ``cluster`` (2 slots) and whose quick lane to ``local``: the pool of
    processes the queue would start for itself, a Jobs here."""
    cluster, local = Jobs(), Jobs()
    monkeypatch.setattr(GradingQueue, "_new_pool", lambda self, workers, nice=0: local)
    remote = Remote(frozenset({METRIC}), CLUSTER, lambda: threads)
    queue = GradingQueue(store, ContestClock(), workers=1, executor=cluster, slots=2, remote=remote)  # type: ignore[arg-type]
    queue.start()
    return queue, cluster, local


def test_the_metric_lane_goes_to_the_cluster_and_the_quick_lane_stays_local(store: Store, monkeypatch):
    queue, cluster, local = split_queue(store, monkeypatch)
    runs = [accept(store, who, "lmbudget") for who in ("ada", "alan", "grace")]
    quick = accept(store, "linus", "m1")
    for sid in [*runs, quick]:
        queue.enqueue(sid)
    assert cluster.running() == runs[:2] and local.running() == [quick], "two threads, and the quick one beside"
    health = queue.lane_health()
    assert health[METRIC] == {
        "workers": 2,
        "alive": 2,
        "busy": 2,
        "waiting": 1,
        "replaced": 0,
        "where": CLUSTER,
        "threads": 2,
    }
    assert health[QUICK] == {
        "workers": 1,
        "alive": 0,  # a Jobs has no processes to count
        "busy": 1,
        "waiting": 0,
        "replaced": 0,
        "where": LOCAL,
        "threads": None,
    }
    local.finish(quick)
    assert store.get(quick).status == "graded"  # type: ignore[union-attr]
    queue.close()


def test_a_scheduler_gone_fails_the_clusters_submissions_only(store: Store, monkeypatch):
    """Dask cancels what its scheduler lost, and a client that gave up refuses what it is handed: both are that
    submission's grading failing (no cost to its student; the coach grades it again), never a stuck "queued"
    nor an upload's 500; the quick lane grades on."""
    queue, cluster, local = split_queue(store, monkeypatch, threads=0)
    held = accept(store, "ada", "lmbudget")
    queue.enqueue(held)
    cluster.future(held).cancel()  # as Dask's _cascade_future does when the scheduler is lost

    def refuse(*args, **kwargs) -> Future:
        raise RuntimeError("Client is closed")

    monkeypatch.setattr(cluster, "submit", refuse)
    refused = accept(store, "alan", "lmbudget")
    queue.enqueue(refused)
    quick = accept(store, "grace", "m1")
    queue.enqueue(quick)
    local.finish(quick)
    rows = {sid: store.get(sid) for sid in (held, refused, quick)}
    assert {sid: row.status for sid, row in rows.items()} == {held: "failed", refused: "failed", quick: "graded"}  # type: ignore[union-attr]
    assert "the Dask cluster at tcp://10.0.0.2:8786 could not grade it" in rows[held].error  # type: ignore[union-attr,operator]
    assert "Client is closed" in rows[refused].error  # type: ignore[union-attr,operator]
    assert queue.lane_health()[METRIC]["alive"] == 0, "the coach sees the cluster gone"
    queue.close()


def test_the_lanes_a_coach_sends_to_the_cluster(tmp_path: Path):
    (tmp_path / "metric.toml").write_text(CONTEST)
    (tmp_path / "quick.toml").write_text(open_contest("Quick", "[tasks.m1]\npoints = 30\n"))
    with_metric, quick_only = load(tmp_path / "metric.toml"), load(tmp_path / "quick.toml")
    assert cluster_lanes("tcp://h:8786", "all", None, with_metric) == frozenset(LANES)
    assert cluster_lanes("tcp://h:8786", "metric", None, with_metric) == {METRIC}
    assert cluster_lanes("tcp://h:8786", "quick", 2, with_metric) == {QUICK}
    assert cluster_lanes("tcp://h:8786", "metric", None, quick_only) == frozenset()  # serve warns, grades here
    assert cluster_lanes("tcp://h:8786", "quick", None, quick_only) == frozenset(LANES)  # its one lane: the quick


@pytest.mark.parametrize(
    "options, said",
    [
        (["--scheduler-lanes", "metric"], "--scheduler-lanes metric needs --scheduler ADDRESS"),
        (["--scheduler-lanes", "gpu"], "'gpu' is not one of 'all', 'quick', 'metric'"),
        (["--scheduler", "tcp://127.0.0.1:9", "--scheduler-lanes", "metric", "--metric-workers", "0"], "needs two"),
    ],
)
def test_a_choice_of_lanes_that_cannot_be_met_is_a_usage_error(tmp_path: Path, options: list[str], said: str):
    folder = contest_folder(tmp_path / "round", open_contest("Quick", "[tasks.m1]\npoints = 30\n"))
    result = CliRunner().invoke(contest_group, ["serve", str(folder), "--port", "1", *options])
    assert result.exit_code == 2 and said in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
