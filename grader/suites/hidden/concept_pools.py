"""concepts' option pools: what a paper's student is shown in place of the stub's options and listing.

Hidden, as the rest of the bank: the release holds the lesson's options and key, and a paper's student is shown
options drawn from here only (grader/suites/bank.py ``Pooled``), never the lesson's own words, so the key found in
the release's locks cannot be carried across by its words. Each pool has right statements and wrong ones of one
kind and length, the wrong ones sharing the right ones' words (a family against another, a mask one way against
the other), so that neither the longest option nor the words of the lesson's key point at a right one. Every
feedback names no letter: the options are drawn, and a student's letters are their own.

``BUGLINE``: listings of the same training step, each wrong on a line of its own (bank.py ``Listing``).
"""

from __future__ import annotations

from grader.suites.bank import Listing, Option, Pooled


def _options(*pairs: tuple[str, str]) -> tuple[Option, ...]:
    return tuple(Option(text, feedback) for text, feedback in pairs)


POOLS: list[Pooled] = [
    Pooled(
        "Q_BLOCK",
        several=True,
        why="GPT keeps the decoder stack alone and drops what linked it to an encoder: a block is LayerNorm, causal "
        "self-attention, residual, then LayerNorm, a feed-forward 4 d wide, residual",
        right=_options(
            (
                "its self-attention is masked, so a position sees itself and earlier ones only",
                "the causal mask hides every later position",
            ),
            (
                "it never cross-attends: there is no encoder output for it to attend to",
                "GPT has no encoder, so the sublayer that read one is gone",
            ),
            (
                "each of its two sublayers, attention and feed-forward, sits inside a residual",
                "x + attn(LN(x)), then x + FFN(LN(x)): a residual around each sublayer",
            ),
            (
                "its feed-forward widens each position to 4 d, then projects it back to d",
                "Linear(d, 4 d), GELU, Linear(4 d, d): the 4x expansion of every GPT-2 size",
            ),
            (
                "its output has the same shape as its input, so that blocks can be stacked",
                "each sublayer maps d to d and is added back: a block keeps (B, T, d), so blocks stack",
            ),
        ),
        wrong=_options(
            (
                "its self-attention is unmasked, so a position sees the whole sequence",
                "that is an encoder's attention (BERT's); GPT's is causal",
            ),
            (
                "it cross-attends to an encoder's output after its own self-attention",
                "cross-attention to an encoder is exactly what GPT drops: it has no encoder",
            ),
            (
                "it has three sublayers: self-attention, cross-attention and feed-forward",
                "three is the original decoder's count; without cross-attention GPT's block has two",
            ),
            (
                "its feed-forward narrows each position to d / 4, then projects it back to d",
                "the feed-forward widens, to 4 d, before it projects back",
            ),
            (
                "a LayerNorm comes only after the last block, and none inside the blocks",
                "each sublayer has a LayerNorm before it (pre-norm); the final one is added after the blocks",
            ),
        ),
    ),
    Pooled(
        "Q_FAMILIES",
        asked="Which statement puts a model in its right family?",
        right=_options(
            (
                "BERT is an encoder only: each position reads the whole input",
                "BERT is bidirectional and fills in masked tokens: an encoder",
            ),
            (
                "GPT is a decoder only: each position reads only itself and the positions before it",
                "GPT is causal and predicts the next token: a decoder with no encoder",
            ),
            (
                "T5 is an encoder-decoder: its decoder cross-attends to the encoded input",
                "T5 keeps both stacks of the original Transformer, joined by cross-attention",
            ),
        ),
        wrong=_options(
            (
                "BERT is a decoder only: each position reads itself and the positions before it",
                "BERT reads in both directions: an encoder, not a decoder",
            ),
            (
                "GPT is an encoder only: each position reads the whole input, both ways",
                "GPT is causal: no position reads the ones after it; it is a decoder only",
            ),
            (
                "T5 is a decoder only, with no encoder at all",
                "T5 has both stacks: its decoder cross-attends to what its encoder made of the input",
            ),
            (
                "GPT is an encoder-decoder: its decoder cross-attends to the encoded prompt",
                "GPT has no encoder, so nothing to cross-attend to: it is a decoder only",
            ),
            (
                "BERT is an encoder-decoder: its decoder fills in the masked input tokens",
                "BERT has no decoder: its encoder itself predicts the masked tokens",
            ),
        ),
    ),
    Pooled(
        "Q_PARALLEL",
        right=_options(
            (
                "in one pass: the targets are known, the mask hides each future",
                "teacher forcing: every target is known, and the causal mask hides each position's future",
            ),
            (
                "one pass over the sequence: each position is scored against its own next true token",
                "the targets are the inputs shifted by one, all known, so one masked pass scores them all",
            ),
            (
                "by teacher forcing: true text is fed to it, so a single masked run scores all of its tokens",
                "training never waits for a prediction: the true text is fed, and the mask hides the future",
            ),
        ),
        wrong=_options(
            (
                "one forward pass per position: the mask hides each position's future, so each one needs its own",
                "the mask is what makes one pass enough: it hides each position's future within that pass",
            ),
            (
                "a single pass, but only the last position is scored: the others have no target at all",
                "every position has a target, the next token, and each of them counts in the loss",
            ),
            (
                "one pass for a small model; a large one is scored a position at a time",
                "the size of the model has nothing to do with it: the causal mask makes one pass enough",
            ),
            (
                "T passes, one per prefix, since no mask can hide a position's future within one pass",
                "hiding the future within one pass is what the mask does: the scores above the diagonal are -inf",
            ),
            (
                "a single unmasked pass: each target is dropped from the input before it is scored",
                "nothing is dropped: without the mask a position would read its target; the mask hides it",
            ),
        ),
    ),
    Pooled(
        "Q_ABILITIES",
        asked="Three prompts: (1) three solved examples, then a new input; (2) a question followed by \"Let's think "
        'step by step", with no example; (3) a model that picks up a new task from its context alone, with no weight '
        "update. Which statement names one of them rightly?",
        right=_options(
            (
                "(1) is few-shot prompting: solved examples in the context, and no weight update at all",
                "examples in the prompt, read and never trained on: few-shot prompting",
            ),
            (
                "(2) is zero-shot chain of thought: a cue to reason, and no example",
                "an instruction to reason step by step with no example: zero-shot chain of thought",
            ),
            (
                "(3) is in-context learning: the task is learnt from its context, not trained",
                "learning a task from the context alone, the weights unchanged: in-context learning",
            ),
        ),
        wrong=_options(
            (
                "(1) is zero-shot chain of thought: solved examples, and no instruction to reason",
                "zero-shot means no example, and (1) has three: it is few-shot prompting",
            ),
            (
                "(2) is few-shot prompting: the instruction stands in for the solved examples",
                "few-shot means examples in the prompt, and (2) has none: it is zero-shot chain of thought",
            ),
            (
                "(2) is few-shot chain of thought: a cue to reason",
                "few-shot means examples in the prompt, and (2) has none: it is zero-shot chain of thought",
            ),
            (
                "(1) is zero-shot prompting: the new input comes with no instruction of its own",
                "zero-shot means no example at all, and (1) has three: few-shot prompting",
            ),
            (
                "(2) is in-context learning: the steps of reasoning are shown to it in full",
                "(2) shows no example at all: an instruction to reason is zero-shot chain of thought",
            ),
        ),
    ),
    Pooled(
        "Q_FEWSHOT",
        right=_options(
            (
                "nothing changed: they were only read, in a forward pass that computes no gradient at all",
                "few-shot prompting is only a longer input: no gradient is computed, no weight changes",
            ),
            (
                "they stayed as they were: the examples shaped only that pass's activations",
                "the examples change what the model computes on this input, never its weights",
            ),
            (
                "no loss was backpropagated, so no weight moved",
                "a prompt is read, not trained on: without a backward pass there is no update",
            ),
        ),
        wrong=_options(
            (
                "they were read in a forward pass, and the last layer was nudged toward the examples",
                "no weight moves: a prompt is read in a forward pass, and nothing is trained",
            ),
            (
                "a gradient step was taken on each example",
                "few-shot examples are not training steps: no loss is backpropagated",
            ),
            (
                "only the embeddings moved: they were read, then updated, in the forward pass",
                "the embeddings are read, not written: nothing in the model changes",
            ),
            (
                "the query and key projections of every layer were tuned to the examples",
                "the projections stay as trained; only the attention over this input differs",
            ),
            (
                "a low-rank update was fitted to the examples and added to the weights",
                "that is fine-tuning with adapters; a prompt trains nothing",
            ),
        ),
    ),
    Pooled(
        "Q_LIE",
        right=_options(
            (
                "chain of thought was trained into GPT-3 with an objective of its own, on examples",
                "the lie: no ability had an objective of its own; they appeared with scale from next-token prediction",
            ),
            (
                "Chinchilla's rule is about 20 parameters per training token",
                "the lie: the rule is about 20 tokens per parameter, parameters and tokens growing together",
            ),
            (
                "GPT-2's four sizes each have a context length of their own, a longer one for a larger size",
                "the lie: the four sizes share one architecture and a context of 1024",
            ),
        ),
        wrong=_options(
            (
                "GPT-2's four sizes share one architecture, a context of 1024 and learned positions",
                "true: only the depth, the width and the heads change from size to size",
            ),
            (
                "Chinchilla scales parameters and tokens as one, about 20 tokens per parameter",
                "true: about 20 training tokens per parameter, both scaled together",
            ),
            (
                "the feed-forward widens each position to 4 d_model, then projects back",
                "true: Linear(d, 4 d), GELU, Linear(4 d, d) in every GPT-2 size",
            ),
            (
                "few-shot prompting and chain of thought emerged in GPT-3 with no training objective of their own",
                "true: they appeared with scale, from next-token prediction alone",
            ),
            (
                "emergent abilities such as chain of thought are fragile and sensitive to the wording",
                "true: a change in the prompt's wording can make them vanish",
            ),
        ),
    ),
    Pooled(
        "Q_MASKDIR",
        right=_options(
            (
                "a mask that lets each position see the very token it is asked to predict",
                "seeing the next token turns prediction into copying: the loss collapses, and generation, with no "
                "future to copy, is rubbish",
            ),
            (
                "a mask made with triu where tril was meant, so that attention reads every future token",
                "the wrong triangle lets every position read what follows it: the model copies its target",
            ),
            (
                "no causal masking at all: attention reads the full sequence",
                "with no mask each position reads its target: the loss collapses in training only",
            ),
        ),
        wrong=_options(
            (
                "a learning rate too low for the loss to move far from where it started",
                "a learning rate too low makes the loss fall slowly, not collapse to near 0",
            ),
            (
                "too few layers and heads for the model to fit the real text it is trained on",
                "a smaller model fits less, so its loss stays higher, not near 0",
            ),
            (
                "a head tied to the token table, sharing its weights with the token embeddings",
                "tying the head saves parameters; it lets no position see the future",
            ),
            (
                "dropout left on during generation, so each token is noisy",
                "dropout at generation blurs predictions a little; it cannot drive the training loss to 0",
            ),
            (
                "a mask letting each position see only the tokens before it, not its own",
                "hiding a position from itself makes prediction harder (position 0 has nothing to read), "
                "never a copy of its target",
            ),
        ),
    ),
    Pooled(
        "Q_OMIT",
        right=_options(
            (
                "about as at the outset: every .grad is None, so the optimiser skips each parameter",
                "without backward no gradient is computed, and an optimiser step skips a parameter without one",
            ),
            (
                "where it started: with no gradient, no weight moves",
                "no gradient, no update: the weights, and the loss, stay where they started",
            ),
            (
                "where it started: the weights never move, as step() has nothing to apply",
                "zero_grad clears the gradients and nothing computes new ones: step() changes no weight",
            ),
        ),
        wrong=_options(
            (
                "lower, but falling slowly: step() still nudges every weight a little",
                "nothing can fall: without backward there is no gradient for step() to follow",
            ),
            (
                "NaN: step() divides by a gradient norm of zero, and every one of the weights then diverges",
                "nothing diverges: a parameter without a gradient is skipped, not updated",
            ),
            (
                "never printed: step() stops with an error, as the gradients are missing",
                "step() raises nothing: it skips each parameter whose .grad is None",
            ),
            (
                "below where it started: with no gradient, step() falls back on its momentum",
                "there is no momentum either: an optimiser's state is made only by a step with a gradient",
            ),
            (
                "above where it started: with no gradient, step() applies weight decay alone",
                "AdamW decays only a parameter with a gradient, and none has one: nothing moves",
            ),
        ),
    ),
    Pooled(
        "Q_EXPOSURE",
        right=_options(
            (
                "in training, true prefixes; in generation, its own outputs",
                "exposure bias: trained on true text (teacher forcing), the model generates from its own",
            ),
            (
                "in generation the input holds the model's own tokens, not the true text it was trained on",
                "generation feeds back each sampled token: an early mistake stays in the context",
            ),
            (
                "one early slip snowballs: later steps build on contexts never seen while learning",
                "training only ever shows true prefixes; its own errors make contexts it never saw",
            ),
        ),
        wrong=_options(
            (
                "generation uses teacher forcing on the true tokens; training feeds the model its own outputs",
                "the other way round: teacher forcing is what training does",
            ),
            (
                "the causal mask points the other way in generation, toward the tokens still to come",
                "the mask is the same in both; what changes is where the input tokens come from",
            ),
            (
                "while generating, gradients flow back through every token it samples",
                "nothing is trained while generating: no gradient flows at all",
            ),
            (
                "training reads the model's own outputs, mistakes and all; generation reads true prefixes",
                "the other way round: training reads true text, generation its own outputs",
            ),
            (
                "generation scores every position in one pass; training goes token by token",
                "the other way round: training scores all positions in one pass, generation goes token by token",
            ),
        ),
    ),
    Pooled(
        "Q_OVERFLOW",
        right=_options(
            (
                "an error: the position table has just 8 rows, and position 8 has no row",
                "the learned position table has rows 0 to 7: the lookup of position 8 fails",
            ),
            (
                "it fails: the lookup of position 8 falls outside the learned position table",
                "max_T rows, positions 0 to max_T - 1: there is no vector for position 8",
            ),
            (
                "it stops: the 9th token's position has no learned vector",
                "the table holds positions 0 to max_T - 1; generate crops its input to the last max_T for this reason",
            ),
        ),
        wrong=_options(
            (
                "it runs: position 8 reuses the table's last row, the one of position 7",
                "nothing reuses a row: the lookup of position 8 fails",
            ),
            (
                "it runs: the mask cuts the input to the last 8 tokens, before the blocks",
                "nothing crops inside the model; generate crops before it calls the model",
            ),
            (
                "it runs, with worse predictions at position 8 than at others",
                "it does not run at all: there is no learned vector for position 8",
            ),
            (
                "it runs: position 8 wraps around to row 0",
                "no index wraps: a lookup outside the table fails",
            ),
            (
                "it runs: the position table has rows for positions 0 to 8, one per token",
                "max_T = 8 rows are positions 0 to 7: the lookup of position 8 fails",
            ),
        ),
    ),
    Pooled(
        "Q_MISSING",
        right=_options(
            (
                "how many attention heads it has",
                "heads split d into slices: qkv is d x 3d and proj d x d whatever their number",
            ),
            (
                "the number of attention heads d is split into",
                "however d is split, qkv is d x 3d and proj d x d: the split does not count",
            ),
            (
                "the training batch size",
                "the batch is data, not weights: no parameter depends on it",
            ),
        ),
        wrong=_options(
            ("the vocabulary's size, V", "the token table and the head are vocab x d each"),
            ("the length of the context, max_T", "the position table has a row per position"),
            ("how many layers it stacks", "each layer adds 12 d^2 + 13 d parameters"),
            ("the model's width, d", "every table and every layer grows with d"),
            ("the number of rows of the token table", "that is the vocabulary: the token table and the head use it"),
        ),
    ),
    Pooled(
        "Q_SHAPE",
        asked="Predict before running: TinyGPT(vocab_size, d, n_heads, n_layers, max_T) on (B, t) token ids returns "
        "logits. Which statement about their shape holds?",
        right=_options(
            (
                "its last axis has vocab_size entries, one per token",
                "the head maps each position's d numbers to a score for every token of the vocabulary",
            ),
            (
                "it keeps the position axis: every position has its row of scores",
                "every position predicts its next token, so the logits keep the position axis",
            ),
            (
                "it has three axes: B sequences, t positions and vocab_size scores at each",
                "the logits are (B, t, vocab_size): one row of scores per input position",
            ),
        ),
        wrong=_options(
            (
                "its last axis has d entries: the hidden state of each of t positions",
                "d is the hidden state's width, before the final LayerNorm and the head",
            ),
            (
                "it is B by vocab_size: only the last of the t positions has scores",
                "every position predicts its next token, not only the last: the position axis stays",
            ),
            (
                "its last two axes are t and t, like attention weights",
                "(t, t) is one head's attention weights, not the logits",
            ),
            (
                "its first axis has vocab_size entries, then come B sequences of t positions",
                "the batch axis comes first, as in the input; the vocabulary is the last axis",
            ),
            (
                "it has an axis of n_heads: each head gives its own scores",
                "the heads are concatenated and projected inside each block; the logits have no head axis",
            ),
        ),
    ),
]

_STEP = (
    "the forward pass is right: the model maps (B, T-1) ids to (B, T-1, V) logits",
    "flattening the logits to (B (T-1), V) and the targets to (B (T-1),) is how cross_entropy takes them",
    "zero_grad, backward, then step is the right order",
)

BUGLINE: tuple[Listing, ...] = (
    Listing(
        lines=(
            "inputs = data[:, 1:]",
            "targets = data[:, 1:]",
            "logits = model(inputs)",
            "loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))",
            "opt.zero_grad(); loss.backward(); opt.step()",
        ),
        bug=1,
        feedback={
            2: "the targets are right: every token but the first, data[:, 1:]",
            3: _STEP[0],
            4: _STEP[1],
            5: _STEP[2],
        },
        why="the inputs must be every token but the last, data[:, :-1]: with data[:, 1:] each position is given "
        "its own target, and the model learns to copy",
    ),
    Listing(
        lines=(
            "x, y = data[:, :-1], data[:, 1:]",
            "logits = model(x).detach()",
            "loss = F.cross_entropy(logits.view(-1, V), y.reshape(-1))",
            "opt.zero_grad(); loss.backward()",
            "opt.step()",
        ),
        bug=2,
        feedback={
            1: "the inputs and targets are right: the targets are the inputs shifted by one",
            3: _STEP[1],
            4: "zero_grad before backward is the right order",
            5: "step after backward is the right order",
        },
        why="detach() cuts the logits off the graph: the loss has no path back to the weights, so backward() "
        "raises and nothing is trained",
    ),
    Listing(
        lines=(
            "x, y = data[:, :-1], data[:, 1:]",
            "opt.zero_grad()",
            "logits = model(y)",
            "loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))",
            "loss.backward(); opt.step()",
        ),
        bug=3,
        feedback={
            1: "the inputs and targets are right: the targets are the inputs shifted by one",
            2: "clearing the gradients before the forward pass is fine: backward comes after it",
            4: _STEP[1],
            5: "backward, then step is the right order",
        },
        why="the model must read the inputs, x: reading y, its own targets, each position is asked for the token "
        "it was given, and the model learns to copy",
    ),
    Listing(
        lines=(
            "inputs = data[:, :-1]",
            "targets = data[:, 1:]",
            "logits = model(inputs)",
            "loss = F.cross_entropy(logits.reshape(-1, V), inputs.reshape(-1))",
            "opt.zero_grad(); loss.backward(); opt.step()",
        ),
        bug=4,
        feedback={
            1: "the inputs are right: every token but the last, data[:, :-1]",
            2: "the targets are right: every token but the first, data[:, 1:]",
            3: _STEP[0],
            5: _STEP[2],
        },
        why="the loss must score the logits against the targets: against the inputs each position is asked for "
        "its own token, and the model learns to copy",
    ),
    Listing(
        lines=(
            "inputs = data[:, :-1]",
            "targets = data[:, 1:]",
            "logits = model(inputs)",
            "loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))",
            "opt.zero_grad(); opt.step(); loss.backward()",
        ),
        bug=5,
        feedback={
            1: "the inputs are right: every token but the last, data[:, :-1]",
            2: "the targets are right: every token but the first, data[:, 1:]",
            3: _STEP[0],
            4: _STEP[1],
        },
        why="step() comes before backward(): it finds the gradients zero_grad has just cleared and moves nothing, "
        "and the gradients backward then computes are cleared before the next step",
    ),
)
