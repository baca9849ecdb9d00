"""kvcache: greedy generation with a key/value cache, on the grader's own TinyGPT.

While this milestone is graded, ``m1_attention`` and ``m2_model`` in the worker are
the grader's, so the model the student's code drives is trusted. Its weights are
copied into the reference TinyGPT in this process, whose uncached ``generate``
(m4) gives the expected tokens. A forward pre-hook on ``blocks.0.attn.qkv`` (in
the worker) counts the positions the student's code really fed to the model.

When tokens differ, a probe first asks whether every pass applies the final
LayerNorm before the head (grader/suites/kv_probes.py); then the grader replays the
most common cache bugs here (the same model, run on the whole sequence with the
bug's positions and attention pattern) and names those that give exactly the
student's tokens. When a call fails on disagreeing sizes, a second probe reads
which axis the cache was joined along.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F

from grader.sandbox.client import StudentError
from grader.sandbox.common.agreement import ErrorKind
from grader.suites import checks, kv_probes

V, D, T = 29, 24, 8
H, L = 4, 2  # heads and layers of the model most checks use
COUNT_AT = "blocks.0.attn.qkv"
SHARPEN = 3.0  # see build


# ------------------------------------------------------------------ the model, prompts, calls


def build(kvcache, ref, seed: int, heads: int = H, layers: int = L):
    """The grader's TinyGPT in the worker, and a copy with the same weights here.

    At its initial scale an untrained model's next token hardly depends on attention (the newest token's
    embedding dominates), so most cache bugs would still give the right tokens: qkv and proj are scaled up.
    """
    model = kvcache.new("TinyGPT", V, D, heads, layers, T, module="m2_model", seed=seed)
    copy = ref.m2_model.TinyGPT(V, D, heads, layers, T)
    state = weights(model, copy)
    for name in state:
        if name.endswith(("attn.qkv.weight", "attn.proj.weight")):
            state[name] = SHARPEN * state[name]
    model.load(state)
    copy.load_state_dict(state)
    return model, copy.eval()


def weights(model, like: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The worker model's weights, each checked against the shape of ``like``'s."""
    state, want = model.state_dict(), like.state_dict()
    if not isinstance(state, dict) or set(state) != set(want):
        checks.fail(
            "the grader's TinyGPT in the worker no longer has its own weights: "
            "your file must not change the m2_model module it is given"
        )
    return {name: checks.tensor(state[name], f"the model's weight {name}", w.shape) for name, w in want.items()}


def attributes(model) -> dict[str, set[str]]:
    """The names each module of ``model`` answers to (``dir()``: its attributes, submodules, parameters and
    buffers), by the module's name ("" is the model): what a cache kept on the model adds to."""
    state = model.state_dict()
    names = {""}
    for key in state if isinstance(state, dict) else ():
        path = str(key).split(".")[:-1]
        names.update(".".join(path[: i + 1]) for i in range(len(path)))
    return {name: set(model.call("get_submodule", name, keep=True).call("__dir__")) for name in sorted(names)}


def kept_on_model(model, before: dict[str, set[str]]) -> str | None:
    """The message when the model holds names it did not hold in ``before``, else None."""
    after = attributes(model)
    added = [f"model.{name}.{a}" if name else f"model.{a}" for name, had in before.items() for a in after[name] - had]
    if not added:
        return None
    return (
        f"after generate_cached, the model holds {', '.join(sorted(added)[:3])}"
        + (f" (and {len(added) - 3} more)" if len(added) > 3 else "")
        + ", which it did not hold before: the cache must not be kept on the model between calls. It keeps "
        "every key and value alive after the call, and the next call (another prompt, another batch size) "
        "finds the last call's keys there. Keep the cache in a local variable of generate_cached, made fresh "
        "in every call: [None] * len(model.blocks)"
    )


def prompt(seed: int, B: int, t: int) -> torch.Tensor:
    return torch.randint(0, V, (B, t), generator=torch.Generator().manual_seed(seed))


def generate_cached(kvcache, model, start: torch.Tensor, max_new: int | None) -> torch.Tensor:
    """The student's result, validated: (B, t + max_new) token ids that start with the prompt.

    A ValueError for a sequence that fits fails with the reason. ``max_new=None`` uses the default.
    """
    B, t = start.shape
    n = 5 if max_new is None else max_new
    kwargs = {} if max_new is None else {"max_new": max_new}
    try:
        out = kvcache.call("generate_cached", model, start, **kwargs)
    except StudentError as e:
        if e.type == "IndexError" and t + n - 1 == T and n > 1 and runs_shorter(kvcache, model, start, n - 1):
            checks.fail(
                f"a prompt of {tokens(t)} with max_new={n} fits (the last token fed sits at position "
                f"t + max_new - 2 = {T - 1}, the position table's last row), but your code raised IndexError "
                f"({e.message:.100}), and not with max_new={n - 1}: a new token is fed at a position one too far, "
                "off by one. The prompt holds positions 0 .. t - 1, so at step i (from 0) the newest token sits "
                "at position t + i - 1"
            )
        if e.type == ErrorKind.VALUE_ERROR and t + n - 1 <= T:
            checks.fail(
                f"a prompt of {tokens(t)} with max_new={n} fits, but your code raised ValueError "
                f"({e.message:.150}): t + max_new - 1 = {t + n - 1} <= model.T = {T}, because the last "
                "new token is never fed; raise only when t + max_new - 1 > model.T"
            )
        # sizes that disagree: the general hint (slice a mask or the position table) does not fit a cache,
        # whose usual culprit is the axis it grows along; the probe reads that axis from its own errors
        if kv_probes.sizes_disagree(e.message) and (cause := kv_probes.cache_axis(kvcache)):
            checks.fail(f"{e}. Likely cause: {cause}")
        raise
    what = f"generate_cached's result for a ({B}, {t}) prompt and max_new={n}"
    if isinstance(out, torch.Tensor) and tuple(out.shape) == (B, n) and n:
        checks.fail(f"{what} holds only the new tokens: return the prompt followed by them, (B, t + max_new)")
    out = checks.tensor(out, what, (B, t + n), dtype=None)
    if out.dtype != torch.long:
        checks.fail(f"{what} has dtype {out.dtype}: token ids are torch.long (argmax gives long; keep it)")
    if not torch.equal(out[:, :t], start):
        checks.fail(f"{what} does not start with the prompt: return the prompt followed by the new tokens")
    return out


def runs_shorter(kvcache, model, start: torch.Tensor, max_new: int) -> bool:
    """Whether generating ``max_new`` tokens from ``start`` runs without raising."""
    try:
        kvcache.call("generate_cached", model, start, max_new=max_new)
    except StudentError:
        return False
    return True


def expected(ref, copy, start: torch.Tensor, max_new: int) -> torch.Tensor:
    """m4's generate on ``copy``, worked out once per grading process for each set of weights and prompt."""
    key = ("kvcache expected", checks.fingerprint(*copy.state_dict().values(), start), max_new)
    return checks.remembered(key, lambda: ref.m4_generate.generate(copy, start, max_new))


def positions_seen(counter) -> int:
    value = counter.attr("positions")
    if type(value) is not int:
        checks.fail("the grader's position counter was tampered with")
    return value


# ------------------------------------------------------------------ the expected tokens, and known bugs replayed


class Bug(NamedTuple):
    """A known bug, replayed on the whole sequence: the positions tokens were fed at, which keys each query saw.

    ``positions(p, t)`` and ``visible(i, j, t)`` take positions in the whole sequence (i a query's, j a key's)
    and the prompt's length t; ``scale`` multiplies the scores (None: 1 / sqrt(d_head)), or is a function of the
    model's width d and its number of heads that gives that factor.
    """

    cause: str
    positions: Callable = lambda p, t: p
    visible: Callable = lambda i, j, t: j <= i
    scale: float | Callable[[int, int], float] | None = None


KNOWN_BUGS = [
    Bug(
        "the prompt pass has no causal mask: each prompt position also attended to the prompt's later positions. "
        "Mask the prompt's scores causally, as in m1 (a single new token may see every cached key, a prompt "
        "position may not)",
        visible=lambda i, j, t: (j <= i) | ((i < t) & (j < t)),
    ),
    Bug(
        "every new token was fed at position t = {t}, the prompt's length: the position index is not advanced. "
        "At step i (from 0) the newest token sits at position t + i - 1",
        positions=lambda p, t: p.clamp(max=t),
    ),
    Bug(
        "the cache is never updated: each new token attended only to itself. Keep each layer's keys and values "
        "from the prompt pass and append the newest token's every step",
        visible=lambda i, j, t: (j <= i) & ((i < t) | (j == i)),
    ),
    Bug(
        "the new tokens' keys and values are not appended to the cache: each new token saw the prompt and "
        "itself only. Store the extended keys and values back in the layer's cache every step",
        visible=lambda i, j, t: (j <= i) & ((i < t) | (j < t) | (j == i)),
    ),
    Bug(
        "each new token was fed at a position one too far, off by one: the prompt holds positions 0 .. t - 1, so at "
        "step i (from 0) the newest token sits at position t + i - 1",
        positions=lambda p, t: torch.where(p >= t, p + 1, p),
    ),
    Bug("the attention scores are not divided by sqrt(d_head), with d_head = d // n_heads", scale=1.0),
    # a bug of every pass, prompt included: the first token may still come out right, the replay tells
    Bug(
        "the attention scores are divided by sqrt(d), the model's width, instead of sqrt(d_head), with d_head = "
        "d // n_heads, in every pass, the prompt's included",
        scale=lambda d, n_heads: d**-0.5,
    ),
]


@torch.no_grad()
def replay(copy, start: torch.Tensor, max_new: int, bug: Bug | None = None) -> torch.Tensor:
    """Greedy generation by whole-sequence forwards of ``copy``, as ``bug`` would compute it (None: no bug)."""
    bug = bug or Bug("")
    idx, t = start, start.shape[1]
    for _ in range(max_new):
        n = idx.shape[1]
        p = torch.arange(n)
        mask = bug.visible(p.view(n, 1), p.view(1, n), t)
        x = copy.tok(idx) + copy.pos(bug.positions(p, t))
        for block in copy.blocks:
            x = x + attention(block.attn, block.ln1(x), mask, bug.scale)
            x = x + block.ffn(block.ln2(x))
        idx = torch.cat([idx, copy.head(copy.ln(x[:, -1])).argmax(dim=-1, keepdim=True)], dim=1)
    return idx


def attention(
    attn, x: torch.Tensor, mask: torch.Tensor, scale: float | Callable[[int, int], float] | None
) -> torch.Tensor:
    B, n, d = x.shape
    q, k, v = (z.view(B, n, attn.n_heads, d // attn.n_heads).transpose(1, 2) for z in attn.qkv(x).split(d, dim=-1))
    scale = scale(d, attn.n_heads) if callable(scale) else scale
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
    return attn.proj(out.transpose(1, 2).reshape(B, n, d))


def same_tokens(
    copy,
    start: torch.Tensor,
    runs: list[torch.Tensor],
    want: torch.Tensor,
    again: Callable[[int], torch.Tensor] | None = None,
    kept: Callable[[], str | None] | None = None,
    probe: Callable[[], str | None] | None = None,
) -> None:
    """Each of the student's results for ``start`` (one per max_new) must be the matching prefix of ``want``.

    The first difference is named, with the likely cause: when ``again(max_new)`` (the student's call repeated)
    gives other tokens than the run did, state kept between calls; else what ``probe()`` finds (a module the
    passes skip); else a known bug that gives every one of the runs.
    """
    t = start.shape[1]
    for got in runs:
        if torch.equal(got, want[:, : got.shape[1]]):
            continue
        i = int((got != want[:, : got.shape[1]]).any(dim=0).nonzero()[0])
        b = int((got[:, i] != want[:, i]).nonzero()[0])
        message = (
            f"with a prompt of {tokens(t)} and max_new={got.shape[1] - t}, new token {i - t + 1} (position "
            f"{i}, batch row {b}) is {int(got[b, i])}, but m4's generate gives {int(want[b, i])}"
        )
        if again is not None and not torch.equal(again(got.shape[1] - t), got):
            on_model = kept() if kept else None
            checks.fail(f"{message}. Likely cause: {on_model}" if on_model else f"{message}. {CARRIED_OVER}")
        if probe is not None and (cause := probe()):
            checks.fail(f"{message}. Likely cause: {cause}")
        checks.fail(f"{message}. {explain_tokens(copy, start, runs, i)}")


# The evidence: the same call, repeated at once, gives other tokens; no bug of one call's arithmetic does that.
CARRIED_OVER = (
    "Likely cause: the same call made again gives other tokens, so something outlives a call: a cache kept in a "
    "default argument (cache=[] is created once, when the function is defined), in a global or on the model. "
    "Start every call "
    "from a fresh cache, [None] * len(model.blocks), made inside generate_cached"
)


def explain_tokens(copy, start: torch.Tensor, runs: list[torch.Tensor], i: int) -> str:
    t, longest = start.shape[1], max(r.shape[1] for r in runs)
    causes = []
    for bug in KNOWN_BUGS:
        try:
            replayed = replay(copy, start, longest - t, bug)
        except IndexError:  # the bug's positions run past the table on this sequence: it explains nothing here
            continue
        if all(torch.equal(r, replayed[:, : r.shape[1]]) for r in runs):
            causes.append(bug.cause.format(t=t))
    if causes:
        return "Likely cause: " + "; or ".join(causes)
    if i == t:
        return (
            "The first new token comes from the prompt pass alone, so that pass already differs from the "
            "model's forward: check the heads' split (B, t, n_heads, d // n_heads), the scaling by sqrt(d_head), "
            "the causal mask, both residuals, ln1 and ln2, model.ln and model.head on the last position, and "
            "each layer starting from an empty cache of its own"
        )
    return (
        "The first new token is right, so the prompt pass is likely right (a bug in every pass, such as the "
        "scaling, can still leave one token unchanged): then the cache or the positions of later steps are "
        "wrong (the position index not advanced, keys and values not appended to the cache, or one layer "
        "reading another layer's cache)"
    )


def final_norm(kvcache, model, copy) -> Callable[[], str | None]:
    """The probe of whether each pass applies model.ln before the head, on ``model`` (whose weights are
    ``copy``'s)."""
    return functools.partial(kv_probes.final_norm, kvcache, model, copy.state_dict())


def tokens(t: int) -> str:
    return f"{t} token" if t == 1 else f"{t} tokens"


# ------------------------------------------------------------------ the checks


@pytest.mark.points(3)
@pytest.mark.parametrize(
    "B,heads,layers,seed", [(3, 4, 2, 15), (2, 3, 3, 28)], ids=["4-heads-2-layers-batch-3", "3-heads-3-layers-batch-2"]
)
def test_same_tokens_as_generate(kvcache, ref, B, heads, layers, seed):
    """generate_cached gives m4's tokens for every prompt length and max_new that fit in model.T"""
    model, copy = build(kvcache, ref, seed, heads, layers)
    fresh = attributes(model)
    probe = final_norm(kvcache, model, copy)
    for t in range(1, T + 1):
        start = prompt(100 * seed + t, B, t)
        want = expected(ref, copy, start, T + 1 - t)  # every max_new is a prefix of the longest
        runs = [generate_cached(kvcache, model, start, max_new) for max_new in range(1, T + 2 - t)]
        again = functools.partial(generate_cached, kvcache, model, start)
        kept = functools.partial(kept_on_model, model, fresh)
        same_tokens(copy, start, runs, want, again=again, kept=kept, probe=probe)


def test_result_is_prompt_then_new_tokens(kvcache, ref):
    """generate_cached(model, start) returns the prompt then 5 new tokens, a (B, t + 5) long tensor"""
    model, copy = build(kvcache, ref, 21)
    start = prompt(21, 2, 3)
    runs = [generate_cached(kvcache, model, start, None)]
    same_tokens(copy, start, runs, expected(ref, copy, start, 5), probe=final_norm(kvcache, model, copy))


def test_zero_new_tokens(kvcache, ref):
    """generate_cached(model, start, 0) returns the prompt unchanged"""
    model, _ = build(kvcache, ref, 22)
    generate_cached(kvcache, model, prompt(22, 2, 4), 0)


def test_exactly_fills_the_context(kvcache, ref):
    """a sequence whose last fed token sits at the last position (t + max_new - 1 = model.T) is generated"""
    model, copy = build(kvcache, ref, 23)
    probe = final_norm(kvcache, model, copy)
    for t in (T, 1, 4):
        start = prompt(230 + t, 2, t)
        want = expected(ref, copy, start, T + 1 - t)
        same_tokens(copy, start, [generate_cached(kvcache, model, start, T + 1 - t)], want, probe=probe)


def fed(prompt_len: int, max_new: int, cached: bool) -> int:
    if max_new == 0:
        return 0
    return prompt_len + max_new - 1 if cached else max_new * prompt_len + max_new * (max_new - 1) // 2


def explain_count(got: int, p: int, m: int, cached: bool) -> str:
    if m == 0:
        return "with max_new = 0 nothing is generated, so nothing is fed"
    if got == fed(p, m + 1, cached):
        return (
            "you counted the last new token as fed: the step that produces it is the last one, nothing is fed after it"
        )
    if got == fed(p, m, not cached):
        return f"that is the count {'without' if cached else 'with'} a cache"
    if cached and got in (m - 1, m):
        return "you forgot the prompt: with a cache it is still fed once, in the first step"
    if not cached and got in (m * (m - 1) // 2, m * (m + 1) // 2):
        return "you forgot the prompt: without a cache every step feeds it again, with the tokens generated so far"
    if not cached:
        return "without a cache, step i (from 0) feeds the whole sequence so far: prompt_len + i positions"
    return "with a cache, the prompt is fed once, then one position per step after the first"


@pytest.mark.points(2)
@pytest.mark.parametrize(
    "prompt_len,max_new,cached",
    [
        (10, 20, False),
        (10, 20, True),
        (3, 4, False),
        (3, 4, True),
        (1, 6, False),
        (1, 6, True),
        (7, 1, True),
        (5, 0, False),
        (5, 0, True),
    ],
    ids=[
        "lesson-uncached",
        "lesson-cached",
        "3+4-uncached",
        "3+4-cached",
        "1+6-uncached",
        "1+6-cached",
        "7+1-cached",
        "nothing-new-uncached",
        "nothing-new-cached",
    ],
)
def test_positions_processed(kvcache, prompt_len, max_new, cached):
    """positions_processed counts the positions fed to the model, with and without a cache"""
    call = f"positions_processed({prompt_len}, {max_new}, cached={cached})"
    got = int(checks.number(kvcache.call("positions_processed", prompt_len, max_new, cached), call, integer=True))
    want = fed(prompt_len, max_new, cached)
    if got != want:
        checks.fail(f"{call} is {got!r}, expected {want}: {explain_count(got, prompt_len, max_new, cached)}")


@pytest.mark.points(2)
def test_each_position_fed_once(kvcache, ref):
    """generate_cached makes the model process the prompt once, then one new token per step"""
    model, copy = build(kvcache, ref, 24)
    counter = model.count_positions(COUNT_AT)
    for t, max_new in ((3, 5), (1, 8), (6, 1)):
        before = positions_seen(counter)
        start = prompt(240 + t, 1, t)
        out = generate_cached(kvcache, model, start, max_new)
        got, want, uncached = positions_seen(counter) - before, fed(t, max_new, True), fed(t, max_new, False)
        if got == want:
            continue
        message = (
            f"with a prompt of {tokens(t)} and max_new={max_new}, model.{COUNT_AT} processed {got} positions, "
            f"expected {want} (the prompt once, then the {max_new - 1} new tokens before the last one)"
        )
        if got == 0 and torch.equal(out, expected(ref, copy, start, max_new)):
            # a count the worker keeps is its claim: what it cannot show, this check cannot credit
            checks.fail(
                f"your code generated the right tokens without calling model.{COUNT_AT} as a "
                "module (F.linear with its weight?), so the grader could not count the positions fed. Call the "
                "model's submodules as modules, block.attn.qkv(x), as the stub asks"
            )
        if got == 0:
            checks.fail(
                f"{message}: the model's submodules were not called as modules (no positions seen). Call "
                "them, block.attn.qkv(x), rather than using their weights or a copy of the model"
            )
        if got == uncached:
            checks.fail(
                f"{message}: you fed the whole sequence each step (no cache), {uncached} positions in all. "
                "Feed the prompt once, then only the newest token, reusing the cached keys and values"
            )
        if got == want + 1:
            checks.fail(f"{message}: the last new token was fed too, but nothing uses its prediction")
        checks.fail(f"{message}: each position passes through each layer exactly once")


def test_too_long_raises_value_error(kvcache, ref):
    """a sequence that would run past model.T raises ValueError before generating"""
    model, _ = build(kvcache, ref, 25)
    counter = model.count_positions(COUNT_AT)
    for t, max_new in ((T, 2), (5, 5), (T + 1, 1)):
        case = (
            f"a prompt of {tokens(t)} with max_new={max_new} (t + max_new - 1 = {t + max_new - 1} > "
            f"model.T = {T}: the last token fed would sit past the position table)"
        )
        before = positions_seen(counter)
        try:
            out = kvcache.call("generate_cached", model, prompt(250 + t, 2, t), max_new)
        except StudentError as e:
            if e.type == ErrorKind.NOT_IMPLEMENTED:
                raise
            if e.type != ErrorKind.VALUE_ERROR:
                checks.fail(
                    f"for {case} your code raised {e.type} ({e.message:.120}): a clear ValueError is "
                    "expected, raised before generating: check t + max_new - 1 > model.T first"
                )
            if positions_seen(counter) > before:
                checks.fail(
                    f"for {case} your code raised ValueError, but only after feeding "
                    f"{positions_seen(counter) - before} positions: check before generating anything"
                )
            continue
        checks.fail(
            f"for {case} generate_cached returned {checks.describe(out)}: it must raise ValueError (a "
            "cache cannot crop the sequence as m4's generate does)"
        )


def test_model_unchanged(kvcache, ref):
    """generation records no gradients and only reads the model: its weights are the same afterwards, and it holds
    nothing new (no cache kept on it between calls), after two calls of other batch sizes and lengths"""
    model, copy = build(kvcache, ref, 26)
    before = copy.state_dict()
    counter = model.count_positions(COUNT_AT)
    held = attributes(model)
    for B, t, max_new in ((2, 2, 5), (3, 5, 3)):
        try:
            generate_cached(kvcache, model, prompt(260 + t, B, t), max_new)
        except StudentError as e:  # the second call running into the first call's cache, say
            if e.type == ErrorKind.NOT_IMPLEMENTED or not (kept := kept_on_model(model, held)):
                raise
            checks.fail(f"the call for a ({B}, {t}) prompt raised {e.type} ({e.message:.100}); {kept}")
    if kept := kept_on_model(model, held):
        checks.fail(kept)
    if counter.attr("calls_with_grad"):  # seen where the code calls the submodule (the contract asks it to)
        checks.fail("the model was called with gradients enabled: wrap generation in torch.no_grad()")
    for name, value in weights(model, copy).items():
        if not torch.equal(value, before[name]):
            checks.fail(
                f"generation changed the model's weight {name}: it must only read the model "
                "(keep the cache in your own tensors, and change nothing in place)"
            )


def test_training_mode_kept(kvcache, ref):
    """generation leaves the model in the mode it found it in: a model in training mode stays so"""
    model, _ = build(kvcache, ref, 27)
    model.call("train", True, keep=True)  # as a training loop that samples between steps leaves it
    before = checks.training_modes(model)
    generate_cached(kvcache, model, prompt(270, 2, 3), 4)
    checks.same_training_modes(model, before, "generate_cached")
