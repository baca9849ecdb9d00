"""Fixtures for the hidden suites, registered as a pytest plugin by the runner.

The runner sets ``CONTEXT`` before pytest starts; nothing here imports or runs
student code, which lives in worker processes behind ``Session`` objects.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.milestones import MILESTONES
from grader.reference import load_reference
from grader.sandbox.client import Limits, Zygote
from grader.sandbox.session import Session


@dataclass
class GradingContext:
    zygote: Zygote
    submission: Path
    limits: Limits
    sessions: dict[str, Session] = field(default_factory=dict)
    deadline: float = 0.0

    def session(self, milestone: str) -> Session:
        if milestone not in self.sessions:
            m = MILESTONES[milestone]
            self.sessions[milestone] = Session(self.zygote, self.submission, m.modules, m.trusted)
        session = self.sessions[milestone]
        session.start_test(self.deadline - time.monotonic())
        return session

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()


CONTEXT: GradingContext | None = None


@pytest.fixture(autouse=True)
def _time_budget():
    """Each test gets its own time budget, shared by all its calls into the worker."""
    CONTEXT.deadline = time.monotonic() + CONTEXT.limits.test_seconds
    for session in CONTEXT.sessions.values():
        session.start_test(CONTEXT.limits.test_seconds)


@pytest.fixture(scope="session")
def ref() -> SimpleNamespace:
    """The reference modules, in this (the grading) process only."""
    return load_reference()


@pytest.fixture
def m1() -> Session:
    return CONTEXT.session("m1")


@pytest.fixture
def m2() -> Session:
    return CONTEXT.session("m2")


@pytest.fixture
def m3() -> Session:
    return CONTEXT.session("m3")


@pytest.fixture
def m4() -> Session:
    return CONTEXT.session("m4")


@pytest.fixture
def lesson() -> Session:
    return CONTEXT.session("lesson")


@pytest.fixture
def rng():
    """A seeded generator for test inputs, so every run grades the same inputs."""
    import torch
    return torch.Generator().manual_seed(1234)
