"""The graded milestones: ids (fixed by the contract), titles, files and suites."""

from __future__ import annotations

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


CORE_MILESTONE_FILES = ("m1_attention", "m2_model", "m3_train")  # what the later exercises build on

MILESTONES: dict[str, Milestone] = {
    m.id: m
    for m in (
        Milestone("m1", "Causal self-attention", "test_m1_attention.py", ("m1_attention",)),
        Milestone("m2", "The full TinyGPT", "test_m2_model.py", ("m2_model",), trusted=("m1_attention",)),
        Milestone("m3", "Causal-LM training", "test_m3_train.py", ("m3_train",)),
        Milestone("m4", "Greedy generation", "test_m4_generate.py", ("m4_generate",)),
        Milestone(
            "lesson",
            "The lesson's numbers, end to end",
            "test_lesson.py",
            ("m2_model", "m3_train", "m4_generate", "m1_attention"),
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
        Milestone("quiz", "Check yourself: short questions", "test_quiz.py", ("quiz",)),
    )
}

# Every file a submission may hold, in lesson order.
STUDENT_MODULES: tuple[str, ...] = tuple(dict.fromkeys(name for m in MILESTONES.values() for name in m.modules))
