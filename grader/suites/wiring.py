"""How a student's layers are wired, read back from their outputs with weights the grader chooses.

Each probe sets a module's weights so that one part of its wiring shows plainly in what it returns: which channels
an attention head keeps (the heads' layout), what a block adds back around each sublayer (the residuals), what a
sublayer receives (a LayerNorm's output: its mean, its divisor, its eps), which nonlinearity the feed-forward
applies, and where the model reads its positions. A reading names what the code did, never the reference's numbers:
the public checks run these probes in the student release, and the hidden checks use them to name the cause of a
mismatch. Every weight here follows the names and shapes the stubs document; the math (LayerNorm, GELU) is
torch's own.

A probe returns None when what it reads is right, and a sentence saying what the code does otherwise. It runs the
student's code in the worker like any check: a probe used to explain another failure is wrapped by
``checks.likely_cause``, which turns any error into "no explanation".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from grader.sandbox.client import Remote
from grader.suites import attention_scale, causality, checks
from grader.suites.causality import random_fault

EPS = 1e-5  # nn.LayerNorm's default, the lesson's

# ---------------------------------------------------------------- parameters the stubs document


def attention_parameters(d: int, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """CausalSelfAttention(d, n_heads)'s parameters by name: qkv = Linear(d, 3d), proj = Linear(d, d)."""
    shapes = {"qkv.weight": (3 * d, d), "qkv.bias": (3 * d,), "proj.weight": (d, d), "proj.bias": (d,)}
    return {prefix + k: v for k, v in shapes.items()}


def block_parameters(d: int, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """GPTBlock(d, n_heads)'s parameters, in the order the stub creates them: ln1, attn, ln2, ffn."""
    shapes = {
        "ln1.weight": (d,),
        "ln1.bias": (d,),
        **attention_parameters(d, "attn."),
        "ln2.weight": (d,),
        "ln2.bias": (d,),
        "ffn.0.weight": (4 * d, d),
        "ffn.0.bias": (4 * d,),
        "ffn.2.weight": (d, 4 * d),
        "ffn.2.bias": (d,),
    }
    return {prefix + k: v for k, v in shapes.items()}


def model_parameters(vocab: int, d: int, n_layers: int, max_T: int) -> dict[str, tuple[int, ...]]:
    """TinyGPT(vocab, d, n_heads, n_layers, max_T)'s parameters, in the stub's order: tok, pos, blocks, ln, head."""
    shapes: dict[str, tuple[int, ...]] = {"tok.weight": (vocab, d), "pos.weight": (max_T, d)}
    for i in range(n_layers):
        shapes.update(block_parameters(d, f"blocks.{i}."))
    shapes.update({"ln.weight": (d,), "ln.bias": (d,), "head.weight": (vocab, d)})
    return shapes


def parameter_fault(module: Remote, want: Mapping[str, Sequence[int]], what: str) -> str | None:
    """Why ``module``'s parameters are not ``want``'s names and shapes (the probes below set weights by those
    names), or None. Extra buffers are fine."""
    described = module.describe()
    try:
        have = {str(k): tuple(int(n) for n in v) for k, v in described["parameters"].items()}
        uses = len(described["all_parameters"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return f"the grader cannot read {what}'s parameters"
    return checks.parameter_fault(have, uses, {k: tuple(v) for k, v in want.items()}, what)


# ---------------------------------------------------------------- small tools


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _output(value: Any, what: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The output as float64, after the same shape and finiteness checks any check makes."""
    out = checks.tensor(value, what, shape)
    checks.finite(out, what)
    return out.double()


def _close(a: torch.Tensor, b: torch.Tensor, atol: float) -> bool:
    return a.shape == b.shape and bool(((a - b).abs() <= atol).all())


# ---------------------------------------------------------------- the heads' layout


@dataclass(frozen=True)
class Layout:
    """How (B, T, d) becomes (B, n_heads, T, d_head) and back."""

    split: str  # "transpose": view(B, T, H, dh).transpose(1, 2); "plain": view(B, H, T, dh); "interleaved"
    merge: str  # the same names, undoing each


SPLITS = {
    "transpose": "view(B, T, n_heads, d_head).transpose(1, 2)",
    "plain": "a plain view or reshape to (B, n_heads, T, d_head)",
    "interleaved": "view(B, T, d_head, n_heads), its last axis moved forward (head h takes every n_heads-th feature)",
}


def _split(x: torch.Tensor, H: int, how: str) -> torch.Tensor:
    B, T, d = x.shape
    if how == "transpose":
        return x.reshape(B, T, H, d // H).transpose(1, 2)
    if how == "plain":
        return x.reshape(B, H, T, d // H)
    return x.reshape(B, T, d // H, H).permute(0, 3, 1, 2)


def _merge(x: torch.Tensor, how: str) -> torch.Tensor:
    B, H, T, dh = x.shape
    if how == "transpose":
        return x.transpose(1, 2).reshape(B, T, H * dh)
    if how == "plain":
        return x.reshape(B, T, H * dh)
    return x.permute(0, 2, 3, 1).reshape(B, T, H * dh)


def _uniform_attention(x: torch.Tensor, H: int, layout: Layout) -> torch.Tensor:
    """What q = k = 0, v = x and proj = identity give: each head averages its values over the positions allowed."""
    v = _split(x, H, layout.split)
    T = v.shape[-2]
    weights = torch.ones(T, T, dtype=x.dtype).tril()
    weights = weights / weights.sum(-1, keepdim=True)
    return _merge(weights @ v, layout.merge)


LAYOUT_D, LAYOUT_HEADS, LAYOUT_T = 12, 3, 5  # d_head 4: T, n_heads and d_head all differ, so layouts do too


def impulses(T: int = LAYOUT_T, d: int = LAYOUT_D) -> torch.Tensor:
    """(T * d, T, d): batch item p * d + c is 1 at position p, channel c, and 0 elsewhere."""
    return torch.eye(T * d).reshape(T * d, T, d)


def layout_weights(d: int) -> dict[str, torch.Tensor]:
    """q = k = 0 (every score 0: uniform attention over the allowed keys), v = the input, proj = identity."""
    eye, zero = torch.eye(d), torch.zeros(d, d)
    return {
        "qkv.weight": torch.cat([zero, zero, eye]),
        "qkv.bias": torch.zeros(3 * d),
        "proj.weight": eye,
        "proj.bias": torch.zeros(d),
    }


def head_layout_fault(layer: Remote, what: str = "CausalSelfAttention") -> str | None:
    """Reads where a one-hot input lands: with q = k = 0, v and proj the identity, each head averages its own
    d_head features over the earlier positions, so channel c of the input reaches channel c of the output only.
    ``layer`` is a CausalSelfAttention(LAYOUT_D, LAYOUT_HEADS) in the worker; its weights are replaced."""
    layer.load(layout_weights(LAYOUT_D))
    x = impulses()
    if fault := random_fault(layer, x, what):  # dropout would scatter the impulses: say so, not "the layout"
        return fault
    out = _output(layer(x), f"{what}'s output", tuple(x.shape))
    # response[p, c, t, c']: how much input (p, c) reaches output (t, c')
    response = out.reshape(LAYOUT_T, LAYOUT_D, LAYOUT_T, LAYOUT_D)
    elsewhere = response * (1 - torch.eye(LAYOUT_D, dtype=torch.float64))[None, :, None, :]
    if not elsewhere.abs().max() > 1e-5:
        return None  # channels stay where they are: whatever else is wrong, the layout is not
    p, c, t, c2 = (int(i) for i in (elsewhere.abs() == elsewhere.abs().max()).nonzero()[0])
    seen = (
        f"{what}({LAYOUT_D}, {LAYOUT_HEADS}), with q = k = 0 and v and proj the identity, moves an input at position "
        f"{p}, channel {c} to position {t}, channel {c2}, where each head only averages its own d_head features over "
        "the earlier positions, so a feature never changes channel"
    )
    for split in SPLITS:
        for merge in SPLITS:
            layout = Layout(split, merge)
            if layout == Layout("transpose", "transpose"):
                continue
            want = _uniform_attention(x.double(), LAYOUT_HEADS, layout)
            if _close(out, want, 1e-5):
                return f"{what}: {_layout_cause(layout)} ({seen})"
    return (
        f"{what}: the heads' layout is wrong: split (B, T, d) with view(B, T, n_heads, d_head).transpose(1, 2), and "
        f"merge with transpose(1, 2) then reshape(B, T, d) ({seen})"
    )


def projection_fault(layer: Remote, d: int, what: str = "CausalSelfAttention") -> str | None:
    """Whether ``layer``'s output is its ``proj`` applied last: with proj's weight 0 and its bias c, it must return
    c at every position, whatever the heads did. ``layer`` is a CausalSelfAttention(d, n_heads) in the worker."""
    c = _vector(61, d)
    g = _generator(63)
    layer.load(
        {
            "qkv.weight": 0.3 * torch.randn(3 * d, d, generator=g),
            "qkv.bias": 0.1 * torch.randn(3 * d, generator=g),
            "proj.weight": torch.zeros(d, d),
            "proj.bias": c,
        }
    )
    x = torch.randn(2, 4, d, generator=_generator(62))
    if fault := random_fault(layer, x, what):  # dropout after proj moves its output: say so, not "apply proj"
        return fault
    out = _output(layer(x), f"{what}'s output", tuple(x.shape))
    if _close(out, c.double().expand_as(out), 1e-5):
        return None
    return (
        f"{what}, with proj's weight set to 0 and its bias to a vector c, should return c at every position (its "
        "output is proj of the merged heads, and proj then ignores them), and does not: apply self.proj last, to "
        "the heads merged back into (B, T, d)"
    )


def _layout_cause(layout: Layout) -> str:
    fix_split = (
        "the heads are split with "
        + SPLITS[layout.split]
        + ", which mixes features of different positions into one head: view (B, T, d) as (B, T, n_heads, d_head) "
        "first, then transpose(1, 2) (a view or reshape cannot move an axis)"
    )
    fix_merge = (
        "the heads are merged without transposing back: out is (B, n_heads, T, d_head); transpose(1, 2) to "
        "(B, T, n_heads, d_head), then reshape(B, T, d)"
        if layout.merge == "plain"
        else "the heads are merged as if interleaved: transpose(1, 2), then reshape(B, T, d)"
    )
    if layout.split != "transpose" and layout.merge != "transpose":
        return f"{fix_split}; and {fix_merge}"
    return fix_split if layout.split != "transpose" else fix_merge


# ---------------------------------------------------------------- a LayerNorm, read from its output


def _norm_forms(d: int) -> dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]]:
    """A divisor's form: (the divisor from the variance v and eps e, the eps that gives divisor s at variance v)."""
    u = d / (d - 1)  # the unbiased variance's factor
    return {
        "right": (lambda v, e: (v + e).sqrt(), lambda v, s: s * s - v),
        "unbiased": (lambda v, e: (u * v + e).sqrt(), lambda v, s: s * s - u * v),
        "outside": (lambda v, e: v.sqrt() + e, lambda v, s: s - v.sqrt()),
        "unbiased outside": (lambda v, e: (u * v).sqrt() + e, lambda v, s: s - (u * v).sqrt()),
        "no root": (lambda v, e: v + e, lambda v, s: s - v),
    }


def _divisor_form(centred: torch.Tensor, normed: torch.Tensor, atol: float) -> tuple[str, float] | None:
    """(form, eps) of the divisor that maps each row of ``centred`` to ``normed``, or None where no form does."""
    d = centred.shape[-1]
    var = (centred * centred).mean(-1)
    along = (centred * normed).sum(-1)
    if not (along > 0).all():
        return None
    divisor = (centred * centred).sum(-1) / along  # least squares: normed = centred / divisor
    for form, (divide, eps_of) in _norm_forms(d).items():
        # each row's own eps; the right one gives every row's output within float32's rounding
        for eps in sorted({EPS, 0.0, *(float(e) for e in eps_of(var, divisor))}):
            if eps < 0 or not math.isfinite(eps):
                continue
            if _close(centred / divide(var, torch.tensor(eps, dtype=torch.float64))[:, None], normed, atol):
                return form, eps
    return None


def norm_fault(
    inputs: torch.Tensor,
    outputs: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    name: str,
    others: Mapping[str, tuple[torch.Tensor, torch.Tensor]] = {},
    atol: float = 2e-5,
) -> str | None:
    """How ``outputs`` (N, d) differ from LayerNorm(inputs) with ``weight``, ``bias`` and eps 1e-5, in words; None
    when they do not. ``name`` is the LayerNorm meant ("ln2"); ``others`` the model's other LayerNorms' (weight,
    bias), by name, for a norm that uses the wrong one's. ``atol``: what float32 and the probe's path allow."""
    h, r = inputs.double(), outputs.double()
    w, b = weight.double(), bias.double()
    if _close(r, F.layer_norm(h, h.shape[-1:], w, b, EPS), atol):
        return None
    if _close(r, h, atol):
        return f"what should be {name}'s output is its input unchanged: {name} is not applied"
    affines = {
        f"{name}'s weight and bias": (w, b),
        "no weight and no bias": (torch.ones_like(w), torch.zeros_like(b)),
        f"{name}'s weight but no bias": (w, torch.zeros_like(b)),
        f"{name}'s bias but no weight": (torch.ones_like(w), b),
        **{f"{other}'s weight and bias": (ow.double(), ob.double()) for other, (ow, ob) in others.items()},
    }
    centred = h - h.mean(-1, keepdim=True)
    for affine, (aw, ab) in affines.items():
        normed = (r - ab) / aw
        tolerance = atol / float(aw.abs().min())
        for mean, rows in (("", centred), (" without subtracting the mean", h)):
            found = _divisor_form(rows, normed, tolerance)
            if found is None:
                continue
            form, eps = found
            if affine.startswith(f"{name}'s weight and") and not mean and form == "right" and _eps_is(eps, EPS):
                return None  # right within the reading's precision
            return _norm_words(name, affine, mean, form, eps)
    return (
        f"{name}'s output is not a LayerNorm of its input: each row minus its mean, divided by sqrt(var + 1e-5) "
        f"(var the mean of the squares, over d), times {name}.weight, plus {name}.bias"
    )


def _eps_is(eps: float, want: float) -> bool:
    return math.isclose(eps, want, rel_tol=0.05)


def _eps_text(eps: float) -> str:
    """1e-06 as 1e-6, 0 as 0 (no eps)."""
    if eps < 1e-15:
        return "0 (no eps at all)"
    return f"{eps:.1g}".replace("e-0", "e-")


def _norm_words(name: str, affine: str, mean: str, form: str, eps: float) -> str:
    """The sentence for a LayerNorm read as ``form`` with ``eps``, scaled by ``affine``."""
    faults = []
    if not affine.startswith(f"{name}'s weight and"):
        faults.append(f"it applies {affine} (a LayerNorm multiplies by {name}.weight, then adds {name}.bias)")
    if mean:
        faults.append("it does not subtract each row's mean (x - x.mean(-1, keepdim=True))")
    if form.startswith("unbiased"):
        faults.append(
            "its variance is the unbiased one, divided by d - 1 (torch.var's and Tensor.std's default): a "
            "LayerNorm's divides by d (unbiased=False)"
        )
    if form.endswith("outside"):
        faults.append("it adds eps outside the square root (std + eps): a LayerNorm divides by sqrt(var + eps)")
    if form == "no root":
        faults.append("it divides by var + eps, not its square root")
    if not _eps_is(eps, EPS):
        faults.append(f"its eps is {_eps_text(eps)}, not 1e-5, nn.LayerNorm's default, which the lesson uses")
    return f"{name} is not the lesson's LayerNorm: " + "; ".join(faults)


# ---------------------------------------------------------------- GELU, read from its values

GELU_POINTS = torch.linspace(-3, 3, 12, dtype=torch.float64)
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "ReLU, max(0, z)": F.relu,
    "GELU's tanh approximation (approximate='tanh')": lambda z: F.gelu(z, approximate="tanh"),
    "no nonlinearity at all: f(z) = z": lambda z: z,
    "SiLU, z * sigmoid(z)": F.silu,
    "tanh": torch.tanh,
    "the sigmoid": torch.sigmoid,
    "LeakyReLU": F.leaky_relu,
    "ELU": F.elu,
}


def activation_fault(values: torch.Tensor, what: str = "the feed-forward's nonlinearity") -> str | None:
    """How ``values``, a nonlinearity's outputs at ``GELU_POINTS``, differ from exact GELU's; None where not."""
    z, f = GELU_POINTS, values.double()
    if _close(f, F.gelu(z), 2e-5):
        return None
    shown = ", ".join(f"f({float(a):.3g}) = {float(b):.4f}" for a, b in list(zip(z, f))[::3])
    named = next((name for name, g in ACTIVATIONS.items() if _close(f, g(z), 2e-5)), None)
    return (
        f"{what} gives {shown}"
        + (f": that is {named}" if named else "")
        + "; the lesson's is GELU, nn.GELU() (the exact form, z * Phi(z)): f(-1) = -0.1587, f(1) = 0.8413"
    )


# ---------------------------------------------------------------- readings taken in order


def _reading(probe: Any, step: str) -> str | None:
    readings = probe._readings
    if step not in readings:
        readings[step] = getattr(probe, f"_{step}")()
    return readings[step]


def _first_fault(probe: Any, steps: Sequence[str], upto: str) -> str | None:
    for step in steps[: steps.index(upto) + 1]:
        if (fault := _reading(probe, step)) is not None:
            return fault
    return None


def _check(probe: Any, steps: Sequence[str], own: Sequence[str], whole: str) -> None:
    last = max(steps.index(step) for step in own)
    for step in steps[: last + 1]:
        if (fault := _reading(probe, step)) is None:
            continue
        if step in own:
            checks.fail(fault)
        checks.not_observed(f"this part of {whole} is read only once the parts before it are right, and {fault}")


# ---------------------------------------------------------------- GPTBlock

BLOCK_D, BLOCK_HEADS = 12, 3


def _vector(seed: int, d: int, spread: float = 0.5, centre: float = 0.0) -> torch.Tensor:
    return centre + spread * torch.randn(d, generator=_generator(seed))


def _norm_weights(seed: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A LayerNorm's weight and bias that change what it gives (at 1 and 0 leaving either out would not show):
    weights in [0.75, 1.25], so the probes' paths stay in range."""
    g = _generator(seed)
    return 0.75 + 0.5 * torch.rand(d, generator=g), 0.3 * torch.randn(d, generator=g)


def _scaled_rows(seed: int, n: int, d: int) -> torch.Tensor:
    """(n, d) rows whose variances run from 1 down to 1e-9: eps 1e-5 shows in the small ones."""
    scales = torch.logspace(0, -4.5, n, dtype=torch.float64)
    rows = torch.randn(n, d, generator=_generator(seed), dtype=torch.float64)
    rows = (rows - rows.mean(-1, keepdim=True)) / rows.std(-1, unbiased=False, keepdim=True)
    # a mean to subtract, on each row's own scale: on a far larger one, float32 would round its spread away
    offset = torch.randn(n, 1, generator=_generator(seed + 1), dtype=torch.float64)
    return ((rows + offset) * scales[:, None]).float()


class BlockProbe:
    """GPTBlock(BLOCK_D, BLOCK_HEADS) probed part by part; each reading is taken once, in order, and a later one
    is read only when those before it hold (a block without its residuals says nothing about its norms)."""

    STEPS = ("parameters", "random", "sublayers", "residuals", "activation", "ln2", "ln1")

    def __init__(self, make: Callable[[], Remote], what: str = "GPTBlock") -> None:
        self.make, self.what, self.d = make, what, BLOCK_D
        self._readings: dict[str, str | None] = {}
        self._block: Remote | None = None

    def fault(self, upto: str = "ln1") -> str | None:
        """The first fault among the readings up to ``upto`` (one of ``STEPS``), or None."""
        return _first_fault(self, self.STEPS, upto)

    def check(self, *own: str) -> None:
        """A check of the readings ``own`` (the last one and those before it read in order): fails with the first
        fault among them; set aside, saying why, when a reading before them fails (another check's fault)."""
        _check(self, self.STEPS, own, "the block")

    # each reading sets the whole state: what one left never shapes the next
    def _state(self, **parts: torch.Tensor) -> dict[str, torch.Tensor]:
        d = self.d
        g = _generator(11)
        ln1, ln2 = _norm_weights(1, d), _norm_weights(2, d)
        state = {
            "ln1.weight": ln1[0],
            "ln1.bias": ln1[1],
            "attn.qkv.weight": 0.3 * torch.randn(3 * d, d, generator=g),
            "attn.qkv.bias": 0.1 * torch.randn(3 * d, generator=g),
            "attn.proj.weight": torch.zeros(d, d),
            "attn.proj.bias": torch.zeros(d),
            "ln2.weight": ln2[0],
            "ln2.bias": ln2[1],
            "ffn.0.weight": 0.3 * torch.randn(4 * d, d, generator=g),
            "ffn.0.bias": 0.1 * torch.randn(4 * d, generator=g),
            "ffn.2.weight": torch.zeros(d, 4 * d),
            "ffn.2.bias": torch.zeros(d),
        }
        state.update(parts)
        return state

    def block(self) -> Remote:
        if self._block is None:
            self._block = self.make()
        return self._block

    def run(self, state: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        block = self.block()
        block.load(state)
        return _output(block(x), f"{self.what}'s output", tuple(x.shape))

    def _parameters(self) -> str | None:
        return parameter_fault(self.block(), block_parameters(self.d), self.what)

    def _random(self) -> str | None:
        block = self.block()
        block.load(self._state(**{"attn.proj.weight": 0.3 * torch.eye(self.d), "ffn.2.weight": self._down(0.3)}))
        return random_fault(block, torch.randn(2, 4, self.d, generator=_generator(3)), self.what)

    def _down(self, scale: float) -> torch.Tensor:
        """A (d, 4d) second Linear that reads the first d hidden units back, times ``scale``."""
        return torch.cat([scale * torch.eye(self.d), torch.zeros(self.d, 3 * self.d)], dim=1)

    def _sublayers(self) -> str | None:
        """attn and ffn, each called alone with its last Linear's weight 0, return that Linear's bias: the readings
        below make them constant so."""
        d = self.d
        block = self.block()
        attn = block.call("get_submodule", "attn", keep=True)
        if fault := projection_fault(attn, d, f"{self.what}.attn, your CausalSelfAttention (m1_attention.py),"):
            return fault
        c = _vector(64, d)
        block.load(self._state(**{"ffn.2.bias": c}))
        x = torch.randn(2, 4, d, generator=_generator(62))
        out = _output(block.call("get_submodule", "ffn", keep=True)(x), f"{self.what}.ffn's output", tuple(x.shape))
        if not _close(out, c.double().expand_as(out), 1e-5):
            return (
                f"{self.what}.ffn, with its last Linear's weight set to 0, should return that Linear's bias at every "
                "position, and does not: the feed-forward is Linear(d, 4d), GELU, Linear(4d, d), in that order"
            )
        return None

    def _residuals(self) -> str | None:
        """attn and ffn made constant (their last Linear's weight 0, its bias a vector): what is left is what the
        block adds around them, x + c_attn + c_ffn."""
        d = self.d
        c_attn, c_ffn = _vector(21, d), _vector(22, d)
        x = torch.randn(2, 4, d, generator=_generator(23)) + 0.5
        y = self.run(self._state(**{"attn.proj.bias": c_attn, "ffn.2.bias": c_ffn}), x)
        terms = torch.stack([t.double().expand_as(x).flatten() for t in (x, c_attn, c_ffn)])
        coefficients = torch.linalg.lstsq(terms.T, y.flatten()).solution
        fitted = (terms.T @ coefficients).reshape(y.shape)
        if _close(fitted, y, 1e-4):
            a, b, c = (round(float(k), 3) + 0.0 for k in coefficients)  # + 0.0: no "-0"
            if (a, b, c) == (1, 1, 1):
                return None
            return self._residual_words(a, b, c)
        for ln, (w, bias) in (("ln2", _norm_weights(2, d)), ("ln1", _norm_weights(1, d))):
            normed = (y - bias.double()) / w.double()
            if _close(normed.mean(-1), torch.zeros(y.shape[:-1], dtype=torch.float64), 1e-3) and _close(
                normed.var(-1, unbiased=False), torch.ones(y.shape[:-1], dtype=torch.float64), 2e-2
            ):
                return (
                    f"{self.what}'s output is normalised by {ln}, after the residual is added (post-norm): the "
                    "lesson's block is pre-norm, it normalises only what goes into each sublayer and adds the "
                    "sublayer's output to the un-normalised x: x = x + attn(ln1(x)), then x = x + ffn(ln2(x))"
                )
        return (
            f"with attn and ffn made constant (their output Linear's weight set to 0), {self.what} should return "
            "x + attn's constant + ffn's constant, and it returns something else: the block must be "
            "x = x + attn(ln1(x)), then x = x + ffn(ln2(x))"
        )

    def _residual_words(self, a: float, b: float, c: float) -> str:
        said = f"{self.what} returns {a:g} x + {b:g} attn(...) + {c:g} ffn(...) where the lesson's block returns x + "
        said += "attn(ln1(x)) + ffn(ln2(...)) (read with attn and ffn made constant)"
        if (a, b, c) == (0, 1, 1):
            return f"{said}: the residual around the attention is missing, x = x + attn(ln1(x)), not attn(ln1(x))"
        if (a, b, c) == (0, 0, 1):
            return f"{said}: the residual around the feed-forward is missing, x = x + ffn(ln2(x)), not ffn(ln2(x))"
        if (a, b, c) == (0, 0, 0):
            return f"{said}: no residual at all"
        parts = []
        if a != 1:
            parts.append("the input x must be carried through once (x = x + ...)")
        if b != 1:
            parts.append("the attention's output must be added once and carried into the feed-forward's residual")
        if c != 1:
            parts.append("the feed-forward's output must be added once")
        return f"{said}: " + "; ".join(parts)

    def _activation(self) -> str | None:
        """ffn's first Linear 0 and its bias the points: the hidden units hold f(points) whatever the input, and
        the second Linear reads them back."""
        d = self.d
        points = torch.zeros(4 * d)
        points[:d] = GELU_POINTS.float()
        x = torch.randn(2, 3, d, generator=_generator(31))
        state = self._state(
            **{"ffn.0.weight": torch.zeros(4 * d, d), "ffn.0.bias": points, "ffn.2.weight": self._down(1)}
        )
        y = self.run(state, x)
        return activation_fault((y - x.double()).reshape(-1, d).mean(0), f"{self.what}'s feed-forward nonlinearity")

    SHIFT = 12.0  # GELU(u) = u within float32 for u >= 6: ffn's input plus SHIFT stays above it

    def _ln2(self) -> str | None:
        """ffn made the identity (its first Linear shifts its input far up, where GELU is linear, the second shifts
        it back), attn silent: the block returns x + what ffn received, ln2(x)."""
        d = self.d
        up = torch.cat([torch.eye(d), torch.zeros(3 * d, d)])
        shift = torch.cat([torch.full((d,), self.SHIFT), torch.zeros(3 * d)])
        state = self._state(
            **{"ffn.0.weight": up, "ffn.0.bias": shift, "ffn.2.weight": self._down(1), "ffn.2.bias": -shift[:d]}
        )
        x = _scaled_rows(41, 12, d).reshape(12, 1, d)
        y = self.run(state, x)
        received = (y - x.double()).reshape(-1, d)
        ln1, ln2 = _norm_weights(1, d), _norm_weights(2, d)
        fault = norm_fault(x.reshape(-1, d), received, *ln2, "ln2", {"ln1": ln1}, atol=2e-5)
        return None if fault is None else f"{self.what}: {fault} (read from what its feed-forward receives)"

    def _ln1(self) -> str | None:
        """One position, q = k = 0 and v and proj the identity: attn returns what it received, ln1(x); ffn silent."""
        d = self.d
        state = self._state(**{f"attn.{k}": v for k, v in layout_weights(d).items()})
        x = _scaled_rows(51, 12, d).reshape(12, 1, d)
        y = self.run(state, x)
        attn = self.block().call("get_submodule", "attn", keep=True)
        alone = _output(attn(x), f"{self.what}.attn's output", tuple(x.shape))
        if not _close(alone, x.double(), 1e-5):
            return (
                f"{self.what}.attn, your CausalSelfAttention (m1_attention.py), with q = k = 0 and v and proj the "
                "identity should return its input at a single position (its one key gets all the weight), and "
                "does not: the block's attention input cannot be read"
            )
        received = (y - x.double()).reshape(-1, d)
        ln1, ln2 = _norm_weights(1, d), _norm_weights(2, d)
        fault = norm_fault(x.reshape(-1, d), received, *ln1, "ln1", {"ln2": ln2}, atol=2e-5)
        return None if fault is None else f"{self.what}: {fault} (read from what its attention receives)"


# ---------------------------------------------------------------- TinyGPT

MODEL = (20, 12, 3, 2, 6)  # vocab, d, n_heads, n_layers, max_T: vocab > d, so the head can give ln's output back


class ModelProbe:
    """TinyGPT(*MODEL) probed part by part, in order: its blocks (as ``BlockProbe`` reads them), then the final
    LayerNorm, then the positions it reads."""

    STEPS = ("parameters", "random", "blocks", "final_norm", "positions")

    def __init__(self, make: Callable[[], Remote], what: str = "TinyGPT") -> None:
        self.make, self.what = make, what
        self.vocab, self.d, self.heads, self.layers, self.max_T = MODEL
        self._readings: dict[str, str | None] = {}
        self._model: Remote | None = None

    def fault(self, upto: str = "positions") -> str | None:
        """The first fault among the readings up to ``upto`` (one of ``STEPS``), or None."""
        return _first_fault(self, self.STEPS, upto)

    def check(self, *own: str) -> None:
        """As ``BlockProbe.check``."""
        _check(self, self.STEPS, own, "the model")

    def model(self) -> Remote:
        if self._model is None:
            self._model = self.make()
        return self._model

    def _state(self, **parts: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every block silent (attn's and ffn's last Linear 0: a right block gives its input back), ln's weights
        varied, and a head whose first d rows read ln's output back."""
        V, d = self.vocab, self.d
        g = _generator(71)
        state = {"tok.weight": torch.randn(V, d, generator=g), "pos.weight": torch.randn(self.max_T, d, generator=g)}
        for i in range(self.layers):
            for name, shape in block_parameters(d, f"blocks.{i}.").items():
                state[name] = 0.3 * torch.randn(shape, generator=g)
            for name in ("attn.proj.weight", "attn.proj.bias", "ffn.2.weight", "ffn.2.bias"):
                state[f"blocks.{i}.{name}"] = torch.zeros(block_parameters(d)[name])
        state["ln.weight"], state["ln.bias"] = _norm_weights(7, d)
        state["head.weight"] = torch.cat([torch.eye(d), 0.3 * torch.randn(V - d, d, generator=g)])
        state.update(parts)
        return state

    def run(self, state: dict[str, torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
        model = self.model()
        model.load(state)
        return _output(model(idx), f"{self.what}'s logits", (*idx.shape, self.vocab))

    def _parameters(self) -> str | None:
        return parameter_fault(self.model(), model_parameters(self.vocab, self.d, self.layers, self.max_T), self.what)

    def _random(self) -> str | None:
        model = self.model()
        model.load(self._state(**{f"blocks.{i}.attn.proj.weight": torch.eye(self.d) for i in range(self.layers)}))
        return random_fault(model, torch.arange(10).reshape(2, 5) % self.vocab, self.what)

    def _blocks(self) -> str | None:
        probe = BlockProbe(lambda: self.model().call("get_submodule", "blocks.0", keep=True), f"{self.what}.blocks[0]")
        probe.d = self.d
        return probe.fault()

    def _final_norm(self) -> str | None:
        """Positions 0, blocks silent: the first d logits are ln(tok[idx])."""
        d = self.d
        tok = _scaled_rows(81, self.vocab, d)
        idx = torch.arange(self.vocab).reshape(4, self.vocab // 4)
        logits = self.run(self._state(**{"tok.weight": tok, "pos.weight": torch.zeros(self.max_T, d)}), idx)
        received = logits[..., :d].reshape(-1, d)
        fault = norm_fault(tok[idx].reshape(-1, d), received, *_norm_weights(7, d), "ln, the final LayerNorm,")
        if fault is None:
            return None
        if "is its input unchanged" in fault:
            return f"{self.what} never applies its final LayerNorm ln: the head reads ln's output, logits = head(ln(x))"
        return f"{self.what}: {fault} (read from the logits)"

    def _positions(self) -> str | None:
        """Tokens 0, blocks silent: the first d logits are ln(pos[j]) for the row j each position reads."""
        d, t = self.d, self.max_T - 2
        pos = torch.randn(self.max_T, d, generator=_generator(91))
        idx = torch.arange(2 * t).reshape(2, t) % self.vocab
        logits = self.run(self._state(**{"tok.weight": torch.zeros(self.vocab, d), "pos.weight": pos}), idx)
        received = logits[..., :d].double()
        w, b = _norm_weights(7, d)
        rows = F.layer_norm(pos.double(), (d,), w.double(), b.double(), EPS)
        read: list[int | None] = []
        for i in range(t):
            same = [j for j in range(self.max_T) if _close(received[:, i], rows[j].expand(2, d), 1e-4)]
            read.append(same[0] if same else None)
        if read == list(range(t)):
            return None
        if all(j is None for j in read) and _close(received, b.double().expand_as(received), 1e-4):
            return f"{self.what} adds no position embedding: x = tok(idx) + pos(torch.arange(t))"
        return f"{self.what}, given {t} tokens, {_positions_words(read, t, self.max_T)}"


def _positions_words(read: list[int | None], t: int, max_T: int) -> str:
    """What the rows of pos read at positions 0..t-1 say, in words."""
    pairs = ", ".join(f"position {i} row {j}" for i, j in enumerate(read) if j is not None)
    said = f"reads these rows of its position table: {pairs}" if pairs else "reads no single row of pos per position"
    if None in read:
        return f"{said}; each position i must read row i: pos(torch.arange(t))"
    first = read[0] or 0
    if read == list(range(first, first + t)):
        cause = (
            "the rows are aligned to the end of the table (arange(max_T - t, max_T))"
            if first + t == max_T
            else f"positions are counted from {first} (arange({first}, t + {first}))"
        )
        return f"{said}: {cause}; count them from 0 with torch.arange(t)"
    if read == list(range(t))[::-1]:
        return f"{said}: the positions run backwards; use torch.arange(t)"
    return f"{said}: position i must read row i, pos(torch.arange(t))"


def lesson_initial_state(vocab: int, d: int, n_heads: int, n_layers: int, max_T: int, seed: int) -> dict:
    """What ``torch.manual_seed(seed)`` then creating the layers in the stubs' order gives, by parameter name: the
    lesson's initial weights, made of torch's own layers (the numbers are torch's random stream, not a secret)."""
    checks.seed(seed)
    state = {"tok.weight": torch.nn.Embedding(vocab, d).weight, "pos.weight": torch.nn.Embedding(max_T, d).weight}
    for i in range(n_layers):
        layers = {
            "ln1": torch.nn.LayerNorm(d),
            "attn.qkv": torch.nn.Linear(d, 3 * d),
            "attn.proj": torch.nn.Linear(d, d),
            "ln2": torch.nn.LayerNorm(d),
            "ffn.0": torch.nn.Linear(d, 4 * d),
            "ffn.2": torch.nn.Linear(4 * d, d),
        }
        for name, layer in layers.items():
            state.update({f"blocks.{i}.{name}.{k}": v for k, v in layer.named_parameters()})
    final = torch.nn.LayerNorm(d)
    state.update({"ln.weight": final.weight, "ln.bias": final.bias})
    state["head.weight"] = torch.nn.Linear(d, vocab, bias=False).weight
    return {k: v.detach() for k, v in state.items()}


def initial_weights_fault(model: Remote, config: tuple[int, int, int, int, int], seed: int, what: str) -> str | None:
    """Which of ``model``'s initial parameters (made after manual_seed(``seed``)) first differs from what creating
    the layers in the stubs' order gives, in words; None where none does."""
    want = lesson_initial_state(*config, seed=seed)
    state = model.state_dict()
    for name, expected in want.items():
        got = state.get(name) if isinstance(state, dict) else None
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or not torch.allclose(got, expected):
            return (
                f"seeded with torch.manual_seed({seed}), {what}'s initial {name} is not what creating its layers in "
                "the stubs' order gives: tok, pos, then in each block ln1, attn (qkv, then proj), ln2, ffn, then "
                "ln and head. A layer created in another order, or something extra that draws random numbers "
                "before it, changes every seeded number the lesson prints"
            )
    return None


# ---------------------------------------------------------------- what a later check builds on


def earlier_fault(view: Any) -> str | None:
    """The first fault of the student's milestones 1 and 2 that these probes read, in words, or None: for a later
    check that runs them (the student release's lesson, kvcache and concepts checks run the student's own files),
    so that its failure names the earlier behaviour at fault instead of its own. ``view``: that check's milestone
    view. A reading that cannot be taken (the student's class raises) is skipped."""

    def layer() -> Remote:
        return view.new("CausalSelfAttention", LAYOUT_D, LAYOUT_HEADS, module="m1_attention")

    readings: list[Callable[[], str | None]] = [
        lambda: head_layout_fault(layer()),
        lambda: attention_scale.layer_scale_fault(
            view.new("CausalSelfAttention", attention_scale.D, attention_scale.HEADS, module="m1_attention")
        ),
        lambda: _leak_fault(view),
        lambda: BlockProbe(lambda: view.new("GPTBlock", BLOCK_D, BLOCK_HEADS, module="m2_model")).fault(),
        lambda: ModelProbe(lambda: view.new("TinyGPT", *MODEL, module="m2_model")).fault(),
        lambda: initial_weights_fault(
            view.new("TinyGPT", 50, 64, 4, 2, 8, seed=42, module="m2_model"), (50, 64, 4, 2, 8), 42, "TinyGPT"
        ),
    ]
    for reading in readings:
        if fault := checks.likely_cause(reading):
            return f"your milestones 1 and 2, which this check runs, are not the lesson's: {fault}"
    return None


def _leak_fault(view: Any) -> str | None:
    """What the causality probe says of the student's TinyGPT: later tokens must not move earlier logits."""
    vocab, T = MODEL[0], MODEL[4]
    model = view.new("TinyGPT", *MODEL, seed=0, module="m2_model")
    x = causality.random_tokens(0, 2, T, vocab)
    try:
        causality.no_future_leak(model, x, causality.token_perturbation(vocab), (2, T, vocab), "TinyGPT", logits=True)
    except AssertionError as e:
        return str(e)
    return None
