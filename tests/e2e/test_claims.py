"""What a worker says is a claim: a submission that marks its own errors as the grader's, or answers
"the probe saw nothing", earns no more than the checks it really passes, out of the milestone's full points.

The request handler runs in the submission's process, so a submission can make every error come back marked as
the grader's fault, or replace a probe's answer. The grading side settles each such claim by running the same
checks on the reference in fresh workers (grader/runner.py ``settle_claims``): the grader's own faults, which
fail there too, stay set aside (tests/e2e/test_internal_errors.py); the rest count, at 0 points.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

import attacks as A
from helpers import Variant, batch_here, check_here, cli, grade

pytestmark = pytest.mark.slow  # every test here grades whole submissions


def submission(folder: Path, forgery: str) -> Path:
    """The reference with m1 replaced by the stub that writes causal_mask alone, ``forgery`` run at import."""
    Variant("only-causal-mask", files={A.M1: A.m1_stub_with_only_causal_mask(forgery)}).build(folder)
    return folder


@pytest.fixture(scope="module")
def honest_m1(tmp_path_factory) -> dict:
    """The same stub without the forgery: what its code really earns on m1."""
    report = grade(submission(tmp_path_factory.mktemp("honest") / "sub", ""), "-m", "m1").report
    (m1,) = report["milestones"]
    assert 0 < m1["score"] < m1["max_score"], "the stub with causal_mask alone should earn some, not all, points"
    return m1


@pytest.fixture(scope="module")
def full_m1(reference) -> float:
    return reference.milestone("m1")["max_score"]


def test_forged_grader_faults_earn_only_what_the_code_passes(tmp_path, honest_m1, full_m1):
    """Every error marked as the grader's: the same points as without the forgery, out of m1's full points."""
    result = grade(submission(tmp_path / "forged", A.FORGE_GRADER_FAULTS), "-m", "m1")
    (m1,) = result.report["milestones"]
    assert (m1["score"], m1["max_score"]) == (honest_m1["score"], full_m1), (m1["score"], m1["max_score"])
    assert result.report["set_aside"]["checks"] == 0, result.report["set_aside"]
    settled = [c for c in m1["checks"] if c["rechecked"] == "submission"]
    assert settled and all(c["counted"] and not c["passed"] and c["verdict"] == "runtime error" for c in settled)
    assert all("run on the reference solution in a fresh sandbox, completes" in c["message"] for c in settled)


def test_forged_faults_in_gradescope_results(tmp_path, honest_m1, full_m1):
    """Gradescope's results.json: the forged checks are failed tests with their points, not 0-point notes."""
    out = tmp_path / "results.json"
    folder = submission(tmp_path / "forged", A.FORGE_GRADER_FAULTS)
    proc = check_here(str(folder), "-m", "m1", "--format", "gradescope", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert results["score"] == pytest.approx(honest_m1["score"], abs=0.01)
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(full_m1, abs=0.01)


def test_forged_faults_in_a_batch(tmp_path, honest_m1, full_m1):
    """`grade batch`'s gradebook, which the contest and the exports read: the same points, the full stake."""
    submission(tmp_path / "class" / "forger", A.FORGE_GRADER_FAULTS)
    proc = batch_here(str(tmp_path / "class"), "--workers", "1", "-m", "m1", "--db", str(tmp_path / "g.sqlite"))
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(tmp_path / "g.sqlite") as con:
        score, top = con.execute("SELECT score, max_score FROM submissions WHERE student = 'forger'").fetchone()
        aside = con.execute("SELECT COUNT(*) FROM checks WHERE NOT counted").fetchone()[0]
    assert (score, top, aside) == (pytest.approx(honest_m1["score"], abs=0.01), pytest.approx(full_m1), 0)
    report = cli("report", str(tmp_path / "g.sqlite"))
    assert "reported a grader fault that the reference does not have" in report.stdout, report.stdout
    assert "forger (" in report.stdout, report.stdout


M2_IMPORT = "import torch.nn as nn\n"
# TinyGPT's forward with the next token's embedding mixed in: a leak every causal check must catch
M2_FORWARD = "        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))\n"
M2_LEAK = M2_FORWARD + "        x = x + torch.roll(self.tok(idx), -1, dims=1)\n"


def gradient_check(folder: Path) -> dict:
    report = grade(folder, "-m", "m2").report
    assert report["set_aside"]["checks"] == 0, report["set_aside"]
    (m2,) = report["milestones"]
    return next(c for c in m2["checks"] if c["name"].startswith("the gradient of the logits"))


@pytest.mark.parametrize("leaks", [False, True], ids=["correct", "leaky"])
def test_a_forged_unobserved_gradient_is_still_decided(tmp_path, leaks):
    """TinyGPT's input-gradient probe answers "saw nothing": the check is decided from its outputs instead."""
    edits = [(M2_IMPORT, M2_IMPORT + A.FORGE_UNOBSERVED.strip() + "\n")] + ([(M2_FORWARD, M2_LEAK)] if leaks else [])
    check = gradient_check(Variant("unobserved", edits={A.M2: edits}).build(tmp_path / "m2"))
    assert check["counted"] and check["passed"] is not leaks, check
    if leaks:
        assert "depends on a later position" in check["message"] or "changes by" in check["message"], check


def test_forged_faults_in_a_contest(contest, honest_m1, full_m1):
    """Uploaded to the contest server: the task's points are the share of m1's full points the code passes."""
    from fastapi.testclient import TestClient

    from grader.contest.web.app import create_app
    from helpers import ContestClock, auth, upload

    folder = contest(title="Claims", students=("mallory",))
    forged = A.m1_stub_with_only_causal_mask(A.FORGE_GRADER_FAULTS).encode()
    with TestClient(create_app(folder, ContestClock(minutes=5))) as client:
        sid = upload(client, folder, "mallory", "m1", [(A.M1, forged)]).json()["id"]
        for _ in range(400):
            entry = client.get(f"/api/submissions/{sid}", headers=auth(folder, "mallory")).json()
            if entry["status"] != "queued":
                break
            time.sleep(0.3)
    task = entry["feedback"]["tasks"][0]
    assert entry["status"] == "graded", entry
    assert task["score"] == pytest.approx(30 * honest_m1["score"] / full_m1, abs=0.01), task["score"]
