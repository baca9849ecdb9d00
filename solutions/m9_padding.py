"""Padded batches: sequences of different lengths in one tensor, and a loss that skips the padding (reference)."""
import torch
import torch.nn as nn

from m3_train import clm_inputs_targets, clm_loss


def pad_batch(seqs: list[torch.Tensor], pad_id: int) -> torch.Tensor:
    """Right-pad 1-D token sequences with pad_id into one (B, L) tensor, L the longest length."""
    L = max(len(s) for s in seqs)
    batch = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        batch[i, :len(s)] = s
    return batch


def padded_loss(model: nn.Module, seqs: list[torch.Tensor], pad_id: int) -> torch.Tensor:
    """Mean next-token cross-entropy over every real target; padding targets do not count."""
    inp, tgt = clm_inputs_targets(pad_batch(seqs, pad_id))
    return clm_loss(model(inp), tgt, ignore_index=pad_id)


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(0)
    model = TinyGPT(50, 64, 4, 2, 8)
    seqs = [torch.tensor([5, 12, 3, 42]), torch.tensor([7, 7]), torch.tensor([1, 2, 3, 4, 5, 6, 7])]
    print(pad_batch(seqs, pad_id=0))
    print("padded loss:", padded_loss(model, seqs, pad_id=0).item())
