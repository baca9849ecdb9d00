"""Pieces the commands share: the milestone option's check, and writing a file atomically."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from grader.milestones import MILESTONES


def milestone_ids(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    for m in value:
        if m not in MILESTONES:
            raise click.BadParameter(f"unknown milestone {m!r}; choose from {', '.join(MILESTONES)}")
    return list(dict.fromkeys(value)) or list(MILESTONES)


def write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the whole new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
