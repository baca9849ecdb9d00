"""Scaling: how big is a GPT, and how big should it be for a compute budget?

Two halves, both pure arithmetic (no torch needed):

1. Count parameters in closed form. A GPT of the lesson's design is a token
   table, a position table, ``n_layers`` identical blocks, a final LayerNorm
   and a head. Every ``nn.Linear`` has a bias except the head; every
   ``nn.LayerNorm(d)`` has a weight and a bias (2 d). Your formula must agree
   with ``count_parameters`` of a real ``TinyGPT`` for ANY configuration, and
   gives the GPT-2 family's famous sizes (124M, 355M, 774M, 1.5B).
2. Chinchilla (Hoffmann et al., 2022): training costs about C = 6 N D FLOPs
   for N parameters and D tokens, and for a fixed budget C the loss is lowest
   near D = 20 N tokens per parameter.

Check yourself from the folder that holds this file::

    grade check -m scaling
    python m5_scaling.py         # prints 107,008, the GPT-2 sizes and Chinchilla's 70e9 / 1.4e12
"""

GPT2_VOCAB = 50257      # GPT-2's BPE vocabulary
GPT2_CONTEXT = 1024     # and its context length


def block_parameter_count(d: int) -> int:
    """Parameters of one GPTBlock of width ``d``.

    Add up: ``ln1`` and ``ln2`` (LayerNorm: weight and bias, d each), ``attn.qkv``
    (``nn.Linear(d, 3 * d)``: a weight matrix and a bias), ``attn.proj``
    (``nn.Linear(d, d)``), and the feed-forward ``Linear(d, 4 * d)``,
    ``Linear(4 * d, d)`` (GELU has no parameters). The number of heads does not
    matter: heads split d, they do not add weights. d = 64 gives 49,984.
    """
    raise NotImplementedError("block_parameter_count: LayerNorms + qkv + proj + the 4x feed-forward")


def gpt_parameter_count(vocab_size: int, d: int, n_layers: int, max_T: int, tied: bool = False) -> int:
    """Parameters of a GPT of the lesson's design, in closed form.

    Token table (vocab_size x d), position table (max_T x d), ``n_layers``
    blocks, the final LayerNorm, and the head ``nn.Linear(d, vocab_size,
    bias=False)``. With ``tied=True`` the head IS the token table (one shared
    matrix, counted once). ``gpt_parameter_count(50, 64, 2, 8)`` is 107,008.
    """
    raise NotImplementedError("gpt_parameter_count: embeddings + blocks + final LayerNorm + head (unless tied)")


def gpt2_config(name: str) -> tuple[int, int, int]:
    """``(n_layers, d, n_heads)`` of a GPT-2 size: "small", "medium", "large" or "xl".

    small: 12 layers, d 768, 12 heads; medium: 24, 1024, 16; large: 36, 1280, 20;
    xl: 48, 1600, 25. Raise ``ValueError`` for any other name.
    """
    raise NotImplementedError("gpt2_config: a lookup table, and ValueError for unknown names")


def training_flops(n_params: float, n_tokens: float) -> float:
    """Training compute C = 6 N D: per parameter and token, 2 FLOPs forward and 4 backward.

    Raise ``ValueError`` unless both counts are positive.
    """
    raise NotImplementedError("training_flops: C = 6 N D")


def chinchilla_optimal(compute: float) -> tuple[float, float]:
    """The compute-optimal ``(n_params, n_tokens)`` for a budget of ``compute`` FLOPs.

    Solve C = 6 N D together with D = 20 N. Chinchilla's own budget, 5.88e23
    FLOPs, gives 70e9 parameters and 1.4e12 tokens. Raise ``ValueError`` for a
    budget that is not positive.
    """
    raise NotImplementedError("chinchilla_optimal: substitute D = 20 N into C = 6 N D")


def tokens_per_parameter(n_params: float, n_tokens: float) -> float:
    """Training tokens per parameter, D / N (about 20 when compute-optimal); ``ValueError`` unless positive."""
    raise NotImplementedError("tokens_per_parameter: D / N")


if __name__ == "__main__":
    print("TinyGPT(50, 64, 4, 2, 8):", f"{gpt_parameter_count(50, 64, 2, 8):,}")  # lesson: 107,008
    for size in ("small", "medium", "large", "xl"):
        n_layers, d, _ = gpt2_config(size)
        print(f"GPT-2 {size:6s}: {gpt_parameter_count(GPT2_VOCAB, d, n_layers, GPT2_CONTEXT, tied=True):>13,}")
    n, tokens = chinchilla_optimal(5.88e23)
    print(f"Chinchilla at 5.88e23 FLOPs: N = {n:.3g}, D = {tokens:.3g}")  # 7e+10 and 1.4e+12
