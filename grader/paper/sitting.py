"""``grade check`` on a paper's notebook: which parts, numbers and rules it is graded on, and its score in the
paper's points.

A notebook made by ``grade paper render`` carries ``metadata.gptkit.paper`` (grader/paper/render.py). It is
graded on exactly its parts, with its seed as the variant (the student's numbers) and its parts' rules; each
part's score (the grader's points won over the points at stake) is then scaled to the part's points in the
paper. The metadata is the student's own file: it decides what a self-check grades, never an official
grade (a contest run on a paper takes the seeds from its secret and the rules from the paper file).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grader import nofollow
from grader.errors import BadUsage
from grader.milestones import GRADABLE
from grader.paper.config import RULES, SECRET_FILE, PaperFileError, Part, load
from grader.results import Report
from grader.submission import MAX_NOTEBOOK_BYTES
from grader.variants import Variant, seed_of


class SittingError(BadUsage):
    """The notebook's paper metadata cannot be used; the message says which key and why."""


@dataclass(frozen=True)
class Sitting:
    paper: str
    title: str
    student: str | None
    seed: int | None
    parts: tuple[Part, ...]

    def milestones(self, chosen: list[str] | None = None) -> list[str]:
        """The parts to grade: all, or those of ``chosen`` (each must be a part)."""
        ids = [p.id for p in self.parts]
        if not chosen:
            return ids
        extra = [m for m in chosen if m not in ids]
        if extra:
            raise SittingError(f"this paper's notebook has no part {', '.join(extra)}; its parts are {', '.join(ids)}")
        return [m for m in ids if m in chosen]

    def order(self, milestones: list[str]) -> list[str]:
        """``milestones`` in the paper's order (those that are not its parts last, as given)."""
        ids = [p.id for p in self.parts]
        return [m for m in ids if m in milestones] + [m for m in milestones if m not in ids]

    @property
    def variant(self) -> Variant:
        return Variant(self.seed)

    @property
    def rules(self) -> dict[str, frozenset[str]]:
        # every part: a paper states all its rules, so a part that lists none has none (not its suite's default)
        return {p.id: frozenset(p.rules) for p in self.parts}

    def scores(self, report: Report, graded: list[str]) -> list[tuple[str, float, float, float, float]]:
        """(part, grader's points won, at stake, paper points won, paper points) for each graded part."""
        rows = []
        for part in self.parts:
            if part.id in graded:
                won, stake = report.score(part.id)
                rows.append((part.id, won, stake, part.points * won / stake if stake else 0.0, part.points))
        return rows

    def summary(self, report: Report, graded: list[str]) -> str:
        rows = self.scores(report, graded)
        who = f"student {self.student}" if self.student is not None else "the lesson's numbers"
        lines = [f"paper: {self.title} ({who})"]
        width = max(len(r[0]) for r in rows)
        for part, won, stake, got, points in rows:
            lines.append(f"  {part:<{width}}  {got:6.2f} / {points:g}   ({won:g} of the grader's {stake:g} points)")
        total = sum(r[3] for r in rows)
        at_stake = sum(r[4] for r in rows)
        whole = sum(p.points for p in self.parts)
        lines.append(
            f"  {'total':<{width}}  {total:6.2f} / {at_stake:g}"
            + ("" if at_stake == whole else f" (of the paper's {whole:g})")
        )
        return "\n".join(lines)

    def to_json(self, report: Report, graded: list[str]) -> dict:
        rows = self.scores(report, graded)
        return {
            "id": self.paper,
            "title": self.title,
            "student": self.student,
            "seed": self.seed,
            "parts": [{"id": r[0], "score": round(r[3], 2), "points": r[4]} for r in rows],
            "score": round(sum(r[3] for r in rows), 2),
            "points": sum(r[4] for r in rows),
        }


def from_paper(paper_path: Path, student: str | None = None) -> Sitting:
    """A sitting of the paper file at ``paper_path`` (for a folder of exercise files, or to grade a notebook on
    the paper itself rather than on its metadata): the lesson's numbers, or ``student``'s, drawn from the paper's
    secret, which must exist (the coach's, made by the first ``grade paper render``)."""
    try:
        paper = load(paper_path)
    except PaperFileError as e:
        raise SittingError(str(e)) from None
    seed = None
    if student is not None:
        secret = (paper.folder or paper_path) / SECRET_FILE
        if not secret.is_file():
            raise SittingError(
                f"--student needs the paper's secret, {secret}, which is not there: the coach's `grade paper render "
                "--student` makes it; without --student you are graded on the lesson's numbers"
            )
        seed = seed_of(secret.read_text(encoding="utf-8").strip(), paper.id, student)
    parts = tuple(Part(p.id, p.points, p.rules) for p in paper.parts)
    return Sitting(paper.id, paper.title, student, seed, parts)


def sitting_of(path: Path) -> Sitting | None:
    """The paper a notebook at ``path`` was rendered for; None for a folder or a notebook without one."""
    if path.is_dir() or path.suffix != ".ipynb":
        return None
    try:
        meta = json.loads(nofollow.read_bytes(path, MAX_NOTEBOOK_BYTES)).get("metadata", {})
    except (OSError, UnicodeDecodeError, ValueError, AttributeError):
        return None  # not readable, or a link: grading says so as for any notebook
    gptkit = meta.get("gptkit") if isinstance(meta, dict) else None
    paper = gptkit.get("paper") if isinstance(gptkit, dict) else None
    if paper is None:
        return None
    return parse(paper, f"{path}: metadata gptkit.paper")


def paper_of(report: Report) -> Sitting | None:
    """The paper a report was graded on, where it says so itself: its submission is a paper's notebook, graded
    with that notebook's numbers on some of its parts. None for anything else (a folder, a lesson grading)."""
    try:
        sitting = sitting_of(Path(report.submission))
    except SittingError:
        return None
    if sitting is None or report.variant != sitting.seed or not report.milestones:
        return None
    return sitting if set(report.milestones) <= {p.id for p in sitting.parts} else None


def parse(paper: object, where: str = "gptkit.paper") -> Sitting:
    """The sitting a notebook's paper metadata (``paper``, found at ``where``) describes, every key checked:
    SittingError names the first that cannot be used, and why."""
    if not isinstance(paper, dict):
        raise SittingError(f"{where} should be an object")
    for key in ("id", "title"):
        if not isinstance(paper.get(key), str):
            raise _bad(where, key, "a string")
    student, seed = paper.get("student"), paper.get("seed")
    if student is not None and not isinstance(student, str):
        raise _bad(where, "student", "a string or null")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise _bad(where, "seed", "a non-negative integer or null")
    raw = paper.get("parts")
    if not isinstance(raw, list) or not raw:
        raise _bad(where, "parts", "a non-empty list")
    parts = [_part(part, f"{where}.parts[{i}]") for i, part in enumerate(raw)]
    if len({p.id for p in parts}) != len(parts):
        raise _bad(where, "parts", "a list of different exercises")
    return Sitting(paper["id"], paper["title"], student, seed, tuple(parts))


def _bad(where: str, key: str, what: str) -> SittingError:
    """The error for the metadata's ``key`` (found at ``where``): it should be ``what``."""
    return SittingError(f"{where}.{key} should be {what}")


def _part(part: object, where: str) -> Part:
    """One of the paper's parts (found at ``where``): an exercise id, positive points, and rules of that exercise."""
    if not isinstance(part, dict) or part.get("id") not in GRADABLE:
        raise _bad(where, "id", f"an exercise id ({', '.join(GRADABLE)})")
    points = part.get("points")
    if isinstance(points, bool) or not isinstance(points, int | float) or not points > 0:
        raise _bad(where, "points", "a positive number")
    rules = part.get("rules", [])
    if not isinstance(rules, list) or any(
        not isinstance(r, str) or r not in RULES or RULES[r][0] != part["id"] for r in rules
    ):
        raise _bad(where, "rules", f"a list of {part['id']}'s rules")
    return Part(part["id"], float(points), tuple(rules))
