"""Milestone 3: causal-LM training with teacher forcing.

You write how a sequence becomes (input, target) pairs, the next-token loss,
and a small training loop.

Nothing from milestones 1 and 2 is imported at the top, so this file loads
even while they are unfinished; ``train`` just takes any model that maps
(B, T) token ids to (B, T, V) logits. The demo below uses your TinyGPT.

Check yourself from the folder that holds this file::

    grade check -m m3            # or, from one level up: grade check exercises -m m3
    python m3_train.py           # prints the lesson's losses

With ``torch.manual_seed(42)``, ``TinyGPT(50, 64, 4, 2, 8)`` and then
``data = torch.randint(0, 50, (8, 8))``, steps 1, 5, 10, 20 give losses
4.0511, 3.4078, 2.7282, 1.5836.
"""
import torch
from torch import nn


def clm_inputs_targets(data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Split token sequences data (B, T + 1) into (inp, tgt), each (B, T).

    Teacher forcing: at every position the model sees the true tokens so far
    and must predict the next one. So the input is every token but the last,
    ``data[:, :-1]``, and the target is every token but the first,
    ``data[:, 1:]``: tgt[:, i] is the token that follows inp[:, i].
    """
    raise NotImplementedError("clm_inputs_targets: slice off the last / first token")


def clm_loss(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    """Next-token loss: a scalar tensor.

    Shapes in: logits (B, T, V), targets (B, T) of token ids.

    The loss is the MEAN cross-entropy over the positions that count.
    ``F.cross_entropy`` (from ``torch.nn.functional``) wants (N, V) and (N,),
    so flatten the batch and time dims together first (``reshape``).

    If ``ignore_index`` is given, positions whose target equals it (padding,
    say) do not count: they add nothing and are not in the mean's denominator.
    With ``ignore_index=None`` every position counts; note that
    ``F.cross_entropy`` does not accept None for its own ``ignore_index``.
    """
    raise NotImplementedError("clm_loss: mean cross-entropy over counted positions")


def train(model: nn.Module, data: torch.Tensor, steps: int = 20, lr: float = 1e-3) -> list[float]:
    """Train model on data (B, T + 1) for ``steps`` steps; return every step's loss.

    Make the inputs and targets once with ``clm_inputs_targets``, and one
    ``torch.optim.Adam`` over the model's parameters with learning rate lr.
    Then each step, in this order:

    1. zero the gradients (they accumulate otherwise),
    2. run the model forward on the inputs,
    3. compute ``clm_loss`` against the targets,
    4. backward,
    5. optimizer step,
    6. record ``loss.item()`` (a plain float, so no graph is kept alive).

    Returns a list of ``steps`` floats, the loss of step 1 first.
    """
    raise NotImplementedError("train: the Adam loop, recording loss.item() each step")


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    data = torch.randint(0, 50, (8, 8))
    losses = train(model, data)
    # lesson: 4.0511, 3.4078, 2.7282, 1.5836
    for step in (1, 5, 10, 20):
        print(f"step {step:2d}: loss {losses[step - 1]:.4f}")
