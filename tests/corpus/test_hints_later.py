"""The later exercises' hints name the cause a known bug has, and never one it does not have.

test_attention_hints.py does this for m1; here, for the bugs whose hints once named the wrong cause because two
causes give one number (at one size, in one probe) or because a hint was read off an error message alone. Every
failing message of the bug's milestone, hidden and public, is read: some must name the cause, none may name a
wrong one, and a bug of one cause may cost at most ``at_most`` checks.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from corpus import BUGGY
from helpers import Graded, Variant, explain, grade, grade_many

pytestmark = pytest.mark.slow  # every test here grades whole submissions

MASK_SHAPE_HINT = ("mask[:T, :T]", "pos(arange(T))")


@dataclass(frozen=True)
class Hints:
    bug: str  # the name of a corpus BUGGY variant
    hidden: tuple[str, ...]  # phrases some failing hidden message contains
    wrong: tuple[str, ...]  # phrases no failing message (hidden or public) may contain
    at_most: int | None = None  # failing hidden checks allowed: one cause, one check

    @property
    def variant(self) -> Variant:
        return next(v for v in BUGGY if v.name == self.bug)


CASES = [
    # a bug of every pass whose first token came out right was blamed on "the cache or the positions"
    Hints(
        "scores-over-sqrt-d",
        hidden=("divided by sqrt(d), the model's width",),
        wrong=("so the prompt pass works", "the cache or the positions of later steps are likely wrong"),
    ),
    # a cache kept between calls: the same call repeated tells it
    Hints("cache-in-a-default-argument", hidden=("outlives a call",), wrong=("so the prompt pass works",)),
    # at 32 heads in 8 groups, n_heads // n_groups gives what a missing factor 2 gives
    Hints("group-size-for-groups", hidden=("query heads per group",), wrong=("the factor 2 is missing",)),
    # at d = vocab_size = max_T = 1 the final LayerNorm's 2 d is the embeddings' vocab_size x d + max_T x d ...
    Hints(
        "no-final-layernorm",
        hidden=("the final LayerNorm (2 d) is missing",),
        wrong=("the embeddings (vocab_size x d and max_T x d) are missing",),
    ),
    # ... and one position too many (+d) is the head's vocab_size biases
    Hints("position-table-one-row-too-many", hidden=("one row too many",), wrong=("bias-free", "biases")),
    # the combination is blamed only when each filter alone is right
    Hints(
        "sampling-top-k-keeps-k-plus-1",
        hidden=("filter_logits(top_k=5) alone keeps",),
        wrong=("top-p used the probabilities", "top-p was skipped", "top-k was skipped", "filter each row on its own"),
    ),
    Hints(
        "sampling-top-p-drops-crossing-token",
        hidden=("filter_logits(top_p=0.75) alone keeps",),
        wrong=("filter each row on its own", "top-p was skipped", "top-k was skipped"),
    ),
    # int32 is an integer dtype: say .long(), in the one check that asks for torch.long
    Hints("sampling-int32-ids", hidden=("convert with .long()",), wrong=("token ids are integers",), at_most=1),
    # a size mismatch inside sample_next has nothing to do with a mask or a position table
    Hints(
        "sampling-inverse-cdf-without-a-column",
        hidden=("in sample_next, the logits and probabilities are (B, V)",),
        wrong=MASK_SHAPE_HINT,
    ),
    Hints(
        "m2-block-passes-layer-past",
        hidden=("graded with the grader's own m1", "forward(x) takes only x"),
        wrong=("check the signature against the exercise's docstring",),
    ),
]


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, tuple[Graded, Graded]]:
    """Each case's (hidden, public) reports on its milestone."""
    root = tmp_path_factory.mktemp("later-hints")
    folders = {c.bug: (c.variant.build(root / c.bug), c.variant.milestone) for c in CASES}
    hidden = grade_many([(folder, [str(ms)]) for folder, ms in folders.values()], root)
    return {
        bug: (report, grade(folder, "-m", str(ms), "--public"))
        for (bug, (folder, ms)), report in zip(folders.items(), hidden)
    }


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.bug)
def test_hints_name_the_real_cause_and_no_other(graded, case):
    milestone = str(case.variant.milestone)
    hidden, public = graded[case.bug]
    assert hidden.report and public.report, explain(hidden) + "\n" + explain(public)
    assert not hidden.full(milestone), explain(hidden)
    messages = {"hidden": hidden.messages(milestone), "public": public.messages(milestone)}
    listing = "\n".join(f"{kind}: {m[:400]}" for kind, ms in messages.items() for m in ms)
    for phrase in case.hidden:
        assert any(phrase in m for m in messages["hidden"]), f"no hidden message names {phrase!r}:\n{listing}"
    wrong = [(w, m[:300]) for ms in messages.values() for m in ms for w in case.wrong if w.lower() in m.lower()]
    assert not wrong, f"a wrong cause is named: {wrong[:3]}\n{listing}"
    if case.at_most is not None:
        assert len(messages["hidden"]) <= case.at_most, f"one cause failed {len(messages['hidden'])} checks:\n{listing}"
