"""kv_probes reads sizes from torch's own error messages: here the errors a cache joined along each axis raises,
with the torch installed, are raised and read, so that a reworded message fails here and not in a student's
report."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from grader.suites import kv_probes

B, H, D_HEAD, PROMPT = kv_probes.AXIS_BATCH, kv_probes.AXIS_HEADS, kv_probes.AXIS_D_HEAD, kv_probes.AXIS_PROMPT


def keys(t: int) -> torch.Tensor:
    """The probe's keys for t positions, laid out as the stub says: (B, n_heads, t, d_head)."""
    return torch.zeros(B, H, t, D_HEAD)


def message(call: Callable[[], object]) -> str:
    with pytest.raises(RuntimeError) as raised:
        call()
    return str(raised.value)


def test_the_probe_sizes_all_differ():
    """Each size names one axis only: the positions (the prompt's and the new token's 1), batch, heads, features,
    and no axis is twice another."""
    sizes = [PROMPT, 1, *kv_probes.AXES]
    assert len(set(sizes)) == len(sizes)
    assert not {2 * s for s in kv_probes.AXES} & set(kv_probes.AXES)


@pytest.mark.parametrize("dim", [0, 1, 3])
def test_a_join_along_another_axis_names_the_positions(dim):
    said = message(lambda: torch.cat([keys(PROMPT), keys(1)], dim=dim))
    found = kv_probes.JOIN.search(said)
    assert found, said
    assert int(found[1]) == dim and {int(found[2]), int(found[3])} == {PROMPT, 1}


def test_a_join_along_the_positions_goes_through():
    assert torch.cat([keys(PROMPT), keys(1)], dim=2).shape == (B, H, PROMPT + 1, D_HEAD)


@pytest.mark.parametrize("dim,size", [(0, B), (1, H), (3, D_HEAD)], ids=["batch", "heads", "features"])
def test_the_axis_a_join_doubled_is_read_from_the_scores(dim, size):
    """After a 1-token prompt the join goes through; the new token's query against the joined keys then names
    the doubled axis."""
    joined = torch.cat([keys(1), keys(1)], dim=dim)
    said = message(lambda: keys(1) @ joined.transpose(-2, -1))
    assert kv_probes.sizes_disagree(said), said
    assert kv_probes.doubled(said) == size, said


def test_other_errors_are_not_read():
    assert not kv_probes.sizes_disagree("index out of range in self")
    assert kv_probes.doubled("The size of tensor a (5) must match the size of tensor b (7) at dimension 1") is None
