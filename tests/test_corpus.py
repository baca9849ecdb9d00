"""Each buggy variant loses points in its own milestone only, for the right reason; each correct one scores full."""
import pytest
from corpus import BUGGY, CORRECT

from helpers import MILESTONES, explain


@pytest.mark.parametrize("variant", BUGGY, ids=lambda v: v.name)
def test_buggy_variant_loses_points_only_in_its_milestone(graded, variant):
    result = graded(variant)
    assert result.returncode == 0, explain(result)
    docked = not result.full(variant.milestone)
    assert docked, f"{variant.milestone} kept full marks:\n{explain(result)}"
    others = [m for m in MILESTONES if m != variant.milestone and not result.full(m)]
    assert not others, f"also lost points in {others}:\n{explain(result)}"
    messages = list(dict.fromkeys(result.messages(variant.milestone)))
    named = any(variant.expect.lower() in m.lower() for m in messages)
    listing = "\n".join(messages)
    assert named, f"no failing {variant.milestone} message contains {variant.expect!r}:\n{explain(result)}\n{listing}"


@pytest.mark.parametrize("variant", CORRECT, ids=lambda v: v.name)
def test_correct_variant_scores_full_marks(graded, variant):
    result = graded(variant)
    assert result.returncode == 0, explain(result)
    full = all(result.full(m) for m in (*MILESTONES, "lesson"))
    assert full, explain(result)
