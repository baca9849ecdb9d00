"""Milestone attnvar: multi_head_attention, grouped_query_attention and latent_attention, without loops.

Every check of a function first applies its rules (grader/suites/rules.py: no Python loops over heads
or positions, no library attention), so a broken rule scores 0 for that function. Sizes are picked so
no two axes of a checked tensor are equal: batch 3, T = 7, d = 24, 4 heads of 6, 2 K/V groups, latent
rank 10.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from grader.sandbox.client import StudentError
from grader.sandbox.common.agreement import ErrorKind
from grader.suites import causality, checks, kv_probes, rules
from grader.suites.hidden import diagnose

B, T, D, HEADS, GROUPS, RANK = 3, 7, 24, 4, 2, 10
GROWTH_D = 48  # the rules' calls: 16 heads of 3 at most
MHA, GQA, MLA = "multi_head_attention", "grouped_query_attention", "latent_attention"
FUNCTIONS = (MHA, GQA, MLA)


# ---------------------------------------------------------------- inputs


def inputs(
    seed: int, fn: str, b: int = B, t: int = T, d: int = D, heads: int = HEADS, groups: int = GROUPS, rank: int = RANK
) -> tuple:
    """x and the weights for one call of ``fn`` (the arguments after x, sizes included)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(b, t, d, generator=g)

    def w(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=g) / math.sqrt(rows)

    if fn == MHA:
        return x, (w(d, d), w(d, d), w(d, d), w(d, d), heads)
    if fn == GQA:
        kv = groups * (d // heads)
        return x, (w(d, d), w(d, kv), w(d, kv), w(d, d), heads, groups)
    return x, (w(d, d), w(d, rank), w(rank, d), w(rank, d), w(d, d), heads)


def sizes_of(fn: str, heads: int, t: int, groups: int) -> str:
    return f"n_heads = {heads}" + (f", n_groups = {groups}" if fn == GQA else "") + f", T = {t}"


def growths(fn: str) -> tuple[rules.Growth, ...]:
    """Calls whose numbers of tensor operations must not grow: 4, 8 and 16 heads, then 4, 8 and 16 positions
    (and for GQA, 2, 4 and 8 query heads per group).

    Each growth stays on one code path: never one K/V group (x-transformers' multi-query branch) nor as many
    groups as heads (Llama's n_rep == 1 early return), where a correct function may dispatch other work.
    GQA scales its groups with its heads (2 query heads per group throughout).
    """

    def call(heads: int, groups: int, t: int) -> rules.Call:
        x, rest = inputs(99, fn, b=2, t=t, d=GROWTH_D, heads=heads, groups=groups, rank=12)
        return rules.Call((x, *rest), sizes_of(fn, heads, t, groups))

    found = [
        rules.Growth("the number of heads", *(call(heads, heads // 2, 5) for heads in (4, 8, 16))),
        rules.Growth("the number of positions", *(call(4, 2, t) for t in (4, 8, 16))),
    ]
    if fn == GQA:
        found.append(rules.Growth("the query heads per group", *(call(heads, 2, 5) for heads in (4, 8, 16))))
    return tuple(found)


RULES = (
    rules.NoLoops(
        advice="Work on all heads at once: view (B, T, d) as (B, T, n_heads, head_size) and transpose to "
        "(B, n_heads, T, head_size); one batched matmul then scores every head and every position"
    ),
    rules.NoCalls(
        *rules.LIBRARY_ATTENTION,
        name="no-library-attention",
        says="no library attention",
        advice="This exercise is the attention itself: scores = q @ k^T / sqrt(head_size), -inf above the "
        "diagonal, softmax, weights @ v",
    ),
)
PARTS = {fn: rules.Part(fn, RULES, growths(fn)) for fn in FUNCTIONS}


@pytest.fixture(scope="module")
def verdicts(grading_context) -> rules.Verdicts:
    # A paper may put only some rules in force for this part (grader/paper/); the lesson puts them all.
    return rules.Verdicts(grading_context.submission, active=grading_context.rules_for("attnvar"))


def run(view, verdicts: rules.Verdicts, fn: str, x: torch.Tensor, rest: tuple) -> torch.Tensor:
    """``fn(x, *rest)`` in the worker, once ``fn`` is known to follow its rules; checked to be (B, T, d)."""
    with diagnosed(view, fn):
        verdicts.require(view, PARTS[fn])
        out = view.call(fn, x, *rest)
    return checks.tensor(out, f"{fn}'s output", tuple(x.shape))


@contextmanager
def diagnosed(view, fn: str) -> Iterator[None]:
    """Within the block, an error the student's ``fn`` raises fails with its likely cause where a probe finds
    one. The runner's general hint for sizes that disagree (slice a mask or a position table) does not fit
    GQA, which has neither: there the usual culprit is the count of K/V copies."""
    try:
        yield
    except StudentError as e:
        if fn == GQA and e.type != ErrorKind.NOT_IMPLEMENTED and (cause := group_counts(view)):
            checks.fail(f"{e}. Likely cause: {cause}")
        raise


# ---------------------------------------------------------------- GQA's two counts, told apart
# n_heads query heads in n_groups groups: the group size n_heads // n_groups is the number of query heads that
# share a K/V head, and so how many copies of each K/V head line them up. Where the two counts are the same
# number (4 heads in 2 groups, 9 in 3) code that takes one for the other is right; wherever they differ it is
# not. That pattern, on splits that no other bug passes and fails alike, names the confusion whatever form it
# takes (repeat_interleave's count, an expand's or a view's sizes).

SPLITS_ALIKE = ((4, 2), (9, 3))  # (n_heads, n_groups) with n_groups == n_heads // n_groups
SPLITS_APART = ((6, 2), (6, 3), (8, 2))
PROBE_HEAD_SIZE = 4


def group_counts(view) -> str | None:
    """Why grouped_query_attention is right only where n_groups == n_heads // n_groups, or None where it is not
    so (right or wrong on both kinds of split alike)."""
    outcomes: dict[tuple[int, int], StudentError | bool] = {}
    for heads, groups in (*SPLITS_ALIKE, *SPLITS_APART):
        x, rest = inputs(60 + heads + groups, GQA, b=2, t=5, d=heads * PROBE_HEAD_SIZE, heads=heads, groups=groups)
        try:
            out = view.call(GQA, x, *rest)
        except StudentError as e:
            if e.type == ErrorKind.NOT_IMPLEMENTED:
                return None
            outcomes[heads, groups] = e
            continue
        want = attention(*projections(GQA, x, rest))
        outcomes[heads, groups] = (
            isinstance(out, torch.Tensor)
            and out.shape == want.shape
            and out.dtype == want.dtype
            and torch.allclose(out, want, atol=1e-4, rtol=1e-3)
        )
    if not all(outcomes[s] is True for s in SPLITS_ALIKE) or any(outcomes[s] is True for s in SPLITS_APART):
        return None
    alike = " and ".join(f"{h} heads in {g} groups" for h, g in SPLITS_ALIKE)
    apart = "; ".join(
        f"{h} heads in {g} groups: {f'raised {o.type}' if isinstance(o, StudentError) else 'wrong output'}"
        for (h, g), o in outcomes.items()
        if (h, g) in SPLITS_APART
    )
    return (
        "each K/V head serves n_heads // n_groups query heads, so the repeat count is the group size "
        "n_heads // n_groups, not the number of groups n_groups. Your grouped_query_attention is right only where "
        f"the two are the same number ({alike}) and fails wherever they differ ({apart}){copies_seen(outcomes)}: "
        "somewhere it takes one count for the other. Repeat each K/V head n_heads // n_groups times, in order "
        "(query head h uses K/V head h // (n_heads // n_groups)): k.repeat_interleave(n_heads // n_groups, dim=1); "
        "or, with the query heads grouped instead, view them as (B, T, n_groups, n_heads // n_groups, head_size)"
    )


def copies_seen(outcomes: dict[tuple[int, int], StudentError | bool]) -> str:
    """What a split's error says of the copies made, where it names the query heads against n_groups times a
    count other than the group size: ", and with 6 heads in 2 groups the keys had 4 heads, ..."; else ""."""
    for (heads, groups), outcome in outcomes.items():
        if not isinstance(outcome, StudentError):
            continue
        for a, b in kv_probes.BROADCAST.findall(outcome.message):
            sizes = {int(a), int(b)}
            if heads not in sizes or len(sizes) != 2:
                continue
            (kv,) = sizes - {heads}
            copies, left = divmod(kv, groups)
            if left or copies == heads // groups:
                continue
            said = " (n_groups)" if copies == groups else ""
            return (
                f", and with {heads} heads in {groups} groups the keys had {kv} heads against {heads} query heads: "
                f"each of the {groups} K/V heads copied {copies} times{said} instead of {heads // groups} "
                "(n_heads // n_groups)"
            )
    return ""


# ---------------------------------------------------------------- known bugs, recomputed here


def attention(
    q,
    k,
    v,
    w_o,
    heads: int,
    groups: int,
    *,
    mask="before",
    scale="sqrt_hs",
    split="transpose",
    merge="transpose",
    kv="interleave",
    divisor: float | None = None,
) -> torch.Tensor:
    """Attention of (B, T, d) projections, with the lesson's steps or a known bug in one of them."""
    b, t, d = q.shape
    hs = d // heads

    def heads_of(z: torch.Tensor, n: int) -> torch.Tensor:
        if split == "transpose":
            return z.reshape(b, t, n, hs).transpose(1, 2)
        return z.reshape(b, n, t, hs)

    q, k, v = heads_of(q, heads), heads_of(k, groups), heads_of(v, groups)
    if kv == "interleave":
        k, v = k.repeat_interleave(heads // groups, 1), v.repeat_interleave(heads // groups, 1)
    else:
        k, v = k.repeat(1, heads // groups, 1, 1), v.repeat(1, heads // groups, 1, 1)
    divisor = divisor or {"sqrt_hs": math.sqrt(hs), "none": 1.0, "d": d, "hs": hs, "sqrt_d": math.sqrt(d)}[scale]
    scores = q.double() @ k.double().transpose(-2, -1) / divisor
    below = torch.ones(t, t, dtype=torch.bool).tril()
    if mask == "before":
        scores = scores.masked_fill(~below, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    if mask == "after":
        weights = weights * below
    out = weights @ v.double()
    out = out.transpose(1, 2).reshape(b, t, d) if merge == "transpose" else out.reshape(b, t, d)
    return (out @ w_o.double()).float()


def projections(fn: str, x: torch.Tensor, rest: tuple) -> tuple:
    """(q, k, v, w_o, n_heads, n_groups) for one call of ``fn``."""
    if fn == MHA:
        w_q, w_k, w_v, w_o, heads = rest
        return x @ w_q, x @ w_k, x @ w_v, w_o, heads, heads
    if fn == GQA:
        w_q, w_k, w_v, w_o, heads, groups = rest
        return x @ w_q, x @ w_k, x @ w_v, w_o, heads, groups
    w_q, w_down, w_up_k, w_up_v, w_o, heads = rest
    c = x @ w_down
    return x @ w_q, c @ w_up_k, c @ w_up_v, w_o, heads, heads


KNOWN_BUGS: list[tuple[dict[str, Any], str]] = [
    (dict(mask="none"), "no causal mask: fill the scores of later keys with -inf before the softmax"),
    (
        dict(mask="after"),
        "the mask is applied after the softmax (the weights were zeroed, so each row no longer sums to 1): "
        "fill the scores with -inf before the softmax",
    ),
    (dict(scale="none"), "the scores are not scaled: divide them by sqrt(head_size)"),
    (dict(scale="d"), "the scores are divided by d, the wrong scale: divide them by sqrt(head_size)"),
    (dict(scale="hs"), "the scores are divided by head_size, the wrong scale: divide them by sqrt(head_size)"),
    (dict(scale="sqrt_d"), "the scores are divided by sqrt(d), the wrong scale: use sqrt(head_size), d // n_heads"),
    (
        dict(split="plain"),
        "the heads are split with a plain view to (B, n_heads, T, head_size), which mixes positions and "
        "features: view as (B, T, n_heads, head_size), then transpose(1, 2)",
    ),
    (
        dict(merge="plain"),
        "the heads are merged with a plain view of (B, n_heads, T, head_size): transpose(1, 2) back to "
        "(B, T, n_heads, head_size) before the reshape to (B, T, d)",
    ),
    (
        dict(kv="tile"),
        "the K/V heads are repeated in the wrong order (tiled: 0, 1, 0, 1, ...); query head h uses K/V head "
        "h // (n_heads // n_groups): 0, 0, 1, 1, ... as repeat_interleave (not repeat) gives",
    ),
]


def explain(fn: str, out: torch.Tensor, x: torch.Tensor, rest: tuple, view=None) -> str | None:
    """The known bug that gives exactly ``out``, if one does; for GQA, then the two counts taken one for the
    other (probed on ``view``'s function, where given)."""
    q, k, v, w_o, heads, groups = projections(fn, x, rest)
    for bug, why in KNOWN_BUGS:
        if "kv" in bug and groups in (1, heads):
            continue  # repeat and repeat_interleave agree there
        candidate = attention(q, k, v, w_o, heads, groups, **bug)
        if torch.isfinite(candidate).all() and torch.allclose(out, candidate, atol=1e-4, rtol=1e-3):
            return why
    if fn == GQA and view is not None and (cause := group_counts(view)):
        return cause
    # a scale by another size than the head's: any of the sizes, their roots, products and ratios (the latent's
    # size first, where there is one: it is what latent attention is scaled by by mistake)
    sizes = {"r": rest[1].shape[1]} if fn == MLA else {}
    sizes |= {"head_size": q.shape[-1] // heads, "d": q.shape[-1], "n_heads": heads, "T": x.shape[1]}
    return diagnose.wrong_scale(
        out, lambda divisor: attention(q, k, v, w_o, heads, groups, divisor=divisor), sizes, "sqrt(head_size)"
    )


def reference(ref, fn: str, x: torch.Tensor, rest: tuple) -> torch.Tensor:
    return checks.remembered(
        (
            "attnvar",
            fn,
            checks.fingerprint(x, *[r for r in rest if isinstance(r, torch.Tensor)]),
            tuple(r for r in rest if not isinstance(r, torch.Tensor)),
        ),
        lambda: getattr(ref.m10_attnvar, fn)(x, *rest),
    )


def compare(fn: str, out: torch.Tensor, want: torch.Tensor, x: torch.Tensor, rest: tuple, what: str, view=None) -> None:
    checks.assert_close_where(out, want, what, explain=lambda: explain(fn, out, x, rest, view))


# ---------------------------------------------------------------- the rules


@pytest.mark.points(2)
@pytest.mark.parametrize("fn", FUNCTIONS)
def test_follows_the_contest_rules(attnvar, verdicts, fn):
    """no Python loop over heads or positions, no library attention (checked in the source and while it runs)"""
    with diagnosed(attnvar, fn):
        verdicts.require(attnvar, PARTS[fn])


# ---------------------------------------------------------------- shapes and values

CONFIGS = {
    MHA: [dict(), dict(heads=3), dict(heads=1, b=1, t=5), dict(heads=6, t=11, b=2)],
    GQA: [dict(), dict(groups=1), dict(groups=4), dict(heads=6, groups=3, t=11, b=2)],
    MLA: [dict(), dict(rank=4), dict(heads=3, rank=30), dict(heads=6, t=11, b=2, rank=8)],
}
CASES = [(fn, i) for fn in FUNCTIONS for i in range(len(CONFIGS[fn]))]


def case_id(case) -> str:
    fn, i = case
    return f"{fn}-" + ("-".join(f"{k}{v}" for k, v in CONFIGS[fn][i].items()) or "default")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_output_shape(attnvar, verdicts, case):
    """the output is (B, T, d) for several batch sizes, lengths, head and group counts"""
    fn, i = case
    x, rest = inputs(10 + i, fn, **CONFIGS[fn][i])
    run(attnvar, verdicts, fn, x, rest)


@pytest.mark.points(3)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_matches_reference(attnvar, verdicts, ref, case):
    """with the same seeded inputs and weights, the output equals the reference's"""
    fn, i = case
    x, rest = inputs(20 + i, fn, **CONFIGS[fn][i])
    out = run(attnvar, verdicts, fn, x, rest)
    compare(fn, out, reference(ref, fn, x, rest), x, rest, f"{fn}'s output", attnvar)


# ---------------------------------------------------------------- causality, the four ways m1 checks it

CAUSAL_CHECKS = [*causality.OUTPUT_PROBES, "gradient"]


def perturb(x: torch.Tensor, t: int) -> torch.Tensor:
    x = x.clone()
    x[:, t:] += torch.randn(x[:, t:].shape, generator=torch.Generator().manual_seed(300 + t))
    return x


@pytest.mark.points(2)
@pytest.mark.parametrize("check", CAUSAL_CHECKS)
@pytest.mark.parametrize("fn", FUNCTIONS)
def test_is_causal(attnvar, verdicts, fn, check):
    """outputs depend only on earlier positions of the same batch item (values and gradients)"""
    with diagnosed(attnvar, fn):
        verdicts.require(attnvar, PARTS[fn])
    x, rest = inputs(30, fn)
    other, _ = inputs(31, fn)

    def forward(z: torch.Tensor) -> torch.Tensor:
        with diagnosed(attnvar, fn):
            return attnvar.call(fn, z, *rest)

    shape = tuple(x.shape)
    if check in causality.OUTPUT_PROBES:
        causality.output_probe(check, forward, x, other, perturb, shape, fn)
    else:  # the outputs too: a leak through a detached tensor has no gradient, and the matrix is the worker's claim
        outputs = functools.partial(causality.no_future_leak, forward, x, perturb, shape, fn)
        with diagnosed(attnvar, fn):
            grad = attnvar.function(fn).input_grad(x, *rest)
        causality.causal_gradient(grad, T, fn, otherwise=outputs)


def test_large_inputs_stay_causal(attnvar, verdicts):
    """no leak even for inputs scaled by 1000 (a finite mask fill can be overpowered)"""
    verdicts.require(attnvar, PARTS[MHA])
    x, rest = inputs(32, MHA)

    def perturb_large(z: torch.Tensor, t: int) -> torch.Tensor:
        return z + 999 * (perturb(z, t) - z)

    causality.no_future_leak(
        lambda z: attnvar.call(MHA, z, *rest),
        x * 1e3,
        perturb_large,
        tuple(x.shape),
        f"{MHA} on inputs scaled by 1000",
        tol=causality.SCALED_INPUT_TOLERANCE,
    )


# ---------------------------------------------------------------- equivalences
# Each is a check of GQA or of latent attention alone: the multi-head attention they must equal is the
# reference's, so a rule broken in (or a bug of) the student's multi_head_attention costs only its own points.


@pytest.mark.points(2)
def test_all_groups_is_multi_head(attnvar, verdicts, ref):
    """grouped_query_attention with n_groups = n_heads gives multi_head_attention's output"""
    x, rest = inputs(40, MHA)
    mha = reference(ref, MHA, x, rest)
    gqa = run(attnvar, verdicts, GQA, x, (*rest, HEADS))
    diff = float((gqa - mha).abs().max())
    if diff > 1e-5:
        checks.fail(
            f"with n_groups = n_heads = {HEADS}, grouped_query_attention differs from multi-head attention "
            f"by up to {diff:.3g}: every query head should then have its own K/V head, head h using K/V head h"
        )


@pytest.mark.points(2)
def test_one_group_shares_its_keys_and_values(attnvar, verdicts):
    """with one group and identical query heads, every head gives the same output (one K/V head for all)"""
    x, (w_q, w_k, w_v, _, heads, _) = inputs(41, GQA, groups=1)
    hs = D // heads
    w_q = w_q[:, :hs].repeat(1, heads)  # every query head the same
    out = run(attnvar, verdicts, GQA, x, (w_q, w_k, w_v, torch.eye(D), heads, 1))
    per_head = out.view(B, T, heads, hs)
    diff = (per_head - per_head[:, :, :1]).abs().amax(dim=(0, 1, 3))
    if diff.max() > 1e-5:
        h = int(diff.argmax())
        checks.fail(
            f"with n_groups = 1, w_o = identity and identical query heads, head {h}'s output differs from head "
            f"0's by {float(diff.max()):.3g}: with one group the single K/V head (w_k and w_v are "
            f"(d, head_size) = ({D}, {hs})) must serve every query head"
        )


@pytest.mark.points(2)
def test_latent_with_identity_is_multi_head(attnvar, verdicts, ref):
    """latent_attention with r = d and w_down = I gives multi_head_attention with w_k = w_up_k, w_v = w_up_v"""
    x, rest = inputs(42, MHA)
    w_q, w_k, w_v, w_o, heads = rest
    mha = reference(ref, MHA, x, rest)
    mla = run(attnvar, verdicts, MLA, x, (w_q, torch.eye(D), w_k, w_v, w_o, heads))
    diff = float((mla - mha).abs().max())
    if diff > 1e-5:
        checks.fail(
            f"with w_down = identity, latent_attention differs from multi-head attention by up to {diff:.3g}: "
            "keys and values must come from the latent c = x @ w_down (k = c @ w_up_k, v = c @ w_up_v), queries "
            "from x @ w_q"
        )
