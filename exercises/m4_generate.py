"""Milestone 4: greedy autoregressive generation.

You write ``generate``: the model predicts one token, appends it, and feeds
the longer sequence back in, again and again.

Nothing from milestones 1 and 2 is imported at the top, so this file loads
even while they are unfinished; the demo below uses your TinyGPT.

Check yourself from the folder that holds this file::

    grade check -m m4            # or, from one level up: grade check exercises -m m4
    python m4_generate.py        # prints the lesson's generated tokens

With ``torch.manual_seed(42)`` and ``TinyGPT(50, 64, 4, 2, 8)``,
``generate(model, torch.tensor([[5, 12, 3]]), 5)`` gives
``[5, 12, 3, 42, 2, 38, 35, 35]`` (untrained, so the new tokens are arbitrary
but fixed by the seed).
"""
import torch
from torch import nn


def generate(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:
    """Append ``max_new`` greedily chosen tokens to the prompt ``start``.

    Shape in: start (B, t) token ids. Shape out: (B, t + max_new), the prompt
    followed by the new tokens.

    Run everything under ``torch.no_grad()`` (a decorator or a ``with``
    block): generation never calls backward, so recording gradients would
    only waste memory. Leave the model as you found it, its mode included:
    a model in training mode stays in training mode, and one in eval mode
    stays in eval mode (if you call ``model.eval()``, restore the caller's
    mode afterwards). Then, max_new times (``max_new`` counts the NEW
    tokens, whatever the prompt's length):

    1. Crop: feed the model at most the LAST ``model.T`` tokens. It has
       position embeddings for only T positions, and the sequence grows.
    2. Take the logits of the LAST position, (B, V): that is the prediction
       for the next token. Earlier positions predict tokens we already have.
    3. Greedy choice: the argmax over the vocabulary, one id per row.
    4. Append it to the sequence (keep it (B, 1) so it concatenates on dim 1).
    """
    raise NotImplementedError("generate: crop to model.T, argmax the last logits, append")


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    print(generate(model, torch.tensor([[5, 12, 3]]), 5)[0].tolist())  # lesson: [5, 12, 3, 42, 2, 38, 35, 35]
