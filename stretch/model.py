"""The reference model classes from ``solutions/``, and the configurations the stretch trains.

The reference is loaded as the grader loads it (``grader/reference.py``, the one loader).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from types import ModuleType

import torch.nn as nn

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
    """A reference TinyGPT of the given shape (no second GPT implementation lives here)."""
    TinyGPT = reference("m2_model").TinyGPT
    return TinyGPT(config.vocab_size, config.d, config.n_heads, config.n_layers, config.block_size)


def count_parameters(model: nn.Module) -> int:
    return reference("m2_model").count_parameters(model)
