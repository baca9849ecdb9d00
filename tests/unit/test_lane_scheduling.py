"""The grading queue's lanes: a metric task's submissions (lmbudget's training runs) are
graded with a capacity of their own, so that a quick task's upload never waits behind them; fair between
students within each lane. The sizes (``lane_slots``) and, with an executor whose jobs the test ends by hand,
which submission is handed out when."""

from __future__ import annotations

import re
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from grader.contest.grading import METRIC, QUICK, GradingQueue, lane_of, lane_slots, queue_slots
from grader.contest.store import Store
from helpers import ContestClock, contest_folder, open_contest

CONTEST = open_contest("Lanes", "[tasks.m1]\npoints = 30\n[tasks.lmbudget]\npoints = 10\n")


@pytest.mark.parametrize(
    "workers, metric, sizes",
    [
        (1, None, {QUICK: 1, METRIC: 1}),  # one worker: the metric lane still has a process of its own
        (2, None, {QUICK: 2, METRIC: 1}),
        (8, None, {QUICK: 8, METRIC: 4}),
        (2, 3, {QUICK: 2, METRIC: 3}),
        (2, 0, {QUICK: 2}),  # no metric lane: every task shares the workers, as before lanes
    ],
)
def test_own_processes_give_each_lane_its_own(workers: int, metric: int | None, sizes: dict[str, int]):
    assert lane_slots(workers, metric) == sizes


@pytest.mark.parametrize(
    "threads, metric, sizes",
    [
        (2, None, {QUICK: 1, METRIC: 1}),
        (8, None, {QUICK: 4, METRIC: 4}),
        (4, 10, {QUICK: 1, METRIC: 3}),  # never every thread: the quick lane keeps one
        (1, None, {QUICK: 1, METRIC: 1}),  # one thread cannot keep them apart
        (6, 0, {QUICK: 6}),
    ],
)
def test_a_clusters_threads_are_shared_between_the_lanes(threads: int, metric: int | None, sizes: dict[str, int]):
    assert lane_slots(1, metric, threads) == sizes == queue_slots(1, metric, True, threads)


def test_a_metric_task_goes_to_its_lane_only_where_there_is_one():
    assert lane_of("lmbudget", {QUICK, METRIC}) == METRIC
    assert lane_of("m1", {QUICK, METRIC}) == QUICK
    assert lane_of("lmbudget", {QUICK}) == QUICK


class Jobs:
    """An executor whose futures the test completes: ``handed`` are (submission id, task, future), in order."""

    def __init__(self) -> None:
        self.handed: list[tuple[int, str, Future]] = []

    def submit(self, fn, path: str, tasks: list[str], *args: Any, **kwargs: Any) -> Future:
        future: Future = Future()
        self.handed.append((int(re.search(r"uploads/(\d+)", path).group(1)), tasks[0], future))  # type: ignore[union-attr]
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass

    def running(self) -> list[int]:
        return [sid for sid, _, future in self.handed if not future.done()]

    def finish(self, sid: int) -> None:
        future = next(f for s, _, f in self.handed if s == sid)
        future.set_result({"milestones": [{"id": "m1", "score": 1, "max_score": 1, "checks": [{"counted": True}]}]})


@pytest.fixture
def store(tmp_path: Path):
    store = Store(contest_folder(tmp_path / "round", CONTEST, ("ada", "alan", "grace", "linus")))
    yield store
    store.close()


def accept(store: Store, student: str, task: str) -> int:
    name = "lmbudget.py" if task == "lmbudget" else "m1_attention.py"
    return store.accept(student, task, ContestClock()(), lambda target: (target / name).write_text("x = 1") and ".")


def queue_of(store: Store, jobs: Jobs, metric_workers: int | None) -> GradingQueue:
    queue = GradingQueue(store, ContestClock(), executor=jobs, slots=2, metric_workers=metric_workers)  # type: ignore[arg-type]
    queue.start()
    return queue


def test_quick_uploads_are_handed_out_while_two_training_runs_wait_their_turn(store: Store):
    """Two slots, one each: ada's and alan's lmbudget runs take the metric lane's one in turn, and grace's and
    linus's m1 uploads, after them, go to the quick lane's at once, one after the other."""
    jobs = Jobs()
    queue = queue_of(store, jobs, metric_workers=None)
    runs = [accept(store, who, "lmbudget") for who in ("ada", "alan")]
    quick = [accept(store, who, "m1") for who in ("grace", "linus")]
    for sid in runs + quick:
        queue.enqueue(sid)
    assert jobs.running() == [runs[0], quick[0]], "one training run, and a quick upload beside it"
    jobs.finish(quick[0])
    assert jobs.running() == [runs[0], quick[1]], "the next quick upload does not wait for the training run"
    jobs.finish(quick[1])
    health = queue.lane_health()
    outside = {"where": "an executor not the server's own", "threads": None}
    assert health[METRIC] == {"workers": 1, "alive": 1, "busy": 1, "waiting": 1, "replaced": 0, **outside}
    assert health[QUICK] == {"workers": 1, "alive": 1, "busy": 0, "waiting": 0, "replaced": 0, **outside}
    jobs.finish(runs[0])
    assert jobs.running() == [runs[1]]
    queue.close()


def test_without_a_metric_lane_two_training_runs_hold_every_slot(store: Store):
    """metric_workers = 0 (lanes off, the behaviour before them): the quick uploads wait behind both runs."""
    jobs = Jobs()
    queue = queue_of(store, jobs, metric_workers=0)
    runs = [accept(store, who, "lmbudget") for who in ("ada", "alan")]
    quick = accept(store, "grace", "m1")
    for sid in [*runs, quick]:
        queue.enqueue(sid)
    assert jobs.running() == runs and list(queue.lane_health()) == [QUICK]
    jobs.finish(runs[0])
    assert jobs.running() == [runs[1], quick]
    queue.close()


def test_the_metric_lane_is_fair_between_students(store: Store):
    """ada queues three training runs, alan one after them: alan's is graded second in the metric lane."""
    jobs = Jobs()
    queue = queue_of(store, jobs, metric_workers=None)
    hers = [accept(store, "ada", "lmbudget") for _ in range(3)]
    his = accept(store, "alan", "lmbudget")
    for sid in [*hers, his]:
        queue.enqueue(sid)
    order = []
    while jobs.running():
        (sid,) = jobs.running()
        order.append(sid)
        jobs.finish(sid)
    assert order == [hers[0], his, *hers[1:]]
    queue.close()


def test_the_coach_sees_each_lane_on_the_page_and_in_the_api(tmp_path: Path):
    """No lifespan (nothing grades): an lmbudget upload waits in the metric lane, the quick lane is empty."""
    from fastapi.testclient import TestClient

    from grader.contest.web.app import create_app
    from helpers import SOLUTIONS, auth, upload

    folder = contest_folder(tmp_path / "round", CONTEST)
    client = TestClient(create_app(folder, ContestClock(), workers=2))
    answer = upload(client, folder, "ada", "lmbudget", [("lmbudget.py", (SOLUTIONS / "lmbudget.py").read_bytes())])
    assert answer.status_code == 202, answer.text
    health = client.get("/api/coach", headers=auth(folder, "coach")).json()["health"]
    assert health["workers"] == 3 and health["queued"] == 1
    quick, metric = health["lanes"]
    assert quick == {
        "lane": "quick",
        "workers": 2,
        "alive": 0,
        "busy": 0,
        "waiting": 0,
        "oldest_wait_seconds": None,
        "replaced": 0,
        "where": "local processes",
        "threads": None,
    }
    assert metric == {**quick, "lane": "metric", "workers": 1, "waiting": 1, "oldest_wait_seconds": 0}
    page = client.get("/coach", headers={**auth(folder, "coach"), "Accept": "text/html"}).text
    assert 'id="lane-quick"' in page and 'id="lane-metric"' in page
    assert "<strong>Metric tasks</strong>" in page and "waiting <strong>1</strong>" in page


def test_the_default_workers_are_the_cores_as_far_as_the_memory_holds():
    """One quick process per core, but never more than the machine's memory holds with every grading process (and
    the metric lane's half as many) at its limits: a class's burst of memory hogs costs only their own gradings."""
    from grader.contest.grading import default_workers
    from grader.sandbox.client import GRADING_MEMORY_BYTES
    from grader.sandbox.common.agreement import CGROUP_SLACK_BYTES

    gib = 1 << 30
    each = 3 * gib + CGROUP_SLACK_BYTES + GRADING_MEMORY_BYTES  # 4.5 GiB: a worker at the default --memory-mb
    assert default_workers(3 * gib, cores=2, machine_bytes=24 * gib) == 2  # the cores: the memory holds 3
    assert default_workers(3 * gib, cores=16, machine_bytes=32 * gib) == 4  # the memory: 4 + 2 metric = 27 GiB
    assert 6 * each <= 32 * gib < 7.5 * each  # 4 quick and 2 metric fit; 5 and 2 would not
    assert default_workers(3 * gib, cores=16, machine_bytes=2 * gib) == 1  # never none
    assert default_workers(gib, cores=16, machine_bytes=32 * gib) == 8  # a lower --memory-mb lets more run


def test_the_metric_lanes_weight_leaves_an_honest_run_its_wall_limit():
    """A training run at METRIC_NICE beside two busy processes on its core (a quick grading and the server) keeps
    enough of it to finish the shipped task's CPU budget within its wall limit (wall_factor times the budget)."""
    from grader.contest.grading import METRIC_NICE
    from grader.lmbudget.task import TASK_FILE, load_task

    weight = 1024 / 1.25**METRIC_NICE  # Linux's weights: 1024 at nice 0, each step 1.25 times less
    share = weight / (2 * 1024 + weight)
    assert share * load_task(TASK_FILE).wall_factor >= 1, f"a run keeps {share:.0%} of a core: past its wall limit"
