"""KV-cache memory: what MHA, GQA, MQA and latent attention cache per token, and how long a context fits (reference)."""

# Bytes per element of each dtype name the contract accepts.
DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "int8": 1}


def dtype_size(dtype: str) -> int:
    """Bytes of one element of ``dtype``; ValueError for a name not in the table."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPE_BYTES)}")
    return DTYPE_BYTES[dtype]


def _positive(**values: int) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")


def cached_per_layer(n_heads: int, head_size: int, n_groups: int | None = None, latent_size: int | None = None) -> int:
    """Numbers one token adds to one layer's cache: K and V for each K/V head, or the latent alone."""
    _positive(n_heads=n_heads, head_size=head_size)
    if n_groups is not None and latent_size is not None:
        raise ValueError("give n_groups (GQA, MQA) or latent_size (latent attention), not both")
    if latent_size is not None:
        _positive(latent_size=latent_size)
        return latent_size  # one latent c, from which both K and V are rebuilt
    kv_heads = n_heads if n_groups is None else n_groups
    _positive(n_groups=kv_heads)
    if n_heads % kv_heads:
        raise ValueError(f"n_groups must divide n_heads: {n_heads} heads cannot share {kv_heads} K/V heads evenly")
    return 2 * kv_heads * head_size  # a key and a value per K/V head


def kv_bytes_per_token(
    n_layers: int,
    n_heads: int,
    head_size: int,
    dtype: str,
    n_groups: int | None = None,
    latent_size: int | None = None,
) -> int:
    """Bytes of KV cache one token adds across all layers."""
    _positive(n_layers=n_layers)
    return n_layers * cached_per_layer(n_heads, head_size, n_groups, latent_size) * dtype_size(dtype)


def kv_bytes(
    batch: int,
    length: int,
    n_layers: int,
    n_heads: int,
    head_size: int,
    dtype: str,
    n_groups: int | None = None,
    latent_size: int | None = None,
) -> int:
    """The whole cache of ``batch`` sequences of ``length`` tokens each."""
    _positive(batch=batch)
    if length < 0:
        raise ValueError(f"length must not be negative, got {length}")
    return batch * length * kv_bytes_per_token(n_layers, n_heads, head_size, dtype, n_groups, latent_size)


def kv_ratio(n_heads: int, head_size: int, n_groups: int | None = None, latent_size: int | None = None) -> float:
    """How many times smaller the variant's cache is than multi-head attention's (layers and dtype cancel)."""
    return cached_per_layer(n_heads, head_size) / cached_per_layer(n_heads, head_size, n_groups, latent_size)


def max_context(
    memory_bytes: int,
    batch: int,
    n_layers: int,
    n_heads: int,
    head_size: int,
    dtype: str,
    n_groups: int | None = None,
    latent_size: int | None = None,
) -> int:
    """The longest length whose cache, for ``batch`` sequences, fits in ``memory_bytes`` (rounded down)."""
    _positive(batch=batch)
    if memory_bytes < 0:
        raise ValueError(f"memory_bytes must not be negative, got {memory_bytes}")
    per_token = kv_bytes_per_token(n_layers, n_heads, head_size, dtype, n_groups, latent_size)
    return memory_bytes // (batch * per_token)


# Check yourself --------------------------------------------------------------------------------

# Q_MC1. What does the KV cache keep for each past token, in each layer of multi-head attention?
#   (a) its query and its key   (b) its key and value   (c) its query, key and value
#   (d) its row of attention weights
Q_MC1 = "b"

# Q_MC2. Which of these make the cache that ONE token adds smaller? (Several may be right.)
#   (a) a smaller batch   (b) int8 in place of bfloat16   (c) a shorter context window
#   (d) grouped-query attention with 8 K/V groups in place of 32 K/V heads, for 32 query heads
Q_MC2 = "b, d"

# Q_TEXT1. Llama-2-70B has 64 query heads that share 8 key/value heads. Which of the attention variants
#   above is that (its three-letter name)?
Q_TEXT1 = "GQA"

# Q_NUM1. How many GiB (2^30 bytes) of KV cache does Llama-2-70B (80 layers, 64 query heads of size 128
#   sharing 8 K/V heads) hold in bfloat16 for a batch of 4 sequences of 4,096 tokens?
Q_NUM1 = 5  # 4 x 4096 x (2 x 80 x 8 x 128 x 2) bytes = 5 x 2^30

# Q_NUM2. How many GiB (2^30 bytes) of KV cache does Llama-2-7B (32 layers, 32 heads of size 128, multi-head
#   attention) hold in float16 for a batch of 8 sequences of 4,096 tokens?
Q_NUM2 = 16  # 8 x 4096 x (2 x 32 x 32 x 128 x 2) bytes = 2^34

# Q_NUM3. Latent attention with 128 heads of size 128 caches a latent of size 512 per layer and token. How
#   many times smaller is its cache than multi-head attention's?
Q_NUM3 = 64  # (2 x 128 x 128) / 512


if __name__ == "__main__":
    print("toy model (2 layers, 4 heads of 8, fp32):", kv_bytes_per_token(2, 4, 8, "fp32"), "bytes per token")
    print("the same with one K/V head (MQA):", kv_bytes_per_token(2, 4, 8, "fp32", n_groups=1))
    print("Llama-2-7B, fp16:", f"{kv_bytes_per_token(32, 32, 128, 'fp16'):,}", "bytes per token")
    print("Llama-2-70B, bf16, 8 groups:", f"{kv_bytes_per_token(80, 64, 128, 'bf16', n_groups=8):,}")
    print("80 GiB, batch 1, Llama-2-7B fp16:", f"{max_context(80 * 2**30, 1, 32, 32, 128, 'fp16'):,}", "tokens")
