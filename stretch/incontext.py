"""In-context learning, measured: a key -> value lookup whose answer exists only in the prompt.

Every sequence draws a fresh random mapping from letters to digits and writes pairs such as
``c>7 a>2 c>7 f>0 ``. A model trained on many such sequences cannot memorise any mapping; the only way to
predict a value is to find an earlier pair with the same key in the context. We then ask ``q>`` after a prompt
that shows the queried pair 0, 1, 2 or 3 times, with no gradient step, and count the right digits.
Values are drawn independently (two keys may share a digit), so an unseen key's value is a pure guess:
chance is 1 in 10.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from stretch.data import CharTokenizer
from stretch.model import ModelConfig, build_model, reference
from stretch.precision import choose

KEYS = "abcdefghijklmnopqrstuvwxyz"
VALUES = "0123456789"
TOKENIZER = CharTokenizer(KEYS + VALUES + "> ")
PAIR = 4  # characters per pair: key, '>', value, space
CHANCE = 1 / len(VALUES)


@dataclass(frozen=True)
class TaskConfig:
    n_pairs: int = 12  # pairs per training sequence
    keys_per_sequence: int = 6  # each sequence draws its pairs from this many keys, so keys repeat
    prompt_pairs: int = 8  # pairs before the query in an evaluation prompt
    n_layers: int = 2  # two layers: one head finds the earlier key, the next copies its value (an induction head)
    d: int = 128
    n_heads: int = 4
    batch_size: int = 64
    steps: int = 1500
    lr: float = 2e-3
    seed: int = 0
    bf16: bool | None = None  # autocast the training steps (evaluation stays fp32); None: where the CPU does bf16

    @property
    def block_size(self) -> int:
        return self.n_pairs * PAIR


def encode_pairs(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """(B, n) key and value indices -> (B, 4n) token ids spelling ``k>v `` for each pair."""
    stoi = TOKENIZER.stoi
    key_ids = torch.tensor([stoi[c] for c in KEYS])[keys]
    value_ids = torch.tensor([stoi[c] for c in VALUES])[values]
    gt, space = torch.full_like(key_ids, stoi[">"]), torch.full_like(key_ids, stoi[" "])
    return torch.stack([key_ids, gt, value_ids, space], dim=-1).flatten(1)


def training_batch(cfg: TaskConfig, batch: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences of pairs under fresh mappings. Only the values of keys already shown are scored (-100 elsewhere):
    a first occurrence is a coin toss, and its noise only slows the lookup the model has to learn."""
    mapping = torch.randint(len(VALUES), (batch, len(KEYS)), generator=generator)
    pool = torch.rand(batch, len(KEYS), generator=generator).argsort(dim=1)[:, : cfg.keys_per_sequence]
    keys = pool.gather(1, torch.randint(cfg.keys_per_sequence, (batch, cfg.n_pairs), generator=generator))
    tokens = encode_pairs(keys, mapping.gather(1, keys))
    targets = torch.full_like(tokens, -100)
    earlier = torch.ones(cfg.n_pairs, cfg.n_pairs, dtype=torch.bool).tril(-1)
    repeat = ((keys[:, :, None] == keys[:, None, :]) & earlier).any(dim=2)
    values = tokens[:, 2::PAIR]
    targets[:, 1::PAIR] = values.masked_fill(~repeat, -100)  # after 'k>' (position 4i+1) comes the value
    return tokens, targets


def shot_prompts(
    cfg: TaskConfig, shots: int, n: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n prompts of cfg.prompt_pairs pairs that show the queried pair exactly `shots` times, then ``q>``.

    Returns (prompts (n, 4 * prompt_pairs + 2), answers (n,) value indices, query keys (n,)).
    """
    if not 0 <= shots <= cfg.prompt_pairs:
        raise ValueError(f"shots must lie in 0..{cfg.prompt_pairs}, got {shots}")
    mapping = torch.randint(len(VALUES), (n, len(KEYS)), generator=generator)
    order = torch.rand(n, len(KEYS), generator=generator).argsort(dim=1)
    query, others = order[:, 0], order[:, 1 : cfg.keys_per_sequence]  # distractors never use the query key
    keys = others.gather(1, torch.randint(others.size(1), (n, cfg.prompt_pairs), generator=generator))
    slots = torch.rand(n, cfg.prompt_pairs, generator=generator).argsort(dim=1)[:, :shots]
    keys.scatter_(1, slots, query[:, None].expand(-1, shots))
    tokens = encode_pairs(keys, mapping.gather(1, keys))
    tail = encode_pairs(query[:, None], mapping.gather(1, query[:, None]))[:, :2]  # 'q>'
    return torch.cat([tokens, tail], dim=1), mapping.gather(1, query[:, None])[:, 0], query


def train_model(cfg: TaskConfig, log: Callable[[str], None] | None = None) -> nn.Module:
    torch.manual_seed(cfg.seed)
    model = build_model(ModelConfig(TOKENIZER.vocab_size, cfg.n_layers, cfg.d, cfg.n_heads, cfg.block_size))
    clm_loss = reference("m3_train").clm_loss
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(cfg.seed)
    bf16 = cfg.bf16 if cfg.bf16 is not None else choose("cpu").bf16
    started = time.perf_counter()
    for step in range(1, cfg.steps + 1):
        for group in opt.param_groups:  # short warmup, then linear decay: settles the copy circuit
            group["lr"] = cfg.lr * min(step / 50, (cfg.steps - step + 1) / cfg.steps)
        tokens, targets = training_batch(cfg, cfg.batch_size, generator)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = clm_loss(model(tokens), targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log and (step % 250 == 0 or step == cfg.steps):
            log(f"step {step:>5}  value loss {loss.item():.3f}  {time.perf_counter() - started:5.1f} s")
    return model.eval()


@torch.no_grad()
def accuracy(model: nn.Module, cfg: TaskConfig, shots: int, n: int = 2000, seed: int = 1) -> float:
    """Share of queries answered right, reading the argmax over the ten digits after 'q>' (no gradient step)."""
    prompts, answers, _ = shot_prompts(cfg, shots, n, torch.Generator().manual_seed(seed + shots))
    digit_ids = torch.tensor([TOKENIZER.stoi[c] for c in VALUES])
    guesses = model(prompts)[:, -1, digit_ids].argmax(dim=-1)
    return (guesses == answers).float().mean().item()


def measure(cfg: TaskConfig, n: int = 2000, log: Callable[[str], None] | None = None) -> dict[int, float]:
    model = train_model(cfg, log)
    return {shots: accuracy(model, cfg, shots, n) for shots in range(4)}


def plot(table: dict[int, float], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar([str(k) for k in table], [100 * v for v in table.values()], color="tab:blue")
    ax.axhline(100 * CHANCE, color="tab:red", linestyle="--", label=f"chance ({CHANCE:.0%})")
    ax.set(
        xlabel="examples of the queried pair in the prompt",
        ylabel="query accuracy (%)",
        ylim=(0, 100),
        title="In-context lookup, no gradient update",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
