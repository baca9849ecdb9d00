"""Attention variants without loops: multi-head, grouped-query and latent attention (reference)."""
import math

import torch
import torch.nn.functional as F


def split_heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, n_heads * hs) -> (B, n_heads, T, hs): head h owns features h * hs up to (h + 1) * hs."""
    B, T, _ = t.shape
    return t.view(B, T, n_heads, -1).transpose(1, 2)


def merge_heads(t: torch.Tensor) -> torch.Tensor:
    """(B, n_heads, T, hs) -> (B, T, n_heads * hs), the inverse of split_heads."""
    B, n_heads, T, hs = t.shape
    return t.transpose(1, 2).reshape(B, T, n_heads * hs)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention of every head at once: q, k, v are (B, n_heads, T, hs)."""
    T, hs = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(hs)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ v


def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    """Causal multi-head attention: x (B, T, d), w_* (d, d); returns (B, T, d)."""
    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_heads)
    v = split_heads(x @ w_v, n_heads)
    return merge_heads(attend(q, k, v)) @ w_o


def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_groups):
    """Causal grouped-query attention: w_k, w_v are (d, n_groups * hs); query head h uses K/V head h // group."""
    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_groups)
    v = split_heads(x @ w_v, n_groups)
    group = n_heads // n_groups  # the query heads that share one K/V head
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    return merge_heads(attend(q, k, v)) @ w_o


def latent_attention(x, w_q, w_down, w_up_k, w_up_v, w_o, n_heads):
    """Causal attention whose keys and values come from one shared latent c = x @ w_down (B, T, r)."""
    c = x @ w_down
    q = split_heads(x @ w_q, n_heads)
    k = split_heads(c @ w_up_k, n_heads)
    v = split_heads(c @ w_up_v, n_heads)
    return merge_heads(attend(q, k, v)) @ w_o


if __name__ == "__main__":
    torch.manual_seed(0)
    d, n_heads = 8, 4
    x = torch.randn(1, 5, d)
    w_q, w_k, w_v, w_o = (torch.randn(d, d) / math.sqrt(d) for _ in range(4))
    mha = multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads)
    gqa = grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_groups=n_heads)
    mla = latent_attention(x, w_q, torch.eye(d), w_k, w_v, w_o, n_heads)
    print("GQA with n_groups = n_heads is MHA:", torch.allclose(mha, gqa, atol=1e-6))
    print("latent with w_down = I is MHA:", torch.allclose(mha, mla, atol=1e-6))
