"""Variants for the `scaling` exercise (m5_scaling.py)."""

from helpers import bug, ok

M5 = "m5_scaling.py"
LAYER_NORMS = "layer_norms = 2 * (2 * d)"
FFN = "ffn = (d * 4 * d + 4 * d) + (4 * d * d + d)"
HEAD = "head = 0 if tied else vocab_size * d"
EMBEDDINGS = "embeddings = vocab_size * d + max_T * d"
OPTIMAL_N = "n_params = math.sqrt(compute / (6 * TOKENS_PER_PARAMETER))"

BUGGY = [
    bug("block-without-layernorms", "scaling", "LayerNorms are missing", M5, (LAYER_NORMS, "layer_norms = 0")),
    bug("ffn-2x-wide", "scaling", "4x wide", M5, (FFN, "ffn = (d * 2 * d + 2 * d) + (2 * d * d + d)")),
    bug("tied-head-counted-twice", "scaling", "count it once", M5, (HEAD, "head = vocab_size * d")),
    bug(
        "head-with-bias",
        "scaling",
        "the head is bias-free",
        M5,
        (HEAD, "head = 0 if tied else vocab_size * d + vocab_size"),
    ),
    bug("no-position-table", "scaling", "position table", M5, (EMBEDDINGS, "embeddings = vocab_size * d")),
    # at the shrunk size d = vocab_size = max_T = 1 these are off as much as other mistakes: told apart at another
    bug(
        "no-final-layernorm",
        "scaling",
        "the final LayerNorm (2 d) is missing",
        M5,
        ("block_parameter_count(d) + 2 * d + head", "block_parameter_count(d) + head"),
    ),
    bug(
        "position-table-one-row-too-many",
        "scaling",
        "one row too many",
        M5,
        (EMBEDDINGS, "embeddings = vocab_size * d + (max_T + 1) * d"),
    ),
    bug("chinchilla-without-20", "scaling", "the 20 is missing", M5, (OPTIMAL_N, "n_params = math.sqrt(compute / 6)")),
    bug(
        "chinchilla-rounded-to-billions",
        "scaling",
        "rounded",
        M5,
        (OPTIMAL_N, "n_params = round(math.sqrt(compute / (6 * TOKENS_PER_PARAMETER)) / 1e9) * 1e9"),
        first=True,
    ),
    bug(
        "flops-forward-only",
        "scaling",
        "forward pass only",
        M5,
        ("return 6 * n_params * n_tokens", "return 2 * n_params * n_tokens"),
    ),
    bug("budget-not-validated", "scaling", "must raise ValueError", M5, ("    _positive(compute=compute)\n", "")),
]

CORRECT = [
    ok(
        "scaling-closed-forms",
        {
            M5: [
                ("    return layer_norms + attention + ffn  # 12 d^2 + 13 d", "    return 12 * d * d + 13 * d"),
                (HEAD, "head = (not tied) * vocab_size * d"),
                (OPTIMAL_N, "n_params = (compute / 120) ** 0.5"),
            ]
        },
    ),
    ok(
        "scaling-counted-from-meta-modules",
        {
            M5: [
                (
                    "def block_parameter_count(d: int) -> int:",
                    """def block_parameter_count(d: int) -> int:
    import torch
    from torch import nn
    with torch.device("meta"):
        layer = nn.TransformerEncoderLayer(d, 1, 4 * d, activation="gelu", batch_first=True, norm_first=True)
    return sum(p.numel() for p in layer.parameters())


def _unused(d: int) -> int:""",
                )
            ]
        },
    ),
]
