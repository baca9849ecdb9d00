"""problems' checkpoints (m13_problems.py): four multi-part problems, each on one stem, in the shape of a USAAIO
round paper.

Hidden: it computes the answers. A problem's numeric parts share one stem, the numbers drawn once per student and
problem (``Part.stem``): the lesson's numbers in the stub and for a student grading alone, a student's own in a paper
(``grade paper render``). A stem is drawn again until every part's answer and usual wrong answers are apart, so each
mistake keeps its own feedback. The multiple-choice parts are asked in each student's own order of options
(``REORDERED``, bank.py ``Shuffled``). ``IDS`` is the stub's order.

- A: attention's scale and cost: the variance of q.k (d_k), after the 1/sqrt(d_k) scale (1), why it matters, the
  FLOPs of QK^T (2 T^2 d_k), how that grows when the context grows;
- B: training a GPT: the softmax-cross-entropy gradient p - y on given logits, C = 6 N D, where the 6 comes from;
- C: generation and its cache: the KV cache's bytes (2 x layers x d_model x bytes x tokens), the positions
  processed without and with the cache;
- D: Chinchilla: N and D from C = 6 N D with D = 20 N, and a judgement on GPT-3's numbers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from grader.milestones import GRADABLE
from grader.suites.bank import Drawn, Params, Reordered, Shuffled, reordered
from grader.suites.questions import ABOVE, MultipleChoice, Question
from grader.variants import Variant

MILESTONE = "problems"
(MODULE,) = GRADABLE[MILESTONE].modules  # m13_problems

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def where(notebook: bool) -> str:
    """Where the question is, for a submission that is a notebook or a folder of exercise files."""
    return ABOVE if notebook else f"{ABOVE}, in {MODULE}.py"


def big(x: float) -> str:
    """A large number as a statement shows it: three significant figures, ``1.24e8``."""
    mantissa, exponent = f"{x:.3g}".split("e") if "e" in f"{x:.3g}" else (f"{x:.3g}", "0")
    return f"{mantissa}e{int(exponent)}" if int(exponent) else mantissa


@dataclass(frozen=True)
class Part(Drawn):
    """A numeric part of a multi-part problem: its numbers are its problem's ``stem``'s, drawn once per student and
    problem, so that every part of the problem asks about the same model, logits or budget."""

    stem: str = ""

    def params(self, variant: Variant) -> Params:
        return variant.params(self.stem, self.lesson, self.draw)


def apart(answer: float, wrong: list[float], gap: float) -> bool:
    """The answer and each distinct wrong answer are at least ``gap`` apart, relative to the larger in size (signs
    count: -0.3 and 0.3 are far apart), and none is 0. Two mistakes that give one number share its feedback
    (``Drawn.question`` joins them)."""
    values = [answer, *dict.fromkeys(v for v in wrong if v != answer)]
    return (
        len(values) == 1 + len(set(wrong))
        and all(v != 0 for v in values)
        and all(abs(a - b) > gap * max(abs(a), abs(b)) for i, a in enumerate(values) for b in values[i + 1 :])
    )


def drawn_until(parts: Callable[[], list[Part]], make: Callable[[random.Random], Params], gap: float = 0.05):
    """A stem's ``draw``: ``make(rng)`` again until, in each of its parts, the answer and the usual wrong answers are
    ``gap`` apart (so each mistake keeps its feedback and none passes for the answer); seeded throughout."""

    def draw(rng: random.Random) -> Params:
        for _ in range(1000):
            params = make(rng)
            if all(apart(p.answer(params), [v for v, _ in p.wrong(params)], gap) for p in parts()):
                return params
        raise AssertionError("no numbers drawn in 1,000 tries keep the usual mistakes apart")

    return draw


# ---------------------------------------------------------------- A: attention's scale and cost

STEM_A = {"d_k": 64, "T": 1024, "factor": 2}


def _stem_a(rng: random.Random) -> Params:
    return {
        "d_k": rng.choice([16, 32, 48, 64, 80, 96, 128, 256]),
        "T": rng.choice([256, 384, 512, 768, 1024, 1536, 2048, 4096]),
        "factor": rng.choice([2, 3, 4, 5, 6, 8]),
    }


DRAW_A = drawn_until(lambda: PARTS_A, _stem_a)
A_VARIANCE: Part = Part(
    "Q_A1",
    stem="A",
    statement="A query q and a key k each have d_k = {d_k} independent entries of mean 0 and variance 1. What is "
    "the variance of the score q . k (before any scaling)?",
    lesson=STEM_A,
    draw=DRAW_A,
    answer=lambda p: p["d_k"],
    wrong=lambda p: [
        (math.sqrt(p["d_k"]), "that is the score's standard deviation; its variance is the square of it"),
        (1, "each product q_i k_i has variance 1, but the score sums d_k independent ones: their variances add"),
        (p["d_k"] ** 2, "the variances of independent terms add: d_k terms of variance 1 give d_k, not d_k^2"),
    ],
    why="q . k sums d_k independent products q_i k_i, each of mean 0 and variance E[q_i^2] E[k_i^2] = 1; the "
    "variances of independent terms add, so Var(q . k) = d_k",
)
A_SCALED: Part = Part(
    "Q_A2",
    stem="A",
    statement="The same scores are divided by sqrt(d_k), as in scaled dot-product attention (d_k = {d_k}). What is "
    "their variance now?",
    lesson=STEM_A,
    draw=DRAW_A,
    answer=lambda p: 1,
    wrong=lambda p: [
        (math.sqrt(p["d_k"]), "dividing by c divides the variance by c^2, not by c: d_k / (sqrt(d_k))^2 = 1"),
        (1 / p["d_k"], "the variance before scaling is d_k, not 1: d_k / d_k = 1"),
        (1 / math.sqrt(p["d_k"]), "the variance before scaling is d_k, and dividing by sqrt(d_k) divides it by d_k"),
        (p["d_k"], "that is the variance before the scale; dividing the scores by sqrt(d_k) divides it by d_k"),
    ],
    why="Var(x / c) = Var(x) / c^2, so d_k / (sqrt(d_k))^2 = 1 whatever d_k: the softmax sees scores of the same "
    "spread at every head size",
)
A_FLOPS: Part = Part(
    "Q_A4",
    stem="A",
    statement="One head computes the whole T x T score matrix Q K^T for T = {T:,} tokens and d_k = {d_k} (before "
    "the mask). How many FLOPs is that, counting a multiply and an add as 2 FLOPs?",
    lesson=STEM_A,
    draw=DRAW_A,
    answer=lambda p: 2 * p["T"] ** 2 * p["d_k"],
    wrong=lambda p: [
        (p["T"] ** 2 * p["d_k"], "a multiply and an add are 2 FLOPs: each of the d_k terms of a score costs 2"),
        (2 * p["T"] * p["d_k"], "that is one query's row of scores: there are T queries, so T x T scores"),
        (p["T"] ** 2, "each of the T x T scores is a dot product of d_k terms, 2 FLOPs each"),
        (2 * p["T"] * p["d_k"] ** 2, "the score matrix is T x T, each entry a d_k-term dot product: 2 T^2 d_k"),
    ],
    why="T x T scores, each a dot product of d_k multiply-adds (2 FLOPs each): 2 T^2 d_k",
)
A_GROWTH: Part = Part(
    "Q_A5",
    stem="A",
    statement="The context grows from T = {T:,} to {factor} x {T:,} tokens (d_k = {d_k} stays). By how many times "
    "do the FLOPs of Q K^T, and the memory of the score matrix, grow?",
    lesson=STEM_A,
    draw=DRAW_A,
    answer=lambda p: p["factor"] ** 2,
    wrong=lambda p: [
        (p["factor"], "the score matrix is T x T: both of its sides grow, so the cost grows with the square"),
        (p["factor"] ** 3, "only the T x T matrix grows; d_k stays, so the cost grows with T^2, not T^3"),
    ],
    why="2 T^2 d_k FLOPs and T^2 scores: multiplying T by f multiplies both by f^2 (attention is quadratic in T)",
)
PARTS_A: list[Part] = [A_VARIANCE, A_SCALED, A_FLOPS, A_GROWTH]

A_WHY = MultipleChoice(
    "Q_A3",
    answer="c",
    why="softmax of scores with a large spread is nearly one-hot, and a saturated softmax passes back almost no "
    "gradient; the scale keeps the spread at 1 whatever d_k",
    wrong={
        "a": "the mask makes attention causal; the scale changes no weight from zero to non-zero",
        "b": "the softmax makes each row sum to 1 with or without the scale",
        "d": "the score matrix has T x T entries whatever they are divided by: the scale saves no memory",
    },
)

# ---------------------------------------------------------------- B: training a GPT

STEM_B = {"logits": [2.0, 1.0, 0.1], "target": 0, "other": 2}
STEM_FLOPS = {"N": 1.24e8, "D": 1e10}


def softmax(logits: list[float]) -> list[float]:
    top = max(logits)
    exps = [math.exp(z - top) for z in logits]
    return [e / sum(exps) for e in exps]


def _stem_b(rng: random.Random) -> Params:
    classes = rng.choice([3, 4, 5])
    logits = [rng.choice([-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0]) for _ in range(classes)]
    target, other = rng.sample(range(classes), 2)
    return {"logits": logits, "target": target, "other": other}


def _usable_b(rng: random.Random) -> Params:
    """A draw whose two probabilities are neither tiny nor near 1 (three significant figures stay meaningful)."""
    while True:
        p = _stem_b(rng)
        probs = softmax(p["logits"])
        if 0.05 <= probs[p["target"]] <= 0.9 and 0.05 <= probs[p["other"]] <= 0.9:
            return p


DRAW_B = drawn_until(lambda: PARTS_B, _usable_b)
B_STATEMENT = (
    "Logits z = {logits} over {classes} classes, the target is class {target} (counting from 0), and the loss is "
    "the cross-entropy -log softmax(z)[{target}]. "
)


def _shown_b(p: Params) -> Params:
    return {**p, "classes": len(p["logits"])}


def prob(p: Params, which: str) -> float:
    return softmax(p["logits"])[p[which]]


B_TARGET: Part = Part(
    "Q_B1",
    stem="B",
    statement=B_STATEMENT + "What is dL/dz_{target}, the gradient at the target's logit (3 significant figures)?",
    lesson=STEM_B,
    draw=DRAW_B,
    answer=lambda p: prob(p, "target") - 1,
    wrong=lambda p: [
        (1 - prob(p, "target"), "the sign is flipped: the gradient is p - y, not y - p (the loss falls as z_c grows)"),
        (prob(p, "target"), "at the target y = 1: the gradient there is p - 1"),
        (-1 / prob(p, "target"), "that is dL/dp, the gradient with respect to the probability, not the logit"),
    ],
    why="dL/dz = softmax(z) - y, where y is one-hot at the target: p_target - 1 at the target",
    shown=_shown_b,
)
B_OTHER: Part = Part(
    "Q_B2",
    stem="B",
    statement=B_STATEMENT + "What is dL/dz_{other}, the gradient at the logit of class {other} (3 significant "
    "figures)?",
    lesson=STEM_B,
    draw=DRAW_B,
    answer=lambda p: prob(p, "other"),
    wrong=lambda p: [
        (-prob(p, "other"), "the sign is flipped: the gradient is p - y, not y - p (raising a wrong logit raises L)"),
        (prob(p, "other") - 1, "y is 1 at the target only: at another class it is 0, so the gradient is p"),
    ],
    why="dL/dz = softmax(z) - y, and y is 0 away from the target: the gradient there is that class's probability",
    shown=_shown_b,
)
PARTS_B: list[Part] = [B_TARGET, B_OTHER]


def _stem_flops(rng: random.Random) -> Params:
    return {
        "N": rng.choice([1.24e8, 3.5e8, 7.7e8, 1.5e9, 2.7e9, 6.7e9, 1.3e10, 3.0e10, 7.0e10]),
        "D": rng.choice([1e10, 2.6e10, 5e10, 1e11, 3e11, 6e11, 1.4e12, 2e12]),
    }


DRAW_FLOPS = drawn_until(lambda: [B_FLOPS], _stem_flops)
B_FLOPS: Part = Part(
    "Q_B3",
    stem="B-flops",
    statement="A GPT of N = {N} parameters is trained on D = {D} tokens. About how many FLOPs does the training "
    "take (forward and backward passes)?",
    lesson=STEM_FLOPS,
    draw=DRAW_FLOPS,
    answer=lambda p: 6 * p["N"] * p["D"],
    wrong=lambda p: [
        (2 * p["N"] * p["D"], "2 N per token is the forward pass alone; the backward pass costs twice as much: 6 N"),
        (4 * p["N"] * p["D"], "the forward pass is 2 N per token and the backward 4 N: 6 N in all"),
        (p["N"] * p["D"], "each parameter costs a multiply and an add (2 FLOPs) per token forward, 4 backward"),
        (6 * p["N"], "that is one token's FLOPs: multiply by the D tokens"),
    ],
    why="about 6 N FLOPs per token (2 N forward, 4 N backward) over D tokens: C = 6 N D",
    shown=lambda p: {"N": big(p["N"]), "D": big(p["D"])},
)

B_SIX = MultipleChoice(
    "Q_B4",
    answer="b",
    why="a weight takes part in one multiply-add per token forward (2 FLOPs); backward it needs the gradient for "
    "the activations and the one for the weight itself, twice the forward's work (4 FLOPs)",
    wrong={
        "a": "the 6 does not count layers: N already counts every parameter of every layer",
        "c": "the optimizer's step costs a few FLOPs per parameter per batch, not per token: it is left out",
        "d": "Adam's state is memory, not FLOPs per token",
    },
)

# ---------------------------------------------------------------- C: generation and its cache

STEM_C = {"n_layers": 12, "d_model": 768, "dtype": "float16", "length": 1024, "prompt": 10, "new": 20}


def _stem_c(rng: random.Random) -> Params:
    return {
        "n_layers": rng.choice([6, 12, 16, 24, 32, 36, 48]),
        "d_model": rng.choice([512, 768, 1024, 1280, 1600, 2048, 2560, 4096]),
        "dtype": rng.choice(list(DTYPE_BYTES)),
        "length": rng.choice([256, 512, 1024, 2048, 4096]),
        "prompt": rng.randint(3, 40),
        "new": rng.randint(5, 60),
    }


def cache_bytes(p: Params) -> float:
    return 2 * p["n_layers"] * p["d_model"] * DTYPE_BYTES[p["dtype"]] * p["length"]


def without_cache(p: Params) -> float:
    """Positions processed when each new token reruns the whole context: P, P + 1, ..., P + G - 1."""
    return p["new"] * p["prompt"] + p["new"] * (p["new"] - 1) // 2


def with_cache(p: Params) -> float:
    """The prompt once, then each new token but the last once: P + G - 1."""
    return p["prompt"] + p["new"] - 1


def _cache_mistakes(p: Params) -> list[tuple[float, str]]:
    want, size = cache_bytes(p), DTYPE_BYTES[p["dtype"]]
    return [
        (want / 2, "K and V are both cached: the factor 2 is missing"),
        (want / p["n_layers"], f"every layer keeps its own cache: multiply by the {p['n_layers']} layers"),
        (want / p["length"], "that is one token's cache: multiply by the sequence's tokens"),
        (want * 8, f"that counts bits: a {p['dtype']} number takes {size} bytes"),
        (want / size, f"a {p['dtype']} number takes {size} bytes, not 1"),
    ]


def _cache_apart(rng: random.Random) -> Params:
    """A stem whose cache mistakes are apart, and whose position counts' mistakes too (those are exact integers,
    so a smaller gap does: 29 and 30 are two answers)."""
    while True:
        p = _stem_c(rng)
        if apart(cache_bytes(p), [v for v, _ in _cache_mistakes(p)], 0.05):
            return p


DRAW_C = drawn_until(lambda: [C_WITHOUT, C_WITH], _cache_apart, gap=0.01)
C_BYTES: Part = Part(
    "Q_C1",
    stem="C",
    statement="A GPT with {n_layers} layers of width d_model = {d_model} (multi-head attention) generates with a KV "
    "cache in {dtype}. How many bytes does the cache hold for one sequence of {length:,} tokens?",
    lesson=STEM_C,
    draw=DRAW_C,
    answer=cache_bytes,
    wrong=_cache_mistakes,
    why="each token keeps a key and a value of d_model numbers (all heads together) in every layer: "
    "2 x n_layers x d_model x bytes per number x tokens",
)
C_WITHOUT: Part = Part(
    "Q_C2",
    stem="C",
    statement="The same model generates {new} new tokens greedily from a prompt of {prompt} tokens, the context "
    "never cropped. Without a cache each step runs the model on the whole context so far. How many positions "
    "does it process in all?",
    lesson=STEM_C,
    draw=DRAW_C,
    answer=without_cache,
    wrong=lambda p: [
        (p["new"] * (p["prompt"] + p["new"]), "the context grows by one per step: P, P + 1, ..., P + G - 1"),
        (p["new"] * p["prompt"], "the context grows by one token each step: add 0 + 1 + ... + (G - 1)"),
        (
            p["new"] * p["prompt"] + p["new"] * (p["new"] + 1) // 2,
            "the last new token is never fed back: the steps read P, P + 1, ..., P + G - 1 positions",
        ),
        (with_cache(p), "that is with the cache; without one every step reprocesses the whole context"),
    ],
    rtol=1e-9,
    wrong_rtol=1e-9,
    why="step k (from 0) runs the model on P + k positions: G P + G (G - 1) / 2 in all, quadratic in G",
)
C_WITH: Part = Part(
    "Q_C3",
    stem="C",
    statement="With a KV cache, the first step processes the prompt's {prompt} positions and every later step only "
    "the newest token. How many positions does generating the {new} tokens process in all?",
    lesson=STEM_C,
    draw=DRAW_C,
    answer=with_cache,
    wrong=lambda p: [
        (p["prompt"] + p["new"], "the last new token is only appended, never fed back: P + G - 1"),
        (p["new"], "the prompt's positions are processed too, once, in the first step"),
        (p["new"] - 1, "the prompt's positions are processed too, once, in the first step"),
        (without_cache(p), "that is without the cache: with one, each position is processed once"),
    ],
    rtol=1e-9,
    wrong_rtol=1e-9,
    why="the prompt once (P positions), then one position for each of the G - 1 tokens fed back: P + G - 1",
)
PARTS_C: list[Part] = [C_BYTES, C_WITHOUT, C_WITH]

# ---------------------------------------------------------------- D: Chinchilla

STEM_D = {"C": 5.88e23}


def _stem_d(rng: random.Random) -> Params:
    return {"C": rng.choice([1.0, 1.5, 2.0, 3.0, 4.5, 6.0, 8.0]) * 10 ** rng.randint(20, 25)}


def chinchilla_n(p: Params) -> float:
    return math.sqrt(p["C"] / 120)


DRAW_D = drawn_until(lambda: [D_PARAMS, D_TOKENS], _stem_d)
D_PARAMS: Part = Part(
    "Q_D1",
    stem="D",
    statement="A compute budget of C = {C} FLOPs. With C = 6 N D and Chinchilla's D = 20 N, how many parameters N "
    "should the model have?",
    lesson=STEM_D,
    draw=DRAW_D,
    answer=chinchilla_n,
    wrong=lambda p: [
        (math.sqrt(p["C"] / 6), "D = 20 N: C = 6 N x 20 N = 120 N^2, so N = sqrt(C / 120)"),
        (p["C"] / 120, "C = 120 N^2: take the square root of C / 120"),
        (math.sqrt(p["C"] / 20), "C = 6 N D = 6 N x 20 N = 120 N^2, so N = sqrt(C / 120)"),
        (20 * chinchilla_n(p), "that is D, the tokens; N is 20 times fewer"),
    ],
    why="D = 20 N turns C = 6 N D into C = 120 N^2: N = sqrt(C / 120)",
    shown=lambda p: {"C": big(p["C"])},
)
D_TOKENS: Part = Part(
    "Q_D2",
    stem="D",
    statement="For the same budget, C = {C} FLOPs, how many training tokens D?",
    lesson=STEM_D,
    draw=DRAW_D,
    answer=lambda p: 20 * chinchilla_n(p),
    wrong=lambda p: [
        (chinchilla_n(p), "that is N: Chinchilla trains on about 20 tokens per parameter"),
        (20 * math.sqrt(p["C"] / 6), "D = 20 N with N = sqrt(C / 120), from C = 6 N x 20 N"),
        (math.sqrt(p["C"] / 6), "D = 20 N, and N = sqrt(C / 120) (C = 120 N^2)"),
    ],
    why="D = 20 N = 20 sqrt(C / 120); check: 6 N D = 120 N^2 = C",
    shown=lambda p: {"C": big(p["C"])},
)
PARTS_D: list[Part] = [D_PARAMS, D_TOKENS]

D_GPT3 = MultipleChoice(
    "Q_D3",
    answer="a",
    why="300e9 / 175e9 is about 1.7 tokens per parameter, far below Chinchilla's 20: at that compute, "
    "C = 6 x 175e9 x 300e9 = 3.15e23, a model of sqrt(C / 120) = 51e9 parameters on about 1e12 tokens would do better",
    wrong={
        "b": "over-trained would mean many more than 20 tokens per parameter; GPT-3 had about 1.7",
        "c": "compute-optimal is about 20 tokens per parameter; GPT-3 had about 1.7",
        "d": "the rule needs only N and D (or the compute): 1.7 tokens per parameter is far below 20",
    },
)

DRAWN: list[Drawn] = [*PARTS_A, *PARTS_B, B_FLOPS, *PARTS_C, *PARTS_D]
FIXED: list[Question] = [A_WHY, B_SIX, D_GPT3]
IDS: list[str] = [
    "Q_A1",
    "Q_A2",
    "Q_A3",
    "Q_A4",
    "Q_A5",
    "Q_B1",
    "Q_B2",
    "Q_B3",
    "Q_B4",
    "Q_C1",
    "Q_C2",
    "Q_C3",
    "Q_D1",
    "Q_D2",
    "Q_D3",
]
assert sorted(IDS) == sorted([q.id for q in DRAWN] + [q.id for q in FIXED]), "IDS lists other questions"
REORDERED: list[Reordered] = [Shuffled(q.id, q.choices) for q in FIXED if isinstance(q, MultipleChoice)]


def question(question_id: str, variant: Variant) -> Question:
    """Question ``question_id`` as ``variant``'s student was asked it."""
    drawn = {q.id: q for q in DRAWN}
    if question_id in drawn:
        return drawn[question_id].marked(variant)
    return reordered(next(q for q in FIXED if q.id == question_id), variant, REORDERED)
