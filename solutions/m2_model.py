"""Milestone 2: the full TinyGPT (reference)."""
import torch
import torch.nn as nn

from m1_attention import CausalSelfAttention


class GPTBlock(nn.Module):
    """Pre-norm transformer block: attention, then a 4x feed-forward, each with a residual."""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_heads)
        self.ln2 = nn.LayerNorm(d)
        self.ffn = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        x = x + self.ffn(self.ln2(x))
        return x


class TinyGPT(nn.Module):
    """Token + position embeddings, n_layers blocks, a final LayerNorm and a linear head."""

    def __init__(self, vocab_size: int, d: int, n_heads: int, n_layers: int, max_T: int):
        super().__init__()
        self.T = max_T
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_T, d)
        self.blocks = nn.ModuleList(GPTBlock(d, n_heads) for _ in range(n_layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def count_parameters(model: nn.Module) -> int:
    """Number of trainable values; a shared Parameter counts once."""
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    print("parameters:", count_parameters(model))
