"""The graded milestones: ids (fixed by the contract), titles, files and suites."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Milestone:
    id: str
    title: str
    suite: str  # file in grader/suites/hidden/ (and grader/suites/public/)
    modules: tuple[str, ...]  # the submission's files this milestone imports
    # Earlier milestones replaced by the grader's own while grading. Milestones with the same ones share
    # a worker (see grader/sandbox/session.py), so the later exercises all trust m1 to m3: one worker.
    trusted: tuple[str, ...] = ()
    # Modules its workers load on first use, slowly: imported up front in the fork server (once for all its
    # workers), only when this milestone is graded. torch._dynamo (about 1 s) is loaded by the optimisers' first
    # step. The grading process does not preload them: its reference answers come from the disk cache
    # (grader/cache.py), and only a cold cache's reference run loads them there.
    preload: tuple[str, ...] = ()


CORE_MILESTONE_FILES = ("m1_attention", "m2_model", "m3_train")  # what the later exercises build on
DYNAMO = ("torch._dynamo",)

MILESTONES: dict[str, Milestone] = {
    m.id: m
    for m in (
        Milestone("m1", "Causal self-attention", "test_m1_attention.py", ("m1_attention",)),
        Milestone("m2", "The full TinyGPT", "test_m2_model.py", ("m2_model",), trusted=("m1_attention",)),
        Milestone("m3", "Causal-LM training", "test_m3_train.py", ("m3_train",), preload=DYNAMO),
        Milestone("m4", "Greedy generation", "test_m4_generate.py", ("m4_generate",)),
        Milestone(
            "lesson",
            "The lesson's numbers, end to end",
            "test_lesson.py",
            ("m2_model", "m3_train", "m4_generate", "m1_attention"),
            preload=DYNAMO,
        ),
        Milestone("scaling", "Parameter counts, GPT-2 sizes, Chinchilla", "test_scaling.py", ("m5_scaling",)),
        Milestone(
            "tying",
            "Weight tying and the library-layer GPT",
            "test_tying.py",
            ("m6_tying",),
            trusted=CORE_MILESTONE_FILES,
        ),
        Milestone(
            "kvcache", "Generation with a KV cache", "test_kvcache.py", ("m7_kvcache",), trusted=CORE_MILESTONE_FILES
        ),
        Milestone("sampling", "Temperature, top-k and top-p sampling", "test_sampling.py", ("m8_sampling",)),
        Milestone("padding", "Padded batches", "test_padding.py", ("m9_padding",), trusted=CORE_MILESTONE_FILES),
        Milestone("attnvar", "Attention variants without loops: MHA, GQA, latent", "test_attnvar.py", ("m10_attnvar",)),
        Milestone("quiz", "Check yourself: short questions", "test_quiz.py", ("quiz",)),
        Milestone(
            "kvmemory",
            "KV-cache memory: MHA, GQA, MQA and latent attention",
            "test_kvmemory.py",
            ("m11_kvmemory",),
        ),
    )
}

# Metric-scored tasks: graded only when named (`-m lmbudget`, a contest or paper task), never by default: each
# run trains a model for its whole budget, and its score is a measurement (the reference's moves a little from
# run to run), where a milestone's is all or nothing per check.
METRIC_TASKS: dict[str, Milestone] = {
    m.id: m
    for m in (
        # grader/lmbudget/: train under a CPU budget, scored on held-out text (bits per character).
        Milestone(
            "lmbudget",
            "Best character-level model within a CPU budget",
            "test_lmbudget.py",
            ("lmbudget",),
            preload=DYNAMO,
        ),
    )
}

# Everything `-m ID` may name: the lesson's milestones, then the metric tasks.
GRADABLE: dict[str, Milestone] = {**MILESTONES, **METRIC_TASKS}

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
