"""KV-cache memory: how much a cache costs with MHA, GQA, MQA and latent attention.

Pure arithmetic (no torch needed). While generating, every layer keeps, for each
past token, what later tokens attend to, so that it is never recomputed:

- multi-head attention (MHA) caches a key AND a value (the factor 2) of
  ``head_size`` numbers for each of its ``n_heads`` heads, in every layer;
- grouped-query attention (GQA) lets the query heads share ``n_groups`` K/V heads
  (``n_groups`` divides ``n_heads``): only those K/V heads are cached.
  Multi-query attention (MQA) is GQA with a single group, and GQA with
  ``n_groups == n_heads`` is MHA again;
- latent attention (as in DeepSeek-V2) caches one vector c of ``latent_size``
  numbers per layer and token, from which both K and V are rebuilt: it is stored
  once, with no factor 2. (DeepSeek-V2 also caches a small decoupled RoPE key;
  leave it out here.)

Each number takes the bytes of its dtype, named by a string: ``"float32"`` or
``"fp32"`` (4 bytes), ``"bfloat16"``/``"bf16"`` and ``"float16"``/``"fp16"`` (2),
``"int8"`` (1). Names are exactly these, lowercase; any other name raises
``ValueError`` with a message that lists the accepted ones. Counts must be
positive (``length`` and ``memory_bytes`` may be 0); giving both ``n_groups``
and ``latent_size``, or an ``n_groups`` that does not divide ``n_heads``, also
raises ``ValueError``.

A worked example, the toy model of the lesson: 2 layers, 4 heads of size 8, in
float32, caches 2 x 2 x 4 x 8 x 4 = 512 bytes per token.

Below the functions are six check-yourself questions. Replace each ``None``
with your answer: a letter (``"a"``) or, where several choices are right,
all of them (``"a, c"``, ``"ac"``, ``["a", "c"]`` or ``{"a", "c"}``; order and
case do not matter), a number (``42``, ``2.5e9``, or a string such as
``"1,234"``), or a short name (a string; case does not matter).

Check yourself from the folder that holds this file::

    grade check -m kvmemory
    python m11_kvmemory.py       # the toy model prints 512
"""


def kv_bytes_per_token(
    n_layers: int,
    n_heads: int,
    head_size: int,
    dtype: str,
    n_groups: int | None = None,
    latent_size: int | None = None,
) -> int:
    """Bytes of KV cache that one token adds, over all ``n_layers`` layers.

    With neither ``n_groups`` nor ``latent_size``: multi-head attention, a key
    and a value per head. With ``n_groups``: grouped-query attention, a key and
    a value per K/V group (``n_groups=1`` is MQA). With ``latent_size``: latent
    attention, one latent of that size per layer. See the module docstring for
    the dtype names. The toy model, ``kv_bytes_per_token(2, 4, 8, "fp32")``, is 512.
    """
    raise NotImplementedError("not implemented yet")


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
    """Bytes of the whole cache of ``batch`` sequences of ``length`` tokens each (the rest as
    ``kv_bytes_per_token``)."""
    raise NotImplementedError("not implemented yet")


def kv_ratio(n_heads: int, head_size: int, n_groups: int | None = None, latent_size: int | None = None) -> float:
    """How many times smaller the variant's cache is than multi-head attention's: MHA's bytes
    divided by the variant's (layers, dtype, batch and length cancel out). MHA itself gives 1.0."""
    raise NotImplementedError("not implemented yet")


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
    """The longest ``length`` (an int, rounded down) whose cache for ``batch`` sequences fits in
    ``memory_bytes``: the largest ``length`` with ``kv_bytes(batch, length, ...) <= memory_bytes``."""
    raise NotImplementedError("not implemented yet")


# Check yourself --------------------------------------------------------------------------------

# Q_MC1. What does the KV cache keep for each past token, in each layer of multi-head attention?
#   (a) its query and its key   (b) its key and value   (c) its query, key and value
#   (d) its row of attention weights
Q_MC1 = None

# Q_MC2. Which of these make the cache that ONE token adds smaller? (Several may be right.)
#   (a) a smaller batch   (b) int8 in place of bfloat16   (c) a shorter context window
#   (d) grouped-query attention with 8 K/V groups in place of 32 K/V heads, for 32 query heads
Q_MC2 = None

# Q_TEXT1. Llama-2-70B has 64 query heads that share 8 key/value heads. Which of the attention variants
#   above is that (its three-letter name)?
Q_TEXT1 = None

# Q_NUM1. How many GiB (2^30 bytes) of KV cache does Llama-2-70B (80 layers, 64 query heads of size 128
#   sharing 8 K/V heads) hold in bfloat16 for a batch of 4 sequences of 4,096 tokens?
Q_NUM1 = None

# Q_NUM2. How many GiB (2^30 bytes) of KV cache does Llama-2-7B (32 layers, 32 heads of size 128, multi-head
#   attention) hold in float16 for a batch of 8 sequences of 4,096 tokens?
Q_NUM2 = None

# Q_NUM3. Latent attention with 128 heads of size 128 caches a latent of size 512 per layer and token. How
#   many times smaller is its cache than multi-head attention's?
Q_NUM3 = None


if __name__ == "__main__":
    print("toy model (2 layers, 4 heads of 8, fp32):", kv_bytes_per_token(2, 4, 8, "fp32"), "bytes per token")
    print("the same with one K/V head (MQA):", kv_bytes_per_token(2, 4, 8, "fp32", n_groups=1))
    print("Llama-2-7B, fp16:", f"{kv_bytes_per_token(32, 32, 128, 'fp16'):,}", "bytes per token")
    print("Llama-2-70B, bf16, 8 groups:", f"{kv_bytes_per_token(80, 64, 128, 'bf16', n_groups=8):,}")
    print("80 GiB, batch 1, Llama-2-7B fp16:", f"{max_context(80 * 2**30, 1, 32, 32, 128, 'fp16'):,}", "tokens")
