"""Each buggy variant loses points in its own milestone only, for the right reason; each correct one scores full.

A variant is graded on the milestones that import a file it changes; that no other
milestone reads those files is proven once per milestone by the isolation test below.
"""
import pytest

from corpus import BUGGY, CORRECT
from grader.milestones import MILESTONES as SPECS
from grader.milestones import STUDENT_MODULES
from helpers import MILESTONES, Variant, explain


def graded_on(graded, variant: Variant):
    return graded(variant, *(arg for m in variant.affected() for arg in ("-m", m)))


@pytest.mark.parametrize("milestone", MILESTONES)
def test_milestone_reads_only_its_own_files(graded, milestone):
    """With every other file of the submission broken, a milestone still scores full marks."""
    broken = {f"{name}.py": 'raise RuntimeError("broken on purpose")\n'
              for name in STUDENT_MODULES if name not in SPECS[milestone].modules}
    result = graded(Variant(f"only-{milestone}", files=broken), "-m", milestone)
    assert result.returncode == 0 and result.full(milestone), explain(result)


@pytest.mark.parametrize("variant", BUGGY, ids=lambda v: f"{v.milestone}-{v.name}")
def test_buggy_variant_loses_points_only_in_its_milestone(graded, variant):
    result = graded_on(graded, variant)
    assert result.returncode == 0, explain(result)
    docked = not result.full(variant.milestone)
    assert docked, f"{variant.milestone} kept full marks:\n{explain(result)}"
    others = [m for m in variant.affected() if m not in (variant.milestone, "lesson") and not result.full(m)]
    assert not others, f"also lost points in {others}:\n{explain(result)}"
    messages = list(dict.fromkeys(result.messages(variant.milestone)))
    named = any(variant.expect.lower() in m.lower() for m in messages)
    listing = "\n".join(messages)
    assert named, f"no failing {variant.milestone} message contains {variant.expect!r}:\n{explain(result)}\n{listing}"


@pytest.mark.parametrize("variant", CORRECT, ids=lambda v: v.name)
def test_correct_variant_scores_full_marks(graded, variant):
    result = graded_on(graded, variant)
    assert result.returncode == 0, explain(result)
    full = all(result.full(m) for m in variant.affected())
    assert full, explain(result)
