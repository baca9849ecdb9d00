"""The reference model classes from ``solutions/``, the stretch's training model, and the configurations it trains.

The reference is loaded as the grader loads it (``grader/reference.py``, the one loader). The stretch trains
``TrainingGPT``: the reference TinyGPT's architecture and parameter names, with optional dropout and, where it pays,
attention through PyTorch's fused ``scaled_dot_product_attention``: two things a GPU run needs and the graded
lesson code must not change. Its weights are the reference's, name for name, so a checkpoint loads into the
reference TinyGPT for sampling, and tests prove both give the same logits for the same weights.

Fused attention is for GPUs. On the 2-core development CPU (AMX) it made the fast preset's bf16 steps about 1.5x
slower than the reference's explicit softmax, and float32 steps under a tenth faster, so on a CPU the training
model computes attention exactly as the reference does, and CPU runs are what they were, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from types import ModuleType

import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.reference import load_reference


def reference(name: str) -> ModuleType:
    """One reference module (``m2_model``, ``m8_sampling``...) from ``solutions/``."""
    return getattr(load_reference(), name)


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    n_layers: int = 6
    d: int = 256
    n_heads: int = 8
    block_size: int = 256

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def build_model(config: ModelConfig) -> nn.Module:
    """A reference TinyGPT of the given shape: what sampling and the lesson use."""
    TinyGPT = reference("m2_model").TinyGPT
    return TinyGPT(config.vocab_size, config.d, config.n_heads, config.n_layers, config.block_size)


class TrainingAttention(nn.Module):
    """The reference CausalSelfAttention (same ``qkv`` and ``proj``), fused or explicit, with dropout."""

    def __init__(self, d: int, n_heads: int, dropout: float, fused: bool):
        super().__init__()
        if d % n_heads:
            raise ValueError(f"the width d={d} must be divisible by the number of heads ({n_heads})")
        self.n_heads = n_heads
        self.dropout = dropout
        self.fused = fused
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        p = self.dropout if self.training else 0.0
        if self.fused:  # flash or memory-efficient attention: the T x T weights are never stored
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:  # the reference's causal_attention, operation for operation, with dropout on the weights
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            scores = scores.masked_fill(torch.tril(torch.ones(T, T, device=x.device)) == 0, float("-inf"))
            weights = F.softmax(scores, dim=-1)
            out = (F.dropout(weights, p) if p else weights) @ v
        return self.resid_drop(self.proj(out.transpose(1, 2).contiguous().view(B, T, d)))


class TrainingBlock(nn.Module):
    """The reference GPTBlock with dropout on each residual branch."""

    def __init__(self, d: int, n_heads: int, dropout: float, fused: bool):
        super().__init__()
        # built in the reference's order, so torch.manual_seed gives the reference's initial weights
        self.ln1 = nn.LayerNorm(d)
        self.attn = TrainingAttention(d, n_heads, dropout, fused)
        self.ln2 = nn.LayerNorm(d)
        # indices 0 and 2 hold the weights, as in the reference's nn.Sequential; dropout goes last
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d), nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))


class TrainingGPT(nn.Module):
    """The reference TinyGPT for training: same parameters and names, optional dropout, fused attention or not."""

    def __init__(
        self,
        vocab_size: int,
        d: int,
        n_heads: int,
        n_layers: int,
        max_T: int,
        dropout: float = 0.0,
        fused: bool = True,
    ):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), not {dropout}")
        self.T = max_T
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_T, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(TrainingBlock(d, n_heads, dropout, fused) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.drop(self.tok(idx) + self.pos(torch.arange(t, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def build_training_model(config: ModelConfig, dropout: float = 0.0, fused: bool = True) -> TrainingGPT:
    """The model the stretch trains; its state_dict loads into ``build_model(config)`` unchanged."""
    return TrainingGPT(config.vocab_size, config.d, config.n_heads, config.n_layers, config.block_size, dropout, fused)


def count_parameters(model: nn.Module) -> int:
    return reference("m2_model").count_parameters(model)
