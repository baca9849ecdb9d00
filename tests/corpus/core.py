"""The corpus: realistic single-bug submissions, and correct ones written differently.

Each Variant is the reference (``solutions/``) with exact text edits, so a variant
breaks loudly (Variant.build asserts) if the reference it patches changes.
``milestone`` is where a buggy variant must lose points, and ``expect`` a phrase that
the grader's message for that milestone should contain when it fails for the right
reason. Correct variants have ``milestone=None`` and must score full marks everywhere.
"""

from helpers import bug, ok

M1, M2, M3, M4 = "m1_attention.py", "m2_model.py", "m3_train.py", "m4_generate.py"

# ------------------------------------------------------------------ reference snippets patched below

MASK = "return torch.tril(torch.ones(T, T, device=device))"
SCALE = "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)"
FILL = 'scores = scores.masked_fill(causal_mask(T, q.device) == 0, float("-inf"))'
SOFTMAX = "weights = F.softmax(scores, dim=-1)"
ATTENTION_BODY = f"""    {SCALE}
    {FILL}
    {SOFTMAX}
    return weights @ v, weights
"""
SPLIT = "q, k, v = self.qkv(x).split(d, dim=-1)"
HEADS = "t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2)"
CALL = "out, _ = causal_attention(q, k, v)"
MERGE = "out = out.transpose(1, 2).contiguous().view(B, T, d)"
PROJ = "self.proj = nn.Linear(d, d)"
FORWARD_BODY = """        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        # (B, T, d) -> (B, n_heads, T, d_head): each head attends on its own slice
        q, k, v = (t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        out, _ = causal_attention(q, k, v)
        out = out.transpose(1, 2).contiguous().view(B, T, d)
        return self.proj(out)
"""


def own_attention(divisor: str = "math.sqrt(d // self.n_heads)", mask: str = "causal_mask(T, x.device)") -> str:
    """A CausalSelfAttention.forward that does its attention inline (as many students write it)."""
    return f"""        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, d // self.n_heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / {divisor}
        scores = scores.masked_fill({mask} == 0, float("-inf"))
        out = F.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, d))
"""


# A LayerNorm written by hand, its divisor given as ``std`` (of x, self.eps): the lesson's divides by
# sqrt(var + eps), var the biased variance (over d).
HAND_WRITTEN_NORM = """class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return self.weight * centred / ({std}) + self.bias


"""
BLOCK_ATTN = "x = x + self.attn(self.ln1(x))"
BLOCK_FFN = "x = x + self.ffn(self.ln2(x))"
FFN = "nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))"
BLOCKS = "self.blocks = nn.ModuleList(GPTBlock(d, n_heads) for _ in range(n_layers))"
HEAD = "self.head = nn.Linear(d, vocab_size, bias=False)"
POSITIONS = "self.pos(torch.arange(t, device=idx.device))"
TRUNK = """        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))
"""
COUNT = "return sum(p.numel() for p in model.parameters())"

PAIR = "return data[:, :-1], data[:, 1:]"
LOSS = "return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore)"
ADAM = "opt = torch.optim.Adam(model.parameters(), lr=lr)"
STEP = """    for _ in range(steps):
        opt.zero_grad()
        loss = clm_loss(model(inp), tgt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
"""

CROP = "logits = model(idx[:, -model.T:])"
PICK = "next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)"
GENERATE = '''@torch.no_grad()
def generate(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:
    """Append max_new greedy tokens to start (B, t); returns (B, t + max_new)."""
    idx = start
    for _ in range(max_new):
        logits = model(idx[:, -model.T:])
        next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
        idx = torch.cat([idx, next_token], dim=1)
    return idx
'''


# Every name the stubs of m1 to m3 document, imported as a later exercise may: while it is graded, these come
# from the grader's trusted modules, which must define them all.
EVERY_EARLIER_NAME = """
from m1_attention import CausalSelfAttention, causal_attention, causal_mask  # noqa: F401
from m2_model import GPTBlock, TinyGPT, count_parameters  # noqa: F401
from m3_train import clm_inputs_targets, clm_loss, train  # noqa: F401
"""

# ------------------------------------------------------------------ buggy: one realistic bug each

BUGGY = [
    # --- m1: causal_mask, causal_attention, CausalSelfAttention
    bug("m1-mask-triu", "m1", "tril", M1, (MASK, MASK.replace("tril", "triu"))),
    bug(
        "m1-mask-after-softmax",
        "m1",
        "after the softmax",
        M1,
        (f"    {FILL}\n    {SOFTMAX}", "    weights = F.softmax(scores, dim=-1) * causal_mask(T, q.device)"),
    ),
    bug("m1-no-scaling", "m1", "sqrt(d_k)", M1, (SCALE, "scores = q @ k.transpose(-2, -1)")),
    bug("m1-scale-by-d", "m1", "instead of 1/sqrt(d_head)", M1, (FORWARD_BODY, own_attention("math.sqrt(d)"))),
    bug(
        "m1-split-heads-without-transpose",
        "m1",
        "plain view",
        M1,
        (HEADS, "t.reshape(B, self.n_heads, T, d // self.n_heads)"),
        first=True,
    ),
    bug(
        "m1-merge-heads-without-transpose",
        "m1",
        "without transposing back",
        M1,
        (MERGE, "out = out.contiguous().view(B, T, d)"),
    ),
    bug("m1-softmax-over-queries", "m1", "dim=-1", M1, (SOFTMAX, "weights = F.softmax(scores, dim=-2)")),
    # over a leading axis: dim 0 or -3 is the batch or the heads for batched inputs (3-D: the same axis), and
    # dim=1 is the keys for 2-D inputs, the queries for 3-D ones and the heads for 4-D ones
    bug("m1-softmax-over-dim0", "m1", "dim=0", M1, (SOFTMAX, "weights = F.softmax(scores, dim=0)")),
    bug("m1-softmax-over-dim-3", "m1", "dim=-3", M1, (SOFTMAX, "weights = F.softmax(scores, dim=-3)")),
    bug("m1-softmax-over-dim1", "m1", "dim=1", M1, (SOFTMAX, "weights = F.softmax(scores, dim=1)")),
    bug(
        "m1-scores-divided-by-d_k",
        "m1",
        "divided by d_k, not sqrt(d_k)",
        M1,
        (SCALE, "scores = q @ k.transpose(-2, -1) / d_k"),
    ),
    bug(
        "m1-diagonal-masked",
        "m1",
        "diagonal",
        M1,
        (MASK, "return torch.tril(torch.ones(T, T, device=device), diagonal=-1)"),
    ),
    bug("m1-mask-hardcoded-8", "m1", "(8, 8)", M1, (MASK, "return torch.tril(torch.ones(8, 8, device=device))")),
    bug(
        "m1-mask-buffer-8-unsliced",
        "m1",
        "slice",
        M1,
        (PROJ, PROJ + '\n        self.register_buffer("mask", torch.tril(torch.ones(8, 8)))'),
        (FORWARD_BODY, own_attention(mask="self.mask")),
    ),
    bug("m1-mask-without-device", "m1", "device", M1, (MASK, "return torch.tril(torch.ones(T, T))")),
    bug(
        "m1-finite-additive-mask",
        "m1",
        "finite fill",
        M1,
        (FILL, "scores = scores + (causal_mask(T, q.device) - 1) * 1e4"),
    ),
    # a finite fill that holds for ordinary scores and gives way to scaled ones: the fill is blamed, not the mask
    bug("m1-finite-fill-1e5", "m1", "finite", M1, (FILL, FILL.replace('float("-inf")', "-1e5"))),
    # the mask right, its use inverted: -inf where it allows, so the last query sees nothing (NaN)
    bug("m1-mask-used-inverted", "m1", "used inverted", M1, (FILL, FILL.replace("== 0", "== 1")), first=True),
    bug("m1-mask-used-inverted-bool", "m1", "used inverted", M1, (FILL, FILL.replace("== 0", ".bool()")), first=True),
    bug("m1-no-output-projection", "m1", "proj is never applied", M1, ("return self.proj(out)", "return out")),
    bug(
        "m1-output-projection-removed",
        "m1",
        "output projection",
        M1,
        (f"\n        {PROJ}", ""),
        ("return self.proj(out)", "return out"),
    ),
    bug("m1-qkv-order-swapped", "m1", "swapped", M1, (SPLIT, SPLIT.replace("q, k, v", "k, q, v"))),
    # Bugs seen on real submissions, each named by the first message that fails.
    bug(
        "m1-scores-over-sequence-length",
        "m1",
        "sequence length",
        M1,
        (SCALE, "scores = q @ k.transpose(-2, -1) / math.sqrt(T)"),
        first=True,
    ),
    bug(
        "m1-module-scores-over-T",
        "m1",
        "sequence length",
        M1,
        (FORWARD_BODY, own_attention("T")),
        first=True,
    ),
    # --- m2: GPTBlock, TinyGPT, count_parameters (graded on the grader's own M1)
    bug(
        "m2-post-norm",
        "m2",
        "post-norm",
        M2,
        (BLOCK_ATTN, "x = self.ln1(x + self.attn(x))"),
        (BLOCK_FFN, "x = self.ln2(x + self.ffn(x))"),
    ),
    bug(
        "m2-no-final-layernorm",
        "m2",
        "final LayerNorm",
        M2,
        ("        self.ln = nn.LayerNorm(d)\n", ""),
        ("self.head(self.ln(x))", "self.head(x)"),
    ),
    # a block written for a cache: m2 runs it on the grader's own m1, whose forward(x) takes x alone
    bug(
        "m2-block-passes-layer-past",
        "m2",
        "graded with the grader's own m1",
        M2,
        (BLOCK_ATTN, BLOCK_ATTN.replace("self.ln1(x))", "self.ln1(x), layer_past=None)")),
    ),
    bug("m2-ffn-2x", "m2", "feed-forward", M2, (FFN, FFN.replace("4 * d", "2 * d"))),
    bug("m2-bias-in-head", "m2", "bias=False", M2, (HEAD, "self.head = nn.Linear(d, vocab_size)")),
    bug(
        "m2-positions-right-aligned",
        "m2",
        "arange(t)",
        M2,
        (POSITIONS, "self.pos(torch.arange(self.T - t, self.T, device=idx.device))"),
    ),
    bug(
        "m2-positions-reversed",
        "m2",
        "backwards",
        M2,
        (POSITIONS, "self.pos(torch.arange(t, device=idx.device).flip(0))"),
    ),
    bug("m2-relu", "m2", "ReLU", M2, (FFN, FFN.replace("GELU", "ReLU"))),
    bug("m2-no-attention-residual", "m2", "residual", M2, (BLOCK_ATTN, "x = self.attn(self.ln1(x))")),
    bug(
        "m2-block-repeated",
        "m2",
        "separate module",
        M2,
        (BLOCKS, "block = GPTBlock(d, n_heads)\n        self.blocks = nn.ModuleList([block] * n_layers)"),
    ),
    bug(
        "m2-count-shared-twice",
        "m2",
        "once",
        M2,
        (COUNT, "return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))"),
    ),
    bug(
        "m2-count-formula",
        "m2",
        "whatever the model is",
        M2,
        (
            COUNT,
            "V, d = model.tok.weight.shape\n    T = model.pos.weight.shape[0]\n"
            "    return V * d + T * d + len(model.blocks) * (12 * d * d + 13 * d) + 2 * d + d * V",
        ),
    ),
    bug("m2-count-hardcoded", "m2", "is 107008, expected", M2, (COUNT, "return 107_008")),
    bug(
        "m2-second-residual-from-block-input",
        "m2",
        "block's input",
        M2,
        (
            f"        {BLOCK_ATTN}\n        {BLOCK_FFN}\n",
            "        h = x + self.attn(self.ln1(x))\n        x = x + self.ffn(self.ln2(h))\n",
        ),
        first=True,
    ),
    bug(
        "m2-positions-from-1",
        "m2",
        "count positions from 0",
        M2,
        (POSITIONS, "self.pos(torch.arange(1, t + 1, device=idx.device))"),
        first=True,
    ),
    # Differences below the old tolerance: a LayerNorm's eps, its bias left out, GELU's tanh form.
    bug(
        "m2-layernorm-eps",
        "m2",
        "eps",
        M2,
        ("        self.ln1 = nn.LayerNorm(d)\n", "        self.ln1 = nn.LayerNorm(d, eps=1e-6)\n"),
        first=True,
    ),
    bug(
        "m2-layernorm-without-bias",
        "m2",
        "ln2",
        M2,
        ("import torch\n", "import torch\nimport torch.nn.functional as F\n"),
        (BLOCK_FFN, "x = x + self.ffn(F.layer_norm(x, (x.shape[-1],), self.ln2.weight))"),
        first=True,
    ),
    bug("m2-gelu-tanh", "m2", "tanh", M2, (FFN, FFN.replace("nn.GELU()", 'nn.GELU(approximate="tanh")')), first=True),
    bug(
        "m2-head-created-before-blocks",
        "m2",
        "different order",
        M2,
        (
            f"        {BLOCKS}\n        self.ln = nn.LayerNorm(d)\n        {HEAD}\n",
            f"        {HEAD}\n        {BLOCKS}\n        self.ln = nn.LayerNorm(d)\n",
        ),
    ),
    # Read part by part (grader/suites/wiring.py) where no known bug reproduces the output: what the code did.
    bug(
        "m2-layernorm-eps-0.1",
        "m2",
        "eps is 0.1",
        M2,
        ("        self.ln1 = nn.LayerNorm(d)\n", "        self.ln1 = nn.LayerNorm(d, eps=0.1)\n"),
        ("        self.ln2 = nn.LayerNorm(d)\n", "        self.ln2 = nn.LayerNorm(d, eps=0.1)\n"),
        ("        self.ln = nn.LayerNorm(d)\n", "        self.ln = nn.LayerNorm(d, eps=0.1)\n"),
        first=True,
    ),
    bug(
        "m2-hand-written-layernorm",
        "m2",
        "unbiased",
        M2,
        ("class GPTBlock", HAND_WRITTEN_NORM.format(std="x.std(-1, keepdim=True) + self.eps") + "class GPTBlock"),
        ("        self.ln1 = nn.LayerNorm(d)\n", "        self.ln1 = LayerNorm(d)\n"),
        ("        self.ln2 = nn.LayerNorm(d)\n", "        self.ln2 = LayerNorm(d)\n"),
        first=True,
    ),
    bug(
        "m2-final-layernorm-eps",
        "m2",
        "eps is 1e-6",
        M2,
        ("        self.ln = nn.LayerNorm(d)\n", "        self.ln = nn.LayerNorm(d, eps=1e-6)\n"),
        first=True,
    ),
    bug("m2-no-feed-forward-residual", "m2", "residual", M2, (BLOCK_FFN, "x = self.ffn(self.ln2(x))"), first=True),
    # a new module is in training mode, where dropout is on: the outputs move from call to call, and the
    # causality probes would blame the mask
    bug(
        "m2-dropout-in-the-feed-forward",
        "m2",
        "dropout",
        M2,
        (FFN, FFN.replace("nn.Linear(4 * d, d))", "nn.Linear(4 * d, d), nn.Dropout(0.1))")),
        first=True,
    ),
    bug(
        "m1-dropout-after-the-projection",
        "m1",
        "dropout",
        M1,
        (PROJ, PROJ + "\n        self.drop = nn.Dropout(0.1)"),
        ("return self.proj(out)", "return self.drop(self.proj(out))"),
        first=True,
    ),
    # .view straight to (B, n_heads, T, d_head) raises on qkv's slices: the hint must say how the axis moves, as
    # .reshape in its place runs and is silently wrong
    bug(
        "m1-heads-viewed-straight-to-heads-first",
        "m1",
        "by view(B, T, n_heads, d_head), then transpose(1, 2)",
        M1,
        (HEADS, "t.view(B, self.n_heads, T, d // self.n_heads)"),
        first=True,
    ),
    # a plain reshape both ways runs, keeps every shape and leaks nothing: only where the features land shows it
    bug(
        "m1-split-and-merge-heads-without-transpose",
        "m1",
        "split with a plain view or reshape",
        M1,
        (HEADS, "t.reshape(B, self.n_heads, T, d // self.n_heads)"),
        (MERGE, "out = out.reshape(B, T, d)"),
        first=True,
    ),
    # --- m3: inputs/targets, loss, training loop (graded on a stand-in model)
    bug("m3-targets-not-shifted", "m3", "shifted", M3, (PAIR, "return data[:, :-1], data[:, :-1]")),
    bug(
        "m3-train-targets-are-inputs",
        "m3",
        "not shifted",
        M3,
        ("loss = clm_loss(model(inp), tgt)", "loss = clm_loss(model(inp), inp)"),
    ),
    bug("m3-no-zero-grad", "m3", "zero_grad", M3, ("        opt.zero_grad()\n", "")),
    bug("m3-loss-sum", "m3", "mean", M3, (LOSS, LOSS.replace("ignore)", 'ignore, reduction="sum")')), first=True),
    bug("m3-ignore-index-ignored", "m3", "still count", M3, (LOSS, LOSS.replace(", ignore_index=ignore", ""))),
    bug("m3-sgd", "m3", "SGD", M3, (ADAM, ADAM.replace("Adam", "SGD"))),
    bug(
        "m3-loss-summed-over-positions",
        "m3",
        "mean over positions",
        M3,
        (LOSS, LOSS.replace("ignore)", 'ignore, reduction="sum") / logits.shape[0]')),
        first=True,
    ),
    # The loss tensors themselves, each holding its step's graph: the contract returns plain floats.
    bug(
        "m3-train-returns-loss-tensors",
        "m3",
        "plain Python floats",
        M3,
        ("losses.append(loss.item())", "losses.append(loss)"),
        first=True,
    ),
    # --- m4: greedy generation (graded on a stand-in model)
    bug("m4-argmax-first-position", "m4", "last position", M4, (PICK, PICK.replace("-1, :]", "0, :]"))),
    bug("m4-no-cropping", "m4", "last model.T tokens", M4, (CROP, "logits = model(idx)")),
    bug("m4-crops-first-tokens", "m4", "FIRST", M4, (CROP, "logits = model(idx[:, :model.T])")),
    bug("m4-crops-to-T-minus-1", "m4", "model.T - 1", M4, (CROP, "logits = model(idx[:, -model.T + 1:])"), first=True),
    bug(
        "m4-samples",
        "m4",
        "never samples",
        M4,
        (PICK, "next_token = torch.multinomial(torch.softmax(logits[:, -1, :], dim=-1), 1)"),
    ),
    bug(
        "m4-returns-only-new-tokens",
        "m4",
        "prompt followed by the new tokens",
        M4,
        ("    return idx\n", "    return idx[:, start.shape[1]:]\n"),
    ),
    bug("m4-no-no-grad", "m4", "no_grad", M4, ("@torch.no_grad()\n", "")),
    # The contract leaves the model unchanged, its mode included: eval() and never back.
    bug(
        "m4-leaves-eval-mode",
        "m4",
        "left the model in eval mode",
        M4,
        ("    idx = start\n", "    model.eval()  # no dropout while generating\n    idx = start\n"),
    ),
    # eval() for generation, then train() whatever the caller's mode was: a model given in eval mode comes back
    # in training mode.
    bug(
        "m4-eval-model-left-training",
        "m4",
        "left the model in training mode",
        M4,
        ("    idx = start\n", "    model.eval()\n    idx = start\n"),
        ("    return idx\n", "    model.train()\n    return idx\n"),
        first=True,
    ),
    # max_new read as the length of the whole result: the loop stops at max_new columns, prompt included.
    bug(
        "m4-max-new-as-total-length",
        "m4",
        "max_new is the number of NEW tokens",
        M4,
        ("for _ in range(max_new):", "for _ in range(max_new - start.shape[1]):"),
        first=True,
    ),
    bug(
        "m4-while-shorter-than-max-new",
        "m4",
        "max_new is the number of NEW tokens",
        M4,
        ("for _ in range(max_new):", "while idx.shape[1] < max_new:"),
        first=True,
    ),
    # argmax over dim 0, the batch axis: one id per vocabulary entry instead of one per row.
    bug(
        "m4-argmax-over-batch",
        "m4",
        "over the vocabulary",
        M4,
        (PICK, PICK.replace("argmax(dim=-1", "argmax(dim=0")),
        first=True,
    ),
]

# ------------------------------------------------------------------ correct: written differently, full marks

CORRECT = [
    ok(
        "registered-mask-buffer",
        {
            M1: [
                (
                    "def __init__(self, d: int, n_heads: int):",
                    "def __init__(self, d: int, n_heads: int, max_T: int = 512):",
                ),
                (
                    PROJ,
                    PROJ + "\n        mask = torch.tril(torch.ones(max_T, max_T)).view(1, 1, max_T, max_T)"
                    '\n        self.register_buffer("mask", mask)',
                ),
                (FORWARD_BODY, own_attention("(d // self.n_heads) ** 0.5", "self.mask[:, :, :T, :T]")),
            ]
        },
    ),
    ok("fused-sdpa", {M1: [(CALL, "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)")]}),
    ok(
        "hand-written-layernorm",
        {
            M2: [
                (
                    "class GPTBlock",
                    HAND_WRITTEN_NORM.format(std="(centred.pow(2).mean(-1, keepdim=True) + self.eps).sqrt()")
                    + "class GPTBlock",
                ),
                ("        self.ln1 = nn.LayerNorm(d)\n", "        self.ln1 = LayerNorm(d)\n"),
                ("        self.ln2 = nn.LayerNorm(d)\n", "        self.ln2 = LayerNorm(d)\n"),
                ("        self.ln = nn.LayerNorm(d)\n", "        self.ln = LayerNorm(d)\n"),
            ]
        },
    ),
    # dropout with p = 0 changes nothing: the lesson's model, written with a switch for later
    ok("dropout-of-zero", {M2: [(FFN, FFN.replace("nn.Linear(4 * d, d))", "nn.Linear(4 * d, d), nn.Dropout(0.0))"))]}),
    ok(
        "einsum-manual-softmax",
        {
            M1: [
                (
                    ATTENTION_BODY,
                    """\
    scores = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d_k)
    scores = scores.masked_fill(causal_mask(T, q.device) == 0, -1e9)
    scores = (scores - scores.amax(dim=-1, keepdim=True)).exp()
    weights = scores / scores.sum(dim=-1, keepdim=True)
    return torch.einsum("...ij,...jd->...id", weights, v), weights
""",
                )
            ]
        },
    ),
    ok(
        "blocked-triu-mask",
        {
            M1: [
                (
                    FILL,
                    "blocked = torch.ones(T, T, device=q.device).triu(diagonal=1).bool()\n"
                    '    scores = scores.masked_fill(blocked, float("-inf"))',
                )
            ]
        },
    ),
    ok(
        "blocks-via-reduce",
        {
            M2: [
                ("import torch\n", "import functools\n\nimport torch\n"),
                (
                    TRUNK,
                    "        x = functools.reduce(lambda h, block: block(h), self.blocks, x)\n"
                    "        return self.head(self.ln(x))\n",
                ),
            ]
        },
    ),
    ok(
        "zero-grad-right-before-backward",
        {
            M3: [
                (
                    STEP,
                    """\
    for _ in range(steps):
        loss = clm_loss(model(inp), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
""",
                )
            ]
        },
    ),
    ok(
        "zero-grad-at-end-of-step",
        {
            M3: [
                (
                    STEP,
                    """\
    for _ in range(steps):
        logits = model(inp)
        loss = clm_loss(logits, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
        losses.append(float(loss))
""",
                )
            ]
        },
    ),
    ok(
        "manual-log-softmax-loss",
        {
            M3: [
                (
                    LOSS,
                    """\
logp = F.log_softmax(logits, dim=-1)
    keep = torch.ones_like(targets, dtype=torch.bool) if ignore_index is None else targets != ignore_index
    nll = -logp.gather(-1, targets.masked_fill(~keep, 0).unsqueeze(-1)).squeeze(-1)
    return (nll * keep).sum() / keep.sum()""",
                )
            ]
        },
    ),
    # --- the contract fixes the submodules, not how forward uses them: functional calls score full marks too
    ok(
        "functional-embeddings",
        {
            M2: [
                ("import torch\n", "import torch\nimport torch.nn.functional as F\n"),
                (
                    f"x = self.tok(idx) + {POSITIONS}",
                    "x = F.embedding(idx, self.tok.weight)"
                    " + F.embedding(torch.arange(t, device=idx.device), self.pos.weight)",
                ),
            ]
        },
    ),
    ok(
        "indexed-embedding-tables",
        {M2: [(f"x = self.tok(idx) + {POSITIONS}", "x = self.tok.weight[idx] + self.pos.weight[:t]")]},
    ),
    ok(
        "functional-linear-layers",
        {
            M1: [
                (SPLIT, "q, k, v = F.linear(x, self.qkv.weight, self.qkv.bias).chunk(3, dim=-1)"),
                ("return self.proj(out)", "return F.linear(out, self.proj.weight, self.proj.bias)"),
            ],
            M2: [
                ("import torch\n", "import torch\nimport torch.nn.functional as F\n"),
                ("return self.head(self.ln(x))", "return F.linear(self.ln(x), self.head.weight)"),
            ],
        },
    ),
    ok(
        "functional-layer-norm-and-gelu",
        {
            M2: [
                ("import torch\n", "import torch\nimport torch.nn.functional as F\n"),
                (
                    f"        {BLOCK_ATTN}\n        {BLOCK_FFN}\n",
                    """\
        d = x.shape[-1]
        x = x + self.attn(F.layer_norm(x, (d,), self.ln1.weight, self.ln1.bias, self.ln1.eps))
        up, down = self.ffn[0], self.ffn[2]
        h = F.layer_norm(x, (d,), self.ln2.weight, self.ln2.bias)
        x = x + F.linear(F.gelu(F.linear(h, up.weight, up.bias)), down.weight, down.bias)
""",
                ),
            ]
        },
    ),
    ok(
        "blocks-plain-list-add-module",
        {
            M2: [
                (
                    BLOCKS,
                    """\
self.blocks = [GPTBlock(d, n_heads) for _ in range(n_layers)]
        for i, block in enumerate(self.blocks):  # a plain list hides them from .parameters(): register each
            self.add_module(f"block{i}", block)""",
                )
            ]
        },
    ),
    ok(
        "generate-while-loop",
        {
            M4: [
                (
                    GENERATE,
                    '''\
def generate(model: nn.Module, start: torch.Tensor, max_new: int = 5) -> torch.Tensor:
    """Append max_new greedy tokens to start (B, t); returns (B, t + max_new)."""
    with torch.no_grad():
        pieces = [start]
        context = start
        while len(pieces) <= max_new:
            logits = model(context[:, -model.T:])
            pieces.append(logits[:, -1].argmax(dim=-1).unsqueeze(1))
            context = torch.cat(pieces, dim=1)
        return torch.cat(pieces, dim=1)
''',
                )
            ]
        },
    ),
]
