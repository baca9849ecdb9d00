"""Hints for shape errors raised inside the sampling functions, where grader/hints.py's general one (a fixed-size
mask or position table, mask[:T, :T]) does not apply: none of these functions has a mask or a position table.

The runner sees only an error's message, not which function raised it; the checks that call these functions do,
so they catch the error and name what usually disagrees there: a per-row number that is not kept as a column.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from grader.sandbox.client import StudentError
from grader.suites import checks

SIZE_MISMATCH = re.compile(r"size of tensor a \(\d+\) must match the size of tensor b \(\d+\)")

HINTS = {
    "filter_logits": "each row's k-th largest logit must stay a column, torch.topk(logits, k).values[..., -1:] "
    "(or keepdim=True), to be compared with that row's (..., V) logits",
    "sample_next": "the logits and probabilities are (B, V), one row per sequence: a number per row, (B,), must "
    "be a column, [:, None] or keepdim=True, to broadcast against its row",
    "generate_sampled": "sample from the last position's logits, model(idx)[:, -1] of shape (B, V), and append "
    "the (B,) new ids as a column, next_token[:, None], to idx (B, t)",
}


@contextmanager
def shape_hint(function: str) -> Iterator[None]:
    """Within the block, a size mismatch the student's code raises fails with the hint of the innermost of these
    functions it was raised in (``function``, the one called, when the traceback names none)."""
    try:
        yield
    except StudentError as e:
        if SIZE_MISMATCH.search(e.message):
            named = [name for frame in e.where for name in HINTS if frame.endswith(f" in {name}")]
            inner = named[-1] if named else function
            checks.fail(f"{e}; hint: in {inner}, {HINTS[inner]}")
        raise
