"""What a generated sequence of the wrong length says about the loop that made it.

Read from the result itself (does it start with the prompt, how many columns follow it, how many per step, which
ids), not from a list of known bugs: a loop that counts max_new as the whole length leaves the prompt followed by
max_new - t new tokens; a step that appends one id per vocabulary entry (an argmax over the wrong axis) leaves
max_new * V. Shared by m4's ``generate`` and sampling's ``generate_sampled``, hidden and public checks alike.
``greedy_cause`` asks the student's model itself whether a wrong greedy sequence is generate's fault or the model's.
"""

from __future__ import annotations

from typing import Any

import torch

from grader.suites import wiring


def wrong_length(out: torch.Tensor, start: torch.Tensor, max_new: int, vocab: int, greedy: bool = True) -> str | None:
    """Why ``out``, a generation's result for the prompt ``start`` (B, t), is not (B, t + max_new), in plain
    words; None where its shape is right or says nothing about the cause. ``vocab`` is the model's V; ``greedy``:
    each step takes an argmax (m4), so a step of V ids is read as an argmax over the wrong axis."""
    B, t = start.shape
    if out.dim() != 2 or out.shape[0] != B or out.shape[1] == t + max_new:
        return None
    cols = out.shape[1]
    if cols < t or not torch.equal(out[:, :t].to(start.dtype), start):
        if cols == max_new > 0:
            return (
                f"those are only the {tokens(max_new, 'new ')}: return the prompt followed by the new tokens, "
                "shape (B, t + max_new)"
            )
        return None
    new = cols - t
    if max_new > t and new == max_new - t:
        return (
            f"it holds the prompt's {tokens(t)} and {tokens(new, 'new ')}, max_new = {max_new} columns in all. "
            "max_new is the number of NEW tokens appended, not the length of the result: run the step max_new "
            f"times, so that the result has t + max_new = {t + max_new} columns"
        )
    if new == 0 and max_new > 0:
        return (
            "it is the prompt alone, with no new token: max_new is the number of NEW tokens appended (the result "
            "has t + max_new columns), so the step runs max_new times whatever the prompt's length"
        )
    if max_new > 0 and new % max_new == 0 and (width := new // max_new) > 1:
        return per_step(out[:, t:], B, max_new, width, vocab if greedy else None)
    return None


def per_step(new: torch.Tensor, B: int, max_new: int, width: int, vocab: int | None) -> str:
    """The cause of ``width`` ids appended at each of ``max_new`` steps where one id per row belongs (``vocab``:
    the V of a greedy step, None for a step that draws)."""
    steps = f"each of the {max_new} steps appended {width} ids"
    one = "where a step appends one id per row, a (B, 1) column"
    if width != vocab:
        return f"{steps}, {one}: make the next token (B, 1), one id per row, before concatenating on dim 1"
    if bool((new < B).all()):
        # Every id is below B, a row's index: what an argmax over the batch axis gives, one per vocabulary entry.
        return (
            f"{steps}, one per vocabulary entry (V = {vocab}), {one}; and every id is below B = {B}, a row's "
            "index: the argmax ran over the batch axis (dim 0). The greedy choice is the argmax over the "
            "vocabulary, dim=-1: logits[:, -1, :].argmax(dim=-1, keepdim=True) is (B, 1)"
        )
    return (
        f"{steps}, one per vocabulary entry (V = {vocab}), {one}: the argmax ran over another axis. The greedy "
        "choice is the argmax over the vocabulary, dim=-1, one id per row"
    )


def tokens(n: int, kind: str = "") -> str:
    """'1 new token', '3 new tokens'."""
    return f"{n} {kind}token{'s' * (n != 1)}"


def greedy_cause(view: Any, model: Any, got: torch.Tensor, t: int, context: int) -> str:
    """Why a greedy sequence ``got`` (B, t + new) is not the lesson's: the first token that is not the model's own
    argmax from the (at most ``context``) tokens before it, where there is one (then generate is at fault); else the
    model, read part by part by ``wiring.earlier_fault`` on ``view``, the check's milestone view."""
    for i in range(t, got.shape[1]):
        want = model(got[:, max(0, i - context) : i], grad=False)[:, -1].argmax(-1)
        if not torch.equal(got[:, i], want):
            b = int((got[:, i] != want).nonzero()[0])
            return (
                f"your model, given the tokens before position {i}, predicts {int(want[b])} there, and generate "
                f"appended {int(got[b, i])}: each new token is the argmax of the last position's logits, over the "
                "vocabulary, with the input cropped to its last model.T tokens"
            )
    return "each token is your model's own greedy choice, so generate is right: " + (
        wiring.earlier_fault(view) or "your model's seeded weights or its forward differ from the lesson's"
    )
