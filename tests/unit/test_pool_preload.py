"""What a pool of grading processes loads once, before it forks them (grader/batch/run.py's ``pool_context``)."""

from __future__ import annotations

import multiprocessing

import pytest

from grader.batch import run
from grader.milestones import GRADABLE

pytestmark = pytest.mark.skipif(
    "forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork server here: the pool is spawned"
)


@pytest.fixture
def preloaded(monkeypatch) -> list[str]:
    """The modules ``pool_context`` asks Python's fork server to load; no fork server is started."""
    modules: list[str] = []
    context = multiprocessing.get_context("forkserver")
    monkeypatch.setattr(context, "set_forkserver_preload", modules.extend)
    monkeypatch.setattr(run, "_ignoring_interrupts", lambda start: None)
    monkeypatch.setattr("multiprocessing.resource_tracker.ensure_running", lambda: None)
    return modules


def test_a_batch_of_milestones_that_train_nothing_does_not_load_dynamo(preloaded):
    """m1 and m4 grade on the grading side without torch._dynamo (1.7 CPU s to load); the grader still is."""
    assert not GRADABLE["m1"].preload and not GRADABLE["m4"].preload
    run.pool_context(["m1", "m4"])
    assert "grader.runner" in preloaded
    assert "torch._dynamo" not in preloaded, preloaded


@pytest.mark.parametrize("milestones", [["m3"], None], ids=["m3", "every milestone"])
def test_a_batch_that_trains_loads_dynamo_once_for_all_its_processes(preloaded, milestones):
    """A cold cache's reference run trains on the grading side: loaded in the pool's fork server, not in each."""
    run.pool_context(*([milestones] if milestones else []))
    assert "torch._dynamo" in preloaded, preloaded


def test_a_batch_given_an_executor_starts_no_fork_server_of_its_own(monkeypatch, tmp_path):
    """A cluster's executor (`grade batch --scheduler`) runs the gradings: this process starts no fork server, torch
    preloaded, for a pool it does not make (it would outlive the batch, unstopped)."""
    from grader.batch.discover import FoundSubmission
    from grader.batch.gradebook import Gradebook
    from grader.sandbox.client import Limits
    from helpers import InThisProcess

    asked: list = []
    monkeypatch.setattr(run, "pool_context", lambda *milestones: asked.append(milestones))
    monkeypatch.setattr(run, "grade_one", lambda *args, **options: {"error": "graded elsewhere"})
    (tmp_path / "ada").mkdir()
    (tmp_path / "ada" / "m1_attention.py").write_text("")
    book = Gradebook(tmp_path / "grades.sqlite")
    found = [FoundSubmission("ada", tmp_path / "ada")]
    run.grade_all(found, book, ["m1"], Limits(), workers=2, executor=InThisProcess())
    assert not asked, "a fork server was started for a pool the batch does not make"
    assert [(r["student"], r["error"]) for r in book.rows()] == [("ada", "graded elsewhere")]
