"""Variants for `concepts` (m12_concepts.py): the usual misunderstandings, each of which must cost points with a
message that teaches the point (not only "wrong"), and right answers written differently."""

import re

from helpers import bug, ok

M12 = "m12_concepts.py"
SUBTRACT = "    return _count(decoder) - _count(encoder)"
ONE_PASS = '    return F.cross_entropy(logits, seq[1:], reduction="none")'
LAST = "        last = model(seq[: t + 1].unsqueeze(0))[0, -1]"
TARGET = "        losses.append(F.cross_entropy(last.unsqueeze(0), seq[t + 1 : t + 2]))"
CHANGE = "    x2[-1] += 3.0  # only the last token changes"
ONE_TOO_MANY = "    idx = torch.zeros(1, model.T + 1, dtype=torch.long)"
PREFIX_LOOP = "    losses = []\n    for t in range(len(seq) - 1):\n" + LAST + "\n" + TARGET
PREFIX_BODY = PREFIX_LOOP + "\n    return torch.stack(losses)"
OVERFLOW_BODY = ONE_TOO_MANY + "\n    try:\n        model(idx)\n"


def answer(question: str, right: str, wrong: str, expect: str):
    """A wrong answer to one question, whose feedback must contain ``expect``."""
    letters = re.sub(r"\W+", "", wrong)
    name = f"{question.lower()}-answered-{letters}"
    return bug(name, "concepts", expect, M12, (right, wrong_line(right, wrong)))


def wrong_line(right: str, wrong: str) -> str:
    return f"{right.split(' = ')[0]} = {wrong}"


BUGGY = [
    # a library decoder layer against an encoder layer
    bug(
        "encoder-less-decoder",
        "concepts",
        "the decoder layer is the larger one",
        M12,
        (SUBTRACT, "    return _count(encoder) - _count(decoder)"),
    ),
    bug(
        "parameter-tensors-counted",
        "concepts",
        "parameter tensors",
        M12,
        (SUBTRACT, "    return len(list(decoder.parameters())) - len(list(encoder.parameters()))"),
        lost=3,
        first=True,
    ),
    bug(
        "norm3-without-its-bias",
        "concepts",
        "without its bias",
        M12,
        (SUBTRACT, "    return _count(decoder.multihead_attn) + decoder.norm3.weight.numel()"),
        lost=3,
        first=True,
    ),
    bug(
        "cross-attention-alone",
        "concepts",
        "a third LayerNorm (norm3",
        M12,
        (SUBTRACT, "    return _count(decoder.multihead_attn)"),
    ),
    # one pass per sequence: the targets, the positions
    bug(
        "targets-not-shifted",
        "concepts",
        "That trains a copier",
        M12,
        (ONE_PASS, '    return F.cross_entropy(logits, seq[:-1], reduction="none")'),
    ),
    bug(
        "one-mean-loss",
        "concepts",
        "reduction='none'",
        M12,
        (ONE_PASS, "    return F.cross_entropy(logits, seq[1:])"),
    ),
    bug(
        "prefix-first-position",
        "concepts",
        "at the prefix's last position",
        M12,
        (LAST, "        last = model(seq[: t + 1].unsqueeze(0))[0, 0]"),
    ),
    bug(
        "prefix-scored-against-its-own-last-token",
        "concepts",
        "the next one, seq[t + 1]",
        M12,
        (TARGET, "        losses.append(F.cross_entropy(last.unsqueeze(0), seq[t : t + 1]))"),
    ),
    # the right losses from the wrong passes: the model is counted, not only the values
    # the right values from the wrong passes lose the function's points on every model (3), and say why first
    bug(
        "prefix-losses-returns-the-one-pass-losses",
        "concepts",
        "run it once on each prefix",
        M12,
        (PREFIX_BODY, "    return teacher_forced_losses(model, seq)  # a causal model gives the same numbers"),
        lost=3,
        first=True,
    ),
    bug(
        "prefix-losses-reads-position-t-of-the-whole-sequence",
        "concepts",
        "passes on 1 to",
        M12,
        (LAST, "        last = model(seq[:-1].unsqueeze(0))[0, t]"),
        lost=3,
        first=True,
    ),
    bug(
        "teacher-forced-losses-one-pass-per-prefix",
        "concepts",
        "teacher forcing is ONE forward pass",
        M12,
        ("    logits = model(seq[:-1].unsqueeze(0))[0]\n" + ONE_PASS, "    return prefix_losses(model, seq)"),
        lost=3,
        first=True,
    ),
    # what the model was fed names the cause where the run ends in an error: the target inside its own prefix
    # (the last prefix is the whole sequence, one token past the lesson model's context), the whole sequence as
    # the one pass's input
    bug(
        "prefix-holds-its-own-target",
        "concepts",
        "holds the token it must predict",
        M12,
        (LAST, "        last = model(seq[: t + 2].unsqueeze(0))[0, -1]"),
        lost=3,
        first=True,
    ),
    bug(
        "teacher-forced-fed-the-whole-sequence",
        "concepts",
        "fed the whole sequence",
        M12,
        ("    logits = model(seq[:-1].unsqueeze(0))[0]", "    logits = model(seq.unsqueeze(0))[0]"),
        lost=3,
        first=True,
    ),
    # a loss below 0 (nll_loss takes log-probabilities), and a softmax over the wrong axis
    bug(
        "nll-loss-on-raw-logits",
        "concepts",
        "below 0",
        M12,
        (ONE_PASS, '    return F.nll_loss(logits, seq[1:], reduction="none")'),
        lost=3,
        first=True,
    ),
    bug(
        "log-softmax-over-the-positions",
        "concepts",
        "over the positions",
        M12,
        (ONE_PASS, "    return -F.log_softmax(logits, dim=0).gather(1, seq[1:, None]).squeeze(1)"),
        lost=3,
        first=True,
    ),
    bug(
        "prefix-log-softmax-over-one-position",
        "concepts",
        "an axis of size 1",
        M12,
        (TARGET, "        losses.append(-F.log_softmax(last[None], dim=0)[0, seq[t + 1]])"),
        lost=3,
        first=True,
    ),
    # the counterexample
    bug(
        "counterexample-changes-the-first-token",
        "concepts",
        "already differ at position 0",
        M12,
        (CHANGE, "    x2[0] += 3.0"),
    ),
    bug(
        "counterexample-changes-nothing", "concepts", "the two inputs are identical", M12, (CHANGE, "    x2[-1] += 0.0")
    ),
    bug("counterexample-too-small", "concepts", "moves by only", M12, (CHANGE, "    x2[-1] += 1e-7")),
    # the position table
    bug(
        "overflow-with-exactly-max-t",
        "concepts",
        "Give it model.T + 1 tokens",
        M12,
        (ONE_TOO_MANY, "    idx = torch.zeros(1, model.T, dtype=torch.long)"),
    ),
    # a name written in rather than read from the model: wrong for a model that stops with another exception, and
    # the message must not say which name is right
    bug(
        "overflow-returns-a-fixed-name",
        "concepts",
        "not a fixed name",
        M12,
        (OVERFLOW_BODY, "    return 'IndexError'  # what TinyGPT raises\n    try:\n        model(idx)\n"),
    ),
    # a hostile one: each model's name looked up by its class, with no run at all; the worker's count of what the
    # TinyGPT read fails it (a count only ever fails, and a function that ran the model has nothing to forge)
    bug(
        "overflow-names-looked-up-by-the-models-class",
        "concepts",
        "never read model.T + 1 tokens",
        M12,
        (
            OVERFLOW_BODY,
            '    return {"TinyGPT": "IndexError"}.get(type(model).__name__, "ValueError")\n'
            "    try:\n        model(idx)\n",
        ),
    ),
    # 1-D ids: TinyGPT stops reading idx.shape[1], with the right name by accident; the other model's check does not
    bug(
        "overflow-with-one-dimensional-ids",
        "concepts",
        "refused your input before it looked at the length",
        M12,
        (ONE_TOO_MANY, "    idx = torch.zeros(model.T + 1, dtype=torch.long)"),
    ),
    # the questions: each wrong answer gets the feedback that says what it misses
    answer("Q_BLOCK", 'Q_BLOCK = "a, b, c"', '"a, b, c, d"', "is what GPT removed"),
    answer("Q_FAMILIES", 'Q_FAMILIES = "d"', '"b"', "an encoder, not a decoder"),
    answer(
        "Q_CROSS",
        "Q_CROSS = 1_051_648  # cross-attention 4 d^2 + 4 d and a third LayerNorm 2 d",
        "1_050_624",
        "third LayerNorm (norm3)",
    ),
    answer("Q_PARALLEL", 'Q_PARALLEL = "c"', '"a"', "that is generation"),
    answer("Q_MASKED", "Q_MASKED = 523_776  # T (T - 1) / 2", "524_800", "counts the entries kept"),
    answer("Q_BUGLINE", "Q_BUGLINE = 2", "4", "is how cross_entropy takes them"),
    answer("Q_MASKDIR", 'Q_MASKDIR = "b"', '"a"', "not collapse to near 0"),
    answer("Q_SHAPE", 'Q_SHAPE = "a"', '"b"', "the hidden state"),
    answer("Q_MISSING", 'Q_MISSING = "b"', '"c"', "the context length is needed"),
    answer("Q_REVERSE", "Q_REVERSE = 64", "67", "not 12 d^2 per layer alone"),
    answer("Q_ABILITIES", 'Q_ABILITIES = "b"', '"c"', "nothing is fine-tuned"),
    answer("Q_FEWSHOT", 'Q_FEWSHOT = "d"', '"b"', "not training steps"),
    answer("Q_LIE", 'Q_LIE = "a"', '"c"', "true: Chinchilla"),
    answer("Q_LOSS0", "Q_LOSS0 = 3.912  # log 50", "5.64", "in bits"),
    answer("Q_WINDOW", "Q_WINDOW = 8", "9", "cropped to the last 8"),
    answer("Q_OMIT", 'Q_OMIT = "c"', '"d"', "skips each parameter whose .grad is None"),
    answer("Q_OVERFLOW", 'Q_OVERFLOW = "c"', '"a"', "nothing reuses a row"),
    answer("Q_PAD", "Q_PAD = 27", "32", "ignore_index leaves them out"),
    answer("Q_EXPOSURE", 'Q_EXPOSURE = "a"', '"b"', "teacher forcing is what training does"),
]

CORRECT = [
    ok(
        "concepts-written-differently",
        {
            M12: [
                (SUBTRACT, "    return 4 * d * d + 6 * d  # the cross-attention (4 d^2 + 4 d) and norm3 (2 d)"),
                (
                    "    logits = model(seq[:-1].unsqueeze(0))[0]\n" + ONE_PASS,
                    "    logits = model(seq[None, :-1]).squeeze(0)\n"
                    "    return -torch.log_softmax(logits, dim=-1).gather(1, seq[1:, None]).squeeze(1)",
                ),
                (
                    "    for t in range(len(seq) - 1):\n" + LAST + "\n" + TARGET,
                    "    for end in range(1, len(seq)):\n"
                    "        logits = model(seq[None, :end])[:, -1]\n"
                    "        losses.append(F.cross_entropy(logits, seq[end : end + 1]))",
                ),
                (
                    "    generator = torch.Generator().manual_seed(0)\n    x1 = torch.randn(T, d, generator=generator)",
                    "    x1 = torch.ones(T, d)",
                ),
                (CHANGE, "    x2[T - 1] = 10.0"),
                (ONE_TOO_MANY, "    idx = torch.arange(model.T + 1).unsqueeze(0) % 2"),
            ]
        },
    ),
    ok(
        "concepts-answers-in-other-forms",
        {
            M12: [
                ('Q_BLOCK = "a, b, c"', 'Q_BLOCK = ["C", "a", "B"]'),
                (
                    "Q_CROSS = 1_051_648  # cross-attention 4 d^2 + 4 d and a third LayerNorm 2 d",
                    'Q_CROSS = "1,051,648"',
                ),
                ("Q_LOSS0 = 3.912  # log 50", "Q_LOSS0 = 3.91"),
                ("Q_BUGLINE = 2", 'Q_BUGLINE = "2"'),
                ("Q_MASKED = 523_776  # T (T - 1) / 2", "Q_MASKED = 1024 * 1023 / 2"),
                ('Q_LIE = "a"', 'Q_LIE = "(A)"'),
            ]
        },
    ),
    # what the lesson's code prints for its first step (m3's first loss), which the question asks for
    ok("concepts-first-loss-as-the-lesson-prints-it", {M12: [("Q_LOSS0 = 3.912  # log 50", "Q_LOSS0 = 4.0511")]}),
]
