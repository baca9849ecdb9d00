"""Milestone 8: sampling with temperature, top-k and top-p (reference)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def filter_logits(logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """(..., V) logits with the tokens outside the top-k, then outside the top-p nucleus, set to -inf."""
    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
        probs, order = F.softmax(logits, dim=-1).sort(dim=-1, descending=True)
        drop = probs.cumsum(dim=-1) - probs >= top_p  # the more probable tokens already reach p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    return logits


def sample_next(logits: torch.Tensor, generator: torch.Generator, temperature: float = 1.0,
                top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """One token id per row of (B, V) logits, drawn with generator; returns (B,) torch.long."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = filter_logits(logits / temperature, top_k, top_p)
    probs = F.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate_sampled(model: nn.Module, start: torch.Tensor, max_new: int, generator: torch.Generator,
                     temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> torch.Tensor:
    """Append max_new sampled tokens to start (B, t); returns (B, t + max_new)."""
    idx = start
    for _ in range(max_new):
        logits = model(idx[:, -model.T:])[:, -1, :]
        next_token = sample_next(logits, generator, temperature, top_k, top_p)
        idx = torch.cat([idx, next_token[:, None]], dim=1)
    return idx


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    generator = torch.Generator().manual_seed(0)
    out = generate_sampled(model, torch.tensor([[5, 12, 3]]), 10, generator, temperature=0.8, top_k=10, top_p=0.9)
    print(out[0].tolist())
