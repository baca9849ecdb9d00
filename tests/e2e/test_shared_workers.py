"""Milestones that trust the same earlier files share one worker (grader/sandbox/session.py).

What sharing must keep: a crash or a hang still costs only the check that caused it
(tests/e2e/test_attacks.py grades those with the other milestones intact), a hang counts
against the milestone whose check hung, and a worker that has used much of its CPU
limit is not handed to the next milestone.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grader.milestones import MILESTONES
from grader.sandbox.client import ForkServer, Limits
from grader.sandbox.common.agreement import Request
from grader.sandbox.session import RETIRE_AT_CPU_SHARE, MilestoneView, NotebookRun, SharedWorker
from helpers import SOLUTIONS

pytestmark = pytest.mark.slow  # every test here grades whole submissions


class FakeWorker:
    def __init__(self) -> None:
        self.alive, self.hung, self.cpu, self.deadline = True, False, 0.0, None
        self.requests: list[dict] = []

    def request(self, header: dict, *_args) -> None:
        self.requests.append(header)

    def close(self) -> None:
        self.alive = False


class FakeForkServer:
    limits = Limits(cpu_seconds=100)

    def __init__(self) -> None:
        self.started: list[FakeWorker] = []

    def spawn(self, _submission: Path) -> FakeWorker:
        self.started.append(FakeWorker())
        return self.started[-1]


@pytest.fixture
def shared() -> SharedWorker:
    return SharedWorker(FakeForkServer(), Path("."), trusted=(), notebook=NotebookRun())


def test_the_reference_needs_one_worker_per_set_of_trusted_files(reference):
    report = reference.report
    groups = {m.trusted for m in MILESTONES.values()}
    assert report["workers"] == len(groups), f"{report['workers']} workers started for {len(groups)} groups"
    assert all(c["passed"] for m in report["milestones"] for c in m["checks"]), "the reference lost points"


def test_each_milestone_imports_its_own_files_once(shared):
    m1, m3 = MilestoneView(shared, ("m1_attention",)), MilestoneView(shared, ("m3_train",))
    assert m1.worker() is m3.worker() is m1.worker(), "milestones with the same trusted files got separate workers"
    imports = [r["modules"] for r in shared.server.started[0].requests if r["op"] == Request.IMPORT]
    assert imports == [["m1_attention"], ["m3_train"]], f"imports sent: {imports}"


def test_a_hang_counts_against_the_milestone_that_hung(shared):
    m1, m3 = MilestoneView(shared, ("m1_attention",)), MilestoneView(shared, ("m3_train",))
    worker = m1.worker()
    worker.alive, worker.hung = False, True  # what WorkerConnection.request does on a time-out
    fresh = m3.worker()
    assert fresh is not worker, "a dead worker was handed out again"
    assert (m1.hangs, m3.hangs) == (1, 0), "the hang was counted against the wrong milestone"


@pytest.mark.parametrize("share, replaced", [(RETIRE_AT_CPU_SHARE / 2, False), (RETIRE_AT_CPU_SHARE * 2, True)])
def test_a_worker_that_used_much_cpu_is_retired_before_the_next_milestone(shared, share, replaced):
    m1, m3 = MilestoneView(shared, ("m1_attention",)), MilestoneView(shared, ("m3_train",))
    worker = m1.worker()
    worker.cpu = share * shared.server.limits.cpu_seconds
    assert m1.worker() is worker, "a milestone lost its worker between two of its own checks"
    assert (m3.worker() is not worker) == replaced, f"at {share:.0%} of the CPU limit, replaced should be {replaced}"
    assert worker.alive != replaced, "the retired worker was left running"


# ------------------------------------------------------------ one fork server for a batch (worker/shared_server.py)


@pytest.fixture
def batch_server():
    server = ForkServer(Limits(), clients=2)
    yield server
    server.close()


def test_each_grading_process_gets_a_copy_of_the_batch_server(batch_server):
    with ThreadPoolExecutor(2) as pool:  # each attach waits until both have connected
        copies = list(pool.map(lambda _: ForkServer.attach(batch_server.address), range(2)))
    assert not Path(batch_server.address).exists(), "the server's socket outlived the wait: a worker could reach it"
    assert batch_server.protections == copies[0].protections, "the server and its copies disagree on protections"
    with pytest.raises(OSError):
        ForkServer.attach(batch_server.address)
    for copy in copies:
        worker = copy.spawn(SOLUTIONS)
        assert worker.request({"op": Request.IMPORT, "modules": ["m1_attention"]}) is None
        copy.close()
        assert copy.worker_cpu > 0, "a copy's workers were not reaped and counted"
    batch_server.close()
    assert batch_server.proc.returncode == 0, "the batch's server did not end cleanly once its copies had"
