"""Per-student variants: the numbers in a paper's questions, drawn from a seed that only the coach can derive.

A student's seed is HMAC-SHA256(secret, paper id + NUL + student id), the id case-folded and stripped
(``student_key``): neighbours get different numbers, and without the secret nobody can compute anyone's. Each
question draws from its own generator, seeded by the student's seed and the question's id, so adding or
reordering questions changes no other question's numbers. A multiple-choice question's options are shown in an
order drawn the same way (``order``, a generator of its own), so the letter of the right option is the student's
own too: the release's locked answers (the lesson's letters) name it no more often than a guess would.
With no seed (a student grading alone, the release) every question keeps the lesson's numbers and order.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import random
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECRET_BYTES = 32


def student_key(student: str) -> str:
    """The student's id as their seed is drawn from it: without surrounding spaces, inner runs of spaces as one,
    case-folded, so that "Ada Lovelace", "ada lovelace" and " Ada  Lovelace " are one student with one seed.
    An id that is already so ("alice", "ada lovelace") keeps the seed it had before ids were normalised."""
    return " ".join(student.split()).casefold()


def seed_of(secret: str, paper: str, student: str) -> int:
    """The student's seed for ``paper``: 63 bits of the HMAC, an int any JSON or TOML holds. Every seed comes
    from here (a render, ``grade check --paper --student``, the contest server), by ``student_key``."""
    digest = hmac.new(secret.encode(), f"{paper}\0{student_key(student)}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def read_or_make_secret(path: Path) -> str:
    """The secret in ``path``; made (owner-only, 0600) when there is none yet. Never rotated: a new secret would
    give every student other numbers halfway through a session."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_hex(SECRET_BYTES) + "\n")
    return path.read_text(encoding="utf-8").strip()


@dataclass(frozen=True)
class Variant:
    """One student's numbers (``seed``), or the lesson's (``seed`` None)."""

    seed: int | None = None

    def params(
        self, key: str, lesson: dict[str, Any], draw: Callable[[random.Random], dict[str, Any]]
    ) -> dict[str, Any]:
        """The numbers of question ``key``: ``lesson`` without a seed, else ``draw`` with this student's
        generator for that question."""
        if self.seed is None:
            return dict(lesson)
        return draw(random.Random(f"{self.seed}:{key}"))

    def order(self, key: str, n: int) -> tuple[int, ...]:
        """The order in which question ``key`` shows its ``n`` options: ``order[i]`` is the lesson's index of the
        option shown i-th. The lesson's order without a seed; else any of the n! orders, uniformly, from a
        generator of the question's own (apart from its numbers'). Uniform, and never "anything but the lesson's":
        ruling the lesson's letter out would itself tell a student with the release's key one letter that is
        wrong."""
        shown = list(range(n))
        if self.seed is not None:
            random.Random(f"{self.seed}:{key}:order").shuffle(shown)
        return tuple(shown)


LESSON = Variant()
