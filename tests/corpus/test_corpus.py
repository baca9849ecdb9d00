"""Each buggy variant loses points in its own milestone only, for the right reason; each correct one scores full.

A variant is graded on the milestones that import a file it changes; that no other
milestone reads those files is proven once per milestone by the isolation test below.
All selected cases are graded by one grader process (see ``corpus_reports``).
"""

import functools

import pytest

from corpus import BUGGY, CORRECT
from grader.milestones import MILESTONES as SPECS
from grader.milestones import STUDENT_MODULES
from helpers import MILESTONES, Graded, Variant, explain, grade_many

pytestmark = pytest.mark.slow  # every test here grades whole submissions


@functools.cache
def isolated(milestone: str) -> Variant:
    """The reference with every file but the milestone's own replaced by one that raises at import."""
    broken = {
        f"{name}.py": 'raise RuntimeError("broken on purpose")\n'
        for name in STUDENT_MODULES
        if name not in SPECS[milestone].modules
    }
    return Variant(f"only-{milestone}", files=broken)


def case(params: dict) -> tuple[Variant, list[str]]:
    """A test's submission, and the milestones to grade it on: those it affects, but for a bug the ``lesson``
    group, which spans the four core files: a core bug may cost points there too, so no test reads it."""
    if "variant" in params:
        variant = params["variant"]
        if variant.milestone is None:
            return variant, variant.affected()
        return variant, [m for m in variant.affected() if m != "lesson" or m == variant.milestone]
    return isolated(params["milestone"]), [params["milestone"]]


@pytest.fixture(scope="session")
def corpus_reports(request, tmp_path_factory) -> dict[int, Graded]:
    """Every selected case of this file, graded in one go: one torch import and one fork server for all.

    The verdicts are those of ``grade check`` (same runner, suites and sandbox); the command line
    itself is tested in test_cli.py, test_reference.py and test_attacks.py.
    """
    cases = [
        case(item.callspec.params)
        for item in request.session.items
        if item.path.name == "test_corpus.py" and hasattr(item, "callspec")
    ]
    root = tmp_path_factory.mktemp("corpus")
    jobs = [(v.build(root / f"submission{i}"), milestones) for i, (v, milestones) in enumerate(cases)]
    return {id(v): graded for (v, _), graded in zip(cases, grade_many(jobs, root))}


@pytest.mark.parametrize("milestone", MILESTONES)
def test_milestone_reads_only_its_own_files(corpus_reports, milestone):
    """With every other file of the submission broken, a milestone still scores full marks."""
    result = corpus_reports[id(isolated(milestone))]
    assert result.report and result.full(milestone), explain(result)


@pytest.mark.parametrize("variant", BUGGY, ids=lambda v: f"{v.milestone}-{v.name}")
def test_buggy_variant_loses_points_only_in_its_milestone(corpus_reports, variant):
    result = corpus_reports[id(variant)]
    assert result.report, explain(result)
    docked = not result.full(variant.milestone)
    assert docked, f"{variant.milestone} kept full marks:\n{explain(result)}"
    others = [m for m in variant.affected() if m not in (variant.milestone, "lesson") and not result.full(m)]
    assert not others, f"also lost points in {others}:\n{explain(result)}"
    messages = list(dict.fromkeys(result.messages(variant.milestone)))
    named = any(variant.expect.lower() in m.lower() for m in messages)
    listing = "\n".join(messages)
    assert named, f"no failing {variant.milestone} message contains {variant.expect!r}:\n{explain(result)}\n{listing}"
    if variant.first:
        assert variant.expect.lower() in messages[0].lower(), (
            f"the first failing {variant.milestone} message does not contain {variant.expect!r}:\n{listing}"
        )
    if variant.lost is not None:
        graded = result.milestone(variant.milestone)
        lost = graded["max_score"] - graded["score"]
        assert lost == pytest.approx(variant.lost, abs=0.02), (
            f"{variant.milestone} lost {lost:.2f} points, expected {variant.lost:.2f}:\n{listing}"
        )


@pytest.mark.parametrize("variant", CORRECT, ids=lambda v: v.name)
def test_correct_variant_scores_full_marks(corpus_reports, variant):
    result = corpus_reports[id(variant)]
    assert result.report, explain(result)
    full = all(result.full(m) for m in variant.affected())
    assert full, explain(result)
