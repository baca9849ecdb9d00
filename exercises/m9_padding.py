"""Padded batches: train on sequences of different lengths at once.

A batch is one (B, L) tensor, but real sentences differ in length. Pad the
short ones with a special ``pad_id`` up to the longest, and make the loss
skip every position whose TARGET is padding, so the padding teaches the model
nothing. Pad on the RIGHT: a causal model then reads each real token at the
same positions, with the same past, as without padding (the padding comes
after, and a causal model never looks ahead), so the padded loss equals the
loss of the sequences taken one by one.

``clm_loss`` from milestone 3 already takes ``ignore_index``; while this
exercise is graded, ``m3_train`` is the grader's own, so importing it is safe.

Check yourself from the folder that holds this file::

    grade check -m padding
    python m9_padding.py
"""
import torch
import torch.nn as nn

from m3_train import clm_inputs_targets, clm_loss  # noqa: F401 - yours to use


def pad_batch(seqs: list[torch.Tensor], pad_id: int) -> torch.Tensor:
    """Right-pad a list of 1-D ``torch.long`` sequences into one ``(B, L)`` tensor.

    ``L`` is the longest length; each row is its sequence followed by
    ``pad_id`` up to ``L``. Example: ``[[5, 12, 3], [7]]`` with ``pad_id=0`` is
    ``[[5, 12, 3], [7, 0, 0]]``.
    """
    raise NotImplementedError("pad_batch: torch.full((B, L), pad_id), then copy each sequence into its row")


def padded_loss(model: nn.Module, seqs: list[torch.Tensor], pad_id: int) -> torch.Tensor:
    """The mean next-token cross-entropy over every real target of ``seqs``, as one scalar tensor.

    Pad, split into inputs and targets with teacher forcing (inputs drop the
    last column, targets the first), run the model on the inputs, and average
    the cross-entropy over the targets that are not ``pad_id``. Return the
    tensor itself (not ``.item()``): training calls ``.backward()`` on it.
    """
    raise NotImplementedError("padded_loss: pad, shift, and a loss with ignore_index=pad_id")


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(50, 64, 4, 2, 8)
    seqs = [torch.tensor([5, 12, 3, 42]), torch.tensor([7, 7]), torch.tensor([1, 2, 3, 4, 5, 6, 7])]
    print(pad_batch(seqs, pad_id=0))
    print("padded loss:", padded_loss(model, seqs, pad_id=0).item())
