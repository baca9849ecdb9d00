"""The paper file, ``paper.toml``: a contest-shaped paper's parts, their points and rules, and its time limit.

    title = "Practice paper 1: attention variants and the KV cache"
    minutes = 180
    feedback = "score"     # what `grade practice` shows while the clock runs (full, score, passfail, none)

    [parts.attnvar]        # a part is an exercise id
    points = 60
    rules = ["no-loops", "no-library-attention"]

    [parts.kvmemory]
    points = 30

Every key is checked as contest.toml's are: a mistake names its key and line.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from grader.errors import InputError
from grader.feedback import Feedback
from grader.milestones import GRADABLE
from grader.suites.points import milestone_points
from grader.tomlfile import Reader

PAPER_FILE = "paper.toml"
SECRET_FILE = "paper.secret"  # beside paper.toml: the key of its students' numbers (grader/variants.py)

# The rules a part may impose, and the exercises whose suites check each (grader/suites/rules.py).
RULES: dict[str, tuple[str, str]] = {
    "no-loops": ("attnvar", "no Python loop over heads or positions: fully vectorised"),
    "no-library-attention": ("attnvar", "without scaled_dot_product_attention or nn.MultiheadAttention"),
    "numpy-only": ("problems", "NumPy only in softmax_xent_grad: no torch import, call or tensor"),
}
KNOWN = {"title", "minutes", "feedback", "parts"}
PART_KEYS = {"points", "rules"}


class PaperFileError(InputError):
    """A paper file that cannot be used; ``str()`` names the file, the line and the key."""


@dataclass(frozen=True)
class Part:
    id: str  # an exercise or metric task id (grader.milestones.GRADABLE)
    points: float
    rules: tuple[str, ...] = ()


@dataclass(frozen=True)
class Paper:
    title: str
    minutes: float
    parts: tuple[Part, ...]
    feedback: Feedback = Feedback.SCORE  # during `grade practice`; full once the time is up
    id: str = "paper"  # the file's folder name: with the student's id, what their variant is drawn from
    folder: Path | None = None  # where paper.toml is (and its secret): None for a paper parsed from text

    def part(self, part_id: str) -> Part | None:
        return next((p for p in self.parts if p.id == part_id), None)

    @property
    def total(self) -> float:
        return sum(p.points for p in self.parts)


def load(path: Path) -> Paper:
    """Read and check the paper file at ``path`` (a folder means its paper.toml)."""
    if path.is_dir():
        path = path / PAPER_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PaperFileError(f"there is no {path}") from None
    except OSError as e:
        raise PaperFileError(f"{path}: cannot read it: {e.strerror or e}") from None
    return dataclasses.replace(parse(text, path.name, paper_id=path.resolve().parent.name), folder=path.parent)


def parse(text: str, name: str = PAPER_FILE, paper_id: str = "paper") -> Paper:
    read, data = Reader.of(text, name, PaperFileError)
    top = read.table(data, (), KNOWN)
    title = read.title(top)
    minutes = read.number(top, ("minutes",), positive=True)
    if minutes is None:
        raise read.fail(("minutes",), "minutes is required: the paper's time limit")
    parts = read.table(top, ("parts",), None)
    if not parts:
        raise read.fail(("parts",), "the paper has no parts: add a [parts.ID] table for each exercise")
    return Paper(
        title=title,
        minutes=float(minutes),
        parts=tuple(_part(read, parts, part_id) for part_id in parts),
        feedback=read.choice(top, ("feedback",), Feedback, Feedback.SCORE),
        id=paper_id,
    )


def _part(read: Reader, parts: dict, part_id: str) -> Part:
    if part_id not in GRADABLE:
        raise read.fail(("parts", part_id), f"parts.{part_id} is not an exercise id; the ids are {', '.join(GRADABLE)}")
    table = read.table(parts, ("parts", part_id), PART_KEYS)
    points = read.number(table, ("parts", part_id, "points"), positive=True)
    if points is None:
        points = milestone_points(part_id)
        if points is None:
            raise read.fail(("parts", part_id), f"parts.{part_id}.points is required")
    rules = table.get("rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        raise read.bad(("parts", part_id, "rules"), rules, "a list of rule names")
    for rule in rules:
        if rule not in RULES:
            raise read.fail(("parts", part_id, "rules"), f"unknown rule {rule!r}; the rules are {', '.join(RULES)}")
        if RULES[rule][0] != part_id:
            raise read.fail(("parts", part_id, "rules"), f"rule {rule!r} applies to {RULES[rule][0]}, not to {part_id}")
    return Part(id=part_id, points=float(points), rules=tuple(dict.fromkeys(rules)))
