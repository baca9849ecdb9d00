"""Checks that explain themselves: what was expected, what came back, where, and why.

Every value checked here was rebuilt in the grading process from raw bytes, so
it is a plain ``torch.Tensor`` (or plain Python data) whatever the student's
code returned in the worker.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any, NoReturn, TypeVar

import torch

from grader import cache
from grader.results import NotObserved, Unanswered
from grader.sandbox.client import Remote, StudentError
from grader.sandbox.common.agreement import NOT_IMPLEMENTED_MESSAGE, ErrorKind, Reply
from grader.sandbox.common.protocol import TensorInfo
from grader.suites import differences

T = TypeVar("T")
BTC = ("batch", "position", "channel")
BTV = ("batch", "position", "token id")


def seed(value: int) -> None:
    """``torch.manual_seed`` for the CPU alone: the same draws, without the 3 ms that seeding the
    absent accelerators (CUDA, XPU, MTIA) costs on every call while they are uninitialised."""
    torch.default_generator.manual_seed(value)


_REMEMBERED: dict[Hashable, Any] = {}


def remembered(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, worked out once per grading process for each ``key``, and once per machine where it can be.

    For the reference's answers that do not depend on the submission: a batch grades hundreds
    in one process, and this module, unlike the suites, is not re-imported for each; a cold
    ``grade check`` reads them from the disk cache (``grader/cache.py``), which adds the grader's
    fingerprint and torch's version to the key. The key must name everything else the answer
    depends on (seeds, sizes), and callers must not modify what comes back.
    """
    if key not in _REMEMBERED:
        described = repr(key)
        # An object's default repr names its address, which differs from run to run: memory only.
        on_disk = " at 0x" not in described
        _REMEMBERED[key] = cache.stored(f"remembered {described}", compute) if on_disk else compute()
    return _REMEMBERED[key]


def fingerprint(*tensors: torch.Tensor) -> str:
    """A digest of the tensors' shapes, dtypes and values: a key for ``remembered``."""
    digest = hashlib.blake2b(digest_size=16)
    for t in tensors:
        digest.update(f"{tuple(t.shape)} {t.dtype};".encode())
        digest.update(t.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def fail(message: str) -> NoReturn:
    raise AssertionError(message)


def not_implemented(what: str) -> NoReturn:
    """Fail for a question still unanswered: its message begins as an untouched stub's (``grade batch`` counts
    such failures apart), its verdict is "not answered". ``what`` is still missing."""
    raise Unanswered(f"{NOT_IMPLEMENTED_MESSAGE}: {what}")


def not_observed(why: str) -> NoReturn:
    """End the check without a verdict: it says why, and its points are set aside (neither won nor lost)."""
    raise NotObserved(why)


def unobserved(value: Any) -> bool:
    """Whether a probe's answer says it saw nothing (``{Reply.UNOBSERVED: why}``): the worker's claim."""
    return isinstance(value, dict) and set(value) == {Reply.UNOBSERVED}


def observed(value: Any) -> Any:
    """A probe's answer, unless the worker says the probe saw nothing."""
    if unobserved(value):
        not_observed(f"the grader could not observe this: {value[Reply.UNOBSERVED]}")
    return value


def describe(value: Any) -> str:
    if isinstance(value, Remote):
        return f"a {value.short_type}"
    if isinstance(value, TensorInfo):
        return f"a tensor on device {value.device}"
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__} ({value!r:.60})"


def tensor(value: Any, what: str, shape: Sequence[int], dtype: torch.dtype | None = torch.float32) -> torch.Tensor:
    """``value`` must be a plain tensor of exactly ``shape`` (and ``dtype``)."""
    if not isinstance(value, torch.Tensor):
        fail(f"{what} should be a torch.Tensor of shape {tuple(shape)}, but your code returned {describe(value)}")
    if tuple(value.shape) != tuple(shape):
        hint = ""
        if sorted(value.shape) == sorted(shape):
            hint = ": the right sizes in the wrong order; is a transpose or view mixing up the axes?"
        fail(f"{what} has shape {tuple(value.shape)}, expected {tuple(shape)}{hint}")
    if dtype is not None and value.dtype != dtype:
        fail(f"{what} has dtype {value.dtype}, expected {dtype}")
    return value


def index_text(index: Sequence[int], axes: Sequence[str]) -> str:
    """'batch 0, position 3, channel 5' (leading unnamed axes are numbered)."""
    names = [f"dim {i}" for i in range(len(index) - len(axes))] + list(axes)[-len(index) :]
    return ", ".join(f"{n} {i}" for n, i in zip(names, index))


def likely_cause(explain: Callable[[], str | None] | None) -> str | None:
    """The known bug that reproduces a submission's output, or None: also when ``explain`` cannot recompute
    it (a module whose parameters are named otherwise, say), for a hint must never crash a check."""
    if explain is None:
        return None
    try:
        return explain()
    except Exception:
        return None


def finite(
    value: torch.Tensor,
    what: str,
    axes: Sequence[str] = BTC,
    hint: str = "",
    explain: Callable[[], str | None] | None = None,
) -> None:
    """Every value finite; on failure, the first bad place and the hint (or the likely bug, if known)."""
    bad = ~torch.isfinite(value)
    if bad.any():
        if not hint and (cause := likely_cause(explain)):
            hint = f"likely cause: {cause}"
        if value.dim() == 0:
            fail(f"{what} is {value.item()}, not a finite number" + (f"; {hint}" if hint else ""))
        index = tuple(int(i) for i in bad.nonzero()[0])
        fail(
            f"{what} holds {value[index].item()} at {index_text(index, axes)} ({int(bad.sum())} non-finite values)"
            + (f"; {hint}" if hint else "")
        )


def assert_close_where(
    actual: torch.Tensor,
    expected: torch.Tensor,
    what: str,
    axes: Sequence[str] = BTC,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    explain: Callable[[], str | None] | None = None,
    sizes: dict[str, float] | None = None,
    causes: dict[str, str] | None = None,
) -> None:
    """Same values within tolerance; on failure, the worst place and the likely bug, if known, else what the
    difference looks like (a factor of one of ``sizes``, shifted positions, ...: ``differences.looks``, with
    ``causes`` for what usually gives each shape here)."""
    finite(actual, what, axes, explain=explain)
    excess = (actual.double() - expected.double()).abs() - (atol + rtol * expected.double().abs())
    if (excess <= 0).all():
        return
    index = tuple(int(i) for i in divmod_index(int(excess.argmax()), actual.shape))
    tolerance = f"{atol:g} + {rtol:g} x |expected|"
    if not index:  # a single number: no place to name
        message = (
            f"{what} differs from the reference: got {actual.item():.6g}, expected {expected.item():.6g} "
            f"(off by more than {tolerance})"
        )
    else:
        message = (
            f"{what} differs from the reference at {index_text(index, axes)}: got {actual[index].item():.6g}, "
            f"expected {expected[index].item():.6g} ({int((excess > 0).sum())} of {actual.numel()} "
            f"values off by more than {tolerance})"
        )
    cause = likely_cause(explain)
    if cause:
        fail(f"{message}. Likely cause: {cause}")
    shape = likely_cause(lambda: differences.looks(actual, expected, axes, sizes, causes))
    fail(message + (f". The difference: {shape}" if shape else ""))


def divmod_index(flat: int, shape: Sequence[int]) -> list[int]:
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return index[::-1]


def number(value: Any, what: str, integer: bool = False) -> float:
    """``value`` must be a plain Python number (an ``int`` where ``integer``), not a tensor or a string."""
    if type(value) is bool or not isinstance(value, int | float):
        fail(
            f"{what} should be a plain Python {'int' if integer else 'number'}, but your code returned "
            f"{describe(value)}" + (": use .item() on a tensor" if isinstance(value, torch.Tensor) else "")
        )
    if isinstance(value, float) and not math.isfinite(value):
        fail(f"{what} should be a finite number, but it is {value!r}")
    if integer and isinstance(value, float) and not value.is_integer():  # float(an int) may overflow
        fail(f"{what} should be a whole number (a count), but it is {value!r}")
    return value


def differs(got: float, want: float, tol: float) -> bool:
    """``got`` is not within ``tol`` of ``want``. Written so that NaN differs from everything: every comparison
    with NaN is False, so ``abs(got - want) > tol`` would let a NaN pass."""
    return not abs(got - want) <= tol


def relative_close(actual: float, expected: float, what: str, rtol: float, hint: str = "") -> None:
    if differs(actual, expected, rtol * abs(expected)):
        fail(
            f"{what} is {actual:.6g}, expected {expected:.6g} (within {rtol:.0e} relative)"
            + (f"; {hint}" if hint else "")
        )


def raises_value_error(thunk: Callable[[], Any], call: str, why: str) -> None:
    """``thunk()`` (a call into the worker) must raise ValueError; ``why`` says what makes the call invalid."""
    try:
        got = thunk()
    except StudentError as e:
        if e.type == ErrorKind.NOT_IMPLEMENTED:
            raise
        if e.type != ErrorKind.VALUE_ERROR:
            fail(
                f"{call} raised {e.type} ({e.message:.120}): {why}, so it must raise ValueError, with a message "
                "that says what is wrong"
            )
        return
    fail(f"{call} returned {describe(got)}: {why}, so it must raise ValueError")


def equal(actual: Any, expected: Any, what: str, hint: str = "") -> None:
    if actual != expected:
        fail(f"{what} is {actual!r}, expected {expected!r}" + (f"; {hint}" if hint else ""))


def training_modes(model: Remote) -> dict[str, Any]:
    """The ``training`` flag of a model in the worker and of its submodules, by name ("" is the model).

    The submodules are those that hold a parameter or a buffer, and every module above them: the state's
    names give them without a worker operation of their own, and ``model.eval()`` reaches them all.
    """
    state = model.state_dict()
    names = {""}
    for key in state if isinstance(state, dict) else ():
        path = str(key).split(".")[:-1]
        names.update(".".join(path[: i + 1]) for i in range(len(path)))
    return {name: model.call("get_submodule", name, keep=True).attr("training") for name in sorted(names)}


def same_training_modes(model: Remote, before: dict[str, Any], function: str) -> None:
    """``function`` left every module of ``model`` in the mode ``before`` recorded (the contract: the model is
    left unchanged, its mode included)."""
    after = training_modes(model)
    for name, was in before.items():
        if after.get(name) != was:
            where = f"model.{name}" if name else "the model"
            now = "eval" if after.get(name) is False else "training"
            fail(
                f"{function} left the model in {now} mode: {where}.training was {was!r} before the call and is "
                f"{after.get(name)!r} after it, but generation must leave the model as it found it. "
                "torch.no_grad() alone records no gradients; if you call model.eval(), restore the caller's mode "
                "afterwards (was_training = model.training, then model.train(was_training))"
            )


# Plain-words causes for parameters that are missing, unexpected or misshapen, by name prefix.
PARAMETER_HINTS = {
    "proj.": "the output projection proj = nn.Linear(d, d)",
    "qkv.": "the fused projection qkv = nn.Linear(d, 3 * d)",
    "head.bias": "the head has no bias: nn.Linear(d, vocab_size, bias=False)",
    "ln.": "the final LayerNorm ln, applied before the head",
    "ln1.": "the LayerNorm ln1 before the attention (pre-norm)",
    "ln2.": "the LayerNorm ln2 before the feed-forward (pre-norm)",
    "ffn.": "the feed-forward nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))",
    "pos.": "the learned position table pos = nn.Embedding(max_T, d)",
    "tok.": "the token embedding tok = nn.Embedding(vocab_size, d)",
    "blocks.": "the n_layers GPTBlocks in blocks",
}


def _hint(name: str) -> str:
    """The hint for the innermost named part: 'blocks.0.attn.proj.weight' gets proj's."""
    dotted = f".{name}"
    matches = [k for k in PARAMETER_HINTS if f".{k}" in dotted]
    key = max(matches, key=lambda k: dotted.rfind(f".{k}"), default=None)
    return f" ({PARAMETER_HINTS[key]})" if key else ""


def same_parameters(described: dict, reference: torch.nn.Module, what: str) -> None:
    """The student's module has the reference's parameter names and shapes (extra buffers are fine)."""
    have = {k: tuple(v) for k, v in described["parameters"].items()}
    want = {k: tuple(p.shape) for k, p in reference.named_parameters()}
    if fault := parameter_fault(have, len(described["all_parameters"]), want, what):
        fail(fault)


def parameter_fault(have: dict[str, tuple], uses: int, want: dict[str, tuple], what: str) -> str | None:
    """Why parameters ``have`` (name -> shape; ``uses``: how many names they go by, a shared one counted each
    time) are not ``want``'s, in words; None where they are."""
    missing = [k for k in want if k not in have]
    extra = [k for k in have if k not in want]
    if uses != len(have):
        return (
            f"{what} uses one parameter under several names: build a separate module for each layer "
            "(one GPTBlock object repeated n_layers times shares its weights)"
        )
    if missing:
        return f"{what} has no parameter {missing[0]}{_hint(missing[0])}" + (
            f" (and {len(missing) - 1} more missing)" if len(missing) > 1 else ""
        )
    if extra:
        return f"{what} has a parameter the lesson's does not: {extra[0]}{_hint(extra[0])}" + (
            f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        )
    for name, shape in want.items():
        if have[name] != shape:
            return f"{what}.{name} has shape {have[name]}, expected {shape}{_hint(name)}"
    return None
