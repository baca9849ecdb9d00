"""grader/suites/hidden/generation.py reads a generated result of the wrong length by its shape and its columns:
each reading on the result such a loop gives, and silence where the shape is right or says nothing."""

import torch

from grader.suites.generation import wrong_length

V = 29
START = torch.tensor([[4, 17, 9], [11, 0, 15]])  # B = 2 prompts of t = 3 tokens


def appended(start: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    return torch.cat([start, new], dim=1)


def test_right_shape_says_nothing():
    assert wrong_length(appended(START, torch.ones(2, 5, dtype=torch.long)), START, 5, V) is None


def test_max_new_read_as_the_total_length():
    # a loop of max_new - t steps: the prompt and 2 new tokens, 5 columns in all
    why = wrong_length(appended(START, torch.ones(2, 2, dtype=torch.long)), START, 5, V)
    assert why and "max_new is the number of NEW tokens" in why and "t + max_new = 8" in why


def test_max_new_no_longer_than_the_prompt():
    # the same loop when max_new <= t appends nothing
    why = wrong_length(START, START, 2, V)
    assert why and "the prompt alone" in why


def test_only_the_new_tokens():
    why = wrong_length(torch.full((2, 5), 7), START, 5, V)
    assert why and "only the 5 new tokens" in why


def test_zero_new_tokens_is_not_only_new_tokens():
    assert wrong_length(torch.zeros(2, 0, dtype=torch.long), START, 0, V) is None


def test_one_id_per_vocabulary_entry_below_b_is_an_argmax_over_the_batch():
    one = START[:1]
    why = wrong_length(appended(one, torch.zeros(1, 2 * V, dtype=torch.long)), one, 2, V)
    assert why and "batch axis (dim 0)" in why and "over the vocabulary, dim=-1" in why


def test_one_id_per_vocabulary_entry_of_any_value_names_the_axis_only():
    one = START[:1]
    why = wrong_length(appended(one, torch.arange(2 * V).view(1, -1) % V), one, 2, V)
    assert why and "another axis" in why and "batch axis" not in why


def test_a_sampling_step_is_not_read_as_an_argmax():
    one = START[:1]
    why = wrong_length(appended(one, torch.zeros(1, 2 * V, dtype=torch.long)), one, 2, V, greedy=False)
    assert why and "argmax" not in why and "one id per row" in why


def test_other_widths_say_one_id_per_row():
    why = wrong_length(appended(START, torch.zeros(2, 3 * 4, dtype=torch.long)), START, 4, V)
    assert why and "appended 3 ids" in why


def test_a_result_that_is_not_the_prompt_and_not_max_new_long_says_nothing():
    assert wrong_length(torch.zeros(2, 6, dtype=torch.long), START, 5, V) is None
