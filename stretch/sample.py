"""Sample from a trained checkpoint with the sampling exercise's reference (solutions/m8_sampling.py).

``explain`` walks the same steps as ``generate_sampled`` (one ``sample_next`` per token, the same generator),
so with the same seed it picks the same tokens, and prints what the model saw and weighed at each one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from stretch import checkpoint
from stretch.data import CharTokenizer, DataError
from stretch.model import ModelConfig, build_model, reference


@dataclass
class Sampler:
    model: nn.Module
    tokenizer: CharTokenizer
    device: str = "cpu"

    def encode_prompt(self, prompt: str) -> torch.Tensor:
        # an empty prompt starts from a newline, a character both corpora contain
        return torch.tensor([self.tokenizer.encode(prompt or "\n")], dtype=torch.long, device=self.device)

    @property
    def block_size(self) -> int:
        """How many tokens the model sees at once (TinyGPT's ``T``)."""
        T = self.model.T
        assert isinstance(T, int)
        return T


def load_sampler(path: str | Path, device: str = "cpu") -> Sampler:
    state = checkpoint.load(path)
    model = build_model(ModelConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    return Sampler(model.to(device).eval(), CharTokenizer(state["chars"]), device)


def generate(
    sampler: Sampler,
    prompt: str,
    max_new: int,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> str:
    """The prompt followed by max_new sampled characters (temperature 0: greedy)."""
    m8 = reference("m8_sampling")
    generator = torch.Generator(device=sampler.device).manual_seed(seed)
    ids = m8.generate_sampled(
        sampler.model, sampler.encode_prompt(prompt), max_new, generator, temperature, top_k, top_p
    )
    return sampler.tokenizer.decode(ids[0])


@dataclass
class Step:
    window: str  # the characters fed to the model (the last block_size of the text so far)
    top: list[tuple[str, float]]  # the five likeliest next characters and their probabilities
    chosen: str


@torch.no_grad()
def explain(
    sampler: Sampler,
    prompt: str,
    max_new: int,
    seed: int = 0,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> Iterator[Step]:
    """Each generation step: the window fed, the top-5 probabilities drawn from, the token chosen."""
    m8 = reference("m8_sampling")
    generator = torch.Generator(device=sampler.device).manual_seed(seed)
    idx, T = sampler.encode_prompt(prompt), sampler.block_size
    for _ in range(max_new):
        window = idx[:, -T:]
        logits = sampler.model(window)[:, -1, :]
        chosen = m8.sample_next(logits, generator, temperature, top_k, top_p)
        # the distribution actually sampled from: after temperature and top-k/top-p (plain softmax when greedy)
        shaped = logits if temperature == 0 else m8.filter_logits(logits / temperature, top_k, top_p)
        probs, ids = F.softmax(shaped, dim=-1)[0].topk(min(5, logits.size(-1)))
        decode = sampler.tokenizer.decode
        yield Step(decode(window[0]), [(decode([i]), p) for i, p in zip(ids.tolist(), probs.tolist())], decode(chosen))
        idx = torch.cat([idx, chosen[:, None]], dim=1)


def show_window(window: str, width: int = 48) -> str:
    tail = window if len(window) <= width else "…" + window[-width:]
    return f"[{len(window):>3} chars] {tail!r}"


def print_explained(steps: Iterator[Step], echo: Callable[[str], None] = print) -> str:
    """Print each step; return the generated characters."""
    out = []
    for n, step in enumerate(steps, 1):
        top = "  ".join(f"{c!r} {p:.3f}" for c, p in step.top)
        echo(f"step {n:>3}  context {show_window(step.window)}")
        echo(f"          top-5  {top}")
        echo(f"          chose  {step.chosen!r}")
        out.append(step.chosen)
    return "".join(out)


def check_prompt(sampler: Sampler, prompt: str) -> None:
    try:
        sampler.tokenizer.encode(prompt)
    except DataError as err:
        raise DataError(f"the prompt uses {err}; this model knows {sampler.tokenizer.chars!r}") from None
