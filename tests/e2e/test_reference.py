"""The two fixed points: the reference scores full marks, the shipped stubs score 0 cleanly."""

import pytest

from grader.milestones import MILESTONES
from helpers import EXERCISES, explain, grade

pytestmark = pytest.mark.slow  # every test here grades whole submissions


def test_reference_scores_full_marks(reference):
    result = reference
    assert result.returncode == 0, explain(result)
    assert result.report["score"] == result.report["max_score"] > 0, explain(result)
    worth = {m["id"]: m["max_score"] for m in result.report["milestones"]}
    assert worth == {m.id: m.points for m in MILESTONES.values()}, "the points grader/milestones.py declares"


def test_stubs_score_zero_with_not_implemented_messages():
    result = grade(EXERCISES)
    assert result.returncode == 0, explain(result)
    assert result.report["score"] == 0, explain(result)
    for m in result.report["milestones"]:
        for check in m["checks"]:
            assert check["message"].startswith("not implemented yet"), (m["id"], check["name"], check["message"])
            assert "Traceback" not in check["message"]


def test_stub_checks_name_their_cases_and_point_at_the_question():
    """Each case of a parametrized check is named for itself (its case id, which the report records); an
    unanswered quiz question's message points at the question where both the file and the notebook show it."""
    result = grade(EXERCISES, "-m", "kvmemory", "-m", "quiz")
    assert result.returncode == 0, explain(result)
    checks = [c for m in result.report["milestones"] for c in m["checks"]]
    for check in checks:
        if check["case"]:
            assert check["name"].endswith(f" [{check['case']}]"), check
    kv_bytes = {c["case"]: c["name"] for c in checks if c["name"].startswith("kv_bytes is")}
    assert len(kv_bytes) == 4 and "Llama-2-7B" not in next(iter(kv_bytes.values())).split(" [")[0], kv_bytes
    for case in kv_bytes:
        assert ("latent" in case) == ("DeepSeek" in case) and ("GQA" in case) == ("70B" in case), kv_bytes
    (q1,) = (c for c in checks if c["name"].endswith(" [Q1]"))
    assert q1["message"].endswith("Q1 is still None (the question is in the comment just above it)"), q1
