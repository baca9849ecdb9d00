"""Checkpoints: written atomically, read back with ``weights_only=True`` (plain tensors, numbers and strings only)."""

from __future__ import annotations

from pathlib import Path

import torch

from grader.files import atomic_path


class CheckpointError(Exception):
    """A checkpoint is missing or unreadable; the message says which and why."""


def save(state: dict, path: Path) -> None:
    """Write to a temp file beside path, then rename: a crash mid-write never leaves a torn checkpoint."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load(path: str | Path) -> dict:
    """A checkpoint file, or from a run's folder its best.pt (the lowest validation loss), else its ckpt.pt."""
    path = Path(path)
    if path.is_dir():
        path = path / "best.pt" if (path / "best.pt").is_file() else path / "ckpt.pt"
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path} (train one with `gptkit train --out-dir DIR`)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: report it, never a traceback
        raise CheckpointError(f"{path} is not a readable gptkit checkpoint: {err}") from err
    missing = {"model", "model_config", "chars"} - set(state if isinstance(state, dict) else ())
    if missing:
        raise CheckpointError(f"{path} is not a gptkit checkpoint (missing {', '.join(sorted(missing))})")
    return state
