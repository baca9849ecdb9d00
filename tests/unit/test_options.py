"""The limit options: what `--timeout` gives a check and one call into the submission's code."""

from __future__ import annotations

from grader.options import DEFAULT, limits


def test_no_options_give_the_default_limits():
    assert limits() == DEFAULT


def test_a_longer_timeout_lets_one_call_take_longer_than_the_default():
    """--timeout 100: a check may take 100 s and one call 50 s (it was capped at the default's 20 s)."""
    chosen = limits(timeout=100)
    assert chosen.test_seconds == 100 and chosen.call_seconds == 50


def test_a_shorter_timeout_is_one_calls_limit_too():
    chosen = limits(timeout=5)
    assert chosen.test_seconds == 5 and chosen.call_seconds == 5
