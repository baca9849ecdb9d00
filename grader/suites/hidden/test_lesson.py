"""The lesson's printed numbers, end to end, with the student's own M1 to M4 together.

Each milestone is graded on its own elsewhere; this integration group checks the
whole pipeline: the lesson's seed-42 losses and tokens, and the same pipeline at
other seeds and sizes against the reference, so copying the printed numbers
earns nothing.
"""

import pytest
import torch

from grader.suites import checks, wiring

LESSON = (50, 64, 4, 2, 8)
LESSON_LOSSES = {1: 4.0511, 5: 3.4078, 10: 2.7282, 20: 1.5836}
LESSON_TOKENS = [5, 12, 3, 42, 2, 38, 35, 35]


def lesson_data(ref, config, seed: int, B: int = 8) -> torch.Tensor:
    """The data the lesson draws right after building the model: replay the generator here."""

    def draw() -> torch.Tensor:
        checks.seed(seed)
        ref.m2_model.TinyGPT(*config)
        return torch.randint(0, config[0], (B, config[4]))

    return checks.remembered(("lesson data", config, seed, B), draw)


@pytest.mark.points(3)
def test_lesson_losses(lesson, ref):
    """seed 42: TinyGPT(50, 64, 4, 2, 8) trained 20 steps prints 4.0511, 3.4078, 2.7282, 1.5836"""
    model = lesson.new("TinyGPT", *LESSON, seed=42, module="m2_model")
    losses = lesson.call("train", model, lesson_data(ref, LESSON, 42), module="m3_train")
    if not isinstance(losses, list) or len(losses) != 20:
        checks.fail(f"train should return 20 losses, not {checks.describe(losses)}")
    for step, want in LESSON_LOSSES.items():
        if checks.differs(float(losses[step - 1]), want, 2e-4):
            checks.fail(
                f"the loss at step {step} is {float(losses[step - 1]):.4f}, the lesson prints {want}: "
                + (
                    wiring.earlier_fault(lesson)
                    or "this end-to-end check runs all your files together; fix the failing checks of m1 to m3 "
                    "first, they say where"
                )
            )


@pytest.mark.points(3)
def test_lesson_generation(lesson):
    """seed 42: generate(model, [[5, 12, 3]], 5) gives [5, 12, 3, 42, 2, 38, 35, 35]"""
    model = lesson.new("TinyGPT", *LESSON, seed=42, module="m2_model")
    out = lesson.call("generate", model, torch.tensor([[5, 12, 3]]), 5, module="m4_generate")
    got = checks.tensor(out, "generate's result", (1, 8), dtype=None)
    checks.equal(got[0].tolist(), LESSON_TOKENS, "the generated sequence")


def reference_pipeline(ref, config, seed: int, data: torch.Tensor, start: torch.Tensor):
    """The reference's losses and tokens for test_pipeline_matches_reference."""
    checks.seed(seed)
    reference = ref.m2_model.TinyGPT(*config)
    return ref.m3_train.train(reference, data, steps=8, lr=3e-3), ref.m4_generate.generate(reference, start, 12)


@pytest.mark.points(4)
@pytest.mark.parametrize(
    "seed,config",
    [(7, (37, 32, 4, 2, 10)), (123, (50, 64, 4, 2, 8))],
    ids=["seed7-37-32-4-2-10", "seed123-lesson-size"],
)
def test_pipeline_matches_reference(lesson, ref, seed, config):
    """at other seeds and sizes, build, train and generate give the reference's numbers"""
    model = lesson.new("TinyGPT", *config, seed=seed, module="m2_model")
    data = lesson_data(ref, config, seed, B=5)
    losses = lesson.call("train", model, data, steps=8, lr=3e-3, module="m3_train")
    start = data[:2, :3]
    tokens = lesson.call("generate", model, start, 12, module="m4_generate")

    want_losses, want_tokens = checks.remembered(
        ("lesson pipeline", seed, config), lambda: reference_pipeline(ref, config, seed, data, start)
    )
    if not isinstance(losses, list) or len(losses) != 8:
        checks.fail(f"train should return 8 losses, not {checks.describe(losses)}")
    checks.assert_close_where(
        torch.tensor([float(x) for x in losses]), torch.tensor(want_losses), "the loss curve", ("step",), atol=2e-4
    )
    got = checks.tensor(tokens, "generate's result", tuple(want_tokens.shape), dtype=None)
    if not torch.equal(got, want_tokens):
        checks.fail(f"after training, generate gives {got.tolist()}, the reference {want_tokens.tolist()}")
