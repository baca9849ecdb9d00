"""Milestone 8: sampling with temperature, top-k and top-p.

Greedy generation (milestone 4) always takes the most probable token, so it
says the same thing every time and easily loops. Sampling draws the next token
from the model's distribution instead, and three knobs shape that distribution:

- temperature: divide the logits by it before the softmax. Below 1 sharpens
  the distribution (towards greedy), above 1 flattens it; 0 means greedy.
- top-k: keep only the k most likely tokens.
- top-p (nucleus): keep the smallest set of most likely tokens whose total
  probability reaches p, so the number kept adapts to how sure the model is.

All randomness comes from a ``torch.Generator`` passed in by the caller: the
same seeded generator gives the same tokens, whatever ``torch.manual_seed``
says. Pass it to every random call (``torch.multinomial(..., generator=g)``).

Check yourself from the folder that holds this file::

    grade check -m sampling      # or, from one level up: grade check exercises -m sampling
    python m8_sampling.py        # samples 10 tokens from an untrained TinyGPT

With ``torch.manual_seed(42)``, ``TinyGPT(50, 64, 4, 2, 8)`` and a generator
seeded with 0, the demo below (temperature 0.8, top_k 10, top_p 0.9) printed
``[5, 12, 3, 22, 11, 15, 43, 40, 7, 4, 33, 38, 32]`` with the reference
(``torch.multinomial``; another correct way of drawing gives other tokens).
With ``temperature=0`` it gives m4's greedy tokens.
"""
import torch
from torch import nn


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Set to ``-inf`` the logits of the tokens that may not be drawn.

    Shape in and out: (..., V): any leading dims, the vocabulary last. Work
    along the last axis only (``dim=-1``, ``[..., -1:]``).

    1. Top-k (if ``top_k`` is not None): keep the ``top_k`` largest logits of
       each row, the k-th largest itself included; ``top_k >= V`` keeps all.
       ``torch.topk(logits, k, dim=-1).values[..., -1:]`` is each row's k-th
       largest value, shaped to broadcast against the row.
    2. Top-p (if ``top_p`` is not None), on what top-k left: take the softmax
       (the removed tokens get probability 0), sort it from most to least
       probable, and keep the smallest set whose cumulative probability
       REACHES ``top_p``: the token that crosses p is kept, and the most
       probable token is always kept. A token is dropped when the tokens
       before it in that order already hold ``top_p`` or more (a sum equal
       to ``top_p`` reaches it). ``torch.sort`` gives the order; ``scatter``
       puts a mask made in sorted order back in vocabulary order.
       Ties: tokens of equal probability may come in any order, so where the
       last token kept is tied with others, keeping only those your sort put
       first and keeping every token tied with it are both right. (The
       second is what you get without sorting, by dropping a token when the
       tokens STRICTLY more probable than it hold ``top_p`` or more.)

    The kept logits are returned unchanged (no scaling, no softmax); the
    others become ``float("-inf")``, so that a softmax gives them 0.
    A ``top_k`` below 1 or a ``top_p`` outside (0, 1] raises ValueError.
    """
    raise NotImplementedError("filter_logits: top-k (k-th largest value), then top-p on the sorted softmax")


def sample_next(logits: torch.Tensor, generator: torch.Generator, temperature: float = 1.0,
                top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Draw one token id per row of ``logits``.

    Shape in: logits (B, V). Shape out: (B,), dtype ``torch.long``.

    1. Check the arguments first: a negative ``temperature``, a ``top_k``
       below 1 or a ``top_p`` outside (0, 1] raise ValueError with a message
       that names the argument.
    2. ``temperature == 0`` means greedy: return the argmax of each row (do
       not divide by 0).
    3. Otherwise divide the logits by the temperature, THEN filter them with
       ``filter_logits`` (top-p depends on the scaled probabilities), take the
       softmax, and draw with ``torch.multinomial(probs, 1, generator=generator)``
       (it returns (B, 1): squeeze the last axis).

    Use no randomness but ``generator``: never the global random state.
    """
    raise NotImplementedError("sample_next: validate, greedy at 0, else logits / temperature, filter, multinomial")


def generate_sampled(model: nn.Module, start: torch.Tensor, max_new: int, generator: torch.Generator,
                     temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Append ``max_new`` sampled tokens to the prompt ``start``.

    Shape in: start (B, t) token ids. Shape out: (B, t + max_new), the prompt
    followed by the new tokens.

    Milestone 4's ``generate`` with ``sample_next`` in place of the argmax:
    under ``torch.no_grad()``, max_new times, crop to the LAST ``model.T``
    tokens, take the logits of the last position (B, V), draw the next token
    with ``sample_next(logits, generator, temperature, top_k, top_p)`` and
    append it (as (B, 1), on dim 1). Pass the same generator at every step.
    """
    raise NotImplementedError("generate_sampled: m4's loop, with sample_next instead of the argmax")


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    generator = torch.Generator().manual_seed(0)
    out = generate_sampled(model, torch.tensor([[5, 12, 3]]), 10, generator, temperature=0.8, top_k=10, top_p=0.9)
    print(out[0].tolist())  # reference: [5, 12, 3, 22, 11, 15, 43, 40, 7, 4, 33, 38, 32]
