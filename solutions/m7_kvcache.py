"""Generation with a key/value cache (reference).

In a causal model the keys and values of a position never change once it has
been fed: later tokens cannot affect them. So each layer keeps them, the prompt
passes through the model once, and every later step feeds only the newest token
and attends over the kept keys and values. Same tokens as m4's generate, with
each position processed once instead of once per step.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, t, d) -> (B, n_heads, t, d // n_heads)."""
    B, t, d = x.shape
    return x.view(B, t, n_heads, d // n_heads).transpose(1, 2)


def cached_attention(attn: nn.Module, x: torch.Tensor, past: tuple | None) -> tuple[torch.Tensor, tuple]:
    """One attention layer for the new positions x (B, t, d), which come right after the cached ones.

    past: the layer's (keys, values) so far, each (B, n_heads, n_past, d_head), or None before the prompt.
    Returns the layer's output for the new positions, (B, t, d), and its cache extended with their keys and values.
    """
    B, t, d = x.shape
    q, k, v = (split_heads(z, attn.n_heads) for z in attn.qkv(x).split(d, dim=-1))
    if past is not None:
        k = torch.cat([past[0], k], dim=2)
        v = torch.cat([past[1], v], dim=2)
    n = k.shape[2]  # every position so far: the cached ones, then the t new ones
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    # new position i is position n - t + i: it may see every key up to and including its own
    visible = torch.ones(t, n, dtype=torch.bool, device=x.device).tril(diagonal=n - t)
    scores = scores.masked_fill(~visible, float("-inf"))
    out = F.softmax(scores, dim=-1) @ v
    return attn.proj(out.transpose(1, 2).reshape(B, t, d)), (k, v)


def feed(model: nn.Module, idx: torch.Tensor, first_position: int, cache: list) -> torch.Tensor:
    """Feed tokens idx (B, t) sitting at positions first_position, ..., first_position + t - 1.

    Every layer's cache (cache[i], for block i) is extended in place. Returns the logits of the
    last fed position, (B, vocab_size): the prediction for the next token.
    """
    positions = torch.arange(first_position, first_position + idx.shape[1], device=idx.device)
    x = model.tok(idx) + model.pos(positions)
    for i, block in enumerate(model.blocks):
        out, cache[i] = cached_attention(block.attn, block.ln1(x), cache[i])
        x = x + out
        x = x + block.ffn(block.ln2(x))
    return model.head(model.ln(x[:, -1]))


@torch.no_grad()
def generate_cached(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:
    """Append max_new greedy tokens to start (B, t), as m4's generate, feeding each position once.

    Returns (B, t + max_new). No cropping: the last token fed sits at position t + max_new - 2, so
    t + max_new - 1 positions must fit in the model's position table.
    """
    t = start.shape[1]
    if t + max_new - 1 > model.T:
        raise ValueError(f"t + max_new - 1 = {t + max_new - 1} positions needed, but model.T = {model.T}: "
                         "a cache cannot crop the sequence")
    cache = [None] * len(model.blocks)
    idx = start
    for i in range(max_new):
        if i == 0:
            logits = feed(model, start, 0, cache)  # the whole prompt, positions 0 .. t - 1
        else:
            logits = feed(model, idx[:, -1:], t + i - 1, cache)  # only the newest token, at its position
        next_token = logits.argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, next_token], dim=1)
    return idx


def positions_processed(prompt_len: int, max_new: int, cached: bool) -> int:
    """Token positions fed through the model to generate max_new tokens (everything fits in the context).

    Without a cache, step i feeds the whole sequence so far, prompt_len + i positions; with one, the
    prompt once and then one position per later step. The last new token is never fed.
    """
    if max_new == 0:
        return 0
    if cached:
        return prompt_len + max_new - 1
    return sum(prompt_len + i for i in range(max_new))


if __name__ == "__main__":
    from m2_model import TinyGPT
    from m4_generate import generate

    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    start = torch.tensor([[5, 12, 3]])
    print("generate:       ", generate(model, start, 5)[0].tolist())
    print("generate_cached:", generate_cached(model, start, 5)[0].tolist())
    uncached, cached = positions_processed(10, 20, cached=False), positions_processed(10, 20, cached=True)
    print(f"a 10-token prompt and 20 new tokens: {uncached} positions fed without a cache, {cached} with one")
