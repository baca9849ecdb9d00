"""A live progress bar for training (rich): step, loss, tokens per second, elapsed and remaining time."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class TrainProgress:
    def __init__(self, total: int, done: int = 0, enabled: bool = True):
        self.enabled = enabled
        self.progress = Progress(
            TextColumn("[bold]train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.4f}"),
            TextColumn("{task.fields[tokens_per_s]:,.0f} tok/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            disable=not enabled,
        )
        self.task = self.progress.add_task("train", total=total, completed=done, loss=float("nan"), tokens_per_s=0.0)

    def __enter__(self) -> TrainProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.__exit__(*exc)

    def update(self, step: int, loss: float, tokens_per_s: float) -> None:
        if self.enabled:
            self.progress.update(self.task, completed=step, loss=loss, tokens_per_s=tokens_per_s)

    def log(self, line: str) -> None:
        if self.enabled:
            self.progress.console.print(line)
