"""``check_reply_size``: a worker's reply past any bound is refused, saying which, before anything reads it."""

from __future__ import annotations

import time

import pytest

from grader.sandbox.client import (
    MAX_REPLY_DEPTH,
    MAX_REPLY_ITEMS,
    MAX_STRING_CHARS,
    ReplyTooLarge,
    check_reply_size,
)


def nested(depth: int) -> dict:
    value: dict = {"t": "py", "v": 0}
    for _ in range(depth):
        value = {"t": "list", "items": [value]}
    return value


@pytest.mark.parametrize(
    "reply, phrase",
    [
        ({"value": {"t": "py", "v": "x" * (MAX_STRING_CHARS + 1)}}, "string; the grader reads at most 64 KB"),
        ({"k" * (MAX_STRING_CHARS + 1): 1}, "string; the grader reads at most 64 KB"),
        ({"value": ["y" * (MAX_STRING_CHARS // 2)] * 10}, "of text in one reply; the grader reads at most 256 KB"),
        ({"value": [0] * (MAX_REPLY_ITEMS + 1)}, "more than 100,000 values in one reply"),
        ({"value": nested(MAX_REPLY_DEPTH)}, "nested more than 64 levels deep"),
    ],
    ids=["string", "key", "text", "items", "depth"],
)
def test_each_bound_is_refused_saying_which(reply, phrase):
    with pytest.raises(ReplyTooLarge, match=phrase):
        check_reply_size(reply)


def test_an_honest_reply_passes():
    """The largest honest reply measured (a full `grade check` of the reference): 12 KB of text, 2,666 values,
    8 levels, its longest string 84 characters."""
    honest = {"value": {"t": "dict", "items": {f"blocks.{i}.attn.qkv.weight": [64, 192] for i in range(500)}}}
    check_reply_size(honest)


def test_the_check_costs_little_whatever_the_reply():
    # CPU time, not the clock: a busy machine (tests side by side) stretches the clock, not the work
    started = time.process_time()
    for reply in ({"v": "a( " * 1_300_000}, {"v": [{"t": "py", "v": 0}] * 200_000}):
        with pytest.raises(ReplyTooLarge):
            check_reply_size(reply)
    assert time.process_time() - started < 2
