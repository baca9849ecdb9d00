"""kvmemory's check-yourself questions (m11_kvmemory.py), with per-student numbers in the numeric ones.

Hidden: it computes the answers. ``QUESTIONS`` lists the six in the stub's order: the multiple-choice and
text ones are fixed; Q_NUM1 to Q_NUM3 are ``Drawn`` (grader/suites/bank.py): the lesson's numbers in the stub
and for a student grading alone, a student's own in a paper (``grade paper render``). A draw is realistic
(sizes of real models: layers, heads, K/V groups, head size, dtype, batch, length) and is drawn again until
the answer and every usual wrong answer are at least 5% apart, so each mistake keeps its own feedback.
``REORDERED``: the multiple-choice ones, whose options each student of a paper draws from a hidden pool
(kv_pools.py, bank.py ``Pooled``).
Q_TEXT1 is asked of everyone alike: its answer is a word (a fact of Llama-2-70B's), which no order changes.
"""

from __future__ import annotations

import random

from grader.milestones import GRADABLE
from grader.suites.bank import Drawn, Params, Reordered, reordered
from grader.suites.hidden.kv_pools import POOLS
from grader.suites.questions import ABOVE, MultipleChoice, Question, Text
from grader.variants import Variant

MILESTONE = "kvmemory"
(MODULE,) = GRADABLE[MILESTONE].modules  # m11_kvmemory


def where(notebook: bool) -> str:
    """Where the question is, for a submission that is a notebook or a folder of exercise files."""
    return ABOVE if notebook else f"{ABOVE}, in {MODULE}.py"


DTYPES = {"float32": 4, "fp32": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "int8": 1}
GIB = 2**30
# The dtype mistaken for a wider one: the size a student may take instead (float32 as a C double).
CONFUSED = {4: 8, 2: 4, 1: 2}
FIXED: list[Question] = [
    MultipleChoice(
        "Q_MC1",
        answer="b",
        why="each new token compares its own query with the keys of all past tokens and mixes their values",
        wrong={
            "a": "the query is used once, by its own token; later tokens read the keys and the values",
            "c": "a past token's query is never used again: caching it only costs memory",
            "d": "the attention weights are recomputed for each new query; keys and values are what is reused",
        },
    ),
    MultipleChoice(
        "Q_MC2",
        answer="bd",
        why="one token's cache is 2 x n_layers x K/V heads x head_size x bytes per number; "
        "batch and context length change how many tokens are cached, not what one costs",
        wrong={
            "a": "a smaller batch caches fewer tokens, but each costs as much",
            "c": "a shorter window caches fewer tokens, but each costs as much",
            "ac": "the batch and the window change how many tokens are cached, not what one token costs",
            "abcd": "the batch and the window change how many tokens are cached, not what one token costs",
        },
    ),
    Text(
        "Q_TEXT1",
        answer="gqa",
        # "grouped-query attention (GQA)", "GQA attention": the name and its abbreviation together, either order
        synonyms=("grouped query", "grouped query gqa", "gqa grouped query", "grouped"),
        context=("attention",),
        why="each K/V head serves a group of 8 query heads: between MHA (64 K/V heads) and MQA (1)",
        wrong={
            "mqa": "MQA has a single K/V head for all the query heads; here there are 8",
            "mha": "in MHA each of the 64 query heads would have its own K/V head",
            "mla": "latent attention caches a latent, not K/V heads",
        },
    ),
]


def cache_gib(p: Params) -> float:
    """The whole cache in GiB: batch x length x 2 (K and V) x layers x K/V heads x head_size x bytes."""
    kv_heads = p.get("n_groups") or p["n_heads"]
    return p["batch"] * p["length"] * 2 * p["n_layers"] * kv_heads * p["head_size"] * DTYPES[p["dtype"]] / GIB


def gib_mistakes(p: Params) -> list[tuple[float, str]]:
    """The usual wrong answers to "how many GiB of cache", and what each one missed."""
    want, size, dtype = cache_gib(p), DTYPES[p["dtype"]], p["dtype"]
    plural = "s" * (size > 1)
    mistakes = [
        (want / 2, "K and V are both cached: the factor 2 is missing"),
        (want / p["n_layers"], f"every layer keeps its own cache: multiply by the {p['n_layers']} layers"),
        (want * GIB / 1e9, "that is in GB (10^9 bytes); a GiB is 2^30 bytes"),
        (want / p["batch"], f"multiply by the batch: each of the {p['batch']} sequences has its own cache"),
        (want * CONFUSED[size] / size, f"a {dtype} number takes {size} byte{plural}, not {CONFUSED[size]}"),
    ]
    if p.get("n_groups"):
        mistakes.append(
            (
                want * p["n_heads"] / p["n_groups"],
                f"with {p['n_groups']} K/V groups only {p['n_groups']} K/V heads are cached, not {p['n_heads']}",
            )
        )
    else:
        mistakes.append((want * 8, f"that counts bits: a {dtype} number takes {size} byte{plural}"))
    return mistakes


def _until(question: Drawn, rng: random.Random, make) -> Params:
    """``make(rng)`` again until its numbers keep every mistake apart and the answer is at least 1 (so that two
    decimals are within the tolerance): a few tries, and the draw stays seeded."""
    for _ in range(1000):
        params = make(rng)
        if 1 <= question.answer(params) <= 2000 and question.distinct(params):
            return params
    raise AssertionError(f"{question.id}: no numbers drawn in 1,000 tries keep the usual mistakes apart")


def _gqa(rng: random.Random) -> Params:
    n_heads = rng.choice([16, 24, 32, 40, 48, 64, 96])
    return {
        "model": "a model",
        "n_layers": rng.choice([22, 24, 26, 28, 30, 32, 36, 40, 42, 48, 60, 64, 80, 94, 96]),
        "n_heads": n_heads,
        "head_size": rng.choice([64, 96, 128]),
        "n_groups": rng.choice([g for g in (2, 4, 8, 16) if n_heads % g == 0 and g < n_heads]),
        "dtype": rng.choice(["bfloat16", "float16", "float32", "int8"]),
        "batch": rng.choice([3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64]),
        "length": rng.choice([2048, 3072, 4096, 6144, 8192, 12288, 16384, 32768]),
    }


def _mha(rng: random.Random) -> Params:
    return {
        "model": "a model",
        "n_layers": rng.choice([12, 16, 20, 22, 24, 26, 28, 30, 32, 36, 40, 48]),
        "n_heads": rng.choice([12, 16, 20, 24, 32, 40]),
        "head_size": rng.choice([64, 80, 128]),
        "dtype": rng.choice(["bfloat16", "float16", "float32"]),
        "batch": rng.choice([3, 4, 5, 6, 8, 10, 12, 16, 24, 32]),
        "length": rng.choice([1024, 1536, 2048, 3072, 4096, 6144, 8192]),
    }


def _latent(rng: random.Random) -> Params:
    return {
        "n_heads": rng.choice([16, 20, 24, 32, 40, 48, 64, 96, 128]),
        "head_size": rng.choice([64, 80, 96, 128, 192]),
        "latent_size": rng.choice([256, 320, 384, 448, 512, 576, 640, 768, 1024]),
    }


GQA_GIB: Drawn = Drawn(
    "Q_NUM1",
    statement="How many GiB (2^30 bytes) of KV cache does {model} ({n_layers} layers, {n_heads} query heads of "
    "size {head_size} sharing {n_groups} K/V heads) hold in {dtype} for a batch of {batch} sequences of "
    "{length:,} tokens?",
    lesson={
        "model": "Llama-2-70B",
        "n_layers": 80,
        "n_heads": 64,
        "head_size": 128,
        "n_groups": 8,
        "dtype": "bfloat16",
        "batch": 4,
        "length": 4096,
    },
    draw=lambda rng: _until(GQA_GIB, rng, _gqa),
    answer=cache_gib,
    wrong=gib_mistakes,
    why="batch x length x (2 x n_layers x K/V heads x head_size x bytes per number), over 2^30 bytes per GiB",
)
MHA_GIB: Drawn = Drawn(
    "Q_NUM2",
    statement="How many GiB (2^30 bytes) of KV cache does {model} ({n_layers} layers, {n_heads} heads of size "
    "{head_size}, multi-head attention) hold in {dtype} for a batch of {batch} sequences of {length:,} tokens?",
    lesson={
        "model": "Llama-2-7B",
        "n_layers": 32,
        "n_heads": 32,
        "head_size": 128,
        "dtype": "float16",
        "batch": 8,
        "length": 4096,
    },
    draw=lambda rng: _until(MHA_GIB, rng, _mha),
    answer=cache_gib,
    wrong=gib_mistakes,
    why="batch x length x (2 x n_layers x n_heads x head_size x bytes per number), over 2^30 bytes per GiB",
)


def latent_ratio(p: Params) -> float:
    return 2 * p["n_heads"] * p["head_size"] / p["latent_size"]


def latent_mistakes(p: Params) -> list[tuple[float, str]]:
    want = latent_ratio(p)
    return [
        (want / 2, "the latent is cached once (it is shared by K and V), while MHA caches both K and V"),
        (1 / want, "that is the latent's cache over MHA's: the question asks how many times smaller"),
        (want / p["n_heads"], f"MHA caches a key and a value for each of its {p['n_heads']} heads"),
    ]


LATENT_RATIO: Drawn = Drawn(
    "Q_NUM3",
    statement="Latent attention with {n_heads} heads of size {head_size} caches a latent of size {latent_size} "
    "per layer and token. How many times smaller is its cache than multi-head attention's?",
    lesson={"n_heads": 128, "head_size": 128, "latent_size": 512},
    draw=lambda rng: _until(LATENT_RATIO, rng, _latent),
    answer=latent_ratio,
    wrong=latent_mistakes,
    why="MHA caches 2 x n_heads x head_size numbers per layer and token (K and V), latent attention latent_size",
)

DRAWN: list[Drawn] = [GQA_GIB, MHA_GIB, LATENT_RATIO]
IDS: list[str] = [q.id for q in FIXED] + [q.id for q in DRAWN]  # the stub's order
# a paper's student is shown options drawn from hidden pools (kv_pools.py), never the lesson's
REORDERED: list[Reordered] = list(POOLS)
assert sorted(p.id for p in POOLS) == sorted(q.id for q in FIXED if isinstance(q, MultipleChoice)), "a pool each"


def question(question_id: str, variant: Variant) -> Question:
    """Question ``question_id`` as ``variant``'s student was asked it."""
    drawn = {q.id: q for q in DRAWN}
    if question_id in drawn:
        return drawn[question_id].marked(variant)
    return reordered(next(q for q in FIXED if q.id == question_id), variant, REORDERED)
