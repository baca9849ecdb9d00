"""Variants for `kvmemory` (m11_kvmemory.py): the usual wrong answers, and right ones written differently."""

from helpers import bug, ok

M11 = "m11_kvmemory.py"
KV_HEADS = "    kv_heads = n_heads if n_groups is None else n_groups\n"
PER_LAYER = "    return 2 * kv_heads * head_size  # a key and a value per K/V head"
LATENT = "        return latent_size  # one latent c, from which both K and V are rebuilt"
PER_TOKEN = "    return n_layers * cached_per_layer(n_heads, head_size, n_groups, latent_size) * dtype_size(dtype)"
TABLE = 'DTYPE_BYTES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "int8": 1}'
FLOOR = "    return memory_bytes // (batch * per_token)"
BOTH = """    if n_groups is not None and latent_size is not None:
        raise ValueError("give n_groups (GQA, MQA) or latent_size (latent attention), not both")
"""
RATIO = "    return cached_per_layer(n_heads, head_size) / cached_per_layer(n_heads, head_size, n_groups, latent_size)"

BUGGY = [
    bug(
        "no-factor-2-for-k-and-v",
        "kvmemory",
        "the factor 2 is missing",
        M11,
        (PER_LAYER, "    return kv_heads * head_size"),
    ),
    bug("no-layers", "kvmemory", "multiply by n_layers", M11, (PER_TOKEN, PER_TOKEN.replace("n_layers * ", ""))),
    bug(
        "n-heads-for-n-groups",
        "kvmemory",
        "use n_groups, not n_heads",
        M11,
        (KV_HEADS, "    kv_heads = n_heads\n"),
    ),
    # at 32 heads in 8 groups, n_heads // n_groups = 4 = 8 / 2: another size tells it from a missing factor 2
    bug(
        "group-size-for-groups",
        "kvmemory",
        "query heads per group",
        M11,
        (KV_HEADS, "    kv_heads = n_heads if n_groups is None else n_heads // n_groups\n"),
    ),
    bug(
        "bits-for-bytes",
        "kvmemory",
        "that counts bits",
        M11,
        (TABLE, TABLE.replace(": 4", ": 32").replace(": 2", ": 16").replace(": 1}", ": 8}")),
    ),
    bug(
        "factor-2-on-the-latent",
        "kvmemory",
        "cached once, without the factor 2",
        M11,
        (LATENT, "        return 2 * latent_size"),
    ),
    bug(
        "latent-ignored",
        "kvmemory",
        "caches only the latent c",
        M11,
        ("    if latent_size is not None:\n        _positive", "    if False:\n        _positive"),
    ),
    bug("not-rounded-down", "kvmemory", "round down", M11, (FLOOR, "    return memory_bytes / (batch * per_token)")),
    bug(
        "ratio-inverted",
        "kvmemory",
        "inverted",
        M11,
        (
            RATIO,
            "    variant = cached_per_layer(n_heads, head_size, n_groups, latent_size)\n"
            "    return variant / cached_per_layer(n_heads, head_size)",
        ),
    ),
    bug(
        "unknown-dtype-as-2-bytes",
        "kvmemory",
        "must raise ValueError",
        M11,
        ("    if dtype not in DTYPE_BYTES:\n", "    if dtype not in DTYPE_BYTES and False:\n"),
    ),
    # Names read case-blind: "FP32" accepted, where the stub lists the names exactly, in lower case.
    bug(
        "kvmemory-dtype-case-blind",
        "kvmemory",
        "in lower case",
        M11,
        ("    if dtype not in DTYPE_BYTES:\n", "    if dtype.lower() not in DTYPE_BYTES:\n"),
        ("    return DTYPE_BYTES[dtype]\n", "    return DTYPE_BYTES[dtype.lower()]\n"),
        first=True,
    ),
    # The documented validations: a count that is not positive, and n_groups with latent_size.
    bug(
        "kvmemory-no-validation",
        "kvmemory",
        "must raise ValueError",
        M11,
        ("        if not value > 0:\n", "        if False:\n"),
        (BOTH, ""),
    ),
    # ... while a length of 0 (an empty cache) and a memory of 0 (nothing fits) are answers, not errors.
    bug(
        "kvmemory-zero-refused",
        "kvmemory",
        "may be 0",
        M11,
        ("    if length < 0:\n", "    if length <= 0:\n"),
        ("    if memory_bytes < 0:\n", "    if memory_bytes <= 0:\n"),
    ),
    bug(
        "mc-queries-cached", "kvmemory", "a past token's query is never used again", M11, ('Q_MC1 = "b"', 'Q_MC1 = "c"')
    ),
    bug("mc-one-of-several", "kvmemory", "more than one choice is right", M11, ('Q_MC2 = "b, d"', 'Q_MC2 = "d"')),
    bug("gb-for-gib", "kvmemory", "a GiB is 2^30 bytes", M11, ("Q_NUM2 = 16  #", "Q_NUM2 = 17.18  #")),
]

CORRECT = [
    ok(
        "kvmemory-dtype-sizes-from-torch",
        {
            M11: [
                (
                    "def dtype_size(dtype: str) -> int:",
                    """def dtype_size(dtype: str) -> int:
    import torch

    names = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "float32": "float32",
             "bfloat16": "bfloat16", "float16": "float16", "int8": "int8"}
    if dtype not in names:
        raise ValueError(f"no such dtype: {dtype}")
    torch_dtype = getattr(torch, names[dtype])
    info = torch.finfo(torch_dtype) if torch_dtype.is_floating_point else torch.iinfo(torch_dtype)
    return info.bits // 8


def _table_size(dtype: str) -> int:""",
                )
            ]
        },
    ),
    ok(
        "kvmemory-other-order",
        {
            M11: [
                (
                    PER_TOKEN,
                    "    per_layer = cached_per_layer(n_heads, head_size, n_groups, latent_size)\n"
                    "    return dtype_size(dtype) * (per_layer * n_layers)",
                ),
                (FLOOR, "    length, _ = divmod(memory_bytes, per_token * batch)\n    return int(length)"),
                (
                    RATIO,
                    "    if n_groups is not None and latent_size is not None:\n"
                    '        raise ValueError("n_groups or latent_size, not both")\n'
                    "    if latent_size is not None:\n        return 2 * n_heads * head_size / latent_size\n"
                    "    return n_heads / (n_groups or n_heads)",
                ),
            ]
        },
    ),
    ok(
        "kvmemory-answers-written-differently",
        {
            M11: [
                ('Q_MC1 = "b"', 'Q_MC1 = "(B)"'),
                ('Q_MC2 = "b, d"', 'Q_MC2 = ["D", "B"]'),
                ('Q_TEXT1 = "GQA"', 'Q_TEXT1 = "Grouped-Query Attention"'),
                ("Q_NUM1 = 5  #", 'Q_NUM1 = "5.0"  #'),
                ("Q_NUM2 = 16  #", "Q_NUM2 = 2**34 / 2**30  #"),
                ("Q_NUM3 = 64  #", 'Q_NUM3 = "64"  #'),
            ]
        },
    ),
    ok("kvmemory-several-letters-as-a-set", {M11: [('Q_MC2 = "b, d"', 'Q_MC2 = {"d", "b"}')]}),
]
