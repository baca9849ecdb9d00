"""Public checks for `kvmemory`: the toy model's number, MQA as one group, and every question answered."""

import pytest

from grader.suites import checks


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


@pytest.mark.parametrize("question", ["Q_MC1", "Q_MC2", "Q_TEXT1", "Q_NUM1", "Q_NUM2", "Q_NUM3"])
def test_public_answered(kvmemory, question):
    """(public) the question has an answer"""
    if kvmemory.value(question) is None:
        checks.not_implemented(f"{question} is still None")
