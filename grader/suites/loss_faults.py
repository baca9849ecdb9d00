"""What per-position losses, and the passes of the model that made them, say is wrong: concepts' checks, hidden
and public, name a mistake by what the code did rather than by a value it happens to give.

- The passes: the worker counts each call's input on the model's token table (``count_positions``), which every
  forward calls once on its (B, t) ids before anything can fail on their length (the position table is looked up
  after it). The whole sequence as the one pass's input, or a prefix that holds its own target, shows there,
  even where the run then ends in an error one token past the model's context.
- The values: a loss below 0, which no cross-entropy is (nll_loss on raw logits), and losses all 0 (a softmax
  over an axis of one element).

The counter runs in the worker, beside the submission, which could forge it; so the counts only ever fail code
that skips the work a function names (one pass passed off as one per prefix, say), or name why code that already
fails fails, never pass code: the values are checked on their own first, against the reference's, and no count
makes a wrong value right. Code that forges the counts can skip the work unseen: nothing a process the
submission shares reports can stop that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from grader.sandbox.client import StudentError
from grader.suites import checks

FED_AT = "tok"  # the submodule whose calls are counted: the token table, on the (B, t) ids


def fed(counter: Any, at: int = -1) -> list[int]:
    """Each call's length (axis ``at`` of its input) as the counter saw it, in the order of the calls."""
    shapes, calls = counter.attr("shapes"), counter.attr("calls")
    if type(shapes) is not list or type(calls) is not int or len(shapes) > calls:
        checks.fail("what the grader counted of the model's calls was tampered with")
    if not all(type(shape) is list and all(type(n) is int for n in shape) for shape in shapes):
        checks.fail("what the grader counted of the model's calls was tampered with")
    return [shape[at] if len(shape) >= -at else 0 for shape in shapes]


def runs(lengths: list[int]) -> str:
    """The passes the counter saw, in words: "one pass, on 8 tokens", "8 passes, on 1, 2, ... tokens"."""
    if not lengths:
        return (
            "no pass (it counts the calls of the model it hands you: run that model, model(x), not a copy of it "
            "nor its weights by hand)"
        )
    shown = ", ".join(map(str, lengths[:10])) + (", ..." if len(lengths) > 10 else "")
    return f"one pass, on {shown} tokens" if len(lengths) == 1 else f"{len(lengths)} passes, on {shown} tokens"


def fed_fault(lengths: list[int], length: int, max_T: int, one_pass: bool) -> str | None:
    """What the passes the model was fed (``lengths``, for a sequence of ``length`` tokens and a model whose
    context is ``max_T``) say is wrong, in words, or None: the whole sequence as the input of teacher forcing's
    one pass (``one_pass``), a prefix that holds its own target (one pass per prefix)."""
    if length not in lengths:  # no pass either function needs is on the whole sequence
        return None
    past = (
        f"; {length} tokens are also more than the model's context of {max_T}, so its position table has no row "
        "for the last one"
        if length > max_T
        else ""
    )
    if one_pass:
        return (
            f"the model was fed the whole sequence, {length} tokens (the grader saw {runs(lengths)}): the input "
            f"is seq[:-1], {length - 1} tokens, since the last token is only ever a target, never an input{past}"
        )
    return (
        f"a prefix holds the token it must predict (the grader saw {runs(lengths)}): entry t runs the model on "
        f"seq[:t + 1], t + 1 tokens, and scores its last position against seq[t + 1], the token after the prefix, "
        f"so the passes run on 1 to {length - 1} tokens and never on the whole sequence{past}"
    )


def called(view: Any, function: str, args: tuple, what: str, fault: Callable[[], str | None]) -> Any:
    """``function(*args)`` in the worker (``view``: the milestone's); where the student's code raises, ``fault()``
    (what the passes say) names why, else the error stands as it is."""
    try:
        return view.call(function, *args, grad=False)
    except StudentError as e:
        cause = checks.likely_cause(fault)
        if not cause:
            raise
        raised = e.type
    # failed outside the handler: a failure raised inside it carries the student's error as its context, and is
    # then reported as a runtime error rather than as the wrong answer it names
    checks.fail(f"{what} raised {raised}: {cause}")


def below_zero(got: torch.Tensor) -> str | None:
    """A loss below 0, which no cross-entropy is, whatever else is wrong: in words, or None."""
    if not (got < -1e-6).any():
        return None
    t = int(got.argmin())
    return (
        f"entry {t} is {got[t].item():.4f}, a loss below 0, which a cross-entropy, -log p with p at most 1, never "
        "is: F.nll_loss takes LOG-probabilities, and on raw logits it gives minus each target's logit. Take "
        "log_softmax over the vocabulary (the last axis) first, or call F.cross_entropy on the logits"
    )


def all_zero(got: torch.Tensor) -> str | None:
    """Every loss 0, a softmax over an axis of one element: in words, or None."""
    if (got.abs() < 1e-6).all():
        return (
            "every loss is 0: the softmax ran over an axis of size 1 (the batch, or a single position), where "
            "each probability is 1. Normalise over the vocabulary, the last axis: log_softmax(logits, dim=-1)"
        )
    return None
