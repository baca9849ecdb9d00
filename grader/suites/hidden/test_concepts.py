"""concepts: the lesson's ideas checked by running them, then its check-yourself questions.

The functions are tried on the grader's trusted TinyGPT (this worker's ``m2_model``), so only the idea itself is
graded: a library decoder layer's extra parameters against an encoder layer's, per-position losses from one
teacher-forced pass and from one pass per prefix (they must agree, match the reference, and come from the passes
named: the worker counts what the model is fed), a counterexample to causality for unmasked attention, and the
error past the context, on two models that stop with different errors. A wrong result is explained by what the
code did: the passes the model was fed (the whole sequence as the one pass's input, a prefix holding its own
target, each named even where the run ends in an error past the context), the losses' sign (below 0: nll_loss on
raw logits), and by recomputing the usual mistakes and naming the one that gives it (targets not shifted, the
first position read for the last, a softmax over the positions, parameter tensors counted for their elements, a
LayerNorm without its bias). The questions are marked by
grader/suites/questions.py, the numeric ones on each student's numbers (concept_questions.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.sandbox.worker.standin import make_standin
from grader.suites import checks, questions
from grader.suites.hidden import concept_questions
from grader.suites.loss_faults import FED_AT, all_zero, below_zero, called, fed, fed_fault, runs

# ---------------------------------------------------------------- what cross-attention costs

LAYERS = [(512, 8, 2048), (64, 4, 256), (96, 3, 200), (256, 16, 1024)]


def elements(layer: nn.Module) -> int:
    return sum(p.numel() for p in layer.parameters())


def library_extra(d: int, n_heads: int, d_ff: int, count: Callable[[nn.Module], int] = elements) -> int:
    """The decoder layer's parameters less the encoder layer's, counted (``count``: their elements, or another
    count) on PyTorch's own layers."""
    with torch.device("meta"):
        decoder = nn.TransformerDecoderLayer(d, n_heads, d_ff, batch_first=True)
        encoder = nn.TransformerEncoderLayer(d, n_heads, d_ff, batch_first=True)
    return count(decoder) - count(encoder)


@pytest.mark.points(3)
@pytest.mark.parametrize("d,n_heads,d_ff", LAYERS, ids=[f"{d}-{h}-{f}" for d, h, f in LAYERS])
def test_decoder_layer_extra(concepts, d, n_heads, d_ff):
    """decoder_layer_extra counts what a library decoder layer adds to an encoder layer: its cross-attention
    and a third LayerNorm"""
    what = f"decoder_layer_extra({d}, {n_heads}, {d_ff})"
    got = checks.number(concepts.call("decoder_layer_extra", d, n_heads, d_ff), what, integer=True)
    want = library_extra(d, n_heads, d_ff)
    assert want == 4 * d * d + 6 * d
    if got == want:
        return
    tensors = library_extra(d, n_heads, d_ff, count=lambda layer: len(list(layer.parameters())))
    # a count of elements that is off is off by d or more (every bias, LayerNorm and matrix of these layers holds
    # d numbers or more): a smaller number counts something else, tensors most likely
    if 0 < abs(got) < d:
        said = "that is how many" if got == tensors else "a number that small counts"
        checks.fail(
            f"{what} is {got:,}, expected {want:,}: {said} parameter tensors (weight matrices, bias vectors) the "
            "decoder layer adds, each counted as one. Count their elements: sum(p.numel() for p in "
            "layer.parameters())"
        )
    causes = {
        -want: "that is the encoder layer less the decoder layer: the decoder layer is the larger one, since it "
        "has everything the encoder layer has plus a cross-attention",
        4 * d * d + 4 * d: "the cross-attention alone: the decoder layer also has a third LayerNorm (norm3, "
        "2 d parameters)",
        4 * d * d: "the weight matrices alone: count the biases (in_proj_bias, out_proj.bias) and the third "
        "LayerNorm too",
        3 * d * d + 5 * d: "the cross-attention has an output projection too (out_proj, d^2 + d)",
        4 * d * d + 5 * d: "the third LayerNorm is counted without its bias: a LayerNorm has a weight and a bias, "
        "d each (norm3: 2 d)",
    }
    cause = causes.get(
        got,
        "build both layers with the same arguments, count every parameter of each (weights, biases, "
        "LayerNorms) and subtract the encoder layer's from the decoder layer's",
    )
    checks.fail(f"{what} is {got:,}, expected {want:,}: {cause}")


# ---------------------------------------------------------------- one pass or one per prefix

# (vocab_size, d, n_heads, n_layers, max_T), the seed the model and the sequence are drawn from, the length L
MODELS = [((50, 64, 4, 2, 8), 42, 9), ((37, 32, 4, 2, 10), 7, 11), ((29, 24, 2, 3, 6), 3, 5)]
MODEL_IDS = ["lesson-model", "37-32-4-2-10", "29-24-2-3-6-short"]


def sequence(config, seed: int, length: int) -> torch.Tensor:
    return torch.randint(0, config[0], (length,), generator=torch.Generator().manual_seed(seed + 1000))


def reference_model(ref, config, seed: int):
    checks.seed(seed)  # the worker built its TinyGPT after the same seed: the same weights
    return ref.m2_model.TinyGPT(*config)


def reference_losses(ref, config, seed: int, length: int) -> dict[str, torch.Tensor]:
    """The right per-position losses and what the usual mistakes give instead, on the reference's model."""

    def compute() -> dict[str, torch.Tensor]:
        model, seq = reference_model(ref, config, seed), sequence(config, seed, length)
        with torch.no_grad():
            logits = model(seq[:-1].unsqueeze(0))[0]
            firsts = torch.stack([model(seq[: t + 1].unsqueeze(0))[0, 0] for t in range(length - 1)])
            targets = seq[1:, None]
            # normalised over the positions instead of the vocabulary: the one pass's (L - 1, V) logits, and each
            # prefix's own, which a causal model makes the one pass's first t + 1 rows
            positions = torch.stack([-logits[: t + 1].log_softmax(dim=0)[t, seq[t + 1]] for t in range(length - 1)])
            return {
                "right": F.cross_entropy(logits, seq[1:], reduction="none"),
                "unshifted": F.cross_entropy(logits, seq[:-1], reduction="none"),
                "first position": F.cross_entropy(firsts, seq[1:], reduction="none"),
                "raw logits": -logits.gather(1, targets).squeeze(1),
                "positions": -logits.log_softmax(dim=0).gather(1, targets).squeeze(1),
                "prefix positions": positions,
            }

    return checks.remembered(("concepts losses and mistakes", config, seed, length), compute)


def worker_model(concepts, config, seed: int):
    return concepts.new("TinyGPT", *config, seed=seed, module="m2_model")


# What the model is fed is counted in the worker, on its token table (FED_AT): grader/suites/loss_faults.py says
# why such a count only ever fails code, never passes it.


def check_losses(
    got, want: dict[str, torch.Tensor], what: str, causes: dict[str, str], fault: Callable[[], str | None]
) -> None:
    """``got`` is the reference's losses (``want["right"]``); else the first cause that explains it fails: a loss
    below 0, a known mistake that gives these values (``causes``), what the model was fed (``fault``), losses all
    0."""
    right = want["right"]
    if isinstance(got, torch.Tensor) and got.dim() == 0:
        checks.fail(f"{what} is one number ({got.item():.4f}): return one loss per position, reduction='none'")
    got = checks.tensor(got, what, tuple(right.shape), dtype=None)
    if not got.is_floating_point() or not torch.isfinite(got).all():
        checks.fail(f"{what} should hold finite float losses, one per position, not {got.tolist()}")
    if torch.allclose(got.double(), right.double(), atol=1e-4, rtol=1e-4):
        return
    if cause := below_zero(got):
        checks.fail(f"{what} is not the reference's: {cause}")
    for name, cause in causes.items():
        if torch.allclose(got.double(), want[name].double(), atol=1e-4, rtol=1e-4):
            checks.fail(f"{what} is not the reference's: {cause}")
    if cause := fault() or all_zero(got):
        checks.fail(f"{what} is not the reference's: {cause}")
    t = int((got.double() - right.double()).abs().argmax())
    checks.fail(
        f"{what} differs from the reference's at entry {t} ({got[t].item():.4f}, expected {right[t].item():.4f}): "
        "entry t is the cross-entropy of the model's prediction after seq[:t + 1] against seq[t + 1]"
    )


RAW_LOGITS = (  # where none of them is below 0
    "these are minus each target's raw logit: F.nll_loss takes LOG-probabilities. Take log_softmax over the "
    "vocabulary (the last axis) first, or call F.cross_entropy on the logits"
)
OVER_POSITIONS = (
    "the log-softmax runs over the positions (the sequence axis), not the vocabulary: each position's "
    "probabilities must sum to 1 over the V tokens, log_softmax(logits, dim=-1)"
)


@pytest.mark.points(3)
@pytest.mark.parametrize("config,seed,length", MODELS, ids=MODEL_IDS)
def test_teacher_forced_losses(concepts, ref, config, seed, length):
    """teacher_forced_losses gives every position's next-token loss from one forward pass"""
    seq, what = sequence(config, seed, length), f"teacher_forced_losses on a sequence of {length} tokens"
    model = worker_model(concepts, config, seed)
    counter = model.count_positions(FED_AT)

    def fault() -> str | None:
        return fed_fault(fed(counter), length, config[4], one_pass=True)

    got = called(concepts, "teacher_forced_losses", (model, seq), what, fault)
    check_losses(
        got,
        reference_losses(ref, config, seed, length),
        what,
        {
            "unshifted": "each position is scored against its own input token (targets seq[:-1]). That trains a "
            "copier: the targets are the inputs shifted by one, seq[1:]",
            "raw logits": RAW_LOGITS,
            "positions": OVER_POSITIONS,
        },
        fault,
    )
    if (lengths := fed(counter)) != [length - 1]:  # right values (checked above): only the work is in question
        cause = fault() or (
            f"teacher forcing is ONE forward pass on seq[:-1] ({length - 1} tokens), every position's prediction "
            "read from that one pass"
        )
        checks.fail(f"{what} gives the right losses, but the grader saw {runs(lengths)}: {cause}")


@pytest.mark.points(3)
@pytest.mark.parametrize("config,seed,length", MODELS, ids=MODEL_IDS)
def test_prefix_losses(concepts, ref, config, seed, length):
    """prefix_losses gives the same losses from one forward pass per prefix, so one pass is enough"""
    seq, what = sequence(config, seed, length), f"prefix_losses on a sequence of {length} tokens"
    model = worker_model(concepts, config, seed)
    counter = model.count_positions(FED_AT)

    def fault() -> str | None:
        return fed_fault(fed(counter), length, config[4], one_pass=False)

    got = called(concepts, "prefix_losses", (model, seq), what, fault)
    check_losses(
        got,
        reference_losses(ref, config, seed, length),
        what,
        {
            "first position": "it reads each prefix's FIRST position; the prediction of the token after a "
            "prefix is at the prefix's last position, [0, -1]",
            "unshifted": "each prefix seq[:t + 1] is scored against its own last token seq[t]; the token it "
            "must predict is the next one, seq[t + 1]",
            "raw logits": RAW_LOGITS,
            "prefix positions": OVER_POSITIONS,
        },
        fault,
    )
    # the same values as one pass give, by construction: what this function shows is that L - 1 passes agree with it
    if sorted(lengths := fed(counter)) != list(range(1, length)):
        checks.fail(
            f"{what} gives the right losses, but the grader saw {runs(lengths)}: run it once on each prefix "
            f"seq[:t + 1], {length - 1} passes on 1 to {length - 1} tokens, keeping each pass's last position (the "
            "losses of one pass on the whole sequence are what these passes must be seen to agree with)"
        )


def attend(x: torch.Tensor, causal: bool) -> torch.Tensor:
    """Single-head attention with queries, keys and values all ``x`` (T, d), as the stub's helper."""
    T, d = x.shape
    scores = x @ x.T / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ x


SIZES = [(4, 4), (2, 8), (8, 16), (16, 3)]


@pytest.mark.points(3)
@pytest.mark.parametrize("T,d", SIZES, ids=[f"T{T}-d{d}" for T, d in SIZES])
def test_counterexample(concepts, T, d):
    """counterexample gives two inputs sharing their start whose unmasked outputs at position 0 differ"""
    what = f"counterexample({T}, {d})"
    pair = concepts.call("counterexample", T, d)
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        checks.fail(f"{what} should return two tensors (x1, x2), not {checks.describe(pair)}")
    x1, x2 = (checks.tensor(x, f"{what}[{i}]", (T, d), dtype=None) for i, x in enumerate(pair))
    for i, x in enumerate((x1, x2)):
        if not x.is_floating_point() or not torch.isfinite(x).all():
            checks.fail(f"{what}[{i}] should hold finite floats (the vectors of the T tokens)")
    x1, x2 = x1.double(), x2.double()
    changed = [t for t in range(T) if not torch.equal(x1[t], x2[t])]
    if not changed:
        checks.fail(
            f"{what}: the two inputs are identical, so no output can change. Keep the earlier tokens and change a "
            "later one"
        )
    first = changed[0]
    if first == 0:
        checks.fail(
            f"{what}: the inputs already differ at position 0. The claim is about the outputs for a prefix both "
            "inputs share: keep position 0 the same, change only later positions"
        )
    moved = (attend(x1, False)[0] - attend(x2, False)[0]).abs().max().item()
    if not moved > 1e-3:
        checks.fail(
            f"{what}: without the mask, position 0's output moves by only {moved:.2g} between your inputs. Change "
            f"a later token by enough (a few units in every channel) that what position 0 attends to changes"
        )
    kept = (attend(x1, True)[:first] - attend(x2, True)[:first]).abs().max().item()
    if kept > 1e-9:  # a causal attention cannot see the change: only inputs that are not finite get here
        checks.fail(f"{what}: with the mask the shared positions still moved by {kept:.2g}: use finite values")


# ---------------------------------------------------------------- past the position table


def raised(build: Callable[[], nn.Module], T: int) -> str:
    """The class name of what the model ``build`` makes raises on ``T + 1`` token ids ("" if it runs), run here
    (torch's generator left as it was: building a model draws from it)."""
    with torch.random.fork_rng(), torch.no_grad():
        model = build()
        try:
            model(torch.zeros(1, T + 1, dtype=torch.long))
        except Exception as e:  # noqa: BLE001 - which one is the answer
            return type(e).__name__
    return ""


@pytest.mark.points(2)
@pytest.mark.parametrize("max_T", [8, 5, 12])
def test_overflow_error(concepts, ref, max_T):
    """overflow_error names the error a model raises one token past its context, for two models that raise
    different ones: a TinyGPT, and a model that checks its input's length itself"""
    what = f"overflow_error on a TinyGPT with model.T = {max_T}"
    model = concepts.new("TinyGPT", 31, 16, 2, 1, max_T, seed=max_T, module="m2_model")
    counter = model.count_positions("tok")  # the token table: called on the (B, t) ids before the positions
    got = overflow_name(concepts.call("overflow_error", model), what)
    want = raised(lambda: ref.m2_model.TinyGPT(31, 16, 2, 1, max_T), max_T)
    if got == "":
        checks.fail(
            f"{what} says the model ran. It runs on model.T tokens or fewer, so the input was too short: one past "
            "its context is the point. Give it model.T + 1 tokens"
        )
    if got != want:
        checks.fail(
            f"{what} is {got!r}, not the name of the exception the model raises on model.T + 1 tokens: run the "
            "model on them inside try, and return type(e).__name__ of the exception caught"
        )
    # A model of the same interface whose own length check stops it first, with another exception: a name written
    # into the function, rather than read from what the model raised, is wrong for one of the two.
    other = f"overflow_error on another model with model.T = {max_T}, one that checks its input's length itself"
    got = overflow_name(concepts.call("overflow_error", concepts.standin(31, 16, max_T, seed=max_T)), other)
    want = raised(lambda: make_standin(31, 16, max_T, seed=max_T), max_T)
    if got == "TypeError" != want:
        checks.fail(
            f"{other} is 'TypeError': that model takes its token ids as a (B, t) tensor of dtype torch.long, and "
            "refused your input before it looked at the length: feed it a (1, model.T + 1) tensor of torch.long ids"
        )
    if got != want:
        checks.fail(
            f"{other} is {got!r}, but that model stops with another exception: return the name of what the model "
            "you are given raises (run it on model.T + 1 tokens, catch the exception, type(e).__name__), not a "
            "fixed name"
        )
    # Right names from both; but did the TinyGPT read model.T + 1 tokens? The worker's count, which only ever fails.
    if max_T + 1 not in (seen := fed(counter, at=-1)):
        said = ", ".join(map(str, seen[:10])) + " tokens" if seen else "no input"
        checks.fail(
            f"{what} names an exception, but the model never read model.T + 1 tokens (its token table saw {said}): "
            "feed it a (1, model.T + 1) tensor of token ids; the name must come from running the model, not be "
            "written in"
        )


def overflow_name(got, what: str) -> str:
    if not isinstance(got, str):
        checks.fail(f"{what} should return the exception's class name (a str), not {checks.describe(got)}")
    return got


# ---------------------------------------------------------------- check yourself

QUESTION_IDS = concept_questions.IDS


def answer(concepts, name: str):
    """The module-level answer, as plain data; a set (not plain data on the wire) is listed in the worker."""
    value = concepts.value(name)
    if getattr(value, "short_type", None) in ("set", "frozenset"):
        value = concepts.call("list", value, module="builtins")
    return value


@pytest.fixture(scope="session")
def notebook(grading_context) -> bool:
    """Whether the submission is a notebook: grader/submission.py runs its cells from notebook_code.py."""
    return (grading_context.submission / "notebook_code.py").is_file()


@pytest.mark.points(19)
@pytest.mark.parametrize("question_id", QUESTION_IDS)
def test_question(concepts, variant, notebook, question_id):
    """the answer to the check-yourself question"""
    question = concept_questions.question(question_id, variant)
    questions.assess(question, answer(concepts, question_id), concept_questions.where(notebook))
