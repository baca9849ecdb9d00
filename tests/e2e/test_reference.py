"""The two fixed points: the reference scores full marks, the shipped stubs score 0 cleanly."""

import pytest

from helpers import EXERCISES, SOLUTIONS, explain, grade

pytestmark = pytest.mark.slow  # every test here grades whole submissions


def test_reference_scores_full_marks():
    result = grade(SOLUTIONS)
    assert result.returncode == 0, explain(result)
    assert result.report["score"] == result.report["max_score"] > 0, explain(result)


def test_stubs_score_zero_with_not_implemented_messages():
    result = grade(EXERCISES)
    assert result.returncode == 0, explain(result)
    assert result.report["score"] == 0, explain(result)
    for m in result.report["milestones"]:
        for check in m["checks"]:
            assert check["message"].startswith("not implemented yet"), (m["id"], check["name"], check["message"])
            assert "Traceback" not in check["message"]
