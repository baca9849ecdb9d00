"""The reference model classes from ``solutions/``, and the configurations the stretch trains.

The solutions import each other by plain names (``from m1_attention import ...``),
so their folder is on ``sys.path`` while they load, as in ``grader/reference.py``.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

import torch.nn as nn

SOLUTIONS = Path(__file__).resolve().parents[1] / "solutions"


def reference(name: str) -> ModuleType:
    """Import one reference module (``m2_model``, ``m8_sampling``...) from ``solutions/``."""
    if name in sys.modules:
        return sys.modules[name]
    sys.path.insert(0, str(SOLUTIONS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SOLUTIONS))


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
