"""Public checks for milestone attnvar: the shapes, the two equivalences the stub states, and the rules."""

import pytest
import torch

from grader.suites import attention_scale, checks, rules

FUNCTIONS = ("multi_head_attention", "grouped_query_attention", "latent_attention")


def weights(seed: int, *shapes: tuple[int, int]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) / shape[0] ** 0.5 for shape in shapes]


def arguments(fn: str, heads: int, t: int) -> tuple:
    """x (2, t, 16) and the weights for ``fn`` with ``heads`` heads (2 K/V groups, latent rank 6)."""
    x = torch.randn(2, t, 16, generator=torch.Generator().manual_seed(t))
    if fn == "multi_head_attention":
        return (x, *weights(1, *[(16, 16)] * 4), heads)
    if fn == "grouped_query_attention":
        kv = 2 * (16 // heads)
        return (x, *weights(2, (16, 16), (16, kv), (16, kv), (16, 16)), heads, 2)
    return (x, *weights(3, (16, 16), (16, 6), (6, 16), (6, 16), (16, 16)), heads)


RULES = (
    rules.NoLoops(advice="process every head and every position at once, with batched tensor operations"),
    rules.NoCalls(
        *rules.LIBRARY_ATTENTION,
        name="no-library-attention",
        says="no library attention",
        advice="compute the attention yourself",
    ),
)
PARTS = {
    fn: rules.Part(
        fn,
        RULES,
        (
            # three sizes on one code path: 2 K/V groups of 2, 4 and 8 query heads (never one query head per
            # group, where a correct GQA may take a branch of its own), as the hidden suite probes
            rules.Growth("the number of heads", *(rules.Call(arguments(fn, h, 5), f"{h} heads") for h in (4, 8, 16))),
            rules.Growth("T", *(rules.Call(arguments(fn, 4, t), f"T = {t}") for t in (4, 8, 16))),
        ),
    )
    for fn in FUNCTIONS
}


@pytest.fixture(scope="module")
def verdicts(grading_context) -> rules.Verdicts:
    # A paper may put only some rules in force for this part (grader/paper/); the lesson puts them all.
    return rules.Verdicts(grading_context.submission, active=grading_context.rules_for("attnvar"))


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_public_rules(attnvar, verdicts, fn):
    """(public) no Python loops over heads or positions, no F.scaled_dot_product_attention"""
    verdicts.require(attnvar, PARTS[fn])


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_public_shape(attnvar, fn):
    """(public) 4 heads: (2, 5, 16) in, (2, 5, 16) out"""
    checks.tensor(attnvar.call(fn, *arguments(fn, 4, 5)), f"{fn}'s output", (2, 5, 16))


def test_public_multi_head_scale(attnvar, verdicts):
    """(public) multi_head_attention with d = 36, 4 heads divides its scores by sqrt(head_size) = 3"""
    verdicts.require(attnvar, PARTS["multi_head_attention"])
    eye, x = torch.eye(attention_scale.D), attention_scale.probe_input()
    out = attnvar.call("multi_head_attention", x, eye, eye, eye, eye, attention_scale.HEADS)
    out = checks.tensor(out, "multi_head_attention's output", tuple(x.shape))
    if message := attention_scale.wrong_scale(out, "multi_head_attention"):
        checks.fail(message)


def test_public_groups_equal_heads_is_mha(attnvar):
    """(public) grouped_query_attention with n_groups = n_heads = 4 equals multi_head_attention"""
    x, w_q, w_k, w_v, w_o, heads = arguments("multi_head_attention", 4, 5)
    mha = checks.tensor(attnvar.call("multi_head_attention", x, w_q, w_k, w_v, w_o, 4), "MHA's output", (2, 5, 16))
    gqa = attnvar.call("grouped_query_attention", x, w_q, w_k, w_v, w_o, 4, 4)
    same_as_mha(checks.tensor(gqa, "GQA's output", (2, 5, 16)), mha, "GQA with n_groups = n_heads")


def test_public_latent_identity_is_mha(attnvar):
    """(public) latent_attention with w_down = I (r = d) equals multi_head_attention"""
    x, w_q, w_k, w_v, w_o, heads = arguments("multi_head_attention", 4, 5)
    mha = checks.tensor(attnvar.call("multi_head_attention", x, w_q, w_k, w_v, w_o, 4), "MHA's output", (2, 5, 16))
    mla = attnvar.call("latent_attention", x, w_q, torch.eye(16), w_k, w_v, w_o, 4)
    same_as_mha(checks.tensor(mla, "the latent output", (2, 5, 16)), mha, "latent with w_down = I")


def same_as_mha(actual: torch.Tensor, mha: torch.Tensor, what: str) -> None:
    """``actual`` equals the student's own multi_head_attention's output, which the message names as what
    it is compared with: the reference is not involved, and it is the MHA that may be wrong."""
    try:
        checks.assert_close_where(actual, mha, what)
    except AssertionError as error:
        message = str(error).replace(
            f"{what} differs from the reference", f"{what} differs from your multi_head_attention's output", 1
        )
        raise AssertionError(message.replace(", expected ", ", your multi_head_attention gives ", 1)) from None
