"""Milestone attnvar: attention variants without loops (MHA, GQA, latent).

You write three functions. Each takes the input and the weight matrices as plain
tensors (no ``nn.Module``): the whole computation is yours, in tensor operations.

1. ``multi_head_attention``: the multi-head causal self-attention of milestone 1.
2. ``grouped_query_attention``: fewer key/value heads than query heads (GQA, as in
   Llama 2 and Mistral); one group is multi-query attention (MQA).
3. ``latent_attention``: keys and values expanded from one small shared latent
   (in the style of DeepSeek-V2's multi-head latent attention, without its RoPE part).

Common to all three:

- x is (B, T, d); a weight matrix w is applied as ``x @ w`` (no bias).
- The heads: n_heads heads of head_size = d // n_heads features each; head h owns
  features h * head_size up to (h + 1) * head_size of q (and of k and v).
- Causal: position t attends to positions 0..t only (fill the scores of later
  keys with -inf before the softmax). Scores are scaled by 1 / sqrt(head_size);
  softmax over the keys; no dropout.
- The output is (B, T, d): the heads merged back (head h at features h * head_size
  up to (h + 1) * head_size), then multiplied by w_o.

The rules (checked, as in a contest; a broken rule scores 0 for that function):

- No Python loops over heads or positions: no ``for``/``while`` loop or comprehension
  over them, in the function or in a helper it calls. Process all heads and all
  positions at once with batched tensor operations (view, transpose, @, einsum, ...).
  A loop of a fixed number of steps is fine: over a literal tuple or list,
  ``for t in (q, k, v)``, over ``zip``, ``enumerate`` or ``reversed`` of such, or over
  ``range`` of number literals (``range(3)``). The grader also
  counts the tensor operations a call dispatches: that number must not grow with
  n_heads or T (a branch for a special case, such as one K/V group, is fine).
- Do not call ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` or
  ``F.multi_head_attention_forward``: compute the attention yourself.

Check yourself from the folder that holds this file::

    grade check -m attnvar        # or, from one level up: grade check exercises -m attnvar
    python m10_attnvar.py         # both lines should print True
"""
import math

import torch
import torch.nn.functional as F  # noqa: F401 - you will want F.softmax


def multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads):
    """Causal multi-head self-attention, every head at once.

    Shapes in: x (B, T, d); w_q, w_k, w_v, w_o (d, d); n_heads divides d.
    head_size = d // n_heads.

    1. q = x @ w_q, k = x @ w_k, v = x @ w_v: each (B, T, d).
    2. Split the heads: (B, T, d) -> (B, T, n_heads, head_size) -> transpose to
       (B, n_heads, T, head_size), so that the (T, T) scores are per head.
    3. scores = q @ k^T / sqrt(head_size): (B, n_heads, T, T); -inf above the
       diagonal; softmax over the last axis; weights @ v: (B, n_heads, T, head_size).
    4. Merge the heads: transpose back to (B, T, n_heads, head_size), reshape to
       (B, T, d), and return that @ w_o: (B, T, d).
    """
    raise NotImplementedError("multi_head_attention: project, split the heads, attend, merge, project")


def grouped_query_attention(x, w_q, w_k, w_v, w_o, n_heads, n_groups):
    """Causal grouped-query attention: n_heads query heads, n_groups key/value heads.

    Shapes in: x (B, T, d); w_q and w_o (d, d); w_k and w_v (d, n_groups * head_size),
    where head_size = d // n_heads; n_groups divides n_heads.

    q = x @ w_q has n_heads heads; k = x @ w_k and v = x @ w_v have n_groups heads
    each ((B, n_groups, T, head_size) once split). Consecutive query heads share a
    K/V head: with group = n_heads // n_groups, query head h attends with K/V head
    h // group (heads 0..group-1 use K/V head 0, the next group K/V head 1, ...).
    Make the K/V heads line up with the query heads (each one repeated group times,
    in that order), then attend as in multi_head_attention. Returns (B, T, d).

    n_groups = n_heads is multi_head_attention; n_groups = 1 is multi-query attention
    (one K/V head for all query heads).
    """
    raise NotImplementedError("grouped_query_attention: one K/V head per group of query heads")


def latent_attention(x, w_q, w_down, w_up_k, w_up_v, w_o, n_heads):
    """Causal attention with keys and values from a shared low-rank latent.

    Shapes in: x (B, T, d); w_q and w_o (d, d); w_down (d, r); w_up_k and w_up_v (r, d).

    1. The latent c = x @ w_down: (B, T, r), shared by keys and values (a KV cache
       would store only c: r numbers per position instead of 2 * d).
    2. q = x @ w_q, k = c @ w_up_k, v = c @ w_up_v: each (B, T, d), split into
       n_heads heads of head_size = d // n_heads as in multi_head_attention.
    3. Attend causally per head and merge the heads as in multi_head_attention;
       return that @ w_o: (B, T, d).

    With r = d and w_down the identity this is multi_head_attention with
    w_k = w_up_k and w_v = w_up_v.
    """
    raise NotImplementedError("latent_attention: latent c = x @ w_down, expand k and v, attend per head")


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
