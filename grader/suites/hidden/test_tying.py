"""Weight tying, and the GPT built from PyTorch's own layers.

``tie_weights`` is tried on the grader's trusted TinyGPT (this worker's
``m2_model``), so only the tying itself is graded. ``LibraryGPT`` is the
student's own model: its structure is checked through parameter counts, its
causality with the same four checks as TinyGPT's, and its initialisation by
statistics of its weights.
"""

import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.suites import causality, checks
from grader.suites.hidden import diagnose

V, D, HEADS, LAYERS, T_MAX = 29, 24, 4, 2, 11
SMALL = (50257, 768, 12, 12, 1024)  # GPT-2 small as (vocab_size, d, n_heads, n_layers, max_T)
GPT2_SMALL_TIED, GPT2_SMALL_SAVING = 124_439_808, 50257 * 768


def tinygpt(tying, config=(V, D, HEADS, LAYERS, T_MAX), seed: int = 0, meta: bool = False):
    return tying.new("TinyGPT", *config, seed=seed, module="m2_model", meta=meta)


def tied(tying, model):
    """tie_weights(model), which must hand the model back."""
    out = tying.call("tie_weights", model, keep=True)
    if out.short_type != model.short_type:
        checks.fail(f"tie_weights returned {checks.describe(out)}: return the model itself")
    return model


def size(described: dict) -> int:
    """Parameter values of a described module, a shared Parameter counted once."""
    return sum(math.prod(shape) for shape in described["parameters"].values())


def assert_shared(described: dict, what: str) -> None:
    names, distinct = described["all_parameters"], described["parameters"]
    if "head.weight" not in names:
        checks.fail(f"{what} has no head.weight: the head is nn.Linear(d, vocab_size, bias=False)")
    if "head.weight" in distinct:
        checks.fail(
            f"{what}: head.weight is a Parameter of its own, not the token table's. Assign the Parameter "
            "itself, model.head.weight = model.tok.weight (copying .data or cloning makes two)"
        )


# ---------------------------------------------------------------- tie_weights


@pytest.mark.points(2)
def test_tie_weights_shares_one_parameter(tying):
    """tie_weights makes head.weight the very same Parameter as tok.weight, and returns the model"""
    assert_shared(tied(tying, tinygpt(tying)).describe(), "after tie_weights, the TinyGPT")


def test_tie_keeps_the_token_table(tying, ref):
    """the tied weight is the token table as it was: the head takes tok's Parameter, not the other way round"""
    seed, config = 6, (V, D, HEADS, LAYERS, T_MAX)
    state = tied(tying, tinygpt(tying, config, seed=seed)).state_dict()
    checks.seed(seed)  # the worker built its TinyGPT after the same seed: the same draws, in the same order
    untied = ref.m2_model.TinyGPT(*config)
    table = checks.tensor(state.get("tok.weight") if isinstance(state, dict) else None, "tok.weight", (V, D))
    if torch.equal(table, untied.head.weight.detach()):
        checks.fail(
            "after tie_weights the shared weight holds the head's initial values: the token table was replaced "
            "by the head's Parameter (model.tok.weight = model.head.weight). Tie the other way: the head takes "
            "the token table's Parameter, model.head.weight = model.tok.weight, so the embedding keeps its values"
        )
    checks.assert_close_where(
        table,
        untied.tok.weight.detach(),
        "the tied weight",
        ("token id", "channel"),
        explain=lambda: (
            "tie_weights must keep the token table's values: make head.weight the very Parameter "
            "that tok.weight already is"
        ),
    )


def test_tying_saves_vocab_times_d(tying):
    """tying saves vocab x d parameters: 38,597,376 (23.7%) for GPT-2 small"""
    model = tinygpt(tying)
    before = size(model.describe())
    after = size(tied(tying, model).describe())
    checks.equal(
        before - after,
        V * D,
        f"the saving of tying TinyGPT{(V, D, HEADS, LAYERS, T_MAX)}",
        hint="one vocab_size x d matrix is shared, so it is stored once",
    )
    big = tinygpt(tying, SMALL, meta=True)
    untied = size(big.describe())
    got = size(tied(tying, big).describe())
    checks.equal(
        got,
        GPT2_SMALL_TIED,
        "the tied GPT-2 small TinyGPT's parameter count",
        hint=f"tying saves {GPT2_SMALL_SAVING:,} = 50,257 x 768, {GPT2_SMALL_SAVING / untied:.1%}",
    )


@pytest.mark.points(2)
def test_gradients_reach_the_shared_weight_from_both_ends(tying, ref):
    """the shared weight's gradient is the sum of the embedding's and the head's"""
    model = tied(tying, tinygpt(tying, seed=3))
    reference = ref.m2_model.TinyGPT(V, D, HEADS, LAYERS, T_MAX)
    reference.load_state_dict(model.state_dict())
    x = causality.random_tokens(4, 3, 7, V)
    w = torch.randn(3, 7, V, generator=torch.Generator().manual_seed(5))
    (reference(x) * w).sum().backward()  # the reference is untied: each end's gradient on its own
    ends = {"embedding": reference.tok.weight.grad, "head": reference.head.weight.grad}
    grads = model.grads(x, w)
    got = checks.tensor(
        grads.get("tok.weight") if isinstance(grads, dict) else None, "the gradient of tok.weight", (V, D)
    )
    for end, alone in ends.items():
        if torch.allclose(got, alone, atol=1e-6):
            checks.fail(
                f"the shared weight receives only the {end}'s gradient: after tying, head.weight and "
                "tok.weight must be one Parameter, so autograd adds both ends"
            )
    checks.assert_close_where(
        got, ends["embedding"] + ends["head"], "the shared weight's gradient", ("token id", "channel")
    )


# ---------------------------------------------------------------- LibraryGPT


def library(tying, config=(V, 32, HEADS, LAYERS, T_MAX), seed: int = 0, meta: bool = False):
    return tying.new("LibraryGPT", *config, seed=seed, meta=meta)


def test_library_gpt_shapes(tying):
    """LibraryGPT maps (B, t) token ids to (B, t, vocab_size) logits for every t up to max_T"""
    model = library(tying)
    checks.equal(model.attr("T"), T_MAX, "LibraryGPT(...).T", hint="the attribute T holds max_T")
    for t in range(1, T_MAX + 1):
        checks.tensor(model(causality.random_tokens(t, 2, t, V), grad=False), f"the logits for t = {t}", (2, t, V))


@pytest.mark.points(2)
@pytest.mark.parametrize(
    "config",
    [(V, 32, HEADS, LAYERS, T_MAX), (61, 48, 6, 3, 16), SMALL],
    ids=["29-32-4-2-11", "61-48-6-3-16", "gpt2-small"],
)
def test_library_gpt_parameter_count(tying, ref, config):
    """LibraryGPT has a GPT's parameter count, tied head included: 124,439,808 for GPT-2 small"""
    described = library(tying, config, meta=True).describe()
    assert_shared(described, "LibraryGPT")
    vocab, d, _, layers, max_T = config
    want = ref.m5_scaling.gpt_parameter_count(vocab, d, layers, max_T, tied=True)
    got = size(described)
    if got != want:
        per_layer = (got - want) / layers
        hint = (
            f"each encoder layer is off by {per_layer:,.0f}: dim_feedforward is 4 * d"
            if per_layer.is_integer() and per_layer % d == 0 and per_layer
            else "token and position tables, n_layers encoder layers, a final LayerNorm, and the head tied"
        )
        checks.fail(f"LibraryGPT{config} has {got:,} parameters, expected {want:,}: {hint}")


@pytest.mark.points(2)
@pytest.mark.parametrize("seed", [0, 1])
def test_library_gpt_matches_reference(tying, ref, seed):
    """with the reference's weights, LibraryGPT's logits equal the reference's (pre-norm, GELU, final LayerNorm)"""
    config = (V, 32, HEADS, LAYERS, T_MAX)
    checks.seed(seed)
    reference = ref.m6_tying.LibraryGPT(*config)
    model = library(tying, config)
    model.load(matched_state(model.state_dict(), reference.state_dict()))
    x = causality.random_tokens(seed, 3, 9, V)
    logits = checks.tensor(model(x), "the logits", (3, 9, V))
    with torch.no_grad():
        want = reference(x)
    checks.assert_close_where(
        logits, want, "the logits", checks.BTV, explain=lambda: explain_library(logits, x, reference)
    )


def matched_state(theirs: dict, ours: dict) -> dict:
    """The reference's weights under the student's names, matched in creation order (layer names are free)."""
    have = [(k, tuple(v.shape)) for k, v in theirs.items() if isinstance(v, torch.Tensor)]
    want = [(k, tuple(v.shape)) for k, v in ours.items()]
    if [s for _, s in have] != [s for _, s in want]:
        checks.fail(
            "LibraryGPT's weights do not line up with the lesson's (in creation order: tok, pos, the "
            f"encoder layers, ln, head): yours are {[s for _, s in have][:6]}..., expected "
            f"{[s for _, s in want][:6]}..."
        )
    return {mine: ours[name] for (mine, _), (name, _) in zip(have, want)}


def explain_library(logits: torch.Tensor, x: torch.Tensor, reference) -> str | None:
    """Recompute the reference with one known bug at a time."""

    def variant(**changes):
        def run():
            model = copy.deepcopy(reference)
            for layer in model.blocks.layers:
                for attr, value in changes.items():
                    if attr != "ln":
                        setattr(layer, attr, value)
            if "ln" in changes:
                model.ln = changes["ln"]
            return model(x)

        return run

    return diagnose.first_match(
        logits,
        [
            ('ReLU in the feed-forward: pass activation="gelu"', variant(activation=F.relu)),
            (
                "post-norm layers: pass norm_first=True (LayerNorm before attention and feed-forward)",
                variant(norm_first=False),
            ),
            ("the final LayerNorm ln is not applied before the head", variant(ln=nn.Identity())),
        ],
    )


@pytest.mark.points(2)
@pytest.mark.parametrize("check", [*causality.OUTPUT_PROBES, "gradient"])
def test_library_gpt_is_causal(tying, check):
    """LibraryGPT's logits depend only on earlier tokens (the causal mask reaches every layer)"""
    model = library(tying, seed=1)
    x, other, shape = causality.random_tokens(1, 3, T_MAX, V), causality.random_tokens(2, 3, T_MAX, V), (3, T_MAX, V)
    if check in causality.OUTPUT_PROBES:
        perturb = causality.token_perturbation(V)
        causality.output_probe(check, model, x, other, perturb, shape, "LibraryGPT", logits=True)
    else:
        distinct = causality.distinct_tokens(1, 2, T_MAX, V)
        grad = model.input_grad(distinct, via="tok")

        def outputs() -> None:  # the same tokens' outputs: they decide if the probe saw nothing, and must hold anyway
            perturb = causality.token_perturbation(V)
            causality.no_future_leak(model, distinct, perturb, (2, T_MAX, V), "LibraryGPT", logits=True)

        causality.causal_gradient(grad, T_MAX, "LibraryGPT", otherwise=outputs)


def test_library_gpt_has_no_dropout(tying):
    """LibraryGPT is deterministic in training mode (dropout=0.0, as in the lesson)"""
    model = library(tying, seed=2)
    x = causality.random_tokens(3, 4, T_MAX, V)
    first, second = (checks.tensor(model(x), "the logits", (4, T_MAX, V)) for _ in range(2))
    if not torch.equal(first, second):
        checks.fail(
            "two forward passes on the same tokens differ in training mode: nn.TransformerEncoderLayer "
            "has dropout 0.1 unless you pass dropout=0.0"
        )


def test_library_gpt_initialisation(tying):
    """LibraryGPT starts like GPT-2: weights from N(0, 0.02^2), biases 0, LayerNorms at 1 and 0"""
    state = library(tying, (300, 64, 4, 2, 64), seed=4).state_dict()
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            checks.fail(f"LibraryGPT's {name} is {checks.describe(value)}, not a tensor on the CPU")
        if value.dim() >= 2:
            std = float(value.std())
            if not 0.018 < std < 0.022 or abs(float(value.mean())) > 0.002:
                checks.fail(
                    f"{name} has mean {float(value.mean()):.4f} and std {std:.4f}: draw every weight "
                    "matrix from N(0, 0.02^2) with nn.init.normal_(w, std=0.02) (MultiheadAttention's "
                    "in_proj_weight is a bare Parameter, not an nn.Linear)"
                )
        elif name.endswith("bias") and bool((value != 0).any()):  # NaN != 0 too
            checks.fail(f"{name} is not 0: GPT-2 starts every bias at 0 (nn.init.zeros_)")
