"""Weight tying, and the lesson's GPT rebuilt from PyTorch's own transformer layers (reference)."""
import torch
import torch.nn as nn


def tie_weights(model: nn.Module) -> nn.Module:
    """Make the head and the token table one Parameter: stored once, trained from both ends."""
    model.head.weight = model.tok.weight
    return model


class LibraryGPT(nn.Module):
    """Pre-norm encoder layers under a causal mask, a final LayerNorm and a tied head."""

    def __init__(self, vocab_size: int, d: int, n_heads: int, n_layers: int, max_T: int):
        super().__init__()
        self.T = max_T
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_T, d)
        layer = nn.TransformerEncoderLayer(d, n_heads, 4 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)
        self.apply(_init_gpt2)
        tie_weights(self)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        x = self.blocks(x, mask=mask, is_causal=True)
        return self.head(self.ln(x))


def _init_gpt2(module: nn.Module) -> None:
    """GPT-2's initialisation: weights from N(0, 0.02^2), biases 0 (LayerNorms keep 1 and 0)."""
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.MultiheadAttention):  # its q, k, v projection is a bare Parameter
        nn.init.normal_(module.in_proj_weight, std=0.02)
        nn.init.zeros_(module.in_proj_bias)


if __name__ == "__main__":
    from m2_model import TinyGPT, count_parameters

    with torch.device("meta"):  # shapes only: no memory for 124M parameters
        untied = count_parameters(TinyGPT(50257, 768, 12, 12, 1024))
        tied = count_parameters(LibraryGPT(50257, 768, 12, 12, 1024))
    print(f"GPT-2 small: {untied:,} untied, {tied:,} tied, saving {untied - tied:,} ({1 - tied / untied:.1%})")
    torch.manual_seed(0)
    model = LibraryGPT(50, 64, 4, 2, 8)
    print("logits:", tuple(model(torch.tensor([[5, 12, 3]])).shape))
