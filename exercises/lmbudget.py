"""lmbudget: train the best character-level model you can within a budget of CPU seconds.

The grader calls ``train_within_budget(text, vocab, budget_seconds, context)`` once, in its sandbox, with one thread:

* ``text``: the training split (a str); the only data your code can see;
* ``vocab``: the characters, a list of one-character strings; a character's token id is its index.
  The last entry stands for any character the training text lacks (held-out text may contain some);
* ``budget_seconds``: the CPU seconds you may use, counted by the sandbox over your worker's whole process
  tree (any process you start included) from its start, importing this file included, until you return.
  ``time.process_time()`` is a fair estimate from inside. Going over it (plus a small margin), or over the
  task's wall-clock limit (a multiple of the budget: room for a busy machine, not for sleeping), is "time limit
  exceeded": a 0 that counts. Stop early enough to return. The grader seeds torch's generator and runs one
  thread: a loop of a step count fixed in advance (its schedule on the step, not on the clock) takes the same
  steps, and scores the same, on every run; one that stops on ``time.process_time()`` varies with the load;
* ``context``: the evaluation's context length T.

Return a ``torch.nn.Module`` whose ``model(idx)`` maps a (B, T) int64 tensor of token ids, T up to
``context``, to (B, T, len(vocab)) logits for the next character at each position. The grader puts
it in eval mode and reads it only through its forward, which must be causal (position t may read
``idx[:, :t + 1]`` only: the grader probes it) and has its own small CPU allowance. The grader evaluates
copies of it, each saved with ``torch.save`` and loaded in a fresh process: define its classes at the top
level of this file, and keep no lambdas, open files or processes in it. Score: bits per
character on held-out text (two splits, A and B, that never reach your code), normalised between a
bigram baseline (0 points) and the kit's reference recipe (full points); see docs/exercises.md.

No network, no files but your own: everything your model learns comes from ``text``.
"""

import torch  # noqa: F401 - you will want torch.randint, torch.optim and friends
import torch.nn as nn


def train_within_budget(text: str, vocab: list[str], budget_seconds: float, context: int = 64) -> nn.Module:
    # TODO: build a model, train it on `text` while time.process_time() stays within the budget, return it
    raise NotImplementedError
