"""Milestone 4: greedy generation, on the grader's stand-in model.

The stand-in is causal, position-dependent and refuses inputs longer than its
context, so every rule of the lesson shows: feed at most the last model.T
tokens, take the argmax of the last position, append, repeat.
"""

import pytest
import torch

from grader.sandbox.client import StudentError
from grader.sandbox.common.agreement import ErrorKind
from grader.sandbox.worker.standin import make_standin
from grader.suites import checks
from grader.suites.generation import wrong_length

V, D, T = 29, 16, 8


def prompt(seed: int, B: int, t: int) -> torch.Tensor:
    return torch.randint(0, V, (B, t), generator=torch.Generator().manual_seed(seed))


def generate(m4, model, seed: int | None, start: torch.Tensor, max_new: int | None = 5) -> torch.Tensor:
    """Call the student's generate on the stand-in built from ``seed``; every new token must be greedy.

    With ``seed=None`` only the shape and the prompt are checked (the caller checks the rest).
    """
    kwargs = {} if max_new is None else {"max_new": max_new}
    n = 5 if max_new is None else max_new
    try:
        out = m4.call("generate", model, start, **kwargs)
    except StudentError as e:
        if e.type != ErrorKind.NOT_IMPLEMENTED and (cause := one_prompt_reading(m4, model, start)):
            checks.fail(f"generate raised {e.type} on {start.shape[0]} prompts ({e.message:.160}); {cause}")
        raise
    want = (start.shape[0], start.shape[1] + n)
    if isinstance(out, torch.Tensor) and (cause := wrong_length(out, start, n, V)):
        checks.fail(f"generate's result has shape {tuple(out.shape)}, expected {want}: {cause}")
    out = checks.tensor(out, "generate's result", want, dtype=None)
    if out.dtype != torch.long:
        checks.fail(f"generate's result has dtype {out.dtype}: token ids are torch.long")
    if not torch.equal(out[:, : start.shape[1]], start):
        checks.fail("generate's result does not start with the prompt: return the prompt followed by the new tokens")
    if seed is not None:
        assert_greedy(make_standin(V, D, T, seed), out, start.shape[1])
    return out


def one_prompt_reading(m4, model, start: torch.Tensor) -> str | None:
    """Where generate fails on a batch, what its result for the first prompt alone says (a step that appends the
    wrong number of ids cannot be concatenated to B > 1 rows); None where that says nothing."""
    if start.shape[0] < 2:
        return None
    one = start[:1]
    try:
        out = m4.call("generate", model, one, max_new=2)
    except StudentError:
        return None
    cause = wrong_length(out, one, 2, V) if isinstance(out, torch.Tensor) else None
    return (
        f"on the first prompt alone, with max_new=2, it returned shape {tuple(out.shape)}: {cause}" if cause else None
    )


def assert_greedy(model, out: torch.Tensor, t: int) -> None:
    for i in range(t, out.shape[1]):
        want = greedy_next(model, out[:, :i])
        if not torch.equal(out[:, i], want):
            b = int((out[:, i] != want).nonzero()[0])
            checks.fail(
                f"new token at position {i} (batch {b}) is {int(out[b, i])}, but the greedy choice is "
                f"{int(want[b])}: {explain_token(model, out[:, :i], out[:, i])}"
            )


def greedy_next(model, context: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(context[:, -model.T :])[:, -1].argmax(-1)


def explain_token(model, context: torch.Tensor, got: torch.Tensor) -> str:
    with torch.no_grad():
        if len(context[0]) > model.T and torch.equal(got, model(context[:, : model.T])[:, -1].argmax(-1)):
            return "it is the argmax for the FIRST model.T tokens: crop to the last ones, idx[:, -model.T:]"
        # cropped one token short (idx[:, -model.T + 1:]): the token comes from the last model.T - 1 tokens
        if len(context[0]) >= model.T and torch.equal(got, model(context[:, 1 - model.T :])[:, -1].argmax(-1)):
            return (
                "it is the argmax for the last model.T - 1 tokens: the crop keeps one token too few. "
                "idx[:, -model.T:] keeps the last model.T tokens, the whole context the model can take"
            )
        if torch.equal(got, model(context[:, -model.T :])[:, 0].argmax(-1)):
            return "it is the argmax of the first position's logits: use the last position, logits[:, -1]"
    return "greedy decoding appends the argmax of the last position's logits"


@pytest.mark.points(4)
@pytest.mark.parametrize(
    "B,t,max_new",
    [(1, 3, 5), (3, 2, 4), (2, 6, 10), (4, 1, 15)],
    ids=["lesson-shape", "batch-3", "past-context", "from-one-token"],
)
def test_every_token_is_the_greedy_choice(m4, B, t, max_new):
    """each new token is the argmax of the model's last-position logits on the last model.T tokens"""
    seed = 10 * B + t
    generate(m4, m4.standin(V, D, T, seed), seed, prompt(seed, B, t), max_new)


def test_default_max_new(m4):
    """generate(model, start) adds 5 greedy tokens by default"""
    generate(m4, m4.standin(V, D, T, 1), 1, prompt(1, 2, 3), None)


def test_zero_new_tokens(m4):
    """generate(model, start, 0) returns the prompt unchanged"""
    generate(m4, m4.standin(V, D, T, 2), 2, prompt(2, 2, 3), 0)


def test_deterministic(m4):
    """generating twice from the same prompt gives the same greedy tokens"""
    model, start = m4.standin(V, D, T, 3), prompt(3, 3, 4)
    first, second = generate(m4, model, None, start, 9), generate(m4, model, None, start, 9)
    if not torch.equal(first, second):
        checks.fail("two calls gave different tokens: greedy decoding takes the argmax, it never samples")
    assert_greedy(make_standin(V, D, T, 3), first, start.shape[1])


def test_batch_rows_are_independent(m4):
    """each prompt in a batch generates what it would alone"""
    model, start = m4.standin(V, D, T, 4), prompt(4, 3, 5)
    together = generate(m4, model, 4, start, 6)
    for b in range(3):
        if not torch.equal(generate(m4, model, 4, start[b : b + 1], 6)[0], together[b]):
            checks.fail(
                f"prompt {b} generates different tokens in a batch than alone: take the argmax per row "
                "(dim=-1) and keep the batch axis"
            )


@pytest.mark.parametrize("training", [True, False], ids=["training-mode", "eval-mode"])
def test_no_gradients_recorded(m4, training):
    """generation runs without recording gradients and leaves the model unchanged, in the mode it was given"""
    model = m4.standin(V, D, T, 5)
    # training: as a training loop that samples between steps leaves it; eval: as a caller who switched dropout
    # off leaves it. Either way generate hands the model back in the mode it was given.
    model.call("train", training, keep=True)
    before, modes = model.state_dict(), checks.training_modes(model)
    generate(m4, model, 5, prompt(5, 2, 3), 4)
    if model.attr("calls_with_grad"):
        checks.fail("the model was called with gradients enabled: wrap generation in torch.no_grad()")
    for name, value in model.state_dict().items():
        if not torch.equal(value, before[name]):
            checks.fail(f"generation changed the model's weight {name}: it must only read the model")
    # Unchanged includes the mode: an eval() left behind turns off the dropout of the caller's next training step
    checks.same_training_modes(model, modes, "generate")
