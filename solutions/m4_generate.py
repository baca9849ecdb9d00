"""Milestone 4: greedy autoregressive generation (reference)."""
import torch
import torch.nn as nn


@torch.no_grad()
def generate(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:
    """Append max_new greedy tokens to start (B, t); returns (B, t + max_new)."""
    idx = start
    for _ in range(max_new):
        logits = model(idx[:, -model.T:])
        next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, next_token], dim=1)
    return idx


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    print(generate(model, torch.tensor([[5, 12, 3]]), 5)[0].tolist())
