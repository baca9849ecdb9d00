"""Fixtures for the hidden suites, registered as a pytest plugin by the runner.

The runner sets ``CONTEXT`` before pytest starts; nothing here imports or runs
student code, which lives in worker processes behind ``Session`` objects.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grader.milestones import MILESTONES
from grader.reference import Reference, load_reference
from grader.sandbox.client import Limits, Zygote
from grader.sandbox.session import Session, SharedWorker


@dataclass
class GradingContext:
    zygote: Zygote
    submission: Path
    limits: Limits
    sessions: dict[str, Session] = field(default_factory=dict)
    workers: dict[tuple[str, ...], SharedWorker] = field(default_factory=dict)  # by the files they trust
    deadline: float = 0.0
    ends: float = float("inf")  # the whole submission's time limit, when there is one

    def session(self, milestone: str) -> Session:
        if milestone not in self.sessions:
            m = MILESTONES[milestone]
            if m.trusted not in self.workers:
                self.workers[m.trusted] = SharedWorker(self.zygote, self.submission, m.trusted)
            self.sessions[milestone] = Session(self.workers[m.trusted], m.modules)
        session = self.sessions[milestone]
        session.start_test(self.deadline - time.monotonic())
        return session

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()


CONTEXT: GradingContext | None = None


@pytest.fixture(autouse=True)
def _time_budget():
    """Each test gets its own time budget, shared by all its calls into the worker, within the submission's."""
    now = time.monotonic()
    if now >= CONTEXT.ends:
        pytest.fail(f"not run: this submission used up its time limit of {CONTEXT.limits.submission_seconds:g} s "
                    "before this check (the checks before it took too long)")
    CONTEXT.deadline = min(now + CONTEXT.limits.test_seconds, CONTEXT.ends)
    for session in CONTEXT.sessions.values():
        session.start_test(CONTEXT.deadline - now)


@pytest.fixture(scope="session")
def ref() -> Reference:
    """The reference modules, in this (the grading) process only."""
    return load_reference()


def _milestone_fixture(milestone: str):
    @pytest.fixture(name=milestone)
    def session() -> Session:
        """The submission as seen by this milestone's worker."""
        return CONTEXT.session(milestone)
    return session


# One fixture per milestone id (m1, m2, ..., lesson): pytest finds them as module attributes.
globals().update({m: _milestone_fixture(m) for m in MILESTONES})
