"""Milestone 1: causal self-attention (reference)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(T: int, device=None) -> torch.Tensor:
    """The T x T lower-triangular matrix of ones: 1 = may attend, 0 = blocked."""
    return torch.tril(torch.ones(T, T, device=device))


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Single-head scaled dot-product attention with a causal mask.

    q, k, v: (..., T, d_k). Returns (out, weights): (..., T, d_k) and (..., T, T).
    """
    T, d_k = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    scores = scores.masked_fill(causal_mask(T, q.device) == 0, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: (B, T, d) -> (B, T, d)."""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        assert d % n_heads == 0, "d must be divisible by n_heads"
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        # (B, T, d) -> (B, n_heads, T, d_head): each head attends on its own slice
        q, k, v = (t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        out, _ = causal_attention(q, k, v)
        out = out.transpose(1, 2).contiguous().view(B, T, d)
        return self.proj(out)


if __name__ == "__main__":
    torch.manual_seed(7)
    Q, K, V = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
    out, weights = causal_attention(Q, K, V)
    print("weights[0] =", weights[0].tolist())
    print("out[0] =", [round(x, 4) for x in out[0].tolist()])
