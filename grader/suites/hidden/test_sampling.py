"""Milestone `sampling`: temperature, top-k and top-p, with randomness only from a generator.

Every expected value is recomputed in float64 from the contract (``sampling_math``);
nothing of the student's is imported. The top-p cases are chosen so that no cumulative
probability lies within 1e-3 of p: the set to keep is never a matter of rounding.
Draws are checked three ways: exactly where the answer is certain (greedy,
top_k=1), as a set (never a token the filters remove), and by their frequencies
(a chi-square test at p = 1e-6 over 20,000 draws made in one call).
Generation runs on the grader's stand-in model, as in milestone 4.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from grader.sandbox.client import StudentError
from grader.sandbox.common.agreement import ErrorKind
from grader.sandbox.common.protocol import SeededGenerator
from grader.sandbox.worker.standin import make_standin
from grader.suites import checks
from grader.suites.generation import wrong_length
from grader.suites.hidden.sampling_math import (
    BASE,
    DRAWS,
    chi_square,
    chi_square_bound,
    distribution,
    fits,
    keep_mask,
    likely_cause,
)
from grader.suites.shape_hints import shape_hint

LM_V, LM_D, LM_T = 29, 16, 8  # the stand-in language model


def rows(seed: int, *shape: int, scale: float = 1.5) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def describe_filters(top_k: int | None = None, top_p: float | None = None, temperature: float | None = None) -> str:
    parts = [f"{k}={v}" for k, v in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)) if v is not None]
    return ", ".join(parts) or "no filter"


def ids_of(mask: torch.Tensor) -> list[int]:
    return mask.nonzero().flatten().tolist()


def reraise_unimplemented(e: StudentError) -> None:
    if e.type == ErrorKind.NOT_IMPLEMENTED:
        raise e


# ---------------------------------------------------------------- calls into the worker, validated


def kept(sampling, logits: torch.Tensor, error_hint: str = "", **filters) -> torch.Tensor:
    """The student's filter_logits as a keep mask; the kept logits must be untouched, the others -inf."""
    call = f"filter_logits({describe_filters(**filters)}) on logits of shape {tuple(logits.shape)}"
    try:
        # a check's own error hint knows its input best (leading dims); else the function's shape hint
        with contextlib.nullcontext() if error_hint else shape_hint("filter_logits"):
            out = sampling.call("filter_logits", logits, **filters)
    except StudentError as e:
        reraise_unimplemented(e)
        if e.type == ErrorKind.VALUE_ERROR and filters.get("top_p") == 1:
            checks.fail(
                f"{call} raised ValueError ({e.message}): top_p = 1 is valid (it keeps every token); "
                "only a top_p outside (0, 1] is an error"
            )
        checks.fail(f"{call}: {e}" + (f"; {error_hint}" if error_hint else ""))
    out = checks.tensor(out, "filter_logits's result", logits.shape)
    same = out == logits
    dropped = out == float("-inf")
    odd = ~(same | dropped)
    if odd.any():
        index = tuple(int(i) for i in odd.nonzero()[0])
        where = checks.index_text(index, ("row", "token id") if logits.dim() == 2 else checks.BTV)
        got, was = out[index].item(), logits[index].item()
        if got < -1e8 or got == float("inf"):
            checks.fail(
                f"{call} set a removed token to {got:g} at {where}: use float('-inf'), so that the "
                "softmax gives it probability exactly 0"
            )
        checks.fail(
            f"{call} changed a logit it should keep or remove: {got:g} instead of {was:g} at {where}. "
            "filter_logits leaves the kept logits as they are and sets the others to -inf (no scaling, "
            "no softmax)"
        )
    return same


def token_ids(value, B: int, vocab: int, what: str = "sample_next's result", strict: bool = True) -> torch.Tensor:
    """(B,) torch.long ids in [0, vocab). Not ``strict``: ids of another integer dtype are read as long, so that
    one dtype slip costs the one check that asks for torch.long, not every check that draws."""
    if isinstance(value, torch.Tensor) and tuple(value.shape) == (B, 1):
        checks.fail(
            f"{what} has shape ({B}, 1), expected ({B},): one id per row, so squeeze the last axis "
            "(torch.multinomial(probs, 1) is (B, 1))"
        )
    value = checks.tensor(value, what, (B,), dtype=None)
    integer = not (value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool)
    if value.dtype != torch.long and integer and not strict:
        value = value.long()
    if value.dtype != torch.long:
        checks.fail(
            f"{what} has dtype {value.dtype}, expected torch.long (int64), the dtype torch gives token ids "
            "and embeddings take: "
            + (
                "convert with .long()"
                if integer
                else "sample ids with torch.multinomial or argmax, which return torch.long, not floats"
            )
        )
    if ((value < 0) | (value >= vocab)).any():
        bad = int(value[(value < 0) | (value >= vocab)][0])
        checks.fail(f"{what} holds the token id {bad}, outside the vocabulary 0..{vocab - 1}")
    return value


def draw(
    sampling, logits: torch.Tensor, gen_seed: int, seed: int | None = None, strict: bool = False, **kwargs
) -> torch.Tensor:
    """sample_next's ids; only the check that asks for torch.long is ``strict`` about their dtype."""
    with shape_hint("sample_next"):
        out = sampling.call("sample_next", logits, SeededGenerator(gen_seed), seed=seed, **kwargs)
    return token_ids(out, logits.shape[0], logits.shape[-1], strict=strict)


def generated(
    sampling, model, start: torch.Tensor, max_new: int, gen_seed: int, seed: int | None = None, **kwargs
) -> torch.Tensor:
    """generate_sampled's result, validated: (B, t + max_new) long ids that start with the prompt."""
    try:
        with shape_hint("generate_sampled"):
            out = sampling.call(
                "generate_sampled", model, start, max_new, SeededGenerator(gen_seed), seed=seed, **kwargs
            )
    except StudentError as e:
        if e.type == ErrorKind.VALUE_ERROR and "model.T" in e.message:
            checks.fail(
                f"generate_sampled fed the model too many tokens ({e.message}): crop to the last "
                "model.T tokens, idx[:, -model.T:], before every call"
            )
        raise
    B, t = start.shape
    if isinstance(out, torch.Tensor) and (cause := wrong_length(out, start, max_new, LM_V, greedy=False)):
        checks.fail(f"generate_sampled's result has shape {tuple(out.shape)}, expected {(B, t + max_new)}: {cause}")
    out = checks.tensor(out, "generate_sampled's result", (B, t + max_new), dtype=None)
    if out.dtype != torch.long:
        checks.fail(f"generate_sampled's result has dtype {out.dtype}: token ids are torch.long")
    if not torch.equal(out[:, :t], start):
        checks.fail(
            "generate_sampled's result does not start with the prompt: return the prompt followed by the new tokens"
        )
    if ((out < 0) | (out >= LM_V)).any():
        checks.fail(f"generate_sampled's result holds token ids outside the vocabulary 0..{LM_V - 1}")
    return out


def prompt(seed: int, B: int, t: int) -> torch.Tensor:
    return torch.randint(0, LM_V, (B, t), generator=torch.Generator().manual_seed(seed))


# ---------------------------------------------------------------- filter_logits


@pytest.mark.points(2)
def test_top_k(sampling):
    """filter_logits(top_k=k) keeps exactly the k largest logits, unchanged, and sets the others to -inf"""
    logits = rows(1, 2, 10)
    V = logits.shape[-1]
    for k in (3, 1, 9, V, V + 3):
        got = kept(sampling, logits, "a top_k of V or more keeps every token: use min(top_k, V)", top_k=k)
        want = keep_mask(logits, top_k=k)
        for r in range(logits.shape[0]):
            if torch.equal(got[r], want[r]):
                continue
            n, n_want = int(got[r].sum()), int(want[r].sum())
            largest = logits[r].argsort(descending=True)[:n_want].sort().values.tolist()
            if k >= V:
                checks.fail(
                    f"top_k={k} with only V = {V} tokens kept {n} of them in row {r}: a top_k of V or more "
                    "keeps every token (use min(top_k, V))"
                )
            if abs(n - n_want) == 1:
                checks.fail(
                    f"top_k={k} kept {n} tokens in row {r}, expected exactly {k}: off by one. Keep the k "
                    "largest logits, the k-th largest itself included: mask where logits < the k-th "
                    "largest value (torch.topk(logits, k).values[..., -1:])"
                )
            checks.fail(
                f"top_k={k} kept tokens {ids_of(got[r])} in row {r}, expected the {n_want} largest, "
                f"{largest}: compare each row with its own k-th largest value, along the last axis (dim=-1)"
            )


@pytest.mark.points(2)
def test_top_p(sampling):
    """filter_logits(top_p=p) keeps the smallest set of most probable tokens whose probability reaches p"""
    logits = rows(4, 2, 10)
    for p in (0.5, 0.85, 1e-4, 1.0):
        got = kept(sampling, logits, top_p=p)
        want = keep_mask(logits, top_p=p)
        for r in range(logits.shape[0]):
            if torch.equal(got[r], want[r]):
                continue
            probs = logits[r].double().softmax(dim=-1)
            order = probs.argsort(descending=True)
            cum = probs[order].cumsum(dim=-1)
            n, n_want = int(got[r].sum()), int(want[r].sum())
            row = f"top_p={p:g}, row {r}"
            if n == 0:
                checks.fail(
                    f"{row}: no token was kept. Always keep at least the most probable token (its "
                    "probability alone may be more than p)"
                )
            if cause := mask_order(got[r], want[r], probs, order, p):
                checks.fail(f"{row}: kept tokens {ids_of(got[r])}, expected {ids_of(want[r])}: {cause}")
            if not got[r][order[:n]].all():
                worse = next(int(i) for i in order.flip(0) if got[r][i])
                better = next(int(i) for i in order if not got[r][i])
                checks.fail(
                    f"{row}: kept token {worse} (probability {probs[worse]:.3f}) but removed the more "
                    f"probable token {better} ({probs[better]:.3f}). Top-p adds up the probabilities from "
                    "the most probable token down: sort them (descending) before the cumulative sum"
                )
            if n < n_want and p == 1:
                checks.fail(f"{row}: kept {n} of {len(probs)} tokens; top_p = 1 must keep every token")
            if n == n_want - 1:
                checks.fail(
                    f"{row}: the {n} most probable tokens hold {cum[n - 1]:.3f} < p, and with the next "
                    f"one {cum[n]:.3f} >= p, but you kept only {n}. Top-p dropped the token that crosses "
                    "p: keep the smallest set whose probability REACHES p (the crossing token included)"
                )
            if n < n_want:
                checks.fail(
                    f"{row}: kept the {n} most probable tokens, which hold only {cum[n - 1]:.3f} < p: keep "
                    "adding tokens until their probability reaches p"
                )
            checks.fail(
                f"{row}: kept {n} tokens, but the {n_want} most probable already hold "
                f"{cum[n_want - 1]:.3f} >= p: stop at the first token whose cumulative probability "
                "reaches p (the smallest such set)"
            )
    exactly_at_p(sampling)


def mask_order(got: torch.Tensor, want: torch.Tensor, probs: torch.Tensor, order: torch.Tensor, p: float) -> str | None:
    """Why a row's kept set is the right size at the wrong ids, read from where it sits: None where it is not so.

    A mask made in sorted order and applied as it is puts the flag of the j-th most probable token on token j;
    a cumulative sum taken in vocabulary order keeps a prefix of the vocabulary. The two can agree on a row, and
    then both are named.
    """
    if int(got.sum()) != int(want.sum()) or torch.equal(got, want):
        return None
    if not torch.equal(got, want[order]):  # position j: does the j-th most probable token stay?
        return None
    unsorted = (probs.cumsum(dim=-1) - probs) < p  # the rule applied in vocabulary order, without sorting
    cause = (
        f"the right number of tokens ({int(got.sum())}), at the wrong ids: position j of your mask says whether the "
        "j-th MOST PROBABLE token stays, so the mask is still in sorted order, and it was applied to the logits in "
        "vocabulary order. Put it back in vocabulary order before masking: drop.scatter(-1, order, drop), with "
        "order from torch.sort (or mask the sorted logits, then scatter them back)"
    )
    if torch.equal(got, unsorted):
        cause += (
            "; or the cumulative sum ran in vocabulary order: sort the probabilities (descending) before it, "
            "then put the mask back in vocabulary order"
        )
    return cause


# Cumulative sums that land exactly on p: four equal logits have probabilities of exactly 1/4 (exp(0) = 1 over a
# sum of 4; the two far lower logits add 1e-26, nothing at float32's precision), so 0.25, 0.5 and 0.75 are reached
# exactly and the set to keep is the contract's, not rounding's. Only a tie makes a sum exact (exp is exact at 0
# alone), so the four are tied, and the stub's two readings of a tie both pass: a sort puts the tied tokens in some
# order and keeps the smallest set, which of them it keeps being free; dropping a token when the tokens STRICTLY
# more probable than it hold p or more keeps every token tied with the last one kept, all four. Any other count
# is neither reading: one token more than the smallest set is a > where >= belongs.
AT_P = torch.tensor([[0.0, -60.0, 0.0, 0.0, -60.0, 0.0]])


def exactly_at_p(sampling) -> None:
    """A cumulative probability equal to p reaches p: the set stops at that token, both ways."""
    tied = AT_P[0] == 0
    for p, n_want in ((0.25, 1), (0.5, 2), (0.75, 3)):
        got = kept(sampling, AT_P, top_p=p)[0]
        if torch.equal(got, tied):  # every token tied with the boundary token: the threshold reading
            continue
        n = int(got.sum())
        row = f"top_p={p:g} on four tokens of probability exactly 1/4 (logits {AT_P[0].tolist()})"
        if n > n_want:
            checks.fail(
                f"{row}: kept {n} tokens, but the first {n_want} already hold exactly p = {p:g}: a cumulative "
                "probability equal to p reaches p, so the smallest set stops at that token. Compare with >= "
                "(drop where the probability before a token is already >= p), not >. (The four are tied, so "
                f"keeping all four, every token tied with the last one kept, is right too; {n} is neither)"
            )
        if n < n_want:
            checks.fail(
                f"{row}: kept {n} tokens, but {n} of them hold only {n / 4:g} < p; with the next one the sum is "
                f"exactly p = {p:g}, which reaches p: you dropped the token whose cumulative probability equals p "
                "exactly. Keep every token until the sum is >= p, that token included"
            )
        if not (AT_P[0][got] == 0).all():
            checks.fail(f"{row}: kept a token of probability 1e-26 before a token of probability 1/4")


def test_top_k_then_top_p_on_any_batch_shape(sampling):
    """top-k first, then top-p on the softmax of what is left, row by row on (B, V) and (B, T, V) logits"""
    k, p = 5, 0.75
    for seed, shape in ((7, (4, 12)), (8, (2, 3, 12))):
        logits = rows(seed, *shape)
        hint = "filter along the last axis only ([..., -1:], dim=-1), so that any leading dims work"
        got = kept(sampling, logits, hint, top_k=k, top_p=p)
        want = keep_mask(logits, top_k=k, top_p=p)
        if torch.equal(got, want):
            continue
        diff = (got != want).any(dim=-1).nonzero()[0]
        index = tuple(int(i) for i in diff)
        where = checks.index_text(index, ("row",) if len(shape) == 2 else ("batch", "position"))
        g, w = got[index], want[index]
        # Each filter alone, on the same logits, first: a wrong step shows there, and the combination is blamed
        # only when both steps are right on their own.
        alone = one_filter_wrong(sampling, logits, index, k, p)
        if alone:
            cause = alone
        elif torch.equal(g, (keep_mask(logits, top_k=k) & keep_mask(logits, top_p=p))[index]):
            cause = (
                "top-p used the probabilities of all V tokens: apply top-k first, then top-p to the softmax "
                "of the logits top-k left (renormalised, they sum to 1 again)"
            )
        elif torch.equal(g, keep_mask(logits, top_k=k)[index]):
            cause = "top-p was skipped when top_k was also given: apply both, top-k first"
        elif torch.equal(g, keep_mask(logits, top_p=p)[index]):
            cause = "top-k was skipped when top_p was also given: apply both, top-k first"
        else:
            cause = (
                "filter each row on its own, along the last axis (dim=-1); if the top-k or top-p check "
                "fails too, fix that one first"
            )
        checks.fail(
            f"filter_logits(top_k={k}, top_p={p}) on logits of shape {shape} kept tokens {ids_of(g)} at "
            f"{where}, expected {ids_of(w)}: {cause}"
        )


def one_filter_wrong(sampling, logits: torch.Tensor, index: tuple[int, ...], k: int, p: float) -> str | None:
    """Why the combined filter is wrong at ``index`` when top-k or top-p alone already is there; None when
    both are right on their own."""
    for name, filters in (("top_k", {"top_k": k}), ("top_p", {"top_p": p})):
        alone = kept(sampling, logits, **filters)[index]
        want = keep_mask(logits, **filters)[index]
        if not torch.equal(alone, want):
            value = filters[name]
            return (
                f"filter_logits({name}={value}) alone keeps {ids_of(alone)} there, expected {ids_of(want)}: that "
                f"step is wrong on its own (see the {name.replace('_', '-')} check), so fix it first"
            )
    return None


# ---------------------------------------------------------------- sample_next


@pytest.mark.points(2)
def test_greedy_cases_and_filtered_draws(sampling):
    """sample_next returns (B,) torch.long ids: the argmax at temperature 0 or top_k=1, never a filtered-out token"""
    logits = rows(11, 6, 10, scale=2.0)
    best = logits.argmax(dim=-1)
    try:
        greedy = draw(sampling, logits, 0, temperature=0.0, strict=True)
    except StudentError as e:
        reraise_unimplemented(e)
        if e.type == ErrorKind.VALUE_ERROR:
            checks.fail(
                f"temperature 0 raised ValueError ({e.message}): temperature 0 is valid, it means greedy "
                "(return logits.argmax(dim=-1)); only a negative temperature is an error"
            )
        checks.fail(
            f"temperature 0 made your code raise {e.type} ({e.message}): temperature 0 means greedy, so "
            "return the argmax and do not divide by 0"
        )
    if not torch.equal(greedy, best):
        r = int((greedy != best).nonzero()[0])
        checks.fail(
            f"temperature 0 must be greedy: row {r} gave token {int(greedy[r])}, its argmax is "
            f"{int(best[r])} (return logits.argmax(dim=-1), do not sample)"
        )
    try:
        one = draw(sampling, logits, 1, top_k=1, strict=True)
    except StudentError as e:
        reraise_unimplemented(e)
        checks.fail(f"sample_next(top_k=1): {e}; top_k=1 keeps exactly one token, the argmax")
    if not torch.equal(one, best):
        r = int((one != best).nonzero()[0])
        checks.fail(
            f"with top_k=1 only the argmax is left, so every draw must be it: row {r} gave token "
            f"{int(one[r])}, its argmax is {int(best[r])}. Keep exactly the k largest logits"
        )
    V = BASE.shape[0]
    for gen_seed, (temperature, top_k, top_p) in enumerate(
        ((1.0, 4, None), (1.0, None, 0.6), (2.0, 6, 0.85), (1.0, V, 1.0)), start=2
    ):
        filters = describe_filters(top_k, top_p, temperature)
        try:
            got = draw(
                sampling, BASE.expand(2000, V), gen_seed, temperature=temperature, top_k=top_k, top_p=top_p, strict=True
            )
        except StudentError as e:
            reraise_unimplemented(e)
            checks.fail(
                f"sample_next({filters}) on (2000, {V}) logits: {e}"
                + ("; top_k = V and top_p = 1 are valid (they keep every token)" if top_p == 1 else "")
            )
        allowed = keep_mask(BASE / temperature, top_k, top_p)
        if not allowed[got].all():
            bad = int(got[~allowed[got]][0])
            checks.fail(
                f"sample_next({filters}) drew token {bad}, which the filters remove: only "
                f"{ids_of(allowed)} may be drawn. Sample from softmax(filter_logits(logits / temperature, "
                "top_k, top_p))"
            )


@pytest.mark.points(3)
def test_frequencies_match_the_distribution(sampling):
    """20,000 draws follow softmax(filter(logits / temperature)), at temperatures 0.5 and 2 (chi-square, p = 1e-6)"""
    V = BASE.shape[0]
    for gen_seed, (temperature, top_k, top_p) in enumerate(((0.5, None, None), (2.0, None, None), (2.0, 6, 0.7))):
        filters = describe_filters(top_k, top_p, temperature)
        got = draw(sampling, BASE.expand(DRAWS, V), 100 + gen_seed, temperature=temperature, top_k=top_k, top_p=top_p)
        counts = torch.bincount(got, minlength=V).double()
        want = distribution(BASE, temperature, top_k, top_p)
        if fits(counts, want):
            continue
        stat, df = chi_square(counts, want)
        cause = likely_cause(counts, want, temperature, top_k, top_p)
        removed = ((counts > 0) & (want == 0)).nonzero().flatten().tolist()
        if removed:
            what = f"token {removed[0]} was drawn {int(counts[removed[0]])} times in {DRAWS}, but the filters remove it"
        else:
            expected = DRAWS * want
            worst = int(((counts - expected).abs() / expected.sqrt()).nan_to_num(-1.0).argmax())
            what = (
                f"token {worst} was drawn {int(counts[worst])} times in {DRAWS}, expected about "
                f"{DRAWS * want[worst]:.0f} (chi-square {stat:.4g} > {chi_square_bound(df):.1f}, p < 1e-6)"
            )
        checks.fail(
            f"sample_next({filters}): {what}; counts {counts.long().tolist()}, expected probabilities "
            f"{[round(x, 3) for x in want.tolist()]}. Likely cause: {cause}"
        )


@pytest.mark.points(2)
def test_randomness_comes_only_from_the_generator(sampling):
    """the same generator seed gives the same draws whatever the global seed; another seed gives others"""
    logits = torch.zeros(300, 10)
    first = draw(sampling, logits, 5, seed=1)
    again = draw(sampling, logits, 5, seed=2)
    if not torch.equal(first, again):
        checks.fail(
            "two calls with generators seeded alike gave different draws (only the global seed, "
            "torch.manual_seed, differed): the draws ignore the generator. Pass generator= to "
            "torch.multinomial (or to torch.rand), and use no other source of randomness"
        )
    other = draw(sampling, logits, 6, seed=1)
    if torch.equal(first, other):
        checks.fail(
            "generators with different seeds gave the same 300 draws from a uniform distribution: draw "
            "with the generator passed in (not a new one, not the argmax)"
        )


# case id -> (function, keywords, what makes them invalid): every validation the stubs of sample_next and
# filter_logits document, a top_k below 1 both at 0 and below it.
INVALID: dict[str, tuple[str, dict[str, float], str]] = {
    "temperature=-1": ("sample_next", {"temperature": -1.0}, "a negative temperature"),
    "top_k=0": ("sample_next", {"top_k": 0}, "a top_k below 1"),
    "top_k=-1": ("sample_next", {"top_k": -1}, "a top_k below 1"),
    "top_p=0": ("sample_next", {"top_p": 0.0}, "a top_p outside (0, 1]"),
    "top_p=1.5": ("sample_next", {"top_p": 1.5}, "a top_p outside (0, 1]"),
    "filter-top_k=0": ("filter_logits", {"top_k": 0}, "a top_k below 1"),
    "filter-top_k=-1": ("filter_logits", {"top_k": -1}, "a top_k below 1"),
    "filter-top_p=0": ("filter_logits", {"top_p": 0.0}, "a top_p outside (0, 1]"),
    "filter-top_p=1.5": ("filter_logits", {"top_p": 1.5}, "a top_p outside (0, 1]"),
}


@pytest.mark.points(2)
@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_argument_raises_value_error(sampling, case):
    """an invalid argument makes sample_next or filter_logits raise ValueError"""
    function, kwargs, rule = INVALID[case]
    args = (BASE.repeat(2, 1), SeededGenerator(0)) if function == "sample_next" else (BASE.repeat(2, 1),)
    shown = ", ".join(f"{k}={v:g}" for k, v in kwargs.items())
    checks.raises_value_error(
        lambda: sampling.call(function, *args, **kwargs), f"{function}(..., {shown})", f"{rule} is invalid"
    )


# ---------------------------------------------------------------- generate_sampled


def test_generate_shape_prompt_and_reproducible(sampling):
    """generate_sampled returns prompt + max_new tokens, reproducible with a seeded generator, recording no gradients"""
    model = sampling.standin(LM_V, LM_D, LM_T, 3)
    before = model.state_dict()
    start = prompt(3, 3, 5)
    first = generated(sampling, model, start, 7, 11, seed=1)
    again = generated(sampling, model, start, 7, 11, seed=2)
    if not torch.equal(first, again):
        checks.fail(
            "generate_sampled gave different tokens with generators seeded alike (only the global seed "
            "differed): the draws ignore the generator. Pass it to sample_next at every step"
        )
    if model.attr("calls_with_grad") != 0:
        checks.fail("the model was called with gradients enabled: wrap generation in torch.no_grad()")
    for name, value in model.state_dict().items():
        if not torch.equal(value, before[name]):
            checks.fail(f"generation changed the model's weight {name}: it must only read the model")


def test_generate_greedy_and_top_k(sampling):
    """generate_sampled at temperature 0 is greedy generation; with top_k every new token is in the model's top-k"""
    model, local = sampling.standin(LM_V, LM_D, LM_T, 4), make_standin(LM_V, LM_D, LM_T, 4)
    start, n = prompt(4, 2, 3), 9
    greedy = generated(sampling, model, start, n, 0, temperature=0.0)
    k = 3
    sampled = generated(sampling, model, start, n, 5, temperature=1.5, top_k=k)
    with torch.no_grad():
        for out, rule in ((greedy, "the greedy choice, token"), (sampled, f"in the model's top-{k},")):
            for i in range(start.shape[1], out.shape[1]):
                context = out[:, :i]
                logits = local(context[:, -LM_T:])[:, -1]
                allowed = logits.topk(1 if out is greedy else k, dim=-1).indices
                ok = (allowed == out[:, i : i + 1]).any(dim=-1)
                if ok.all():
                    continue
                b = int((~ok).nonzero()[0])
                token = int(out[b, i])
                cause = (
                    "temperature 0 means greedy: the argmax of the last position's logits"
                    if out is greedy
                    else "sample from the last position's logits, filtered with top_k"
                )
                if i > LM_T and token in local(context[b : b + 1, :LM_T])[0, -1].topk(allowed.shape[1]).indices:
                    cause = "it fits the FIRST model.T tokens: crop to the last ones, idx[:, -model.T:]"
                elif token in local(context[b : b + 1, -LM_T:])[0, 0].topk(allowed.shape[1]).indices:
                    cause = "it fits the first position's logits: use the last position, logits[:, -1]"
                choices = allowed[b].tolist()
                checks.fail(
                    f"new token at position {i} (batch {b}) is {token}, but it should be {rule} "
                    f"{choices[0] if len(choices) == 1 else choices}: {cause}"
                )
