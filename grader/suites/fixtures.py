"""Fixtures for the suites (hidden and public): ``GradingPlugin``, a pytest plugin the runner creates for
one submission and hands to ``pytest.main(plugins=[...])``.

The plugin owns the submission's ``GradingContext`` and provides one fixture per exercise that
``grader/milestones.py`` declares, named by its id (``m1``, ``m2``, ..., ``lmbudget``: that milestone's
``MilestoneView``; made from the declaration, never written out here), ``ref`` (the reference),
``variant`` and ``grading_context``. Nothing here imports or runs student code, which lives in worker processes behind
``MilestoneView`` objects.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from grader.milestones import GRADABLE
from grader.reference import Reference, load_reference
from grader.sandbox.client import ForkServer, Limits
from grader.sandbox.session import MilestoneView, NotebookRun, SharedWorker
from grader.variants import LESSON, Variant


@dataclass
class GradingContext:
    """One submission's grading: its workers, one view per milestone, and the time budgets."""

    server: ForkServer
    submission: Path
    limits: Limits
    views: dict[str, MilestoneView] = field(default_factory=dict)
    workers: dict[tuple[str, ...], SharedWorker] = field(default_factory=dict)  # by the files they trust
    notebook: NotebookRun = field(default_factory=NotebookRun)  # a notebook's cells: what its workers learnt
    deadline: float = 0.0
    ends: float = float("inf")  # the whole submission's time limit, when there is one
    variant: Variant = LESSON  # the student's numbers in a paper's questions (grader/variants.py)
    # A paper's rules by part (grader/paper/config.py RULES); a milestone not named: the rules its suite
    # applies by default (the lesson's contract).
    rules: dict[str, frozenset[str]] = field(default_factory=dict)

    def rules_for(self, milestone: str) -> frozenset[str] | None:
        """The rules in force for ``milestone`` by name; None: every rule its suite applies."""
        return self.rules.get(milestone)

    def view(self, milestone: str) -> MilestoneView:
        if milestone not in self.views:
            m = GRADABLE[milestone]
            if m.trusted not in self.workers:
                self.workers[m.trusted] = SharedWorker(self.server, self.submission, m.trusted, self.notebook)
            self.views[milestone] = MilestoneView(self.workers[m.trusted], m.modules)
        view = self.views[milestone]
        view.start_test(self.deadline - time.monotonic())
        return view

    def start_test(self) -> None:
        """A test begins: it gets its own time budget, shared by all its calls into the worker, within the
        submission's."""
        now = time.monotonic()
        if now >= self.ends:
            pytest.fail(
                f"not run: this submission used up its time limit of {self.limits.submission_seconds:g} s "
                "before this check (the checks before it took too long)"
            )
        self.deadline = min(now + self.limits.test_seconds, self.ends)
        for view in self.views.values():
            view.start_test(self.deadline - now)

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close()


CONTEXT_KEY = pytest.StashKey[GradingContext]()  # where the plugin puts its context in pytest's config


class GradingPlugin:
    """The suites' fixtures for one submission (a pytest plugin: pass an instance to ``pytest.main``)."""

    def __init__(self, context: GradingContext):
        self.context = context

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[CONTEXT_KEY] = self.context  # for the session-wide fixtures, which pytest binds to the class

    @pytest.fixture(autouse=True)
    def _time_budget(self) -> None:
        """Each test gets its own time budget (see ``GradingContext.start_test``)."""
        self.context.start_test()

    @pytest.fixture(scope="session")
    @classmethod
    def grading_context(cls, request: pytest.FixtureRequest) -> GradingContext:
        """For a fixture of wider scope than one test, which cannot use the milestone fixtures."""
        return request.config.stash[CONTEXT_KEY]

    @pytest.fixture(scope="session")
    @classmethod
    def variant(cls, request: pytest.FixtureRequest) -> Variant:
        """The student's variant: the numbers their questions were asked with (the lesson's without one)."""
        return request.config.stash[CONTEXT_KEY].variant

    @pytest.fixture(scope="session")
    @classmethod
    def ref(cls) -> Reference:
        """The reference modules, in this (the grading) process only."""
        return load_reference()


# Names no exercise id may take: the plugin's own fixtures and attributes, and pytest's ``request``.
TAKEN = frozenset({*(name for name in vars(GradingPlugin) if not name.startswith("__")), "context", "request"})


def _view_fixture(milestone: str) -> Any:
    """The fixture named ``milestone``: the submission as seen by that milestone's worker."""

    def view(self: GradingPlugin) -> MilestoneView:
        return self.context.view(milestone)

    view.__name__ = view.__qualname__ = milestone
    view.__doc__ = f"The submission as {milestone}'s worker sees it (grader/milestones.py declares {milestone})."
    return pytest.fixture(name=milestone)(view)


# One fixture per declared milestone or metric task (grader.milestones.GRADABLE), made here from the declaration.
for _id in GRADABLE:
    if not _id.isidentifier() or _id in TAKEN:
        raise ValueError(f"exercise id {_id!r} cannot name a fixture: {', '.join(sorted(TAKEN))} are taken")
    setattr(GradingPlugin, _id, _view_fixture(_id))
