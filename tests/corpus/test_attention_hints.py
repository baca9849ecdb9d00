"""m1's hints name the cause that a known bug reproduces, and never a cause the bug does not have.

test_corpus.py proves that each bug below loses m1 points with a message naming its cause. Here every failing
m1 message, of the hidden checks and of the public ones, is read: it must name no wrong cause (a mask or
diagonal hint for a softmax over the wrong axis, a scaling hint for an upper-triangular mask), and where a
known bug explains every failure (NaN included), every message must say so.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from corpus import core
from helpers import Graded, Variant, explain, grade, grade_many

pytestmark = pytest.mark.slow  # every test here grades whole submissions

MASK_HINTS = ("lower-triangular", "triu", "diagonal allowed", "is the diagonal masked", "leaks from the future")
SCALE_HINTS = ("sqrt(d_k)", "sqrt(d_head)", "unscaled")
SOFTMAX_HINTS = ("softmax runs over", "dim=-1", "dim=0", "dim=1", "dim=-3")


@dataclass(frozen=True)
class Hints:
    bug: str  # the name of a core.BUGGY variant
    hidden: tuple[str, ...]  # phrases some failing hidden message contains
    public: tuple[str, ...] | None  # the same for the public checks; None: the public checks all pass
    wrong: tuple[str, ...]  # phrases no failing message (hidden or public) may contain
    every: str = ""  # a phrase (lower case) every failing hidden message contains, in any case

    @property
    def variant(self) -> Variant:
        return next(v for v in core.BUGGY if v.name == self.bug)


CASES = [
    # the mask lets the future in: the public scaling check must not blame the scaling
    Hints(
        "m1-mask-triu",
        hidden=("upper-triangular (torch.triu)",),
        public=("lower-triangular, torch.tril",),
        wrong=(*SCALE_HINTS, "softmax runs over", "diagonal allowed", "arange(t)"),
    ),
    # NaN from a softmax over the batch or heads: named, and neither the diagonal nor a leak is blamed
    Hints(
        "m1-softmax-over-dim0",
        hidden=("(dim=0,", "batch dimension (dim=0)"),
        public=("over the keys, the last dimension (dim=-1)",),
        wrong=(*MASK_HINTS, *SCALE_HINTS),
        every="likely cause: the softmax runs over",
    ),
    Hints(
        "m1-softmax-over-dim-3",
        hidden=("(dim=-3)", "(dim=1, or -3)"),
        public=("Dimension out of range",),  # 2-D inputs have no dim -3: the error says so
        wrong=(*MASK_HINTS, *SCALE_HINTS),
    ),
    Hints(
        "m1-softmax-over-dim1",
        hidden=("(dim=-3)", "(dim=1, or -3)", "the wrong dimension"),
        # for the public checks' 2-D inputs dim 1 is the last: only the layer's own check sees the bug
        public=("a softmax over the wrong dimension",),
        wrong=(*MASK_HINTS, *SCALE_HINTS),
        every="likely cause: the softmax runs over",
    ),
    # divided by d_k: every failure says so, and no other scaling bug is blamed
    Hints(
        "m1-scores-divided-by-d_k",
        hidden=("divided by d_k, not sqrt(d_k)", "divided by d_head, not sqrt(d_head)"),
        public=("the scale is 1 / sqrt(d_k), not 1 / d_k",),
        wrong=(*MASK_HINTS, "softmax runs over", "unscaled", "not divided by", "not scaled by", "1/sqrt(d)"),
        every="likely cause: the scores are divided by d_",
    ),
    # a finite fill overpowered by scaled inputs: the leak is the fill's, not the mask's shape
    Hints(
        "m1-finite-fill-1e5",
        hidden=("float('-inf')", "overpower"),
        public=None,
        wrong=(
            "tril, not triu",
            "upper-triangular",
            "sliced to the input's length",
            "is the diagonal masked",
            "softmax runs over",
        ),
    ),
]


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, tuple[Graded, Graded]]:
    """Each case's (hidden, public) m1 reports: the hidden checks graded in one process, the public ones as a
    student's release runs them."""
    root = tmp_path_factory.mktemp("hints")
    folders = {c.bug: c.variant.build(root / c.bug) for c in CASES}
    hidden = grade_many([(folder, ["m1"]) for folder in folders.values()], root)
    return {
        bug: (report, grade(folder, "-m", "m1", "--public")) for (bug, folder), report in zip(folders.items(), hidden)
    }


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.bug)
def test_hints_name_the_real_cause_and_no_other(graded, case):
    hidden, public = graded[case.bug]
    assert hidden.report and public.report, explain(hidden) + "\n" + explain(public)
    assert not hidden.full("m1"), explain(hidden)
    messages = {"hidden": hidden.messages("m1"), "public": public.messages("m1")}
    listing = "\n".join(f"{kind}: {m}" for kind, ms in messages.items() for m in ms)

    for phrase in case.hidden:
        assert any(phrase in m for m in messages["hidden"]), f"no hidden message names {phrase!r}:\n{listing}"
    if case.public is None:
        assert public.full("m1"), explain(public)
    for phrase in case.public or ():
        assert any(phrase in m for m in messages["public"]), f"no public message names {phrase!r}:\n{listing}"
    wrong = [(w, m) for ms in messages.values() for m in ms for w in case.wrong if w.lower() in m.lower()]
    assert not wrong, f"a wrong cause is named: {wrong[:3]}\n{listing}"
    unexplained = [m for m in messages["hidden"] if case.every not in m.lower()]
    assert not unexplained, f"failures that do not say {case.every!r}: {unexplained}"
