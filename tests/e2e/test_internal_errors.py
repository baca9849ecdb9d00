"""The grader's own failures are never the student's: planted faults are internal errors that cost no point.

A copy of the kit gets two planted faults: one in a probe that runs in the worker (the gradient
probe of ``input_grad``), one in a comparison that runs in the grading process (batch
independence). The reference, graded by that copy, must keep every other point, with the two
kinds of check reported as internal errors in the text (traceback with ``-v``), JSON and
Gradescope renderings, and ``grade`` exiting 1 (the grader failed), as documented.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import REPO, SOLUTIONS, checks_in_one_process

pytestmark = pytest.mark.slow  # every test here grades whole submissions

PLANTED = {
    # (file, text to find, text to put before it): each fault raises inside the grader's own code
    "worker": (
        "grader/sandbox/worker/ops_probes.py",
        '            module = self.handles[req["handle"]]\n            x = self.value',
        "            [][0]  # planted fault\n",
    ),
    "grading process": (
        "grader/suites/causality.py",
        "    mixed = torch.cat([x[:1], other[1:]])\n",
        "    None + 1  # planted fault\n",
    ),
}
GRADIENT = "the gradient of the logits at t with respect to later token embeddings is exactly 0"
BATCH = "batch_independent"


@pytest.fixture(scope="module")
def faulty_kit(tmp_path_factory) -> Path:
    """The grader and the reference, copied, with both faults planted."""
    kit = tmp_path_factory.mktemp("kit")
    shutil.copytree(REPO / "grader", kit / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(SOLUTIONS, kit / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
    for file, anchor, fault in PLANTED.values():
        path = kit / file
        text = path.read_text()
        assert text.count(anchor) == 1, f"{file} changed: re-anchor the planted fault"
        path.write_text(text.replace(anchor, fault + anchor))
    return kit


@pytest.fixture(scope="module")
def outputs(faulty_kit, tmp_path_factory) -> dict[str, str]:
    """The reference graded on m2 by the faulty copy (python in its folder imports the copy's grader), in each
    format: `grade check` three times in one process of the copy's (helpers.checks_in_one_process)."""
    out = tmp_path_factory.mktemp("out")
    formats = ("json", "gradescope", "text")
    checks = [
        [str(SOLUTIONS), "-m", "m2", "--format", fmt, "-o", str(out / fmt), *(["-v"] if fmt == "text" else [])]
        for fmt in formats
    ]
    results = {}
    for fmt, run in zip(formats, checks_in_one_process(faulty_kit, *checks), strict=True):
        assert run.returncode == 1, f"grade should exit 1 when the grader failed:\n{run.stderr}"
        assert "failed inside the grader" in run.stderr
        results[fmt] = (out / fmt).read_text()
    return results


def test_the_copy_runs_its_own_planted_code(faulty_kit, outputs):
    """Guard: the faults did fire (otherwise the tests below would prove nothing)."""
    report = json.loads(outputs["json"])
    assert report["set_aside"]["internal_errors"] >= 2, report["set_aside"]


def test_json_marks_internal_errors_and_they_cost_nothing(outputs):
    report = json.loads(outputs["json"])
    (m2,) = report["milestones"]
    internal = [c for c in m2["checks"] if c["internal_error"]]
    names = " | ".join(c["name"] for c in internal)
    assert GRADIENT in names and BATCH in names, names
    assert all(not c["counted"] and c["traceback"] for c in internal)
    assert all("the grader itself failed" in c["message"] and "not your code" in c["message"] for c in internal)
    assert not any("your code raised" in c["message"] for c in internal)
    counted = [c for c in m2["checks"] if c["counted"]]
    assert all(c["passed"] for c in counted), [c["message"] for c in counted if not c["passed"]]
    assert m2["score"] == m2["max_score"] == pytest.approx(sum(c["max_score"] for c in counted), abs=0.01)
    assert m2["max_score"] > 0
    assert report["score"] == report["max_score"]
    assert report["set_aside"]["points"] == pytest.approx(sum(c["max_score"] for c in internal), abs=0.01)


def test_worker_fault_carries_the_workers_traceback(outputs):
    report = json.loads(outputs["json"])
    gradient = next(c for m in report["milestones"] for c in m["checks"] if c["name"].startswith(GRADIENT))
    assert "a probe in the worker (IndexError" in gradient["message"]
    assert "request_handler.py" in gradient["traceback"] and "op_input_grad" in gradient["traceback"]
    assert "ops_probes.py" in gradient["traceback"]
    batch = next(c for m in report["milestones"] for c in m["checks"] if BATCH in c["name"])
    assert "TypeError" in batch["message"] and "causality.py" in batch["traceback"]


def test_text_shows_them_as_not_counted_with_the_traceback(outputs):
    text = outputs["text"]
    assert "not counted" in text and "failed inside the grader" in text
    assert "the grader's traceback:" in text and "op_input_grad" in text
    assert "✗" not in text  # nothing is reported as the student's failure


def test_gradescope_gives_them_no_weight(outputs):
    results = json.loads(outputs["gradescope"])
    aside = [t for t in results["tests"] if "not counted" in t["name"]]
    assert len(aside) >= 2 and all(t["score"] == t["max_score"] == 0 and "status" not in t for t in aside)
    assert all(t.get("status") == "passed" for t in results["tests"] if t not in aside)
    assert results["score"] == pytest.approx(sum(t["max_score"] for t in results["tests"]), abs=0.01)
    assert "failed inside the grader" in results["output"]
