"""Milestone 3: causal-LM training with teacher forcing (reference)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def clm_inputs_targets(data: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher forcing: the input is every token but the last, the target every token but the first."""
    return data[:, :-1], data[:, 1:]


def clm_loss(logits: torch.Tensor, targets: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    """Mean cross-entropy of (B, T, V) logits against (B, T) targets, skipping ignore_index."""
    V = logits.shape[-1]
    ignore = -100 if ignore_index is None else ignore_index
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore)


def train(model: nn.Module, data: torch.Tensor, steps: int = 20, lr: float = 1e-3) -> list[float]:
    """Adam on the next-token loss of `data` (B, T+1); returns the loss of every step."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    inp, tgt = clm_inputs_targets(data)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = clm_loss(model(inp), tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    from m2_model import TinyGPT

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    data = torch.randint(0, 50, (8, 8))
    losses = train(model, data)
    for step in (1, 5, 10, 20):
        print(f"step {step:2d}: loss {losses[step - 1]:.4f}")
