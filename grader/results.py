"""Grading results and their three renderings: a terminal table, JSON, Gradescope."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from grader import __version__
from grader.milestones import MILESTONES


@dataclass
class CheckResult:
    name: str
    milestone: str
    score: float
    max_score: float
    passed: bool
    message: str = ""
    seconds: float = 0.0
    internal_error: bool = False


@dataclass
class Report:
    submission: str
    checks: list[CheckResult] = field(default_factory=list)
    protections: list[str] = field(default_factory=list)
    seconds: float = 0.0
    public: bool = False  # only the public checks ran (a student release, or --public)
    worker_cpu_seconds: float = 0.0  # the submission's own code, in its workers (0 where not measured)
    workers: int = 0  # worker processes started for it (one per group of milestones, more after crashes)

    @property
    def milestones(self) -> list[str]:
        return [m for m in MILESTONES if any(c.milestone == m for c in self.checks)]

    def of(self, milestone: str) -> list[CheckResult]:
        return [c for c in self.checks if c.milestone == milestone]

    def score(self, milestone: str | None = None) -> tuple[float, float]:
        checks = self.of(milestone) if milestone else self.checks
        return round(sum(c.score for c in checks), 2), round(sum(c.max_score for c in checks), 2)

    @property
    def internal_errors(self) -> list[CheckResult]:
        return [c for c in self.checks if c.internal_error]

    def to_json(self) -> dict:
        score, max_score = self.score()
        return {
            "submission": self.submission, "grader_version": __version__,
            "score": score, "max_score": max_score, "seconds": round(self.seconds, 2),
            "worker_cpu_seconds": round(self.worker_cpu_seconds, 3), "workers": self.workers,
            "checks": "public" if self.public else "all",
            "protections": self.protections,
            "milestones": [{"id": m, "title": MILESTONES[m].title,
                            "score": self.score(m)[0], "max_score": self.score(m)[1],
                            "checks": [asdict(c) for c in self.of(m)]} for m in self.milestones],
        }

    def to_gradescope(self) -> dict:
        return {
            "score": self.score()[0],
            "execution_time": round(self.seconds, 2),
            "output": f"Graded by the TinyGPT kit's grader {__version__}.",
            "visibility": "visible",
            "stdout_visibility": "hidden",
            "tests": [{"name": f"{c.milestone}: {c.name}", "number": str(i + 1),
                       "score": c.score, "max_score": c.max_score,
                       "status": "passed" if c.passed else "failed",
                       "output": "passed" if c.passed else c.message, "output_format": "text",
                       "visibility": "visible", "tags": [c.milestone]} for i, c in enumerate(self.checks)],
        }

    def render(self, fmt: str) -> str:
        if fmt == "json":
            return json.dumps(self.to_json(), indent=2)
        if fmt == "gradescope":
            return json.dumps(self.to_gradescope(), indent=2)
        raise ValueError(fmt)
