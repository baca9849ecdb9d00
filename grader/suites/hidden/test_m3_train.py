"""Milestone 3: teacher-forcing inputs and targets, the loss, and the training loop.

Training runs on the grader's stand-in model (not a TinyGPT), so M3 never depends
on the student's M1/M2. The grader trains an identical copy itself with the
reference loop, then compares both the returned losses and the trained weights.
"""

import pytest
import torch
import torch.nn.functional as F

from grader.sandbox.worker.standin import make_standin
from grader.suites import checks, differences
from grader.suites.hidden import diagnose

V = 29


def logits_and_targets(seed: int, B: int = 3, T: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, V, generator=g) * 2, torch.randint(0, V, (B, T), generator=g)


def loss(m3, logits, targets, **kwargs) -> float:
    value = checks.tensor(m3.call("clm_loss", logits, targets, **kwargs), "clm_loss's result", ())
    checks.finite(value, "the loss", ())
    return float(value)


# ---------------------------------------------------------------- inputs and targets


@pytest.mark.points(2)
@pytest.mark.parametrize("B,T", [(3, 9), (5, 2), (1, 12)])
def test_inputs_targets(m3, B, T):
    """clm_inputs_targets(data) is (data[:, :-1], data[:, 1:])"""
    data = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(T))
    pair = m3.call("clm_inputs_targets", data)
    if not (isinstance(pair, tuple | list) and len(pair) == 2):
        checks.fail(f"clm_inputs_targets should return a pair (inp, tgt), not {checks.describe(pair)}")
    inp = checks.tensor(pair[0], "inp", (B, T - 1), torch.long)
    tgt = checks.tensor(pair[1], "tgt", (B, T - 1), torch.long)
    if not torch.equal(inp, data[:, :-1]):
        checks.fail("inp should be every token but the last: data[:, :-1]")
    if torch.equal(tgt, data[:, :-1]):
        checks.fail("tgt equals inp: the targets must be shifted by one, data[:, 1:] (predict the NEXT token)")
    if not torch.equal(tgt, data[:, 1:]):
        checks.fail("tgt should be every token but the first: data[:, 1:]")


# ---------------------------------------------------------------- the loss


@pytest.mark.points(3)
@pytest.mark.parametrize("seed,B,T", [(0, 3, 7), (1, 2, 11), (2, 5, 1)])
def test_loss_is_mean_cross_entropy(m3, seed, B, T):
    """clm_loss is the mean token cross-entropy over (B, T, V) logits"""
    logits, targets = logits_and_targets(seed, B, T)
    got = loss(m3, logits, targets)
    flat = logits.reshape(-1, V), targets.reshape(-1)
    want = F.cross_entropy(*flat).item()
    if checks.differs(got, want, 1e-4 * max(1.0, abs(want))):
        hint = ""
        if abs(got - F.cross_entropy(logits[:, -1], targets[:, -1]).item()) < 1e-4:
            hint = ": that is the loss of the last position only; every position is a training example"
        elif cause := summed(got / want, B, T):
            hint = f": {cause}"
        checks.fail(f"clm_loss returned {got:.5f}, expected {want:.5f}{hint}")


# A loss a whole number of times the mean is a sum: over which axes, the factor says.
SUMMED = {
    "B * T": "the sum over every position of the batch (reduction='sum')",
    "T": "the sum over the T positions of each sequence, averaged over the batch",
    "B": "the sum over the B sequences, averaged over positions",
}


def summed(ratio: float, B: int, T: int) -> str | None:
    """What a loss ``ratio`` times the mean adds up, in words, or None when the ratio is no such count."""
    text, name = differences.factor_text(ratio, {"B": B, "T": T})
    if name not in SUMMED or ratio < 1:
        return None
    return (
        f"that is {text} times the mean, {SUMMED[name]}. The lesson's loss is the mean over positions and batch "
        "items (F.cross_entropy's default reduction='mean'), so that its size does not grow with B or T"
    )


@pytest.mark.points(3)
@pytest.mark.parametrize("pad", [0, V - 1])
def test_loss_ignore_index(m3, pad):
    """positions whose target is ignore_index do not count in the mean"""
    logits, targets = logits_and_targets(10 + pad, 4, 9)
    targets[0, 5:] = pad
    targets[2, 1:] = pad
    keep = targets != pad
    want = F.cross_entropy(logits[keep], targets[keep]).item()
    got = loss(m3, logits, targets, ignore_index=pad)
    if checks.differs(got, want, 1e-4 * max(1.0, want)):
        everything = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)).item()
        hint = (
            ": the padded positions still count; pass ignore_index to the cross-entropy"
            if abs(got - everything) < 1e-4
            else ""
        )
        checks.fail(
            f"clm_loss(..., ignore_index={pad}) returned {got:.5f}, expected {want:.5f} "
            f"(the mean over the {int(keep.sum())} counted positions){hint}"
        )


def test_loss_without_ignore_index_counts_everything(m3):
    """with ignore_index=None every position counts, whatever its target"""
    logits, targets = logits_and_targets(20, 3, 7)
    targets[:, ::2] = 0
    want = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)).item()
    got = loss(m3, logits, targets)
    if checks.differs(got, want, 1e-4 * max(1.0, want)):
        checks.fail(
            f"clm_loss(logits, targets) returned {got:.5f}, expected {want:.5f}: without ignore_index, "
            "no position may be skipped (not even targets equal to 0)"
        )


# ---------------------------------------------------------------- the training loop

CASES = {  # id: (seed, batch, context, steps, lr)
    "20-steps": (0, 4, 9, 20, 1e-3),
    "7-steps-lr3e-3": (1, 3, 6, 7, 3e-3),
    "12-steps-lr1e-2": (2, 5, 12, 12, 1e-2),
}


def reference_run(
    ref, model: torch.nn.Module, data: torch.Tensor, steps: int | None = None, lr: float | None = None
) -> tuple[list[float], dict[str, torch.Tensor]]:
    """The reference loop's losses and trained weights (its defaults where steps and lr are None)."""
    kwargs = {k: v for k, v in (("steps", steps), ("lr", lr)) if v is not None}
    return ref.m3_train.train(model, data, **kwargs), model.state_dict()


@pytest.fixture(scope="module", params=list(CASES))
def trained(request, ref, grading_context):
    """The same training run twice: the student's loop in the worker, the reference loop here."""
    seed, B, T, steps, lr = CASES[request.param]
    data = torch.randint(0, V, (B, T + 1), generator=torch.Generator().manual_seed(seed))
    m3 = grading_context.view("m3")
    model = m3.standin(V, 16, T, seed)
    losses = m3.call("train", model, data, steps=steps, lr=lr)
    weights = model.state_dict()
    make = lambda: make_standin(V, 16, T, seed)  # noqa: E731
    want_losses, want_weights = checks.remembered(
        ("m3 trained", request.param), lambda: reference_run(ref, make(), data, steps, lr)
    )
    return {
        "losses": losses,
        "weights": weights,
        "want_losses": want_losses,
        "want_weights": want_weights,
        "explain": lambda got: diagnose.explain_training(got, make, data, steps, lr),
        "steps": steps,
    }


def as_losses(value, steps: int) -> torch.Tensor:
    """train's losses as numbers, to compare with the reference's: one-element tensors are read too, so that
    returning tensors costs the one check that asks for floats (test_train_returns_plain_floats), not these."""
    if not isinstance(value, list) or len(value) != steps:
        checks.fail(f"train should return a list with one loss per step ({steps}), not {checks.describe(value)}")
    if not all(type(x) in (float, int) or isinstance(x, torch.Tensor) and x.numel() == 1 for x in value):
        checks.fail("train's list should hold numbers (loss.item()), one per step")
    return torch.tensor([float(x) for x in value], dtype=torch.float64)


@pytest.mark.points(1)
def test_train_returns_plain_floats(m3):
    """train returns a list of plain Python floats, loss.item() of each step, not the loss tensors"""
    data = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(4))
    value = m3.call("train", m3.standin(V, 16, 5, seed=4), data, steps=3)
    if not isinstance(value, list) or len(value) != 3:
        checks.fail(f"train(model, data, steps=3) should return a list of 3 losses, not {checks.describe(value)}")
    for step, x in enumerate(value, start=1):
        if isinstance(x, float):
            continue
        if isinstance(x, torch.Tensor):
            checks.fail(
                f"train returned a list of tensors (step {step}'s loss is {checks.describe(x)}), expected plain "
                "Python floats: record loss.item() each step. A loss tensor holds on to its step's graph (its "
                "grad_fn and everything saved for backward), so a list of them keeps every step's activations "
                "alive; .item() keeps the number alone"
            )
        checks.fail(
            f"train's list holds {checks.describe(x)} for step {step}, expected plain Python floats: record "
            "loss.item() each step"
        )


@pytest.mark.points(3)
def test_train_losses(trained):
    """train returns every step's loss, equal to the reference loop's (Adam, zero_grad, shifted targets)"""
    got = as_losses(trained["losses"], trained["steps"])
    want = torch.tensor(trained["want_losses"], dtype=torch.float64)
    checks.assert_close_where(
        got, want, "the loss curve", ("step",), atol=1e-4, explain=lambda: trained["explain"](got)
    )


@pytest.mark.points(4)
def test_train_updates_weights(trained):
    """after train, the model's weights equal those of the reference loop (checked by the grader)"""
    got_losses = as_losses(trained["losses"], trained["steps"])
    for name, want in trained["want_weights"].items():
        got = checks.tensor(trained["weights"].get(name), f"the trained {name}", tuple(want.shape))
        checks.assert_close_where(
            got,
            want,
            f"the trained weight {name}",
            ("row", "column"),
            atol=1e-4,
            rtol=1e-3,
            explain=lambda: trained["explain"](got_losses),
        )


def test_train_defaults(m3, ref):
    """train(model, data) defaults to 20 steps at lr 1e-3"""
    data = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(3))
    got = as_losses(m3.call("train", m3.standin(V, 16, 5, seed=3), data), 20)
    want, _ = checks.remembered("m3 defaults", lambda: reference_run(ref, make_standin(V, 16, 5, seed=3), data))
    checks.assert_close_where(
        got, torch.tensor(want, dtype=torch.float64), "the loss curve with default arguments", ("step",), atol=1e-4
    )
