"""Variants for the `sampling` exercise (m8_sampling.py: temperature, top-k, top-p)."""

from helpers import bug, ok

M8 = "m8_sampling.py"

# ------------------------------------------------------------------ reference snippets patched below

KTH = "kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[..., -1:]"
TOP_K = 'logits = logits.masked_fill(logits < kth, float("-inf"))'
DROP = "drop = probs.cumsum(dim=-1) - probs >= top_p"
TOP_P = """        probs, order = F.softmax(logits, dim=-1).sort(dim=-1, descending=True)
        drop = probs.cumsum(dim=-1) - probs >= top_p  # the more probable tokens already reach p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
"""
FILTER_BODY = f"""    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {{top_k}}")
        {KTH}
        {TOP_K}
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {{top_p}}")
{TOP_P}    return logits
"""
TEMPERATURE_CHECK = """    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
"""
FILTER_CHECKS = """    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
"""
GREEDY = """    if temperature == 0:
        return logits.argmax(dim=-1)
"""
SCALE = "logits = filter_logits(logits / temperature, top_k, top_p)"
SOFTMAX = "probs = F.softmax(logits, dim=-1)\n    return"
DRAW = "return torch.multinomial(probs, 1, generator=generator).squeeze(-1)"
SAMPLE_BODY = f"""{TEMPERATURE_CHECK}{FILTER_CHECKS}{GREEDY}    {SCALE}
    probs = F.softmax(logits, dim=-1)
    {DRAW}
"""
CROP = "logits = model(idx[:, -model.T:])[:, -1, :]"
GENERATE_BODY = f"""    idx = start
    for _ in range(max_new):
        {CROP}
        next_token = sample_next(logits, generator, temperature, top_k, top_p)
        idx = torch.cat([idx, next_token[:, None]], dim=1)
    return idx
"""

BUGGY = [
    bug(
        "sampling-temperature-multiplied",
        "sampling",
        "temperature multiplied the logits",
        M8,
        (SCALE, "logits = filter_logits(logits * temperature, top_k, top_p)"),
    ),
    bug(
        "sampling-temperature-on-probabilities",
        "sampling",
        "the temperature had no effect",
        M8,
        (SCALE, "logits = filter_logits(logits, top_k, top_p)"),
        (SOFTMAX, "probs = F.softmax(logits, dim=-1) / temperature\n    return"),
    ),
    bug(
        "sampling-filter-before-temperature",
        "sampling",
        "the filters ran before the temperature",
        M8,
        (SCALE, "logits = filter_logits(logits, top_k, top_p) / temperature"),
    ),
    bug("sampling-temperature-zero-divides", "sampling", "do not divide by 0", M8, (GREEDY, "")),
    bug(
        "sampling-top-k-off-by-one",
        "sampling",
        "off by one",
        M8,
        (TOP_K, TOP_K.replace("logits < kth", "logits <= kth")),
    ),
    # k + 1 kept: the combined top-k + top-p check blames the top-k step, shown wrong on its own
    bug(
        "sampling-top-k-keeps-k-plus-1",
        "sampling",
        "that step is wrong on its own (see the top-k check)",
        M8,
        (KTH, "kth = torch.topk(logits, min(top_k + 1, logits.size(-1)), dim=-1).values[..., -1:]"),
    ),
    # int32 ids: one check asks for torch.long and says .long(); the draws are still read
    bug(
        "sampling-int32-ids",
        "sampling",
        "convert with .long()",
        M8,
        (DRAW, DRAW + ".int()"),
    ),
    # inverse-CDF sampling with the uniform draw (B,) not made a column: a size mismatch inside sample_next
    bug(
        "sampling-inverse-cdf-without-a-column",
        "sampling",
        "in sample_next, the logits and probabilities are (B, V)",
        M8,
        (
            DRAW,
            "u = torch.rand(probs.shape[0], generator=generator)\n    return (probs.cumsum(dim=-1) < u).sum(dim=-1)",
        ),
    ),
    bug(
        "sampling-top-k-not-clamped",
        "sampling",
        "min(top_k, V)",
        M8,
        (KTH, "kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]"),
    ),
    bug(
        "sampling-top-k-2d-only",
        "sampling",
        "leading dims",
        M8,
        (KTH, "kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[:, [-1]]"),
    ),
    bug(
        "sampling-top-p-drops-crossing-token",
        "sampling",
        "crosses p",
        M8,
        (DROP, "drop = probs.cumsum(dim=-1) >= top_p"),
    ),
    # A cumulative probability equal to p already reaches p; these keep the token after it too.
    bug(
        "sampling-top-p-strict-at-p",
        "sampling",
        "exactly p",
        M8,
        (DROP, "drop = probs.cumsum(dim=-1) - probs > top_p"),
        first=True,
    ),
    bug(
        "sampling-top-p-shifted-mask-strict",
        "sampling",
        "exactly p",
        M8,
        (
            DROP,
            "drop = probs.cumsum(dim=-1) > top_p\n"
            "        drop = torch.cat([torch.zeros_like(drop[..., :1]), drop[..., :-1]], dim=-1)",
        ),
        first=True,
    ),
    bug(
        "sampling-top-p-unsorted",
        "sampling",
        "sort them",
        M8,
        (
            TOP_P,
            """        probs = F.softmax(logits, dim=-1)
        drop = probs.cumsum(dim=-1) - probs >= top_p
        logits = logits.masked_fill(drop, float("-inf"))
""",
        ),
    ),
    # The drop mask made in sorted order and applied as it is: token j gets the flag of the j-th most probable.
    bug(
        "sampling-top-p-mask-not-scattered",
        "sampling",
        "vocabulary order",
        M8,
        (
            'logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))',
            'logits = logits.masked_fill(drop, float("-inf"))',
        ),
        first=True,
    ),
    bug(
        "sampling-top-p-before-top-k",
        "sampling",
        "top-p used the probabilities of all V tokens",
        M8,
        (
            FILTER_BODY,
            f"""    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {{top_p}}")
{TOP_P}    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {{top_k}}")
        {KTH}
        {TOP_K}
    return logits
""",
        ),
    ),
    bug(
        "sampling-global-rng",
        "sampling",
        "ignore the generator",
        M8,
        (DRAW, "return torch.multinomial(probs, 1).squeeze(-1)"),
    ),
    bug(
        "sampling-own-generator",
        "sampling",
        "draw with the generator passed in",
        M8,
        (DRAW, "return torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(0)).squeeze(-1)"),
    ),
    bug("sampling-no-temperature-check", "sampling", "must raise ValueError", M8, (TEMPERATURE_CHECK, "")),
    # Only top_k == 0 refused; the k-th largest read from the sorted logits, where -1 indexes from the end: a
    # negative top_k runs quietly.
    bug(
        "sampling-top-k-negative-accepted",
        "sampling",
        "top_k below 1",
        M8,
        ("top_k is not None and top_k < 1", "top_k is not None and top_k == 0"),
        ("if top_k < 1:", "if top_k == 0:"),
        (KTH, "kth = logits.sort(dim=-1, descending=True).values[..., min(top_k, logits.size(-1)) - 1, None]"),
        first=True,
    ),
    bug(
        "sampling-no-argument-checks",
        "sampling",
        "must raise ValueError",
        M8,
        (TEMPERATURE_CHECK + FILTER_CHECKS, ""),
        (
            """        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
""",
            "",
        ),
        (
            """        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
""",
            "",
        ),
    ),
    bug(
        "sampling-returns-b-by-1",
        "sampling",
        "squeeze the last axis",
        M8,
        (DRAW, "return torch.multinomial(probs, 1, generator=generator)"),
    ),
    bug(
        "sampling-generate-no-crop",
        "sampling",
        "crop to the last model.T tokens",
        M8,
        (CROP, "logits = model(idx)[:, -1, :]"),
    ),
    bug(
        "sampling-generate-first-position",
        "sampling",
        "last position",
        M8,
        (CROP, "logits = model(idx[:, -model.T:])[:, 0, :]"),
    ),
    bug(
        "sampling-generate-no-grad-missing",
        "sampling",
        "no_grad",
        M8,
        ("@torch.no_grad()\ndef generate_sampled", "def generate_sampled"),
    ),
]

CORRECT = [
    # top-k by sorting, top-p by a loop over each row, sampling by inverse CDF with torch.rand(generator=...).
    ok(
        "sampling-loops-inverse-cdf",
        {
            M8: [
                (
                    FILTER_BODY,
                    """    if top_k is not None and top_k < 1:
        raise ValueError("top_k must be >= 1")
    if top_p is not None and (top_p <= 0 or top_p > 1):
        raise ValueError("top_p must be in (0, 1]")
    out = logits.clone()
    V = out.shape[-1]
    rows = out.reshape(-1, V)
    for row in rows:
        if top_k is not None and top_k < V:
            threshold = row.sort(descending=True).values[top_k - 1]
            row[row < threshold] = float("-inf")
        if top_p is not None:
            probs = torch.softmax(row, dim=0)
            total = 0.0
            for i in probs.argsort(descending=True).tolist():
                if total >= top_p:
                    row[i] = float("-inf")
                total += probs[i].item()
    return rows.reshape(out.shape)
""",
                ),
                (
                    SAMPLE_BODY,
                    """    bad_k = top_k is not None and top_k < 1
    if temperature < 0 or bad_k or (top_p is not None and not 0 < top_p <= 1):
        raise ValueError(f"bad sampling arguments: temperature={temperature}, top_k={top_k}, top_p={top_p}")
    if not temperature:
        return torch.argmax(logits, dim=1)
    probs = F.softmax(filter_logits(logits / temperature, top_k, top_p), dim=-1)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp(max=probs.shape[1] - 1)
""",
                ),
                (
                    GENERATE_BODY,
                    """    with torch.no_grad():
        out = start.clone()
        while out.shape[1] < start.shape[1] + max_new:
            last = model(out[:, max(0, out.shape[1] - model.T):])[:, -1]
            out = torch.cat((out, sample_next(last, generator, temperature, top_k, top_p).unsqueeze(1)), 1)
    return out
""",
                ),
                ("@torch.no_grad()\ndef generate_sampled", "def generate_sampled"),
            ]
        },
    ),
    # top-k with kthvalue, top-p as Hugging Face writes it now (ascending: remove the least probable tokens whose
    # sum stays within 1 - p; its older descending form, "sum > p" shifted right, keeps one token too many when a
    # sum lands exactly on p: sampling-top-p-shifted-mask-strict), sampling with the Gumbel-max trick.
    ok(
        "sampling-gumbel-hf-top-p",
        {
            M8: [
                (
                    FILTER_BODY,
                    """    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k={top_k}: need at least one token")
        k = min(top_k, logits.shape[-1])
        kth = torch.kthvalue(logits, logits.shape[-1] - k + 1, dim=-1, keepdim=True).values
        logits = torch.where(logits >= kth, logits, torch.full_like(logits, float("-inf")))
    if top_p is not None:
        if top_p <= 0 or top_p > 1:
            raise ValueError(f"top_p={top_p}: must be in (0, 1]")
        sorted_logits, sorted_idx = torch.sort(logits, descending=False, dim=-1)
        remove = sorted_logits.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        remove[..., -1] = False
        mask = torch.zeros_like(remove).scatter(-1, sorted_idx, remove)
        logits = logits.masked_fill(mask, float("-inf"))
    return logits
""",
                ),
                (
                    SAMPLE_BODY,
                    """    if temperature < 0:
        raise ValueError("temperature must not be negative")
    if top_k is not None and top_k < 1:
        raise ValueError("top_k must be positive")
    if top_p is not None and not (0 < top_p <= 1):
        raise ValueError("top_p must lie in (0, 1]")
    if temperature == 0:
        return logits.max(dim=-1).indices
    scaled = filter_logits(logits / temperature, top_k=top_k, top_p=top_p)
    u = torch.rand(scaled.shape, generator=generator).clamp(min=1e-20)
    return (scaled - torch.log(-torch.log(u))).argmax(dim=-1)
""",
                ),
            ]
        },
    ),
    # Top-p as a threshold, with no sort: a token is dropped when the tokens strictly more probable than it hold
    # top_p or more, so every token tied with the last one kept stays (all four of the exactly-1/4 check's).
    ok(
        "sampling-top-p-threshold-keeps-ties",
        {
            M8: [
                (
                    TOP_P,
                    """        probs = F.softmax(logits, dim=-1)
        # above[..., i]: the probability of the tokens strictly more probable than token i
        above = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(dim=-1)
        logits = logits.masked_fill(above >= top_p, float("-inf"))
""",
                ),
            ]
        },
    ),
    # The exponential race (probs / Exp(1), as gpt-fast samples), from a generator-drawn exponential.
    ok(
        "sampling-exponential-race",
        {
            M8: [
                (
                    DRAW,
                    """noise = torch.empty_like(probs).exponential_(1, generator=generator)
    return (probs / noise).argmax(dim=-1).long()""",
                ),
            ]
        },
    ),
]
