"""A trusted milestone-1 module, sent only to the worker that grades milestone 2.

M2 builds on ``CausalSelfAttention``; a bug in the student's M1 must not cost
M2 points, so while M2 is graded ``from m1_attention import ...`` gets this
module. It rests on PyTorch's fused kernel rather than on the lesson's
hand-written mask and softmax, and creates its submodules in the contract's
order so that seeded weights agree.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(T, device=None):
    return torch.ones(T, T, device=device).tril()


class CausalSelfAttention(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, d = x.shape
        heads = self.qkv(x).view(B, T, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(heads[0], heads[1], heads[2], is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, T, d))
