"""The lesson's ideas, checked: why GPT is decoder-only, why it trains every position at once, and its pitfalls.

The code you wrote in m1 to m4 works; this exercise asks why. Four short
functions show it by running things, and nineteen questions ask you to predict,
spot and explain before you run anything.

1. ``decoder_layer_extra(d, n_heads, d_ff)``: build PyTorch's
   ``nn.TransformerDecoderLayer`` and ``nn.TransformerEncoderLayer`` with the same
   arguments (``batch_first=True``) and return how many more parameters the
   decoder layer has. That difference is what GPT leaves out: an encoder layer
   with a causal mask is a GPT block.
2. ``teacher_forced_losses(model, seq)`` and ``prefix_losses(model, seq)``: the
   loss of every next-token prediction in the 1-D sequence ``seq`` (ids, length
   L), a float tensor of shape ``(L - 1,)``, entry ``t`` the loss of predicting
   ``seq[t + 1]``. The first runs the model ONCE on the whole input (teacher
   forcing); the second runs it ``L - 1`` times, once on each prefix
   ``seq[:t + 1]``, keeping the prediction at the prefix's last position. With a
   causal model the two agree: that is why training is parallel.
3. ``counterexample(T, d)``: two inputs ``(x1, x2)``, float tensors of shape
   ``(T, d)``, that agree on the earlier positions (at least position 0) and
   differ at a later one, chosen so that ``self_attend(x, causal=False)`` (given
   below: attention with no mask) gives a different output at position 0 for
   the two, while ``self_attend(x, causal=True)`` gives the same for every position
   they share. Break the claim "earlier outputs never depend on later tokens"
   for the unmasked version.
4. ``overflow_error(model)``: run ``model`` (a TinyGPT) on an input one token
   longer than its context ``model.T`` and return the name of the exception
   class that stops it (a string such as ``"ValueError"``), or ``""`` if it runs.

Below the functions are the check-yourself questions. Replace each ``None``
with your answer: a letter (``"a"``) or, where several choices are right, all
of them (``"a, c"``, ``"ac"`` or ``["a", "c"]``; order and case do not matter),
or a number (``42``, ``2.5e9``, or a string such as ``"1,234"``). Work each out
before running anything; then check with your code.

Check yourself from the folder that holds this file::

    grade check -m concepts
    python m12_concepts.py      # runs your own TinyGPT through the functions
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 - you will want F.cross_entropy


def self_attend(x: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Single-head attention of ``x`` (T, d) on itself (queries, keys and values are ``x``), with or without the
    causal mask. Given: used by ``counterexample`` and the demo."""
    T, d = x.shape
    scores = x @ x.T / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(scores, dim=-1) @ x


def decoder_layer_extra(d: int, n_heads: int, d_ff: int) -> int:
    """How many more parameters ``nn.TransformerDecoderLayer(d, n_heads, d_ff, batch_first=True)`` has than
    ``nn.TransformerEncoderLayer(d, n_heads, d_ff, batch_first=True)``: build both and count."""
    raise NotImplementedError("decoder_layer_extra: build both layers, count, subtract")


def teacher_forced_losses(model: nn.Module, seq: torch.Tensor) -> torch.Tensor:
    """Every next-token loss of ``seq`` (L,) from ONE forward pass on ``seq[:-1]``: a (L - 1,) float tensor."""
    raise NotImplementedError("teacher_forced_losses: one pass, one loss per position")


def prefix_losses(model: nn.Module, seq: torch.Tensor) -> torch.Tensor:
    """The same losses from L - 1 passes: entry t runs the model on ``seq[:t + 1]`` and scores its last position
    against ``seq[t + 1]``."""
    raise NotImplementedError("prefix_losses: one pass per prefix, its last position")


def counterexample(T: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two (T, d) inputs equal before position T - 1 and different at it: unmasked attention's output at
    position 0 differs between them, causal attention's outputs at positions 0 to T - 2 do not."""
    raise NotImplementedError("counterexample: two inputs that share their start")


def overflow_error(model: nn.Module) -> str:
    """The name of the exception raised by ``model`` on ``model.T + 1`` tokens ("" if none)."""
    raise NotImplementedError("overflow_error: run one token too many, name the exception")


# Check yourself --------------------------------------------------------------------------------

# Part 1: GPT as a decoder-only transformer

# Q_BLOCK. Which of these hold for a GPT block? (Several may be right.)
#   (a) it has no cross-attention   (b) its self-attention is causal
#   (c) it has two sublayers, self-attention and feed-forward, each with a residual
#   (d) it attends to an encoder's output, as the original Transformer's decoder does
Q_BLOCK = None

# Q_FAMILIES. Which line puts BERT, GPT and T5 in the right families?
#   (a) BERT encoder-only, GPT encoder-decoder, T5 decoder-only
#   (b) BERT decoder-only, GPT encoder-only, T5 encoder-decoder
#   (c) BERT encoder-decoder, GPT decoder-only, T5 encoder-only
#   (d) BERT encoder-only, GPT decoder-only, T5 encoder-decoder
Q_FAMILIES = None

# Q_CROSS. Predict, then check with decoder_layer_extra: how many more parameters does
#   nn.TransformerDecoderLayer(512, 8, 2048) have than nn.TransformerEncoderLayer(512, 8, 2048)?
Q_CROSS = None

# Q_PARALLEL. One training step on a batch of sequences of T tokens: how does GPT get the loss at every position?
#   (a) in T forward passes, one per position, each reading only the tokens before it
#   (b) in one forward pass that scores only the last position: the others have no target
#   (c) in one forward pass: the targets are known and the mask hides each position's future
#   (d) in one pass for a small model such as TinyGPT; a large one goes position by position
Q_PARALLEL = None

# Q_MASKED. What the mask costs: with a context of 1,024 tokens, one head computes a 1,024 x 1,024 matrix of
#   attention scores. How many of those scores does the causal mask throw away (set to -inf)?
Q_MASKED = None

# Q_BUGLINE. Which line of this training step is wrong (its number)?
#   1  inputs = data[:, :-1]
#   2  targets = data[:, :-1]
#   3  logits = model(inputs)
#   4  loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
#   5  opt.zero_grad(); loss.backward(); opt.step()
Q_BUGLINE = None

# Q_MASKDIR. A student's GPT reaches a training loss near 0 on real text within a few hundred steps, and its
#   greedy generation is rubbish. What is the likeliest cause?
#   (a) a learning rate too low for the weights to move far from where they started
#   (b) a mask pointing the wrong way, so each position sees its next token
#   (c) too few layers and heads for the model to fit the text it is trained on
#   (d) a head tied to the token table, sharing its weights with the embeddings
Q_MASKDIR = None

# Part 2: the architecture, its sizes and what emerges

# Q_SHAPE. Predict before running: TinyGPT(vocab_size, d, n_heads, n_layers, max_T) on (B, t) token ids returns
#   logits of which shape?   (a) (B, t, vocab_size)   (b) (B, t, d)   (c) (B, vocab_size)   (d) (B, t, t)
Q_SHAPE = None

# Q_MISSING. You must count a TinyGPT's parameters and are told four sizes. Which one do you NOT need?
#   (a) the size of the vocabulary   (b) the number of heads   (c) the context length   (d) the number of layers
Q_MISSING = None

# Q_REVERSE. Reverse engineering: a TinyGPT (m2's, untied head) with a vocabulary of 50, a context of 8 and 2
#   layers has 107,008 parameters. What is its width d?
Q_REVERSE = None

# Q_ABILITIES. Three prompts: (1) three solved examples, then a new input; (2) a question followed by "Let's
#   think step by step", with no example; (3) a model that picks up a new task from its context alone, with no
#   weight update. Which line names them?
#   (a) (1) chain-of-thought prompting, (2) few-shot prompting, (3) in-context learning
#   (b) (1) few-shot prompting, (2) zero-shot chain of thought, (3) in-context learning
#   (c) (1) fine-tuning on the examples, (2) chain of thought, (3) few-shot prompting
#   (d) (1) zero-shot prompting, (2) few-shot chain of thought, (3) in-context learning
Q_ABILITIES = None

# Q_FEWSHOT. A model answers well after a prompt with three worked examples. What happened to its weights?
#   (a) the last layer's weights adapted to the examples   (b) three small gradient steps, one per example
#   (c) the examples' token embeddings were updated   (d) nothing: they were only read, in a forward pass
Q_FEWSHOT = None

# Q_LIE. Two truths and a lie: which statement is false?
#   (a) few-shot prompting and chain of thought were trained into GPT-3 with objectives of their own
#   (b) GPT-2's four sizes share one architecture, with a context of 1024 and learned positions
#   (c) at a fixed compute budget Chinchilla grows parameters and tokens together, about 20 tokens per parameter
#   (d) the feed-forward sublayer widens each position from d_model to 4 d_model, then projects it back
Q_LIE = None

# Part 3: inference, the training loop, where it stops working

# Q_LOSS0. Predict before you train: a freshly initialised GPT with a vocabulary of 50 tokens gives every
#   token nearly the same logit. About what cross-entropy loss (natural log) will its first step print?
Q_LOSS0 = None

# Q_WINDOW. A GPT with a context of 8 tokens generates greedily from a prompt of 3 tokens, cropping its input
#   as m4's generate does. How many tokens does the model read when it picks new token number 7?
Q_WINDOW = None

# Q_OMIT. The recipe with one step left out: a loop runs zero_grad, forward, loss and optimizer.step(), but
#   never loss.backward(). After 20 steps the loss is
#   (a) lower, but falling slowly: step() still nudges the weights a little
#   (b) NaN: with no gradient to follow, step() diverges
#   (c) where it started: with no gradient, step() moves no weight
#   (d) never printed: step() raises an error on the missing gradients
Q_OMIT = None

# Q_OVERFLOW. Edge case: TinyGPT(50, 64, 4, 2, 8) is called on 9 tokens. What happens?
#   (a) it runs: position 8 reuses the last row of the position table
#   (b) it runs: the mask crops the input to its last 8 tokens
#   (c) an error: the position table has rows for positions 0 to 7 only
#   (d) it runs, with worse predictions at position 8 than at the others
Q_OVERFLOW = None

# Q_PAD. A batch of 4 sequences is padded so that each has 8 targets; 5 of the targets are padding. The loss
#   is cross_entropy with ignore_index set to the padding id: over how many targets is its mean taken?
Q_PAD = None

# Q_EXPOSURE. Exposure bias: what differs between training and generation?
#   (a) in training the model reads true prefixes; in generation it reads its own outputs, mistakes and all
#   (b) generation feeds the model true tokens by teacher forcing; training feeds it its own outputs
#   (c) the causal mask points the other way in generation, so each position reads the future
#   (d) in generation the gradients flow back through each sampled token into the weights
Q_EXPOSURE = None


if __name__ == "__main__":
    from m2_model import TinyGPT

    print("a decoder layer over an encoder layer (512, 8, 2048):", f"{decoder_layer_extra(512, 8, 2048):,}")
    torch.manual_seed(42)
    model = TinyGPT(50, 64, 4, 2, 8)
    seq = torch.randint(0, 50, (9,))
    with torch.no_grad():
        one, many = teacher_forced_losses(model, seq), prefix_losses(model, seq)
    print("one pass:     ", [round(x, 4) for x in one.tolist()])
    print("8 passes:     ", [round(x, 4) for x in many.tolist()])
    print("largest gap:", f"{(one - many).abs().max().item():.2e}", " mean:", f"{one.mean().item():.4f}")
    x1, x2 = counterexample(4, 4)
    for causal in (False, True):
        moved = (self_attend(x1, causal)[0] - self_attend(x2, causal)[0]).abs().max().item()
        print("masked" if causal else "unmasked", f"position 0 moves by: {moved:.4f}")
    print("9 tokens into a context of 8:", overflow_error(model))
