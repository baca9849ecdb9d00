"""A trusted milestone-1 module, sent to the workers that grade later milestones (m2, tying, kvcache, padding).

A bug in the student's M1 must not cost later points, so while those are graded
``from m1_attention import ...`` gets this module. It implements the whole
milestone-1 contract (every name, signature and attribute the stub documents;
``tests/unit/test_trusted.py`` keeps it so), but is written differently from the
reference, so that a worker never holds the reference's attention. Submodules are
created in the contract's order so that seeded weights agree.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(T: int, device=None) -> torch.Tensor:
    return torch.ones(T, T, device=device).tril()


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    T = q.shape[-2]
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    scores = torch.matmul(q * q.shape[-1] ** -0.5, k.transpose(-2, -1)).masked_fill(future, float("-inf"))
    weights = scores.softmax(dim=-1)
    return torch.matmul(weights, v), weights


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        heads = self.qkv(x).view(B, T, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(heads[0], heads[1], heads[2], is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, T, d))
