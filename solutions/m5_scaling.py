"""Scaling: parameter counts in closed form, the GPT-2 family, and Chinchilla's compute-optimal split (reference)."""
import math

GPT2_VOCAB = 50257
GPT2_CONTEXT = 1024
GPT2_SIZES = {"small": (12, 768, 12), "medium": (24, 1024, 16), "large": (36, 1280, 20), "xl": (48, 1600, 25)}
TOKENS_PER_PARAMETER = 20  # Chinchilla's rule of thumb: D = 20 N


def block_parameter_count(d: int) -> int:
    """One pre-norm block: two LayerNorms, qkv and proj, and the 4x feed-forward."""
    layer_norms = 2 * (2 * d)
    attention = (3 * d * d + 3 * d) + (d * d + d)
    ffn = (d * 4 * d + 4 * d) + (4 * d * d + d)
    return layer_norms + attention + ffn  # 12 d^2 + 13 d


def gpt_parameter_count(vocab_size: int, d: int, n_layers: int, max_T: int, tied: bool = False) -> int:
    """Embeddings, blocks, final LayerNorm and a bias-free head (free when tied to the token table)."""
    embeddings = vocab_size * d + max_T * d
    head = 0 if tied else vocab_size * d
    return embeddings + n_layers * block_parameter_count(d) + 2 * d + head


def gpt2_config(name: str) -> tuple[int, int, int]:
    """(n_layers, d, n_heads) of a GPT-2 size: small, medium, large or xl."""
    if name not in GPT2_SIZES:
        raise ValueError(f"unknown GPT-2 size {name!r}; choose from {', '.join(GPT2_SIZES)}")
    return GPT2_SIZES[name]


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")


def training_flops(n_params: float, n_tokens: float) -> float:
    """About 6 FLOPs per parameter per token: 2 for the forward pass, 4 for the backward."""
    _positive(n_params=n_params, n_tokens=n_tokens)
    return 6 * n_params * n_tokens


def chinchilla_optimal(compute: float) -> tuple[float, float]:
    """The (N, D) that spends `compute` FLOPs with C = 6 N D and D = 20 N."""
    _positive(compute=compute)
    n_params = math.sqrt(compute / (6 * TOKENS_PER_PARAMETER))
    return n_params, TOKENS_PER_PARAMETER * n_params


def tokens_per_parameter(n_params: float, n_tokens: float) -> float:
    """Training tokens per parameter, D / N (about 20 for a compute-optimal model)."""
    _positive(n_params=n_params, n_tokens=n_tokens)
    return n_tokens / n_params


if __name__ == "__main__":
    print("TinyGPT(50, 64, 4, 2, 8):", f"{gpt_parameter_count(50, 64, 2, 8):,}")
    for size in GPT2_SIZES:
        n_layers, d, _ = gpt2_config(size)
        print(f"GPT-2 {size:6s}: {gpt_parameter_count(GPT2_VOCAB, d, n_layers, GPT2_CONTEXT, tied=True):>13,}")
    n, tokens = chinchilla_optimal(5.88e23)
    print(f"Chinchilla at 5.88e23 FLOPs: N = {n:.3g}, D = {tokens:.3g}")
