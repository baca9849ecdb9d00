"""KV-cache memory: bytes per token for MHA, GQA, MQA and latent attention, whole caches, ratios and the longest
context that fits, on GPT-2-small-, Llama-2- and DeepSeek-V2-like configurations; then the check-yourself
questions, marked by grader/suites/questions.py.

A wrong number is explained by recomputing the usual mistakes (no factor 2 for K and V, no layers,
n_heads in place of n_groups, bits for bytes, a factor 2 on the latent) and naming those that give it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from grader.sandbox.client import StudentError
from grader.sandbox.common.agreement import ErrorKind
from grader.suites import checks, questions
from grader.suites.hidden import kv_questions

DTYPES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "int8": 1}
GIB = 2**30

# name -> (n_layers, n_heads, head_size, dtype, n_groups, latent_size), bytes per token
CONFIGS = {
    "gpt2-small-fp32": ((12, 12, 64, "float32", None, None), 73_728),
    "gpt2-small-fp16": ((12, 12, 64, "fp16", None, None), 36_864),
    "llama2-7b-fp16": ((32, 32, 128, "float16", None, None), 524_288),
    "llama2-7b-int8": ((32, 32, 128, "int8", None, None), 262_144),
    "llama2-7b-mqa": ((32, 32, 128, "bf16", 1, None), 16_384),
    "llama2-70b-gqa": ((80, 64, 128, "bfloat16", 8, None), 327_680),
    "llama3-8b-gqa": ((32, 32, 128, "bf16", 8, None), 131_072),
    "deepseek-v2-latent": ((60, 128, 128, "bf16", None, 512), 61_440),
}


def per_token(n_layers, n_heads, head_size, dtype, n_groups=None, latent_size=None) -> int:
    size = DTYPES[dtype]
    if latent_size is not None:
        return n_layers * latent_size * size
    return 2 * n_layers * (n_groups or n_heads) * head_size * size


def shown_args(args: tuple) -> str:
    n_layers, n_heads, head_size, dtype, n_groups, latent_size = args
    extra = (f", n_groups={n_groups}" if n_groups is not None else "") + (
        f", latent_size={latent_size}" if latent_size is not None else ""
    )
    return f"{n_layers}, {n_heads}, {head_size}, {dtype!r}{extra}"


def keywords(args: tuple) -> tuple[tuple, dict]:
    n_layers, n_heads, head_size, dtype, n_groups, latent_size = args
    kwargs = {k: v for k, v in (("n_groups", n_groups), ("latent_size", latent_size)) if v is not None}
    return (n_layers, n_heads, head_size, dtype), kwargs


def mistakes(args: tuple, scale: int = 1) -> list[tuple[float, str]]:
    """(the number, in bytes of ``scale`` tokens, that each usual mistake gives for ``args``; what it missed)."""
    n_layers, n_heads, head_size, dtype, n_groups, latent_size = args
    want = per_token(*args) * scale
    size = DTYPES[dtype]
    latent = latent_size is not None
    grouped = n_groups is not None and n_groups != n_heads
    return [
        (not latent and want // 2, "K and V are both cached: the factor 2 is missing"),
        (want // n_layers, "every layer keeps its own cache: multiply by n_layers"),
        (want * 8, f"that counts bits: one {dtype} number takes {size} byte{'s' * (size > 1)}, not {8 * size}"),
        (
            grouped and want // n_groups * n_heads,
            "with grouped-query attention only the n_groups K/V heads are cached: use n_groups, not n_heads",
        ),
        (
            grouped and want // n_groups * (n_heads // n_groups),
            "n_heads // n_groups is the number of query heads per group; the K/V heads cached are the n_groups "
            "groups themselves",
        ),
        (
            latent and want * 2,
            "the latent c is one vector shared by K and V: it is cached once, without the factor 2",
        ),
        (
            latent and 2 * n_layers * n_heads * head_size * size * scale,
            "latent attention caches only the latent c (latent_size numbers per layer), not K and V",
        ),
    ]


def other_size(args: tuple) -> tuple:
    """The same model with twice the heads and twice the groups: groups of the same size. Two mistakes that give
    one number here (32 heads in 8 groups: n_heads // n_groups = 4 = 8 / 2) give different numbers there."""
    n_layers, n_heads, head_size, dtype, n_groups, latent_size = args
    return (n_layers, 2 * n_heads, head_size, dtype, n_groups and 2 * n_groups, latent_size)


def explain_bytes(got: float, args: tuple, scale: int = 1, again: Callable[[tuple], float] | None = None) -> str:
    """Every usual mistake that gives ``got`` (bytes of ``scale`` tokens), in plain words. Where several do,
    ``again(args)``, the student's number for other arguments, keeps those that give it at another size too."""
    n_layers, n_heads, head_size, dtype, n_groups, latent_size = args
    want = per_token(*args) * scale
    size = DTYPES[dtype]
    fits = [i for i, (value, _) in enumerate(mistakes(args, scale)) if value and got == value]
    if len(fits) > 1 and again is not None:
        other = other_size(args)
        there = again(other)
        kept = [i for i in fits if mistakes(other, scale)[i][0] == there]
        fits = kept or fits  # nothing fits there: the other size has a bug of its own, so keep them all
    causes = list(dict.fromkeys(mistakes(args, scale)[i][1] for i in fits))
    sizes = [
        (want // size * other, f"one {dtype} number takes {size} byte{'s' * (size > 1)}, not {other}")
        for other in sorted(set(DTYPES.values()) - {size})
    ]
    causes = causes or [cause for value, cause in sizes if got == value]  # only when nothing likelier fits
    if causes:
        return "; or ".join(causes)
    return (
        "bytes per token = 2 (K and V) x n_layers x K/V heads (n_groups, else n_heads) x head_size x bytes per "
        "number; latent attention: n_layers x latent_size x bytes per number"
    )


def call_per_token(kvmemory, args: tuple) -> float:
    positional, kwargs = keywords(args)
    got = kvmemory.call("kv_bytes_per_token", *positional, **kwargs)
    return checks.number(got, f"kv_bytes_per_token({shown_args(args)})", integer=True)


def check_per_token(kvmemory, args: tuple, what: str) -> None:
    got = call_per_token(kvmemory, args)
    want = per_token(*args)
    if got != want:
        checks.fail(
            f"kv_bytes_per_token({shown_args(args)}) is {got:,}, expected {want:,} ({what}): "
            + explain_bytes(got, args, again=lambda other: call_per_token(kvmemory, other))
        )


# ---------------------------------------------------------------- bytes per token


@pytest.mark.points(8)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_bytes_per_token(kvmemory, name):
    """kv_bytes_per_token gives each variant's bytes per token on GPT-2 small, Llama-2 7B/70B and a latent model"""
    args, want = CONFIGS[name]
    assert per_token(*args) == want
    check_per_token(kvmemory, args, name)


def test_mqa_is_one_group(kvmemory):
    """multi-query attention is grouped-query attention with a single K/V group"""
    args = (32, 32, 128, "fp16", 1, None)
    check_per_token(kvmemory, args, "MQA: one K/V head shared by all 32 query heads")


@pytest.mark.parametrize("heads", [12, 64])
def test_groups_equal_to_heads_is_mha(kvmemory, heads):
    """grouped-query attention with as many groups as heads caches what multi-head attention does"""
    mha = call_per_token(kvmemory, (24, heads, 64, "fp32", None, None))
    gqa = call_per_token(kvmemory, (24, heads, 64, "fp32", heads, None))
    if mha != gqa:
        checks.fail(
            f"with n_groups={heads} = n_heads the cache is {gqa:,} bytes per token, but {mha:,} without n_groups: "
            "each query head then has its own K/V head, which is multi-head attention"
        )


@pytest.mark.points(2)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_dtype_sizes(kvmemory, dtype):
    """each dtype name takes its number of bytes: float32/fp32 4, bfloat16/bf16 and float16/fp16 2, int8 1"""
    check_per_token(kvmemory, (2, 4, 16, dtype, None, None), f"2 layers, 4 heads of 16, in {dtype}")


def test_latent_size_matters(kvmemory):
    """latent attention's cache grows with latent_size and does not depend on the number of heads"""
    for heads, latent in ((16, 384), (128, 384), (128, 1024)):
        check_per_token(kvmemory, (4, heads, 64, "bf16", None, latent), f"a latent of {latent} per layer")


DTYPE_NAMES = "the dtype names are float32/fp32, bfloat16/bf16, float16/fp16 and int8"
# The stub lists the names "exactly these, lowercase": another spelling of one of them is another name.
DTYPE_CASE = f"{DTYPE_NAMES}, exactly so, in lower case: an upper-case spelling is not one of them"
POSITIVE = "a count must be positive (only length and memory_bytes may be 0)"
ONE_VARIANT = "n_groups (GQA, MQA) and latent_size (latent attention) are two variants: give one of them, not both"
MODEL = (2, 4, 8, "fp32")  # the toy model
# (case id, function, positional arguments, keywords, what makes the call invalid): every validation the stub
# documents, each function that takes the argument tried once.
INVALID = [
    ("int4", "kv_bytes_per_token", (2, 4, 8, "int4"), {}, DTYPE_NAMES),
    ("fp12", "kv_bytes_per_token", (2, 4, 8, "fp12"), {}, DTYPE_NAMES),
    ("upper-case-FP32", "kv_bytes_per_token", (2, 4, 8, "FP32"), {}, DTYPE_CASE),
    (
        "7-groups-for-64-heads",
        "kv_bytes_per_token",
        (2, 64, 128, "fp16"),
        {"n_groups": 7},
        "n_groups must divide n_heads",
    ),
    ("groups-and-latent", "kv_bytes_per_token", MODEL, {"n_groups": 2, "latent_size": 16}, ONE_VARIANT),
    ("ratio-groups-and-latent", "kv_ratio", (32, 128), {"n_groups": 8, "latent_size": 512}, ONE_VARIANT),
    ("0-layers", "kv_bytes_per_token", (0, 4, 8, "fp32"), {}, POSITIVE),
    ("negative-heads", "kv_bytes_per_token", (2, -4, 8, "fp32"), {}, POSITIVE),
    ("0-head-size", "kv_bytes_per_token", (2, 4, 0, "fp32"), {}, POSITIVE),
    ("0-groups", "kv_bytes_per_token", MODEL, {"n_groups": 0}, POSITIVE),
    ("0-latent", "kv_bytes_per_token", MODEL, {"latent_size": 0}, POSITIVE),
    ("kv-bytes-0-batch", "kv_bytes", (0, 16, *MODEL), {}, POSITIVE),
    ("kv-bytes-negative-length", "kv_bytes", (2, -1, *MODEL), {}, POSITIVE),
    ("max-context-0-batch", "max_context", (1000, 0, *MODEL), {}, POSITIVE),
    ("max-context-negative-memory", "max_context", (-1, 1, *MODEL), {}, POSITIVE),
]


def shown_call(name: str, args: tuple, kwargs: dict) -> str:
    return f"{name}({', '.join([*map(repr, args), *(f'{k}={v}' for k, v in kwargs.items())])})"


@pytest.mark.points(2)
@pytest.mark.parametrize("name,args,kwargs,why", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_arguments_raise_value_error(kvmemory, name, args, kwargs, why):
    """an unknown dtype name, a count that is not positive, n_groups that does not divide n_heads, or both
    n_groups and latent_size, raises a clear ValueError"""
    checks.raises_value_error(lambda: kvmemory.call(name, *args, **kwargs), shown_call(name, args, kwargs), why)


ZERO = [  # (function, positional arguments, the answer, why 0 is an answer)
    ("kv_bytes", (2, 0, 12, 12, 64, "fp32"), "a length of 0 is an empty cache: 0 bytes"),
    ("max_context", (0, 1, 12, 12, 64, "fp32"), "a memory of 0 holds no token: the longest context is 0"),
]


@pytest.mark.parametrize("name,args,why", ZERO, ids=["kv-bytes-length-0", "max-context-memory-0"])
def test_zero_length_and_memory_are_answers(kvmemory, name, args, why):
    """kv_bytes with length 0 and max_context with a memory of 0 return 0 (only a negative one raises)"""
    call = shown_call(name, args, {})
    try:
        got = kvmemory.call(name, *args)
    except StudentError as e:
        if e.type == ErrorKind.NOT_IMPLEMENTED:
            raise
        checks.fail(
            f"{call} raised {e.type} ({e.message:.120}): {why}. length and memory_bytes may be 0; "
            "only a negative one raises ValueError"
        )
    if checks.number(got, call, integer=True) != 0:
        checks.fail(f"{call} is {got!r}, expected 0: {why}")


# ---------------------------------------------------------------- whole caches


KV_BYTES = [  # (batch, length, the model's arguments, the case's name: the model, and the sequences)
    (4, 2048, (32, 32, 128, "fp16", None, None), "Llama-2-7B fp16, 4 x 2048 tokens (4 GiB)"),
    (1, 1, (12, 12, 64, "fp32", None, None), "GPT-2 small fp32, 1 x 1 token"),
    (3, 1000, (80, 64, 128, "bf16", 8, None), "Llama-2-70B GQA bf16, 3 x 1000 tokens"),
    (5, 7, (60, 128, 128, "bf16", None, 512), "DeepSeek-V2-like latent bf16, 5 x 7 tokens"),
]


@pytest.mark.points(3)
@pytest.mark.parametrize("batch,length,args", [c[:3] for c in KV_BYTES], ids=[c[3] for c in KV_BYTES])
def test_kv_bytes(kvmemory, batch, length, args):
    """kv_bytes is batch x length x the bytes per token"""
    positional, kwargs = keywords(args)
    what = f"kv_bytes({batch}, {length}, {shown_args(args)})"
    got = checks.number(kvmemory.call("kv_bytes", batch, length, *positional, **kwargs), what, integer=True)
    want = batch * length * per_token(*args)
    if got != want:
        causes = {
            want // batch: "multiply by the batch: each sequence has its own cache",
            want // length: "multiply by the length: every token of each sequence is cached",
            want // (batch * length): "that is one token's cache: multiply by batch and length",
        }
        cause = (
            causes.get(got) if batch > 1 and length > 1 else None
        ) or f"batch x length x bytes per token: {explain_bytes(got, args, batch * length)}"
        checks.fail(f"{what} is {got:,}, expected {want:,}: {cause}")


# ---------------------------------------------------------------- ratios

RATIOS = [
    ((64, 128), {"n_groups": 8}, 8.0),  # Llama-2-70B
    ((32, 128), {"n_groups": 1}, 32.0),  # MQA
    ((12, 64), {}, 1.0),  # MHA itself
    ((32, 128), {"latent_size": 512}, 16.0),  # a latent of 512 for 32 heads of 128
    ((32, 96), {"n_groups": 32}, 1.0),
]


@pytest.mark.points(3)
@pytest.mark.parametrize("args,kwargs,want", RATIOS, ids=["gqa-8-groups", "mqa", "mha", "latent", "gqa-32-groups"])
def test_kv_ratio(kvmemory, args, kwargs, want):
    """kv_ratio is MHA's cache over the variant's: n_heads / n_groups, or 2 x n_heads x head_size / latent_size"""
    shown = ", ".join([*map(str, args), *(f"{k}={v}" for k, v in kwargs.items())])
    what = f"kv_ratio({shown})"
    got = checks.number(kvmemory.call("kv_ratio", *args, **kwargs), what)
    if not math.isclose(got, want, rel_tol=1e-9):
        hint = "MHA's cache divided by the variant's"
        if want != 1 and math.isclose(got * want, 1, rel_tol=1e-9):
            hint = "that is the variant's cache over MHA's (inverted): the ratio is MHA's over the variant's"
        elif "latent_size" in kwargs and math.isclose(got, want / 2, rel_tol=1e-9):
            hint = (
                "MHA caches K and V (2 x n_heads x head_size numbers per layer), the latent only once "
                "(latent_size): the factor 2 is on MHA's side alone"
            )
        checks.fail(f"{what} is {got:.6g}, expected {want:g}: {hint}")


# ---------------------------------------------------------------- the longest context that fits

MAX_CONTEXT = [
    (40 * GIB, 8, (32, 32, 128, "fp16", None, None)),  # 10,240 tokens
    (10**9, 1, (12, 12, 64, "fp32", None, None)),  # 13,563.1...: rounded down
    (16 * GIB, 4, (60, 128, 128, "bf16", None, 512)),  # 69,905.07...
    (80 * GIB, 2, (80, 64, 128, "bf16", 8, None)),
    (1000, 1, (32, 32, 128, "fp16", None, None)),  # not one token fits
]


@pytest.mark.points(4)
@pytest.mark.parametrize("memory,batch,args", MAX_CONTEXT, ids=[f"{m:.3g}B-batch{b}" for m, b, _ in MAX_CONTEXT])
def test_max_context(kvmemory, memory, batch, args):
    """max_context is the longest length whose cache fits in the budget, rounded down"""
    positional, kwargs = keywords(args)
    what = f"max_context({memory:,}, {batch}, {shown_args(args)})"
    got = kvmemory.call("max_context", memory, batch, *positional, **kwargs)
    token = per_token(*args)
    want = memory // (batch * token)
    exact = memory / (batch * token)
    if type(got) is float and not got.is_integer() and math.isclose(got, exact, rel_tol=1e-9):
        checks.fail(f"{what} is {got!r}, expected {want:,}: round down (a part of a token does not fit)")
    got = checks.number(got, what, integer=True)
    if got != want:
        causes = {
            want + 1: "rounded up: that many tokens do not fit, round down",
            memory // token: "the budget is shared by the batch: divide by batch x bytes per token",
            memory // (batch * token // 2): "K and V are both cached: the factor 2 is missing",
            memory // (batch * token * 8): "bytes, not bits: the budget and the dtype sizes are in bytes",
        }
        if args[0] > 1:
            causes.setdefault(memory // (batch * token // args[0]), "every layer keeps its own cache (n_layers)")
        cause = causes.get(got, "the largest length with batch x length x bytes per token <= memory_bytes")
        checks.fail(f"{what} is {got:,}, expected {want:,}: {cause}")


# ---------------------------------------------------------------- check yourself

# The questions, in the stub's order; the numeric ones with each student's numbers (kv_questions.py).
QUESTION_IDS = ["Q_MC1", "Q_MC2", "Q_TEXT1", "Q_NUM1", "Q_NUM2", "Q_NUM3"]
assert QUESTION_IDS == kv_questions.IDS, "kv_questions.py and QUESTION_IDS list other questions"


def answer(kvmemory, name: str):
    """The module-level answer, as plain data; a set (not plain data on the wire) is listed in the worker."""
    value = kvmemory.value(name)
    if getattr(value, "short_type", None) in ("set", "frozenset"):
        value = kvmemory.call("list", value, module="builtins")
    return value


@pytest.fixture(scope="session")
def notebook(grading_context) -> bool:
    """Whether the submission is a notebook: grader/submission.py runs its cells from notebook_code.py."""
    return (grading_context.submission / "notebook_code.py").is_file()


@pytest.mark.points(len(QUESTION_IDS))
@pytest.mark.parametrize("question_id", QUESTION_IDS)
def test_question(kvmemory, variant, notebook, question_id):
    """the answer to the check-yourself question"""
    question = kv_questions.question(question_id, variant)
    questions.assess(question, answer(kvmemory, question_id), kv_questions.where(notebook))
