"""Does information flow only from the past? Shared by the attention and the model suites.

``forward`` is any function from a (B, T, ...) input to a (B, T, ...) output,
computed in the worker; every comparison happens here.

Every tolerance is absolute, never a share of the outputs' size: a share grows with what the submission
returns, so adding a huge constant to its outputs widened it past any leak. Logits (``logits=True``)
are compared as log-probabilities (grader/causal.py), which a constant added to a row does not move, so an
honest model may shift or scale its logits as it likes and a leaking one gains nothing by it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from grader.causal import LOG_PROB_TOLERANCE, changed_before, log_probs

from .checks import fail, finite, index_text, likely_cause, observed, tensor, unobserved

Forward = Callable[[torch.Tensor], torch.Tensor]
# The absolute tolerance for outputs of inputs scaled by 1000 (a finite mask fill overpowered): such outputs reach
# a few thousand, where float32's spacing is 5e-4, so rounding stays well under this; an overpowered fill lets a
# later position in with a weight near 1 and moves an output by hundreds.
SCALED_INPUT_TOLERANCE = 1e-2
Perturb = Callable[[torch.Tensor, int], torch.Tensor]

LEAK_HINT = (
    "information leaks from the future: is the mask lower-triangular (tril, not triu), "
    "applied to the scores before the softmax, and sliced to the input's length?"
)


def random_tokens(seed: int, B: int, T: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def distinct_tokens(seed: int, B: int, T: int, vocab: int) -> torch.Tensor:
    """(B, T) token ids, no id twice: a model that reads its token table by index (``tok.weight[idx]``) is
    probed through the rows of that table's gradient, one row per position."""
    return torch.randperm(vocab, generator=torch.Generator().manual_seed(seed))[: B * T].view(B, T)


def token_perturbation(vocab: int) -> Perturb:
    """A Perturb for token ids: every token from position t on becomes a different id."""

    def perturb(x: torch.Tensor, t: int) -> torch.Tensor:
        x = x.clone()
        shift = torch.randint(0, vocab - 1, x[:, t:].shape, generator=torch.Generator().manual_seed(t))
        x[:, t:] = (x[:, t:] + 1 + shift) % vocab
        return x

    return perturb


def perturb_floats(x: torch.Tensor, t: int) -> torch.Tensor:
    """Float inputs (features, not tokens) changed from position t on, by seeded noise."""
    x = x.clone()
    x[:, t:] += torch.randn(x[:, t:].shape, generator=torch.Generator().manual_seed(100 + t))
    return x


def _out(forward: Forward, x: torch.Tensor, shape: tuple[int, ...], what: str) -> torch.Tensor:
    """The output, which must be finite: every comparison with NaN is False, so NaN would pass as no change."""
    out = tensor(forward(x), what, shape)
    finite(out, what, ("batch", "position", "channel"))
    return out


def _measured(out: torch.Tensor, logits: bool) -> torch.Tensor:
    """What is compared: logits as log-probabilities (shift-free), any other output as it is, in double."""
    return log_probs(out) if logits else out.double()


def _by(amount: float, logits: bool) -> str:
    return f"{amount:.3g} nats of log-probability" if logits else f"{amount:.3g}"


def no_future_leak(
    forward: Forward,
    x: torch.Tensor,
    perturb: Perturb,
    shape: tuple[int, ...],
    what: str,
    tol: float | None = None,
    hint: str = LEAK_HINT,
    logits: bool = False,
    explain: Callable[[], str | None] | None = None,
) -> None:
    """Changing inputs from position t on leaves outputs before t alone and changes output t.

    ``tol`` is absolute: in the output's units, or in nats when ``logits`` (compared as log-probabilities; then
    ``LOG_PROB_TOLERANCE`` unless given); 0 (exact) for other outputs unless given.
    ``hint`` is what a leak is blamed on: the mask's usual faults, unless the caller has evidence of another cause,
    or ``explain``, called only for a leak, names one.
    """
    tol = (LOG_PROB_TOLERANCE if logits else 0.0) if tol is None else tol
    steady(forward, x, what)
    base = _measured(_out(forward, x, shape, what), logits)
    for t in range(x.shape[1]):
        out = _measured(_out(forward, perturb(x, t), shape, what), logits)
        diff, before = (out - base).abs(), changed_before(base, out, t)
        if t and not before.max() <= tol:
            b, s = (int(i) for i in (before == before.max()).nonzero()[0])
            cause = likely_cause(explain)
            fail(
                f"{what}: position {s} (batch {b}) changes by {_by(float(before.max()), logits)} when the inputs "
                f"from position {t} on change; " + (f"likely cause: {cause}" if cause else hint)
            )
        if diff[:, t].max() == 0:
            fail(
                f"{what}: the output at position {t} does not change when the input at position {t} "
                "changes: is the diagonal masked (a position must attend to itself)?"
            )


def random_fault(forward: Callable[[torch.Tensor], Any], x: torch.Tensor, what: str) -> str | None:
    """A sentence when two calls on the same input give different outputs: something random runs in forward."""
    first, second = forward(x), forward(x)
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)) or first.shape != second.shape:
        return None
    if not (torch.isfinite(first).all() and torch.isfinite(second).all()):
        return None
    gap = float((first.double() - second.double()).abs().max())
    # the same sums in another order (threads splitting a matmul otherwise) move float32 by far less than this
    if not gap > 1e-5 * (1 + float(first.abs().max())):
        return None
    return (
        f"{what} gives different outputs for the same input, called twice (they differ by up to {gap:.3g}): "
        "something random runs in its forward, such as dropout, which is on in training mode, the mode a new "
        "module starts in. The lesson's model has no dropout: take it out"
    )


def steady(forward: Forward, x: torch.Tensor, what: str) -> None:
    """Two calls on the same input agree: otherwise each probe below would blame what dropout does on a leak."""
    if cause := random_fault(forward, x, what):
        fail(cause)


def prefix_consistent(
    forward: Forward,
    x: torch.Tensor,
    shape: tuple[int, ...],
    what: str,
    atol: float | None = None,
    logits: bool = False,
) -> None:
    """``forward(x[:, :t])`` equals ``forward(x)[:, :t]`` for every t, within ``atol`` (absolute: 1e-5, or
    ``LOG_PROB_TOLERANCE`` nats on log-probabilities when ``logits``)."""
    atol = (LOG_PROB_TOLERANCE if logits else 1e-5) if atol is None else atol
    steady(forward, x, what)
    full = _measured(_out(forward, x, shape, what), logits)
    for t in range(1, x.shape[1]):
        part = _out(forward, x[:, :t], (shape[0], t, *shape[2:]), f"{what} on the first {t} positions")
        diff = (_measured(part, logits) - full[:, :t]).abs()
        if not diff.max() <= atol:
            index = tuple(int(i) for i in (diff == diff.max()).nonzero()[0])
            _blame_a_leak(forward, x, full, t, shape, what, atol, logits)
            fail(
                f"{what} on the first {t} positions differs from the first {t} positions of the output "
                f"on all {x.shape[1]}, at {index_text(index, ('batch', 'position', 'channel'))} "
                f"(by {_by(float(diff.max()), logits)}): "
                "an output must not depend on how many tokens follow it. Are positions counted from 0 "
                "(arange(t)) and is the mask cut to t x t?"
            )


def _blame_a_leak(
    forward: Forward,
    x: torch.Tensor,
    full: torch.Tensor,
    t: int,
    shape: tuple[int, ...],
    what: str,
    atol: float,
    logits: bool,
) -> None:
    """Fails with the leak's hint if the first t outputs (``full``, as measured) change when the inputs after
    them do.

    A prefix that differs is most often a leak (a triu mask), not a miscounted position: say so first.
    """
    other = x.clone()
    other[:, t:] = x[:, :1]  # every later input replaced by the first one: valid tokens or features alike
    before = changed_before(full, _measured(_out(forward, other, shape, what), logits), t)
    if not before.max() <= atol:
        b, s = (int(i) for i in (before == before.max()).nonzero()[0])
        fail(
            f"{what}: position {s} (batch {b}) changes by {_by(float(before.max()), logits)} when the inputs "
            f"from position {t} on change; {LEAK_HINT}"
        )


def batch_independent(
    forward: Forward, x: torch.Tensor, other: torch.Tensor, shape: tuple[int, ...], what: str, logits: bool = False
) -> None:
    """Replacing every batch item but the first leaves the first item's output unchanged (within 1e-6, or
    ``LOG_PROB_TOLERANCE`` nats on log-probabilities when ``logits``)."""
    atol = LOG_PROB_TOLERANCE if logits else 1e-6
    steady(forward, x, what)
    mixed = torch.cat([x[:1], other[1:]])
    first = [_measured(_out(forward, z, shape, what)[:1], logits)[0] for z in (mixed, x)]
    diff = (first[0] - first[1]).abs()
    if not diff.max() <= atol:
        fail(
            f"{what}: batch item 0 changes (by {_by(float(diff.max()), logits)}) when the other batch items change: "
            "the batch items are mixed together somewhere (a reshape across the batch axis?)"
        )


OUTPUT_PROBES = ("no_future_leak", "prefix_consistent", "batch_independent")  # the suites parametrize over them


def output_probe(
    check: str,
    forward: Forward,
    x: torch.Tensor,
    other: torch.Tensor,
    perturb: Perturb,
    shape: tuple[int, ...],
    what: str,
    logits: bool = False,
    explain: Callable[[], str | None] | None = None,
) -> None:
    """The output probe named ``check`` (one of ``OUTPUT_PROBES``) on ``forward``: one test parametrized over
    the three runs each with the same inputs. ``explain``: a leak's cause, where the caller can read one."""
    if check == "no_future_leak":
        no_future_leak(forward, x, perturb, shape, what, logits=logits, explain=explain)
    elif check == "prefix_consistent":
        prefix_consistent(forward, x, shape, what, logits=logits)
    elif check == "batch_independent":
        batch_independent(forward, x, other, shape, what, logits=logits)
    else:
        raise ValueError(f"no output probe named {check!r}")


def causal_gradient(grad: torch.Tensor | dict, T: int, what: str, otherwise: Callable[[], None] | None = None) -> None:
    """``grad[t, s]``, the gradient size of output t with respect to input s, is 0 exactly when s > t.

    ``grad`` is the worker's ``input_grad`` answer, which may say the probe saw nothing: a claim the worker
    could forge (it runs the submission), so ``otherwise``, a check on outputs that the grading process
    compares itself, decides instead. Without one, the check has no verdict. Where there is one it runs after
    a gradient that holds, too: a model that reads a later token as a number (``one_hot(idx[:, t + 1])``) leaks
    through no gradient at all, and a forged matrix says nothing.
    """
    if otherwise is not None and unobserved(grad):
        otherwise()
        return
    _gradient_is_causal(grad, T, what)
    if otherwise is not None:
        otherwise()


def _gradient_is_causal(grad: torch.Tensor | dict, T: int, what: str) -> None:
    grad = tensor(observed(grad), f"the gradient matrix of {what}", (T, T), dtype=None).double()
    future = grad.triu(1)
    if future.any():
        t, s = (int(i) for i in future.nonzero()[0])
        fail(
            f"{what}: the gradient of output position {t} with respect to input position {s} is "
            f"{float(grad[t, s]):.3g}, not 0: output {t} depends on a later position; {LEAK_HINT}"
        )
    if (grad.diagonal() == 0).any():
        t = int((grad.diagonal() == 0).nonzero()[0])
        fail(f"{what}: output position {t} does not depend on its own input (zero gradient): is the diagonal masked?")
