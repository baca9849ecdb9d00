"""What a wrong result looks like next to the right one, in words, and what usually makes a difference of that shape.

A check that knows no bug reproducing a student's result can still say how it differs: by a constant factor (and
which of the problem's sizes that factor is: T, sqrt(d), d / d_head, B * T), by positions shifted by one, by an
axis in another order, or by a transposed layout. Those shapes have few usual causes, so the message can teach
without a list of known bugs. Nothing here holds a reference's code or numbers: the public checks use it too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import torch


def size_expressions(sizes: Mapping[str, float]) -> list[tuple[str, float]]:
    """Names for the numbers a factor may be: each size and its square root, then products and ratios of two."""
    found = [(name, float(v)) for name, v in sizes.items()]
    found += [(f"sqrt({name})", math.sqrt(v)) for name, v in sizes.items()]
    found += [(f"{a} * {b}", float(va * vb)) for (a, va), (b, vb) in itertools.combinations(sizes.items(), 2)]
    found += [(f"{a} / {b}", va / vb) for (a, va), (b, vb) in itertools.permutations(sizes.items(), 2)]
    return [(name, v) for name, v in found if v > 0 and not math.isclose(v, 1.0)]


def name_of(value: float, sizes: Mapping[str, float], rel: float = 1e-3) -> str | None:
    """The first expression of ``sizes`` equal to ``value`` ("T", "sqrt(d)", "d / d_head"), or None."""
    return next((name for name, v in size_expressions(sizes) if math.isclose(value, v, rel_tol=rel)), None)


def factor_text(factor: float, sizes: Mapping[str, float]) -> tuple[str, str | None]:
    """('7 = T', 'T') for a factor of 7 where T = 7; ('0.1429 = 1/T', 'T'); the bare number and None where no
    size gives it."""
    if (name := name_of(factor, sizes)) is not None:
        return f"{factor:.4g} = {name}", name
    if factor and (name := name_of(1 / factor, sizes)) is not None:
        return (f"{factor:.4g} = 1/{name}" if " " not in name else f"{factor:.4g} = 1/({name})"), name
    return f"{factor:.4g}", None


def constant_factor(actual: torch.Tensor, expected: torch.Tensor) -> float | None:
    """c where ``actual`` is c times ``expected`` everywhere (c not 1), else None."""
    a, e = actual.double().flatten(), expected.double().flatten()
    if a.shape != e.shape or not torch.isfinite(a).all() or float(e @ e) == 0:
        return None
    c = float(a @ e) / float(e @ e)
    scale = float(e.abs().max())
    if math.isclose(c, 1.0, rel_tol=1e-3) or not torch.allclose(a, c * e, atol=1e-5 * scale * max(1, abs(c))):
        return None
    return c


def shifted(actual: torch.Tensor, expected: torch.Tensor, axis: int) -> int | None:
    """k (+1 or -1) where ``actual`` at index i of ``axis`` holds ``expected`` at i + k (where both exist)."""
    n = actual.shape[axis]
    if n < 3 or actual.shape != expected.shape:
        return None
    for k in (1, -1):
        got = actual.narrow(axis, max(0, -k), n - 1)
        want = expected.narrow(axis, max(0, k), n - 1)
        if torch.allclose(got, want, atol=1e-5, rtol=1e-4) and not torch.allclose(actual, expected):
            return k
    return None


def permutation(actual: torch.Tensor, expected: torch.Tensor, axis: int) -> list[int] | None:
    """The order p (not the identity) in which ``actual`` holds ``expected``'s slices along ``axis``: slice i of
    ``actual`` is slice p[i] of ``expected``. None when no reordering gives it."""
    n = actual.shape[axis]
    if n < 2 or actual.shape != expected.shape:
        return None
    order = []
    for i in range(n):
        got = actual.select(axis, i)
        same = [j for j in range(n) if torch.allclose(got, expected.select(axis, j), atol=1e-5, rtol=1e-4)]
        if not same:
            return None
        order.append(same[0])
    return order if sorted(order) == list(range(n)) and order != list(range(n)) else None


def exchanged_axes(actual: torch.Tensor, expected: torch.Tensor) -> tuple[int, int] | None:
    """(a, b) when ``actual`` holds ``expected``'s values laid out with axes a and b exchanged, then read back in
    the expected shape (a view or reshape where a transpose was needed)."""
    for a, b in itertools.combinations(range(expected.dim()), 2):
        if expected.shape[a] == expected.shape[b] == 1:
            continue
        laid = expected.transpose(a, b).contiguous().reshape(expected.shape)
        if not torch.allclose(laid, expected) and torch.allclose(actual, laid, atol=1e-5, rtol=1e-4):
            return a, b
    return None


# What usually gives a difference of each shape, by the factor's name or the axis; a check adds its own.
FACTOR_CAUSES = {
    "T": "a sum over the T positions where the mean is asked for (or a mean where the sum is)",
    "B * T": "a sum over every position of the batch where the mean is asked for",
    "B": "a sum over the batch where the mean is asked for",
}


def looks(
    actual: torch.Tensor,
    expected: torch.Tensor,
    axes: Sequence[str],
    sizes: Mapping[str, float] | None = None,
    causes: dict[str, str] | None = None,
) -> str | None:
    """How ``actual`` differs from ``expected`` in plain words, and what usually causes that, or None when the
    difference has none of the shapes this module knows. ``axes`` names the trailing axes; ``sizes`` the
    numbers a factor may be (``{"T": 7, "d": 24}``); ``causes`` maps a factor's name (or "shift", "order",
    "layout") to what usually causes it, over ``FACTOR_CAUSES``."""
    sizes, causes = sizes or {}, {**FACTOR_CAUSES, **(causes or {})}
    names = [f"dim {i}" for i in range(actual.dim() - len(axes))] + list(axes)[-actual.dim() :]
    if actual.shape != expected.shape:
        return None
    if (c := constant_factor(actual, expected)) is not None:
        text, name = factor_text(c, sizes)
        cause = causes.get(name or "")
        return f"every value is {text} times the expected one, a constant factor" + (
            f": what usually causes that is {cause}" if cause else ""
        )
    for axis, name in enumerate(names):
        if name == "position" and (k := shifted(actual, expected, axis)) is not None:
            cause = causes.get("shift", "positions counted from 1 instead of 0, or a position index off by one")
            return (
                f"each position holds what the position {'after' if k > 0 else 'before'} it should: the "
                f"positions are shifted by one; what usually causes that is {cause}"
            )
    for axis, name in enumerate(names):
        if (order := permutation(actual, expected, axis)) is not None:
            reverse = order == list(range(len(order)))[::-1]
            where = "in reverse order" if reverse else f"in the order {order}"
            cause = causes.get("order", "an index computed the wrong way, or a flip, roll or reshape along it")
            return f"the right values, with the {name}s {where}; what usually causes that is {cause}"
    if (pair := exchanged_axes(actual, expected)) is not None:
        a, b = (names[i] for i in pair)
        cause = causes.get("layout", "a view or reshape where a transpose is needed")
        return (
            f"the right values laid out in another order, as if the {a} and {b} axes were exchanged and read "
            f"back in the expected shape; what usually causes that is {cause}"
        )
    return None
