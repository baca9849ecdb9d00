"""Public checks for `kvmemory`: the toy model's number, MQA as one group, and every question answered, and right
or wrong (from its locked hash, grader/suites/locked.py: the release ships no answer)."""

import pytest

from grader.suites import checks
from grader.suites.locked import is_right, judges
from grader.suites.locked_answers import LOCKED
from grader.suites.questions import shown


def test_public_toy_model(kvmemory):
    """(public) the toy model, 2 layers and 4 heads of 8 in fp32: kv_bytes_per_token(2, 4, 8, "fp32") is 512"""
    checks.equal(kvmemory.call("kv_bytes_per_token", 2, 4, 8, "fp32"), 512, 'kv_bytes_per_token(2, 4, 8, "fp32")')


def test_public_mqa_is_one_group(kvmemory):
    """(public) MQA caches one K/V head: a quarter of the toy model's cache with its 4 heads"""
    checks.equal(
        kvmemory.call("kv_bytes_per_token", 2, 4, 8, "fp32", n_groups=1),
        128,
        'kv_bytes_per_token(2, 4, 8, "fp32", n_groups=1)',
    )


def test_public_kv_bytes_scales(kvmemory):
    """(public) the whole cache of 3 sequences of 10 tokens is 30 times one token's"""
    checks.equal(kvmemory.call("kv_bytes", 3, 10, 2, 4, 8, "fp32"), 30 * 512, 'kv_bytes(3, 10, 2, 4, 8, "fp32")')


def test_public_dtype_names_are_lower_case(kvmemory):
    """(public) "FP32" is not a dtype name (the stub's names are lower case): kv_bytes_per_token raises ValueError"""
    checks.raises_value_error(
        lambda: kvmemory.call("kv_bytes_per_token", 2, 4, 8, "FP32"),
        'kv_bytes_per_token(2, 4, 8, "FP32")',
        "the stub accepts its dtype names only as written there, lower case, and refuses any other",
    )


@pytest.mark.parametrize("question", ["Q_MC1", "Q_MC2", "Q_TEXT1", "Q_NUM1", "Q_NUM2", "Q_NUM3"])
def test_public_answered(kvmemory, variant, question):
    """(public) the question has an answer, and it is right"""
    value = kvmemory.value(question)
    if value is None:
        checks.not_implemented(f"{question} is still None")
    if getattr(value, "short_type", None) in ("set", "frozenset"):  # a set is no plain data: listed in the worker
        value = kvmemory.call("list", value, module="builtins")
    # the locks hold the lesson's numbers: a paper's student, asked their own, is told only that they answered
    lock = LOCKED["kvmemory"][question]
    if variant.seed is None and judges(lock) and not is_right(question, value, lock):
        checks.fail(
            f"{question}: {shown(value)} is not right (this public check knows right from wrong but not why: "
            "work it through again from the question's comment)"
        )
