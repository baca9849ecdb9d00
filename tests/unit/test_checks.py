"""The suites' building blocks on values a submission may return: NaN and infinities never pass."""

from __future__ import annotations

import math

import pytest
import torch

from grader.suites import checks
from grader.suites.causality import no_future_leak, token_perturbation

NAN = float("nan")


@pytest.mark.parametrize("got", [NAN, math.inf, -math.inf, 3.5])
def test_differs_is_true_for_nan_infinities_and_far_values(got):
    assert checks.differs(got, 1.0, 1e-3), f"{got} passed as 1.0"


def test_differs_is_false_within_the_tolerance():
    assert not checks.differs(1.0005, 1.0, 1e-3)


@pytest.mark.parametrize("value", [NAN, math.inf])
def test_number_refuses_a_non_finite_float(value):
    with pytest.raises(AssertionError, match="should be a finite number"):
        checks.number(value, "the loss")


def test_number_takes_a_huge_int():
    assert checks.number(10**400, "a count", integer=True) == 10**400


def test_relative_close_fails_on_nan():
    with pytest.raises(AssertionError, match="the loss is nan"):
        checks.relative_close(NAN, 2.0, "the loss", 1e-4)


def test_a_non_finite_scalar_is_named_without_an_empty_place():
    with pytest.raises(AssertionError) as failed:
        checks.finite(torch.tensor(NAN), "the loss")
    assert str(failed.value) == "the loss is nan, not a finite number"


def test_an_output_of_nan_is_not_taken_for_no_leak():
    """Every comparison with NaN is False: a NaN output must fail, not pass as "nothing changed"."""
    x = torch.randint(0, 10, (2, 5))
    with pytest.raises(AssertionError, match="holds nan"):
        no_future_leak(lambda t: torch.full((*t.shape, 3), NAN), x, token_perturbation(10), (2, 5, 3), "logits")


def test_a_nan_output_names_the_likely_cause_when_one_is_known():
    got = torch.tensor([[1.0, NAN]])
    with pytest.raises(AssertionError, match="likely cause: the mask is upside down"):
        checks.assert_close_where(
            got, torch.ones(1, 2), "out", ("row", "column"), explain=lambda: "the mask is upside down"
        )


def test_a_cause_that_cannot_be_computed_is_left_out_not_raised():
    def explain() -> str:
        raise KeyError("attn.qkv.weight")  # a module whose parameters are named otherwise

    with pytest.raises(AssertionError) as failure:
        checks.assert_close_where(torch.zeros(2), torch.ones(2), "out", ("position",), explain=explain)
    assert "differs from the reference" in str(failure.value) and "ikely cause" not in str(failure.value)
    with pytest.raises(AssertionError, match="non-finite values\\)$"):
        checks.finite(torch.tensor([NAN]), "out", ("position",), explain=explain)
