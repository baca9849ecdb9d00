"""concepts' check-yourself questions (m12_concepts.py): the lesson's ideas, with per-student numbers in six.

Hidden: it holds the answers. ``FIXED`` are multiple choice (and one line number), each option's feedback
saying what the option gets wrong; ``DRAWN`` are numeric, ``Drawn`` (grader/suites/bank.py): the lesson's
numbers in the stub and for a student grading alone, a student's own in a paper (``grade paper render``). A
draw is drawn again until the answer and every usual wrong answer are apart, so each mistake keeps its own
feedback. ``IDS`` is the stub's order. ``REORDERED``: the fixed questions each student of a paper is asked in
their own way all the same (bank.py): every multiple choice with options drawn from a hidden pool in the student's
own order (``Pooled``), and Q_BUGLINE with a listing drawn from a pool and numbered from the student's own first
line; the pools are in concept_pools.py.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from grader.milestones import GRADABLE
from grader.suites.bank import Drawn, Numbered, Params, Reordered, reordered
from grader.suites.hidden.concept_pools import BUGLINE, POOLS
from grader.suites.questions import ABOVE, MultipleChoice, Numeric, Question
from grader.variants import Variant

MILESTONE = "concepts"
(MODULE,) = GRADABLE[MILESTONE].modules  # m12_concepts


def where(notebook: bool) -> str:
    """Where the question is, for a submission that is a notebook or a folder of exercise files."""
    return ABOVE if notebook else f"{ABOVE}, in {MODULE}.py"


# ---------------------------------------------------------------- multiple choice and one line number

FIXED: list[Question] = [
    MultipleChoice(
        "Q_BLOCK",
        answer="abc",
        why="GPT keeps only the decoder stack of the original Transformer and drops what linked it to the encoder: "
        "a block is LN, causal self-attention, residual, then LN, feed-forward, residual",
        wrong={
            "abcd": "(d) is what GPT removed: with no encoder there is no memory to cross-attend to",
            "d": "cross-attention to an encoder's memory is exactly the sublayer GPT drops",
            "ab": "(c) holds too: without cross-attention two sublayers are left, each with its residual",
            "ac": "(b) holds too: the self-attention is masked so that a position sees only the past",
            "bc": "(a) holds too: a GPT block has no cross-attention at all",
        },
    ),
    MultipleChoice(
        "Q_FAMILIES",
        answer="d",
        why="BERT is an encoder (bidirectional, fills in masked tokens), GPT a decoder only (causal, next token), "
        "T5 an encoder-decoder (the decoder cross-attends to the encoded input)",
        wrong={
            "a": "GPT has no encoder; T5 is the one with both stacks joined by cross-attention",
            "b": "BERT reads in both directions and is trained to fill in masked tokens: an encoder, not a decoder",
            "c": "BERT has no decoder, and T5 has both stacks joined by cross-attention: only GPT is right there",
        },
    ),
    MultipleChoice(
        "Q_PARALLEL",
        answer="c",
        why="teacher forcing: the whole sequence is known during training, and the mask keeps each position from "
        "seeing the tokens it must predict, so one pass gives every position's loss",
        wrong={
            "a": "that is generation, where the next token is not known yet; in training every token is already "
            "there, and the mask lets all positions learn in one pass",
            "b": "every position has a target (the next token), and all of them count in the loss",
            "d": "the size of the model has nothing to do with it: the causal mask is what makes one pass enough",
        },
    ),
    MultipleChoice(
        "Q_ABILITIES",
        answer="b",
        why="examples in the prompt: few-shot prompting; an instruction to reason and no example: zero-shot "
        "chain of thought; learning the task from the context alone, no weight update: in-context learning",
        wrong={
            "a": "a prompt with solved examples is few-shot prompting, not chain of thought; "
            "'think step by step' with no example is zero-shot chain of thought",
            "c": "nothing is fine-tuned in any of the three: the weights never change, the context does all",
            "d": "zero-shot means no example at all: (1) shows three examples, so it is few-shot",
        },
    ),
    MultipleChoice(
        "Q_FEWSHOT",
        answer="d",
        why="few-shot prompting is only a longer input: the forward pass reads the examples, no gradient is "
        "computed and no weight changes",
        wrong={
            "a": "no weight changes at all: a prompt is read in a forward pass, and nothing is trained",
            "b": "few-shot examples are not training steps: no loss is backpropagated, no weight moves",
            "c": "the embeddings are read, not written: nothing in the model changes",
        },
    ),
    MultipleChoice(
        "Q_LIE",
        answer="a",
        why="emergent abilities were not trained with any objective of their own: they appeared with scale from "
        "next-token prediction, and they are fragile and sensitive to the prompt's wording",
        wrong={
            "b": "true: GPT-2's four sizes share one architecture, a context of 1024 and learned positions",
            "c": "true: Chinchilla grows parameters and tokens together, about 20 tokens per parameter",
            "d": "true: the feed-forward widens d_model to 4 d_model, then projects back",
        },
    ),
    MultipleChoice(
        "Q_MASKDIR",
        answer="b",
        why="a mask that lets a position see the next token turns prediction into copying: the loss collapses "
        "in training, but generation has no future to copy and produces rubbish",
        wrong={
            "a": "a learning rate too low makes the loss fall slowly, not collapse to near 0",
            "c": "a smaller model fits less, so its loss stays higher, not near 0",
            "d": "tying the head to the embeddings saves parameters; it lets no position see the future",
        },
    ),
    Numeric(
        "Q_BUGLINE",
        answer=2,
        why="targets must be the inputs shifted by one, data[:, 1:]: with data[:, :-1] each position is asked "
        "for its own input token, and the model learns to copy",
        wrong={
            1: "the inputs are right: every token but the last, data[:, :-1]",
            3: "the forward pass is right: the model maps (B, T-1) ids to (B, T-1, V) logits",
            4: "flattening logits to (B (T-1), V) and targets to (B (T-1),) is how cross_entropy takes them",
            5: "zero_grad, backward, step is the right order",
        },
    ),
    MultipleChoice(
        "Q_OMIT",
        answer="c",
        why="without backward no gradient is ever computed, and an optimiser step skips a parameter without "
        "one: the weights, and the loss, stay where they started",
        wrong={
            "a": "nothing can fall: without backward there is no gradient for step to follow",
            "b": "nothing diverges: no gradient means no update at all",
            "d": "step() raises nothing: it skips each parameter whose .grad is None",
        },
    ),
    MultipleChoice(
        "Q_EXPOSURE",
        answer="a",
        why="exposure bias: trained on true prefixes (teacher forcing), the model generates from its own, and "
        "an early mistake puts it in contexts it never saw in training",
        wrong={
            "b": "teacher forcing is what training does; generation feeds the model its own tokens",
            "c": "the mask is the same in training and generation; what changes is where the input tokens come from",
            "d": "the gradient does not flow at generation time at all: nothing is trained then",
        },
    ),
    MultipleChoice(
        "Q_OVERFLOW",
        answer="c",
        why="the learned position table has max_T rows, 0 to max_T - 1: position 8 has no row, so the lookup "
        "fails; generation crops its input to the last max_T tokens for this reason",
        wrong={
            "a": "nothing reuses a row: the embedding lookup of position 8 fails",
            "b": "the mask is made for the input's length; nothing crops inside the model (generate crops first)",
            "d": "it does not run at all: there is no learned vector for position 8",
        },
    ),
    MultipleChoice(
        "Q_MISSING",
        answer="b",
        why="the heads split d into n_heads slices of d / n_heads: qkv is d x 3d and proj d x d whatever the "
        "number of heads, so the count never depends on it",
        wrong={
            "a": "the token table and the head are vocab x d each: the vocabulary is needed",
            "c": "the position table has a row per position: the context length is needed",
            "d": "each layer adds 12 d^2 + 13 d parameters: the number of layers is needed",
        },
    ),
    MultipleChoice(
        "Q_SHAPE",
        answer="a",
        why="the model gives scores over the whole vocabulary at every position: (B, t, vocab_size)",
        wrong={
            "b": "(B, t, d) is the hidden state before the final LayerNorm and the head",
            "c": "every position predicts its next token, not only the last: the logits keep the position axis",
            "d": "(t, t) is the shape of one head's attention weights, not of the logits",
        },
    ),
]


# ---------------------------------------------------------------- numbers drawn per student


def _until(make: Callable[[random.Random], Params], question: Drawn, apart: float) -> Callable[[random.Random], Params]:
    """A draw: ``make(rng)`` again until the answer and every usual wrong answer are at least ``apart`` (relative)
    from each other, so that each mistake keeps its own feedback (a few tries; the draw stays seeded)."""

    def draw(rng: random.Random) -> Params:
        for _ in range(1000):
            params = make(rng)
            if question.distinct(params, apart):
                return params
        raise AssertionError(f"{question.id}: no numbers drawn in 1,000 tries keep the usual mistakes apart")

    return draw


def cross_extra(p: Params) -> int:
    """What nn.TransformerDecoderLayer adds to nn.TransformerEncoderLayer: the cross-attention (in_proj
    3 d^2 + 3 d, out_proj d^2 + d) and a third LayerNorm (2 d)."""
    d = p["d"]
    return 4 * d * d + 6 * d


def encoder_layer(p: Params) -> int:
    d, ff = p["d"], p["d_ff"]
    return (4 * d * d + 4 * d) + (2 * d * ff + ff + d) + 4 * d


def cross_mistakes(p: Params) -> list[tuple[float, str]]:
    d = p["d"]
    return [
        (4 * d * d + 4 * d, "the decoder layer also has a third LayerNorm (norm3), 2 d more"),
        (
            4 * d * d,
            "count the biases too: the cross-attention's in_proj_bias (3 d) and out_proj.bias (d), "
            "and the third LayerNorm's 2 d",
        ),
        (3 * d * d + 5 * d, "the cross-attention has an output projection too, d^2 + d"),
        (encoder_layer(p) + cross_extra(p), "that is the whole decoder layer: subtract the encoder layer's count"),
    ]


def _cross(rng: random.Random) -> Params:
    d = rng.choice([96, 128, 192, 256, 320, 384, 448, 512, 640, 768, 1024])
    return {
        "d": d,
        "n_heads": rng.choice([h for h in (2, 4, 6, 8, 12, 16) if d % h == 0]),
        "d_ff": d * rng.choice([2, 3, 4]),
    }


CROSS: Drawn = Drawn(
    "Q_CROSS",
    statement="Predict, then check with decoder_layer_extra: how many more parameters does "
    "nn.TransformerDecoderLayer({d}, {n_heads}, {d_ff}) have than nn.TransformerEncoderLayer({d}, {n_heads}, "
    "{d_ff})?",
    lesson={"d": 512, "n_heads": 8, "d_ff": 2048},
    draw=lambda rng: CROSS_DRAW(rng),
    answer=cross_extra,
    wrong=cross_mistakes,
    why="the extra is the cross-attention, 4 d^2 + 4 d, and a third LayerNorm, 2 d: 4 d^2 + 6 d, whatever the "
    "heads and the feed-forward width",
    rtol=1e-6,
    wrong_rtol=1e-4,
)
CROSS_DRAW: Callable[[random.Random], Params] = _until(_cross, CROSS, 1e-4)


def loss_mistakes(p: Params) -> list[tuple[float, str]]:
    v = p["vocab"]
    return [
        (math.log2(v), "that is in bits (log base 2): cross_entropy uses the natural log"),
        (math.log10(v), "that is log base 10: cross_entropy uses the natural log"),
        (float(v), "the loss is minus the log of the probability 1/V, not V itself"),
        (1 / v, "1/V is the probability each token gets; the loss is minus its log"),
    ]


# The first step prints log V for equal logits, and a little more for a fresh model's: its logits are small but
# not all equal, and their spread raises the mean loss above log V (the lesson's TinyGPT prints 4.0511 against
# log 50 = 3.912, 3.6% above; other vocabularies and seeds up to about 9%). Right is therefore a band from just
# below log V to 10% above it. Numeric's tolerance, and the locked answers' relative grid, are symmetric about the
# answer: the band is written as its centre and half-width.
LOSS0_BELOW, LOSS0_ABOVE = 0.02, 0.10


def first_loss(p: Params) -> float:
    """The centre of the band of first losses taken as right (``LOSS0_BELOW`` below log V to ``LOSS0_ABOVE``
    above it)."""
    return math.log(p["vocab"]) * (1 + (LOSS0_ABOVE - LOSS0_BELOW) / 2)


LOSS0: Drawn = Drawn(
    "Q_LOSS0",
    statement="Predict before you train: a freshly initialised GPT with a vocabulary of {vocab:,} tokens gives "
    "every token nearly the same logit. About what cross-entropy loss (natural log) will its first step print?",
    lesson={"vocab": 50},
    draw=lambda rng: LOSS0_DRAW(rng),
    answer=first_loss,
    wrong=loss_mistakes,
    why="equal logits give each token probability 1/V, and the loss is -log(1/V) = log V. A fresh model's logits "
    "are small but not all equal, and their spread raises the expected loss a little above log V (the lesson's "
    "TinyGPT prints 4.0511 against log 50 = 3.912), so log V or what your code prints is right, up to 10% above "
    "log V; a first loss far above log V means the initialisation is too large",
    rtol=(LOSS0_ABOVE + LOSS0_BELOW) / (2 + LOSS0_ABOVE - LOSS0_BELOW),  # the band's half-width over its centre
)
LOSS0_DRAW: Callable[[random.Random], Params] = _until(
    lambda rng: {"vocab": rng.choice([27, 37, 65, 96, 128, 256, 512, 1000, 4096, 8192, 32000, 50257, 65536])},
    LOSS0,
    0.05,
)


def masked_mistakes(p: Params) -> list[tuple[float, str]]:
    t = p["T"]
    return [
        (t * (t + 1) / 2, "that counts the entries kept (on and below the diagonal); the mask discards the rest"),
        (t * t / 2, "the diagonal is kept: each position attends to itself"),
        (float(t * t), "only the entries above the diagonal are discarded"),
    ]


MASKED: Drawn = Drawn(
    "Q_MASKED",
    statement="What the mask costs: with a context of {T:,} tokens, one head computes a {T:,} x {T:,} matrix of "
    "attention scores. How many of those scores does the causal mask throw away (set to -inf)?",
    lesson={"T": 1024},
    draw=lambda rng: MASKED_DRAW(rng),
    answer=lambda p: p["T"] * (p["T"] - 1) / 2,
    wrong=masked_mistakes,
    why="the entries above the diagonal: T (T - 1) / 2, almost half of the T^2 scores computed",
    rtol=1e-6,
    wrong_rtol=1e-4,
)
MASKED_DRAW: Callable[[random.Random], Params] = _until(
    lambda rng: {"T": rng.choice([8, 12, 16, 50, 64, 100, 128, 256, 512, 2048, 4096])}, MASKED, 1e-4
)


def pad_mistakes(p: Params) -> list[tuple[float, str]]:
    return [
        (float(p["rows"] * p["length"]), "the padded targets do not count: ignore_index leaves them out of the mean"),
        (float(p["pads"]), "that is the number of padded targets: the mean is over the others"),
        (float(p["length"] - p["pads"]), "every row has its own targets: multiply the row length by the rows first"),
    ]


def _pad(rng: random.Random) -> Params:
    rows, length = rng.choice([2, 3, 4, 5, 6, 8, 12, 16]), rng.choice([6, 8, 10, 12, 16, 24, 32, 64])
    return {"rows": rows, "length": length, "pads": rng.randint(1, rows * length // 2)}


PAD: Drawn = Drawn(
    "Q_PAD",
    statement="A batch of {rows} sequences is padded so that each has {length} targets; {pads} of the "
    "targets are padding. The loss is cross_entropy with ignore_index set to the padding id: over how many "
    "targets is its mean taken?",
    lesson={"rows": 4, "length": 8, "pads": 5},
    draw=lambda rng: PAD_DRAW(rng),
    answer=lambda p: p["rows"] * p["length"] - p["pads"],
    wrong=pad_mistakes,
    why="every target but the padded ones: rows x length - padded",
    rtol=1e-6,
    wrong_rtol=1e-4,
)
PAD_DRAW: Callable[[random.Random], Params] = _until(_pad, PAD, 0.01)


def window_mistakes(p: Params) -> list[tuple[float, str]]:
    t, prompt, n = p["T"], p["prompt"], p["n"]
    held = prompt + n - 1  # the prompt and the new tokens before number n
    mistakes = [
        (float(prompt + n), "new token number n is not in the input yet: the prompt and the n - 1 before it are"),
        (float(prompt), "each new token is appended to the input before the next step"),
    ]
    if held > t:  # cropped: the whole sequence is the mistake
        return [(float(held), f"the model reads at most {t} tokens: the input is cropped to the last {t}"), *mistakes]
    # not cropped yet: the full context is the mistake
    return [
        (
            float(t),
            f"the sequence holds only {held} tokens so far: cropping to the last {t} keeps them all, and the "
            "model reads what there is",
        ),
        *mistakes,
    ]


def _window(rng: random.Random) -> Params:
    """Half the students pick a token after the sequence outgrew the context (the answer is T), half one before
    (the answer is the prompt and the new tokens so far): both regimes of cropping are asked."""
    t = rng.choice([8, 16, 32, 64, 128, 256])
    prompt = rng.randint(1, t - 3)
    cropped = rng.random() < 0.5
    n = rng.randint(t - prompt + 2, t + 8) if cropped else rng.randint(2, t - prompt - 1)
    return {"T": t, "prompt": prompt, "n": n}


WINDOW: Drawn = Drawn(
    "Q_WINDOW",
    statement="A GPT with a context of {T} tokens generates greedily from a prompt of {prompt} tokens, cropping "
    "its input as m4's generate does. How many tokens does the model read when it picks new token number {n}?",
    lesson={"T": 8, "prompt": 3, "n": 7},
    draw=lambda rng: WINDOW_DRAW(rng),
    answer=lambda p: min(p["prompt"] + p["n"] - 1, p["T"]),
    wrong=window_mistakes,
    why="before new token n the sequence holds the prompt and n - 1 new tokens; the model reads them all while "
    "they fit its context of T, and the last T once they outgrow it",
    rtol=1e-6,
    wrong_rtol=1e-4,
)
WINDOW_DRAW: Callable[[random.Random], Params] = _until(_window, WINDOW, 1e-3)


def tinygpt_parameters(vocab: int, d: int, n_layers: int, max_t: int) -> int:
    """TinyGPT with an untied head: token and position tables, 12 d^2 + 13 d per block, final LayerNorm, head."""
    return vocab * d + max_t * d + n_layers * (12 * d * d + 13 * d) + 2 * d + vocab * d


def _reverse(rng: random.Random) -> Params:
    params = {
        "vocab": rng.choice([27, 50, 65, 96, 128, 256, 512, 1000]),
        "T": rng.choice([8, 16, 32, 64, 128, 256]),
        "n_layers": rng.choice([1, 2, 3, 4, 6, 8]),
        "d": rng.choice([16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256]),
    }
    params["N"] = tinygpt_parameters(params["vocab"], params["d"], params["n_layers"], params["T"])
    return params


def reverse_mistakes(p: Params) -> list[tuple[float, str]]:
    # a width read off the count as if it were all 12 d^2 per layer (the quadratic term alone)
    rough = math.sqrt(p["N"] / (12 * p["n_layers"]))
    return (
        []
        if abs(rough - p["d"]) < 1
        else [
            (
                rough,
                "the count is not 12 d^2 per layer alone: solve the whole "
                "quadratic, with the biases, LayerNorms, tables and head",
            )
        ]
    )


REVERSE: Drawn = Drawn(
    "Q_REVERSE",
    statement="Reverse engineering: a TinyGPT (m2's, untied head) with a vocabulary of {vocab}, a context of {T} "
    "and {n_layers} layers has {N:,} parameters. What is its width d?",
    lesson={"vocab": 50, "T": 8, "n_layers": 2, "d": 64, "N": 107_008},
    draw=lambda rng: REVERSE_DRAW(rng),
    answer=lambda p: p["d"],
    wrong=reverse_mistakes,
    why="N = 2 V d + T d + L (12 d^2 + 13 d) + 2 d: solve 12 L d^2 + (2 V + T + 13 L + 2) d - N = 0 for d > 0",
    rtol=1e-3,
    shown=lambda p: {k: v for k, v in p.items() if k != "d"},
)
REVERSE_DRAW: Callable[[random.Random], Params] = _until(_reverse, REVERSE, 0.01)

DRAWN: list[Drawn] = [CROSS, LOSS0, MASKED, PAD, WINDOW, REVERSE]
IDS: list[str] = [
    "Q_BLOCK",
    "Q_FAMILIES",
    "Q_CROSS",
    "Q_PARALLEL",
    "Q_MASKED",
    "Q_BUGLINE",
    "Q_MASKDIR",
    "Q_SHAPE",
    "Q_MISSING",
    "Q_REVERSE",
    "Q_ABILITIES",
    "Q_FEWSHOT",
    "Q_LIE",
    "Q_LOSS0",
    "Q_WINDOW",
    "Q_OMIT",
    "Q_OVERFLOW",
    "Q_PAD",
    "Q_EXPOSURE",
]
assert sorted(IDS) == sorted([q.id for q in FIXED] + [q.id for q in DRAWN]), "IDS lists every question once"

# The fixed questions a paper asks each student in their own way: the release's locked answers hold the lesson's
# letters, options and listing, none of which a paper's student is shown (options and listings drawn from hidden
# pools, concept_pools.py).
REORDERED: list[Reordered] = [*POOLS, Numbered("Q_BUGLINE", lines=5, pool=BUGLINE)]
assert sorted(p.id for p in POOLS) == sorted(q.id for q in FIXED if isinstance(q, MultipleChoice)), "a pool each"


def question(question_id: str, variant: Variant) -> Question:
    """Question ``question_id`` as ``variant``'s student was asked it."""
    drawn = {q.id: q for q in DRAWN}
    if question_id in drawn:
        return drawn[question_id].marked(variant)
    return reordered(next(q for q in FIXED if q.id == question_id), variant, REORDERED)
