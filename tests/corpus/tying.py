"""Variants for the `tying` exercise (m6_tying.py)."""

from corpus.core import EVERY_EARLIER_NAME
from helpers import bug, ok

M6 = "m6_tying.py"
TIE = "model.head.weight = model.tok.weight"
LAYER = """        layer = nn.TransformerEncoderLayer(d, n_heads, 4 * d, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)"""
RUN = "x = self.blocks(x, mask=mask, is_causal=True)"
IN_PROJ = """    if isinstance(module, nn.MultiheadAttention):  # its q, k, v projection is a bare Parameter
        nn.init.normal_(module.in_proj_weight, std=0.02)
        nn.init.zeros_(module.in_proj_bias)
"""


def layer(**options: str) -> str:
    settings = {"dropout": "0.0", "activation": '"gelu"', "batch_first": "True", "norm_first": "True", **options}
    args = ", ".join(f"{k}={v}" for k, v in settings.items() if v)
    return f"        layer = nn.TransformerEncoderLayer(d, n_heads, 4 * d, {args})"


BUGGY = [
    bug(
        "tie-copies-the-values",
        "tying",
        "a Parameter of its own",
        M6,
        (TIE, "model.head.weight.data = model.tok.weight.data"),
    ),
    bug(
        "tie-wraps-a-new-parameter",
        "tying",
        "a Parameter of its own",
        M6,
        (TIE, "model.head.weight = nn.Parameter(model.tok.weight)"),
    ),
    bug("library-untied", "tying", "a Parameter of its own", M6, ("        tie_weights(self)\n", "")),
    # One Parameter, but the head's: the token table's initialisation is replaced by the head's.
    bug(
        "tie-the-other-way",
        "tying",
        "the head takes the token table's",
        M6,
        (TIE, "model.tok.weight = model.head.weight"),
    ),
    bug("library-default-dropout", "tying", "dropout", M6, (LAYER, layer(dropout=""))),
    bug("library-relu", "tying", "ReLU in the feed-forward", M6, (LAYER, layer(activation=""))),
    bug("library-post-norm", "tying", "post-norm", M6, (LAYER, layer(norm_first=""))),
    bug("library-without-mask", "tying", "leaks from the future", M6, (RUN, "x = self.blocks(x)")),
    bug("library-in-proj-not-initialised", "tying", "in_proj_weight", M6, (IN_PROJ, "")),
]

CORRECT = [
    ok(
        "library-module-list-and-own-mask",
        {
            M6: [
                (
                    "        self.blocks = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)",
                    "        self.blocks = nn.ModuleList(copy.deepcopy(layer) for _ in range(n_layers))",
                ),
                (
                    """        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        x = self.blocks(x, mask=mask, is_causal=True)""",
                    """        mask = torch.full((t, t), float("-inf"), device=idx.device).triu(1)
        for block in self.blocks:
            x = block(x, src_mask=mask)""",
                ),
                ('"""Weight tying, and', 'import copy\n\n"""Weight tying, and'),
            ]
        },
    ),
    ok(
        "library-mask-from-m1",
        {
            M6: [
                ("import torch.nn as nn\n", "import torch.nn as nn\n" + EVERY_EARLIER_NAME),
                (
                    "mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)",
                    "mask = causal_mask(t, idx.device) == 0  # True where blocked",
                ),
                ("x = self.blocks(x, mask=mask, is_causal=True)", "x = self.blocks(x, mask=mask)"),
            ]
        },
    ),
]
