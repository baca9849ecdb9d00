"""The practice log: every attempt is one line of a JSON-lines file, appended, flushed and synced before anything
is shown, so that a killed process loses nothing and the same command run again continues the session."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.practice.errors import PracticeError

LOG_FOLDER = ".practice"


@dataclass
class Attempt:
    number: int
    time: datetime
    elapsed: float  # seconds since the session started
    counted: bool
    why: str = ""  # not counted: "late", "ended", "grader" or "unreadable"
    error: str = ""  # the grader's failure, or why the work could not be read
    scores: dict[str, float] = field(default_factory=dict)  # part -> points (counted or late attempts)
    report: dict[str, Any] | None = None  # the grader's full report
    digest: str = ""  # the saved work's digest when it was graded ("" where not known)
    final: bool = False  # the grading at hand-in (the time up, q, Ctrl-C, the end of input)

    def record(self) -> dict[str, Any]:
        return {
            "kind": "attempt",
            "number": self.number,
            "time": self.time.isoformat(),
            "elapsed": round(self.elapsed, 3),
            "counted": self.counted,
            "why": self.why,
            "error": self.error,
            "scores": self.scores,
            "report": self.report,
            "digest": self.digest,
            "final": self.final,
        }

    @classmethod
    def of(cls, record: dict[str, Any]) -> Attempt:
        return cls(
            number=int(record["number"]),
            time=datetime.fromisoformat(record["time"]),
            elapsed=float(record["elapsed"]),
            counted=bool(record["counted"]),
            why=str(record.get("why", "")),
            error=str(record.get("error", "")),
            scores={str(k): float(v) for k, v in (record.get("scores") or {}).items()},
            report=record.get("report"),
            digest=str(record.get("digest", "")),
            final=bool(record.get("final", False)),
        )


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one JSON line, flushed and synced to disk before returning: one write, so that a
    killed process leaves whole lines (a torn last line at worst, which reading skips)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, separators=(",", ":")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The log's records from its last session's start on; unreadable lines (a torn last line) are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise PracticeError(f"cannot read the log {path}: {e}") from None
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("kind") == "start":
            records = [record]
        elif records:
            records.append(record)
    return records
