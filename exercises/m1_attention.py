"""Milestone 1: causal self-attention.

You write three pieces, each building on the one before:

1. ``causal_mask``: which positions a token may look at.
2. ``causal_attention``: single-head scaled dot-product attention with that mask.
3. ``CausalSelfAttention``: the multi-head layer a GPT block uses.

Check yourself from the folder that holds this file::

    grade check -m m1            # or, from one level up: grade check exercises -m m1
    python m1_attention.py       # prints the lesson's worked example

The worked example (``torch.manual_seed(7)``, then ``Q, K, V = torch.randn(4, 4)``
three times) should print ``weights[0] = [1.0, 0.0, 0.0, 0.0]`` and
``out[0] = [-0.0835, -0.0235, 0.1744, 2.2983]``.
"""
import torch
from torch import nn


def causal_mask(T: int, device=None) -> torch.Tensor:
    """Return the T x T causal mask.

    Row i says which positions token i may attend to: itself and everything
    before it. So the mask is lower-triangular (``torch.tril`` of a matrix of
    ones): 1 means "may attend", 0 means "blocked" (a future token).

    Example for T = 3::

        [[1, 0, 0],
         [1, 1, 0],
         [1, 1, 1]]

    Create it on ``device`` so that it lives where the scores live; mixing a
    CPU mask with GPU scores is an error.

    Shape out: (T, T).
    """
    raise NotImplementedError("causal_mask: build the T x T lower-triangular matrix of ones")


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Single-head scaled dot-product attention with the causal mask.

    Shapes in: ``q, k, v`` are (..., T, d_k); the leading dims (batch, heads)
    are carried along untouched, so use ``k.transpose(-2, -1)``, not ``k.T``.

    Steps, as in the lesson:

    1. scores = q @ k^T, scaled by 1 / sqrt(d_k) so that their size does not
       grow with d_k (large scores would make the softmax nearly one-hot).
       Shape (..., T, T).
    2. Where the mask is 0, replace the score with -inf. After the softmax
       exp(-inf) = 0, so a token gives exactly zero weight to the future.
       Build the mask with ``device=q.device``.
    3. Softmax over the last dim, so each row of weights sums to 1.
    4. out = weights @ v.

    Returns ``(out, weights)``: out is (..., T, d_k), weights is (..., T, T),
    exactly 0 above the diagonal. Row 0 can only see itself, so
    ``weights[..., 0, :]`` is [1, 0, ..., 0].
    """
    raise NotImplementedError("causal_attention: scale, mask with -inf, softmax, weight v")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention: (B, T, d) -> (B, T, d)."""

    def __init__(self, d: int, n_heads: int):
        """Create the layer's weights.

        Start with ``super().__init__()`` (nn.Module needs it before you assign
        submodules). Then create, in this order (seeded values depend on it):

        - ``self.qkv = nn.Linear(d, 3 * d)``: one matmul makes q, k and v.
        - ``self.proj = nn.Linear(d, d)``: mixes the heads' outputs back together.

        Store ``n_heads`` as ``self.n_heads`` (that exact name): forward needs
        it, and so does the KV cache exercise (``m7_kvcache.py``), which reads
        ``block.attn.n_heads``. Each head works on d_head = d // n_heads
        features, so d must be divisible by n_heads.
        """
        raise NotImplementedError("CausalSelfAttention.__init__: create qkv and proj")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attend over x of shape (B, T, d); works for every T >= 1.

        1. ``self.qkv(x)`` is (B, T, 3d): split it into q, k, v in that order,
           each (B, T, d) (the first d features are q, the next d are k, ...).
        2. Split d into n_heads slices of d_head (head h owns features
           h * d_head up to (h + 1) * d_head): view as (B, T, n_heads, d_head),
           then transpose to (B, n_heads, T, d_head) so that T x T attention
           happens per head.
        3. ``causal_attention`` on the heads gives (B, n_heads, T, d_head);
           scores are scaled by 1 / sqrt(d_head), which it does for you.
        4. Transpose back to (B, T, n_heads, d_head) and merge the heads into
           (B, T, d). After a transpose call ``.contiguous()`` before ``.view``.
        5. Return ``self.proj`` of that: (B, T, d).
        """
        raise NotImplementedError("CausalSelfAttention.forward: split heads, attend, merge, project")


if __name__ == "__main__":
    torch.manual_seed(7)
    Q, K, V = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
    out, weights = causal_attention(Q, K, V)
    print("weights[0] =", weights[0].tolist())  # lesson: [1.0, 0.0, 0.0, 0.0]
    print("out[0] =", [round(x, 4) for x in out[0].tolist()])  # lesson: [-0.0835, -0.0235, 0.1744, 2.2983]
