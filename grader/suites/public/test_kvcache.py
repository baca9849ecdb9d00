"""Public checks for `kvcache`: the lesson's counts and tokens."""

import torch

from grader.sandbox.client import StudentError
from grader.suites import checks, kv_probes, wiring


def test_public_positions(kvcache):
    """(public) positions_processed(10, 20, ...) is 390 without a cache and 29 with one"""
    checks.equal(kvcache.call("positions_processed", 10, 20, False), 390, "positions_processed(10, 20, False)")
    checks.equal(kvcache.call("positions_processed", 10, 20, True), 29, "positions_processed(10, 20, True)")


def test_public_fills_the_context(kvcache):
    """(public) a 3-token prompt and 6 new tokens on a context of 8: the model's own greedy tokens, without error"""
    # t + max_new - 1 = 8 = model.T: the last token fed sits at position 7, the position table's last row.
    model = kvcache.new("TinyGPT", 50, 64, 4, 2, 8, seed=3, module="m2_model")
    start = torch.tensor([[5, 12, 3], [7, 1, 40]])
    try:
        out = cached(kvcache, model, start, 6)
    except StudentError as e:
        if e.type != "IndexError" or not fits(kvcache, model, start, 5):
            raise
        checks.fail(
            f"with 3 prompt tokens and max_new=6 your code raised IndexError ({e.message:.80}), with max_new=5 "
            "it did not: the last new token was fed at position 8, past the table's rows 0..7, so each new "
            "token's position is one too far. The prompt takes positions 0, 1, 2; the first new token is fed at "
            "position 3 = t, the next at 4: position t + i - 1 at step i (from 0)"
        )
    out = checks.tensor(out, "generate_cached's result", (2, 9), dtype=torch.long)
    for i in range(3, 9):
        # what the model itself predicts from the whole sequence so far, without a cache
        want = model(out[:, :i], grad=False)[:, -1].argmax(-1)
        if not torch.equal(out[:, i], want):
            b = int((out[:, i] != want).nonzero()[0])
            said = (
                f"the token generated at position {i} of row {b} is {int(out[b, i])}, but the model fed the whole "
                f"sequence so far predicts {int(want[b])}"
            )
            # a cached step redoes the attention the lesson's way: on a model whose own layers are not the lesson's,
            # the two part ways whatever the cache does
            if cause := wiring.earlier_fault(kvcache) or kv_probes.final_norm(kvcache, model, model.state_dict()):
                checks.fail(f"{said}: {cause}")
            checks.fail(
                f"{said}: a cached step must give what the full forward gives (check each new token's position, "
                "t + i - 1 at step i, and that every layer keeps and extends its own cache)"
            )


def cached(kvcache, model, start: torch.Tensor, max_new: int):
    """generate_cached's result; sizes that disagree in a cache fail with the axis it grows along, read from the
    errors of the probe's own steps (grader/suites/kv_probes.py), not with the general hint on shapes."""
    try:
        return kvcache.call("generate_cached", model, start, max_new)
    except StudentError as e:
        if kv_probes.sizes_disagree(e.message) and (cause := kv_probes.cache_axis(kvcache)):
            checks.fail(f"{e}. Likely cause: {cause}")
        raise


def fits(kvcache, model, start: torch.Tensor, max_new: int) -> bool:
    """Whether generate_cached runs for ``max_new`` tokens without raising."""
    try:
        kvcache.call("generate_cached", model, start, max_new)
    except StudentError:
        return False
    return True


def test_public_lesson_tokens(kvcache):
    """(public) seed 42, your TinyGPT(50, 64, 4, 2, 8): generate_cached gives [5, 12, 3, 42, 2, 38, 35, 35]"""
    model = kvcache.new("TinyGPT", 50, 64, 4, 2, 8, seed=42, module="m2_model")
    out = checks.tensor(
        cached(kvcache, model, torch.tensor([[5, 12, 3]]), 5),
        "generate_cached's result",
        (1, 8),
        dtype=torch.long,
    )
    if out[0].tolist() != LESSON_TOKENS:
        checks.equal(out[0].tolist(), LESSON_TOKENS, "the generated sequence", hint=wiring.earlier_fault(kvcache) or "")


LESSON_TOKENS = [5, 12, 3, 42, 2, 38, 35, 35]
