"""A trusted stand-in for the student's TinyGPT.

Milestones 3 and 4 train and sample a model, but must not depend on the
student's own M1/M2 (a bug there would zero them) nor put the reference
TinyGPT inside a worker (its code could be read there). This model has
TinyGPT's interface (``(B, t)`` ids to ``(B, t, V)`` logits, attribute ``T``)
but is deliberately not a transformer: each position mixes the running mean of
its prefix, so it is causal and position-dependent.

It also keeps counters that let the grader see how it was called.
Loaded by path inside the worker, so it imports nothing from ``grader``.
"""

from __future__ import annotations

import torch
import torch.nn as nn


class StandInLM(nn.Module):
    def __init__(self, vocab_size: int, d: int, max_T: int, tied: bool = False):
        super().__init__()
        self.T = max_T
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_T, d)
        self.mix = nn.Linear(d, d)
        self.head = nn.Linear(d, vocab_size)
        if tied:  # one Parameter under two names, as in weight tying
            self.head.weight = self.tok.weight
        self.calls = 0
        self.calls_with_grad = 0
        self.longest_input = 0

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        if type(idx) is not torch.Tensor or idx.dim() != 2 or idx.dtype != torch.long:
            raise TypeError("the model expects a (B, t) tensor of token ids (dtype torch.long)")
        t = idx.shape[1]
        if not 1 <= t <= self.T:
            raise ValueError(
                f"the model was fed a sequence of {t} tokens, but its context holds "
                f"model.T = {self.T}: feed at most the last model.T tokens"
            )
        self.calls += 1
        self.calls_with_grad += int(torch.is_grad_enabled())
        self.longest_input = max(self.longest_input, t)
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        x = x.cumsum(dim=1) / torch.arange(1, t + 1, device=idx.device).view(1, t, 1)
        return self.head(x + torch.tanh(self.mix(x)))


def make_standin(vocab_size: int, d: int, max_T: int, seed: int, tied: bool = False) -> StandInLM:
    torch.default_generator.manual_seed(seed)
    return StandInLM(vocab_size, d, max_T, tied)
