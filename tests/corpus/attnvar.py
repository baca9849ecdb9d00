"""Variants for the `attnvar` exercise (m10_attnvar.py: multi-head, grouped-query and latent attention, no loops)."""

from helpers import bug, ok

M10 = "m10_attnvar.py"

# ------------------------------------------------------------------ reference snippets patched below

SPLIT = "return t.view(B, T, n_heads, -1).transpose(1, 2)"
SCALE = "scores = q @ k.transpose(-2, -1) / math.sqrt(hs)"
MASK = 'scores = scores.masked_fill(future, float("-inf"))'
SOFTMAX = "weights = F.softmax(scores, dim=-1)"
ATTEND_BODY = f"""    T, hs = q.shape[-2], q.shape[-1]
    {SCALE}
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    {MASK}
    {SOFTMAX}
    return weights @ v
"""
MHA_BODY = """    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_heads)
    v = split_heads(x @ w_v, n_heads)
    return merge_heads(attend(q, k, v)) @ w_o


def grouped_query_attention"""
REPEAT = """    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
"""
GQA_BODY = f"""    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_groups)
    v = split_heads(x @ w_v, n_groups)
    group = n_heads // n_groups  # the query heads that share one K/V head
{REPEAT}    return merge_heads(attend(q, k, v)) @ w_o
"""
MLA_ATTEND = """    v = split_heads(c @ w_up_v, n_heads)
    return merge_heads(attend(q, k, v)) @ w_o"""

# What multi_head_attention's own checks are worth (grader/suites/hidden/test_attnvar.py): its third of the
# rules (2 points) and of the shapes (1), its four reference cases of twelve (3), its four causality cases of
# twelve (2), and the large-inputs check (1). A rule broken in MHA alone costs exactly these: the
# equivalences of GQA and latent attention with MHA are theirs, compared with the reference's MHA.
MHA_POINTS = 2 / 3 + 1 / 3 + 1 + 2 / 3 + 1

BUGGY = [
    bug("attnvar-no-causal-mask", "attnvar", "causal mask", M10, (f"    {MASK}\n", "")),
    bug(
        "attnvar-mask-after-softmax",
        "attnvar",
        "after the softmax",
        M10,
        (f"    {MASK}\n    {SOFTMAX}", "    weights = F.softmax(scores, dim=-1).masked_fill(future, 0.0)"),
    ),
    bug(
        "attnvar-scale-by-d",
        "attnvar",
        "divided by d, the wrong scale",
        M10,
        (SCALE, "scores = q @ k.transpose(-2, -1) / (q.shape[1] * hs)  # 1 / d, d = n_heads * hs"),
    ),
    # latent attention written out, scaled by the latent's size r instead of the head size
    bug(
        "attnvar-latent-scaled-by-latent-size",
        "attnvar",
        "r = 10 is the latent's size",
        M10,
        (
            MLA_ATTEND,
            """    v = split_heads(c @ w_up_v, n_heads)
    T, r = x.shape[1], c.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(r)
    future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
    weights = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return merge_heads(weights @ v) @ w_o""",
        ),
        first=True,
    ),
    bug(
        "attnvar-split-heads-without-transpose",
        "attnvar",
        "plain view",
        M10,
        (SPLIT, "return t.reshape(B, n_heads, T, -1)"),
    ),
    bug(
        "attnvar-gqa-repeat-not-interleave",
        "attnvar",
        "repeat_interleave (not repeat)",
        M10,
        (REPEAT, "    k = k.repeat(1, group, 1, 1)\n    v = v.repeat(1, group, 1, 1)\n"),
    ),
    bug(
        "attnvar-loop-over-heads",
        "attnvar",
        "has a for loop at line",
        M10,
        (
            MHA_BODY,
            """    d = x.shape[-1]
    hs = d // n_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    heads = []
    for h in range(n_heads):
        part = slice(h * hs, (h + 1) * hs)
        heads.append(attend(q[..., part], k[..., part], v[..., part]))
    return torch.cat(heads, dim=-1) @ w_o


def grouped_query_attention""",
        ),
        lost=MHA_POINTS,
    ),
    # No loop statement for the source scan to find: only the count of operations sees it.
    bug(
        "attnvar-map-over-heads",
        "attnvar",
        "grows with the number of heads",
        M10,
        (
            MHA_BODY,
            """    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_heads)
    v = split_heads(x @ w_v, n_heads)
    one = lambda h: attend(q[:, h : h + 1], k[:, h : h + 1], v[:, h : h + 1])  # noqa: E731
    return merge_heads(torch.cat(list(map(one, range(n_heads))), dim=1)) @ w_o


def grouped_query_attention""",
        ),
        lost=MHA_POINTS,
    ),
    bug(
        "attnvar-latent-uses-sdpa",
        "attnvar",
        "scaled_dot_product_attention",
        M10,
        (
            MLA_ATTEND,
            """    v = split_heads(c @ w_up_v, n_heads)
    return merge_heads(F.scaled_dot_product_attention(q, k, v, is_causal=True)) @ w_o""",
        ),
    ),
]

# The rest of the rules' corpus: a loop over positions, a comprehension over heads, recursion over
# the heads (no loop statement: only the count of operations sees it), and SDPA under another name.
BUGGY += [
    bug(
        "attnvar-loop-over-positions",
        "attnvar",
        "has a for loop at line",
        M10,
        (
            ATTEND_BODY,
            """    T, hs = q.shape[-2], q.shape[-1]
    rows = []
    for t in range(T):  # one query position at a time, over the keys up to it
        s = q[..., t : t + 1, :] @ k[..., : t + 1, :].transpose(-2, -1) / math.sqrt(hs)
        rows.append(F.softmax(s, dim=-1) @ v[..., : t + 1, :])
    return torch.cat(rows, dim=-2)
""",
        ),
    ),
    bug(
        "attnvar-comprehension-over-heads",
        "attnvar",
        "has a comprehension (a loop) at line",
        M10,
        (
            MHA_BODY,
            """    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_heads)
    v = split_heads(x @ w_v, n_heads)
    heads = [attend(q[:, h : h + 1], k[:, h : h + 1], v[:, h : h + 1]) for h in range(n_heads)]
    return merge_heads(torch.cat(heads, dim=1)) @ w_o


def grouped_query_attention""",
        ),
    ),
    bug(
        "attnvar-recursion-over-heads",
        "attnvar",
        "grows with the number of heads",
        M10,
        (
            MHA_BODY,
            """    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_heads)
    v = split_heads(x @ w_v, n_heads)
    return merge_heads(head_by_head(q, k, v)) @ w_o


def head_by_head(q, k, v):
    if q.shape[1] == 1:
        return attend(q, k, v)
    first = attend(q[:, :1], k[:, :1], v[:, :1])
    return torch.cat((first, head_by_head(q[:, 1:], k[:, 1:], v[:, 1:])), dim=1)


def grouped_query_attention""",
        ),
    ),
    bug(
        "attnvar-sdpa-through-an-alias",
        "attnvar",
        "uses scaled_dot_product_attention",
        M10,
        (
            "import torch.nn.functional as F\n",
            "import torch.nn.functional as F\nfrom torch.nn.functional import scaled_dot_product_attention as fast\n",
        ),
        (
            MLA_ATTEND,
            """    v = split_heads(c @ w_up_v, n_heads)
    return merge_heads(fast(q, k, v, is_causal=True)) @ w_o""",
        ),
    ),
]

CORRECT = [
    # einsum for both products, the mask with torch.where, the softmax written out (max-subtracted exp / sum).
    ok(
        "attnvar-einsum-where-exp",
        {
            M10: [
                (
                    ATTEND_BODY,
                    """    T = q.shape[-2]
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * q.shape[-1] ** -0.5
    allowed = torch.tril(torch.ones(T, T, device=q.device)).bool()
    scores = torch.where(allowed, scores, torch.tensor(float("-inf")))
    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return torch.einsum("bhqk,bhkd->bhqd", e / e.sum(dim=-1, keepdim=True), v)
""",
                ),
            ]
        },
    ),
    # An additive -inf mask; GQA's K/V heads lined up with expand and reshape (as Llama's repeat_kv does).
    ok(
        "attnvar-additive-mask-expand",
        {
            M10: [
                (
                    f"    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)\n    {MASK}\n",
                    '    scores = scores + torch.full((T, T), float("-inf"), device=q.device).triu(1)\n',
                ),
                (
                    REPEAT,
                    """    B, _, T, hs = k.shape
    k = k[:, :, None].expand(B, n_groups, group, T, hs).reshape(B, n_heads, T, hs)
    v = v[:, :, None].expand(B, n_groups, group, T, hs).reshape(B, n_heads, T, hs)
""",
                ),
            ]
        },
    ),
    # The projections in a loop over a literal tuple, and over a zip of literal tuples (fixed loops, allowed);
    # GQA by broadcasting the query heads of a group against their one K/V head, with no copy of K and V.
    ok(
        "attnvar-fixed-loop-broadcast-groups",
        {
            M10: [
                (
                    MHA_BODY,
                    """    q, k, v = (split_heads(x @ w, n_heads) for w in (w_q, w_k, w_v))
    return merge_heads(attend(q, k, v)) @ w_o


def grouped_query_attention""",
                ),
                (
                    GQA_BODY,
                    """    B, T, d = x.shape
    hs = d // n_heads
    # r: the query heads per group; one K and one V head
    q, k, v = (
        (x @ w).view(B, T, n_groups, r, hs).permute(0, 2, 3, 1, 4)
        for w, r in zip((w_q, w_k, w_v), (n_heads // n_groups, 1, 1))
    )
    out = attend(q, k, v)  # (B, n_groups, group, T, hs): head g * group + j
    return out.permute(0, 3, 1, 2, 4).reshape(B, T, d) @ w_o
""",
                ),
            ]
        },
    ),
]

# Special cases on one code path of many. x-transformers keeps a real branch for one K/V head (no
# copies: K and V squeezed, one einsum against every query head); Llama's and Hugging Face's repeat_kv return
# early when n_rep == 1. Both are loop-free, so the count of operations must compare probes that take the same
# branch, never one call on the fast path with another off it.
GQA_HEADS = """    q = split_heads(x @ w_q, n_heads)
    k = split_heads(x @ w_k, n_groups)
    v = split_heads(x @ w_v, n_groups)
"""
CORRECT += [
    ok(
        "attnvar-gqa-multi-query-fast-path",
        {
            M10: [
                (
                    GQA_HEADS,
                    """    q = split_heads(x @ w_q, n_heads)
    if n_groups == 1:  # multi-query attention: one K/V head for all, attended without copies
        k, v = x @ w_k, x @ w_v  # (B, T, hs)
        T, hs = q.shape[-2], q.shape[-1]
        scores = torch.einsum("bhqd,bkd->bhqk", q, k) / math.sqrt(hs)
        future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        weights = F.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
        return merge_heads(torch.einsum("bhqk,bkd->bhqd", weights, v)) @ w_o
    k = split_heads(x @ w_k, n_groups)
    v = split_heads(x @ w_v, n_groups)
""",
                ),
            ]
        },
    ),
    ok(
        "attnvar-gqa-repeat-kv-early-return",
        {
            M10: [
                (
                    REPEAT,
                    """    k = repeat_kv(k, group)
    v = repeat_kv(v, group)
""",
                ),
                (
                    "def latent_attention",
                    '''def repeat_kv(t: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, n_kv, T, hs) -> (B, n_kv * n_rep, T, hs), each K/V head n_rep times in a row (Llama's repeat_kv)."""
    if n_rep == 1:  # multi-head attention: nothing to repeat
        return t
    B, n_kv, T, hs = t.shape
    return t[:, :, None].expand(B, n_kv, n_rep, T, hs).reshape(B, n_kv * n_rep, T, hs)


def latent_attention''',
                ),
            ]
        },
    ),
]

# GQA's two counts taken one for the other: the K/V heads copied n_groups times instead of n_heads // n_groups,
# and, in the broadcast layout, the query heads viewed as (group, n_groups) instead of (n_groups, group). Both are
# right where the two counts agree (the suite's 4 heads in 2 groups) and raise elsewhere; the general hint for
# sizes that disagree (slice a mask or the position table) fits neither.
GROUP_COUNTS = "each K/V head serves n_heads // n_groups query heads"
BUGGY += [
    bug(
        "attnvar-gqa-repeats-by-the-number-of-groups",
        "attnvar",
        GROUP_COUNTS,
        M10,
        (REPEAT, REPEAT.replace("repeat_interleave(group,", "repeat_interleave(n_groups,")),
        first=True,
    ),
    bug(
        "attnvar-gqa-query-groups-viewed-the-other-way",
        "attnvar",
        GROUP_COUNTS,
        M10,
        (
            GQA_BODY,
            """    B, T, d = x.shape
    hs = d // n_heads
    group = n_heads // n_groups
    q = (x @ w_q).view(B, T, group, n_groups, hs).permute(0, 2, 3, 1, 4)
    k, v = ((x @ w).view(B, T, n_groups, 1, hs).permute(0, 2, 3, 1, 4) for w in (w_k, w_v))
    out = attend(q, k, v)
    return out.permute(0, 3, 1, 2, 4).reshape(B, T, d) @ w_o
""",
        ),
        first=True,
    ),
]
