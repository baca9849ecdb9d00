"""Variants for the `kvcache` exercise (generation with a key/value cache)."""

from corpus.core import EVERY_EARLIER_NAME
from helpers import bug, ok

M7 = "m7_kvcache.py"

# ------------------------------------------------------------------ reference snippets patched below

LENGTH_CHECK = "if t + max_new - 1 > model.T:"
RAISE = """    if t + max_new - 1 > model.T:
        raise ValueError(f"t + max_new - 1 = {t + max_new - 1} positions needed, but model.T = {model.T}: "
                         "a cache cannot crop the sequence")
"""
NEWEST = "logits = feed(model, idx[:, -1:], t + i - 1, cache)"
LAYER = "out, cache[i] = cached_attention(block.attn, block.ln1(x), cache[i])"
RETURN_CACHE = "return attn.proj(out.transpose(1, 2).reshape(B, t, d)), (k, v)"
SCALE = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])"
MASK = """    scores = scores.masked_fill(~visible, float("-inf"))
"""
ATTEND = """    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    # new position i is position n - t + i: it may see every key up to and including its own
    visible = torch.ones(t, n, dtype=torch.bool, device=x.device).tril(diagonal=n - t)
    scores = scores.masked_fill(~visible, float("-inf"))
    out = F.softmax(scores, dim=-1) @ v
"""
APPEND = """    if past is not None:
        k = torch.cat([past[0], k], dim=2)
        v = torch.cat([past[1], v], dim=2)
"""
SPLIT_AND_APPEND = f"""    q, k, v = (split_heads(z, attn.n_heads) for z in attn.qkv(x).split(d, dim=-1))
{APPEND}"""
LAST_LOGITS = "return model.head(model.ln(x[:, -1]))"
CACHED_COUNT = "return prompt_len + max_new - 1"
UNCACHED_COUNT = "return sum(prompt_len + i for i in range(max_new))"
DECORATED = """@torch.no_grad()
def generate_cached(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:"""
LOOP = """    cache = [None] * len(model.blocks)
    idx = start
    for i in range(max_new):
        if i == 0:
            logits = feed(model, start, 0, cache)  # the whole prompt, positions 0 .. t - 1
        else:
            logits = feed(model, idx[:, -1:], t + i - 1, cache)  # only the newest token, at its position
        next_token = logits.argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, next_token], dim=1)
    return idx
"""

# ------------------------------------------------------------------ correct, written differently

# The cache as two preallocated tensors per model, (layers, B, heads, T, d_head), filled by index; q, k and v
# split in one view, as the grader's own attention does; every step written out in one loop.
PREALLOCATED = """    B = start.shape[0]
    d = model.tok.embedding_dim
    heads = model.blocks[0].attn.n_heads
    keys = torch.zeros(len(model.blocks), B, heads, model.T, d // heads, device=start.device)
    values = torch.zeros_like(keys)
    idx, new, n = start, start, 0  # n: positions cached so far
    for _ in range(max_new):
        s = new.shape[1]
        x = model.tok(new) + model.pos(torch.arange(n, n + s, device=start.device))
        for layer, block in enumerate(model.blocks):
            q, k, v = block.attn.qkv(block.ln1(x)).view(B, s, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            keys[layer, :, :, n:n + s] = k
            values[layer, :, :, n:n + s] = v
            weights = q @ keys[layer, :, :, :n + s].transpose(-2, -1) / (d // heads) ** 0.5
            allowed = torch.ones(s, n + s, dtype=torch.bool, device=start.device).tril(n)
            weights = weights.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
            out = (weights @ values[layer, :, :, :n + s]).transpose(1, 2).reshape(B, s, d)
            x = x + block.attn.proj(out)
            x = x + block.ffn(block.ln2(x))
        n += s
        new = model.head(model.ln(x[:, -1:])).argmax(dim=-1)
        idx = torch.cat([idx, new], dim=1)
    return idx
"""

# The prompt fed before the loop (nothing at all for max_new = 0), a with-block instead of the decorator.
PROMPT_FIRST = """    with torch.no_grad():
        if max_new == 0:
            return start
        cache = [None] * len(model.blocks)
        logits = feed(model, start, 0, cache)
        idx = torch.cat([start, logits.argmax(dim=-1, keepdim=True)], dim=1)
        for position in range(t, t + max_new - 1):
            logits = feed(model, idx[:, position:position + 1], position, cache)
            idx = torch.cat([idx, logits.argmax(dim=-1, keepdim=True)], dim=1)
        return idx
"""


def positions_first(axis: int) -> str:
    """The cache kept as (B, positions, n_heads, d_head), joined along ``axis``: 1 is the positions, 2 the heads."""
    return f"""    h = attn.n_heads
    # the cache kept positions first, (B, t, n_heads, d_head); the heads move forward only to attend
    q, k, v = (z.view(B, t, h, d // h) for z in attn.qkv(x).split(d, dim=-1))
    if past is not None:
        k = torch.cat([past[0], k], dim={axis})
        v = torch.cat([past[1], v], dim={axis})
    kept = (k, v)
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))
"""


# The later steps written out on their own, in a second function beside the prompt's pass.
CACHED_STEP = '''def step(model: nn.Module, token: torch.Tensor, position: int, cache: list) -> torch.Tensor:
    """One cached step: the newest token (B, 1) at its position; returns its logits (B, vocab_size)."""
    x = model.tok(token) + model.pos(torch.tensor([position], device=token.device))
    for i, block in enumerate(model.blocks):
        out, cache[i] = cached_attention(block.attn, block.ln1(x), cache[i])
        x = x + out
        x = x + block.ffn(block.ln2(x))
    return model.head(x[:, -1])


'''

BUGGY = [
    bug(
        "position-not-advanced",
        "kvcache",
        "position index is not advanced",
        M7,
        (NEWEST, "logits = feed(model, idx[:, -1:], t, cache)"),
    ),
    bug(
        "cache-never-stored",
        "kvcache",
        "cache is never updated",
        M7,
        (LAYER, "out, _ = cached_attention(block.attn, block.ln1(x), cache[i])"),
    ),
    bug(
        "cache-keeps-only-the-prompt",
        "kvcache",
        "not appended to the cache",
        M7,
        (RETURN_CACHE, "return attn.proj(out.transpose(1, 2).reshape(B, t, d)), past or (k, v)"),
    ),
    bug(
        "one-cache-for-all-layers",
        "kvcache",
        "empty cache of its own",
        M7,
        (LAYER, "out, cache[i] = cached_attention(block.attn, block.ln1(x), cache[0])"),
    ),
    bug(
        "no-cache-whole-sequence",
        "kvcache",
        "fed the whole sequence each step",
        M7,
        (NEWEST, "logits = feed(model, idx, 0, [None] * len(model.blocks))"),
    ),
    bug("no-mask-on-prompt", "kvcache", "prompt pass has no causal mask", M7, (MASK, "")),
    bug("unscaled-scores", "kvcache", "sqrt(d_head)", M7, (SCALE, "scores = q @ k.transpose(-2, -1)")),
    bug(
        "last-token-counted", "kvcache", "counted the last new token", M7, (CACHED_COUNT, "return prompt_len + max_new")
    ),
    bug(
        "uncached-count-without-prompt",
        "kvcache",
        "forgot the prompt",
        M7,
        (UNCACHED_COUNT, "return sum(range(max_new))"),
    ),
    # a bug of every pass whose first token can still come out right: the replay names it, not "the cache"
    bug(
        "scores-over-sqrt-d",
        "kvcache",
        "divided by sqrt(d), the model's width",
        M7,
        (SCALE, SCALE.replace("q.shape[-1]", "d")),
    ),
    # a cache in a default argument outlives the call: the same call repeated gives other tokens
    bug(
        "cache-in-a-default-argument",
        "kvcache",
        "outlives a call",
        M7,
        (DECORATED, DECORATED.replace("max_new: int = 5)", "max_new: int = 5, cache: list = [])")),
        (
            "    cache = [None] * len(model.blocks)\n    idx = start\n",
            "    cache.extend([None] * (len(model.blocks) - len(cache)))\n    idx = start\n",
        ),
    ),
    bug("no-length-check", "kvcache", "a clear ValueError is expected", M7, (RAISE, "")),
    bug(
        "length-check-off-by-one",
        "kvcache",
        "fits, but your code raised ValueError",
        M7,
        (LENGTH_CHECK, "if t + max_new > model.T:"),
    ),
    bug(
        "gradients-recorded",
        "kvcache",
        "gradients enabled",
        M7,
        (DECORATED, "def generate_cached(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:"),
    ),
    # The contract leaves the model unchanged, its mode included: eval() and never back.
    bug(
        "kvcache-leaves-eval-mode",
        "kvcache",
        "left the model in eval mode",
        M7,
        ("    cache = [None] * len(model.blocks)\n", "    model.eval()\n    cache = [None] * len(model.blocks)\n"),
    ),
    # A position one past the token's own runs off the position table on the longest sequence
    bug(
        "position-off-by-one",
        "kvcache",
        "off by one",
        M7,
        (NEWEST, "logits = feed(model, idx[:, -1:], t + i, cache)"),
        first=True,
    ),
    # A cache kept on the model: right tokens, but the model holds the keys and values after the call
    bug(
        "cache-kept-on-the-model",
        "kvcache",
        "must not be kept on the model",
        M7,
        (
            "    cache = [None] * len(model.blocks)\n    idx = start\n",
            "    model.kv_cache = [None] * len(model.blocks)  # reset every call\n    cache = model.kv_cache\n"
            "    idx = start\n",
        ),
        first=True,
    ),
    # ... made on the first call and never reset: the next call, on another batch size, runs into the old keys
    bug(
        "cache-on-the-model-never-reset",
        "kvcache",
        "must not be kept on the model",
        M7,
        (
            "    cache = [None] * len(model.blocks)\n    idx = start\n",
            '    if not hasattr(model, "kv_cache"):\n        model.kv_cache = [None] * len(model.blocks)\n'
            "    cache = model.kv_cache\n    idx = start\n",
        ),
        first=True,
    ),
]

# The final LayerNorm skipped where the head is applied. The probe's LayerNorm (weight 0, bias b) makes every
# new token head(b)'s: the passes that do not follow it are named, not "the cache or the positions".
BUGGY += [
    bug(
        "cached-step-skips-final-norm",
        "kvcache",
        "the cached steps apply model.head without the final LayerNorm (model.ln)",
        M7,
        (NEWEST, "logits = step(model, idx[:, -1:], t + i - 1, cache)"),
        (DECORATED, CACHED_STEP + DECORATED),
        first=True,
    ),
    bug(
        "no-final-norm",
        "kvcache",
        "both the prompt pass and the cached steps apply model.head without the final LayerNorm (model.ln)",
        M7,
        (LAST_LOGITS, "return model.head(x[:, -1])"),
        first=True,
    ),
]

# The cache joined along the heads axis: the first cached step fails on sizes that disagree, where the general
# hint (slice a mask or the position table) would send the student to code that is right. The probe reads the
# axis from the sizes, in the stub's layout and in one with the positions first.
BUGGY += [
    bug(
        "cache-joined-along-the-heads",
        "kvcache",
        "the cache grows along the heads axis, not the positions axis",
        M7,
        (APPEND, APPEND.replace("dim=2", "dim=1")),
        first=True,
    ),
    bug(
        "cache-positions-first-joined-along-the-heads",
        "kvcache",
        "the cache grows along the heads axis, not the positions axis",
        M7,
        (SPLIT_AND_APPEND, positions_first(2)),
        (RETURN_CACHE, RETURN_CACHE.replace("(k, v)", "kept")),
        first=True,
    ),
]

CORRECT = [
    ok("kvcache-preallocated-cache", {M7: [(LOOP, PREALLOCATED)]}),
    # the cache kept (B, t, n_heads, d_head), joined along its positions axis, dimension 1
    ok(
        "kvcache-positions-first-cache",
        {M7: [(SPLIT_AND_APPEND, positions_first(1)), (RETURN_CACHE, RETURN_CACHE.replace("(k, v)", "kept"))]},
    ),
    ok(
        "kvcache-fused-attention",
        {
            M7: [
                (
                    ATTEND,
                    "    visible = torch.ones(t, k.shape[2], dtype=torch.bool).tril(diagonal=k.shape[2] - t)\n"
                    "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=visible)\n",
                ),
                ("    n = k.shape[2]  # every position so far: the cached ones, then the t new ones\n", ""),
                (UNCACHED_COUNT, "return max_new * prompt_len + max_new * (max_new - 1) // 2"),
            ]
        },
    ),
    ok(
        "kvcache-prompt-before-loop",
        {M7: [(DECORATED, DECORATED.removeprefix("@torch.no_grad()\n")), (LOOP, PROMPT_FIRST)]},
    ),
    ok(
        "attend-with-m1s-names",
        {
            M7: [
                ("import torch.nn.functional as F\n", "import torch.nn.functional as F\n" + EVERY_EARLIER_NAME),
                (
                    ATTEND,
                    """\
    if past is None:  # the prompt: plain causal attention, as in m1
        out, _ = causal_attention(q, k, v)
    else:  # new position i sits at n - t + i: the rows of an n x n causal mask from n - t on
        visible = causal_mask(n, x.device)[n - t:].bool()
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        out = F.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1) @ v
""",
                ),
            ]
        },
    ),
    # eval() while generating, and the caller's mode restored afterwards, as Hugging Face's generate leaves it.
    ok(
        "kvcache-eval-then-restore",
        {
            M7: [
                (
                    LOOP,
                    """    was_training = model.training
    model.eval()
    try:
        cache = [None] * len(model.blocks)
        idx = start
        for i in range(max_new):
            position = 0 if i == 0 else t + i - 1
            logits = feed(model, start if i == 0 else idx[:, -1:], position, cache)
            idx = torch.cat([idx, logits.argmax(dim=-1, keepdim=True)], dim=1)
        return idx
    finally:
        model.train(was_training)
""",
                )
            ]
        },
    ),
]
