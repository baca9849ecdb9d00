"""The exercises, each declared once: its id, title, student files, suites, points, trusted modules, preload.

``GRADABLE`` below is the one list. Everything else reads it: the runner (which suite grades an id), the suites'
fixtures (one per id, ``grader/suites/fixtures.py``), the sandbox (the files a submission may hold, the trusted
modules, what to preload), the reference loader, the command line's ``-m`` choices and tables, the release, the
Gradescope zip and the nbgrader course (a section per milestone, in this order), batch grading, contests and
papers (a task's or part's default points), and the tests (the corpus, the docs' tables, the reference's totals).
Adding an exercise: docs/contributing.md ("Adding an exercise").

For an exercise with id ``ID`` and student file ``NAME`` (``modules``), by convention:

- the stub is ``exercises/NAME.py``, the reference ``solutions/NAME.py``;
- the hidden suite is ``grader/suites/hidden/SUITE`` and the public checks ``grader/suites/public/SUITE``, where
  ``SUITE`` is ``test_ID.py``, except for the core milestones, whose suites keep the names of their files
  (``m1`` -> ``test_m1_attention.py``, ``m2`` -> ``test_m2_model.py``, ``m3`` -> ``test_m3_train.py``,
  ``m4`` -> ``test_m4_generate.py``);
- the suites ask for the submission by the fixture named ``ID`` (``def test_x(padding): padding.call(...)``);
- its corpus is ``tests/corpus/ID.py`` (the core milestones' and ``lesson``'s: ``tests/corpus/core.py``).

The ids and student file names are a published contract (docs/contract.md, docs/exercises.md): never rename them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Milestone:
    id: str  # fixed by the contract; also the suites' fixture for this milestone's view of the submission
    title: str
    modules: tuple[str, ...]  # the submission's files this milestone imports (exercises/NAME.py, solutions/NAME.py)
    # The hidden suite's total: the sum of its test functions' ``@pytest.mark.points(N)`` (1 without the mark),
    # which is what grading awards; tests/unit/test_milestones.py checks the two agree, and the docs' tables
    # against it. None: metric-scored, worth what its task says (lmbudget: grader/lmbudget/task.toml).
    points: float | None
    suite: str = ""  # its file in grader/suites/hidden/ and grader/suites/public/; "" (the default): test_ID.py
    # Earlier milestones replaced by the grader's own while grading. Milestones with the same ones share
    # a worker (see grader/sandbox/session.py), so the later exercises all trust m1 to m3: one worker.
    trusted: tuple[str, ...] = ()
    # Modules its workers load on first use, slowly: imported up front in the fork server (once for all its
    # workers), only when this milestone is graded. torch._dynamo (about 1 s) is loaded by the optimisers' first
    # step. The grading process does not preload them: its reference answers come from the disk cache
    # (grader/cache.py), and only a cold cache's reference run loads them there.
    preload: tuple[str, ...] = ()
    # A metric task: graded only when named (`-m lmbudget`, a contest or paper task), never by default: each run
    # trains a model for its whole budget, and its score is a measurement (the reference's moves a little from
    # run to run), where a milestone's is all or nothing per check.
    metric: bool = False

    def __post_init__(self) -> None:
        if not self.suite:
            object.__setattr__(self, "suite", f"test_{self.id}.py")


CORE_MILESTONE_FILES = ("m1_attention", "m2_model", "m3_train")  # what the later exercises build on
DYNAMO = ("torch._dynamo",)

# Every exercise, in lesson order (the order of the tables, the nbgrader sections and the reports); the metric
# tasks last.
DECLARED: tuple[Milestone, ...] = (
    Milestone("m1", "Causal self-attention", ("m1_attention",), 27, suite="test_m1_attention.py"),
    Milestone("m2", "The full TinyGPT", ("m2_model",), 24, suite="test_m2_model.py", trusted=("m1_attention",)),
    Milestone("m3", "Causal-LM training", ("m3_train",), 18, suite="test_m3_train.py", preload=DYNAMO),
    Milestone("m4", "Greedy generation", ("m4_generate",), 9, suite="test_m4_generate.py"),
    Milestone(
        "lesson",
        "The lesson's numbers, end to end",
        ("m2_model", "m3_train", "m4_generate", "m1_attention"),
        10,
        preload=DYNAMO,
    ),
    Milestone("scaling", "Parameter counts, GPT-2 sizes, Chinchilla", ("m5_scaling",), 19),
    Milestone("tying", "Weight tying and the library-layer GPT", ("m6_tying",), 15, trusted=CORE_MILESTONE_FILES),
    Milestone("kvcache", "Generation with a KV cache", ("m7_kvcache",), 13, trusted=CORE_MILESTONE_FILES),
    Milestone("sampling", "Temperature, top-k and top-p sampling", ("m8_sampling",), 16),
    Milestone("padding", "Padded batches", ("m9_padding",), 8, trusted=CORE_MILESTONE_FILES),
    Milestone("attnvar", "Attention variants without loops: MHA, GQA, latent", ("m10_attnvar",), 15),
    Milestone("quiz", "Check yourself: short questions", ("quiz",), 8),
    Milestone("kvmemory", "KV-cache memory: MHA, GQA, MQA and latent attention", ("m11_kvmemory",), 32),
    Milestone(
        "concepts",
        "The lesson's ideas: decoder-only, parallel training, pitfalls, emergent abilities",
        ("m12_concepts",),
        33,
        trusted=CORE_MILESTONE_FILES,
    ),
    Milestone(
        "problems",
        "Contest problems: attention's scale, training cost, the KV cache, Chinchilla",
        ("m13_problems",),
        35,
    ),
    # grader/lmbudget/: train under a CPU budget, scored on held-out text (bits per character).
    Milestone(
        "lmbudget",
        "Best character-level model within a CPU budget",
        ("lmbudget",),
        None,
        preload=DYNAMO,
        metric=True,
    ),
)

# The lesson's milestones, graded by default; the metric tasks, graded only when named.
MILESTONES: dict[str, Milestone] = {m.id: m for m in DECLARED if not m.metric}
METRIC_TASKS: dict[str, Milestone] = {m.id: m for m in DECLARED if m.metric}

# Everything `-m ID` may name: the lesson's milestones, then the metric tasks.
GRADABLE: dict[str, Milestone] = {**MILESTONES, **METRIC_TASKS}
assert len(GRADABLE) == len(DECLARED), "two exercises declare the same id"

# Every file a submission may hold, in lesson order.
STUDENT_MODULES: tuple[str, ...] = tuple(dict.fromkeys(name for m in GRADABLE.values() for name in m.modules))


def preloads(milestones: Iterable[str]) -> tuple[str, ...]:
    """What grading these milestones loads up front (``Milestone.preload``), each module once."""
    return tuple(dict.fromkeys(module for m in milestones for module in GRADABLE[m].preload))


def side_by_side(milestones: list[str], jobs: int | None = None) -> list[list[str]]:
    """The milestones in ``jobs`` groups to grade side by side, one grading process each (None: one per core,
    at most two: the suites' side of a check is light, and each group starts workers of its own).
    Milestones alternate in lesson order, so the slow ones (m1's first worker, the training runs,
    kvcache's generations) fall into different groups."""
    if jobs is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        jobs = min(2, cores)
    jobs = max(1, min(jobs, len(milestones)))
    return [list(milestones[i::jobs]) for i in range(jobs)]
