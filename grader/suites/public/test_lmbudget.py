"""Public checks for `lmbudget`: train returns a model whose logits have the contract's shape.

Nothing is scored here: the hidden suite trains on the task's corpus under the budget and scores the
loss on held-out text. These checks train for one CPU second on a few lines.
"""

import torch

from grader.suites import checks

TEXT = "def add(a, b):\n    return a + b\n\n" * 200
VOCAB = [*sorted(set(TEXT)), "\ufffd"]
CONTEXT = 16


def test_public_train_returns_a_model(lmbudget):
    """(public) train_within_budget(text, vocab, 1.0, context=16) returns a model: (2, 16) tokens to (2, 16, V)"""
    model = lmbudget.call("train_within_budget", TEXT, VOCAB, 1.0, context=CONTEXT, keep=True)
    x = torch.randint(0, len(VOCAB), (2, CONTEXT), generator=torch.Generator().manual_seed(0))
    if model.short_type == "NoneType":
        checks.fail("train returned None: return the trained torch.nn.Module")
    logits = model(x, grad=False)
    checks.tensor(logits, "model(idx)", (2, CONTEXT, len(VOCAB)), dtype=None)
    checks.finite(logits, "the logits", ("batch", "position", "token"))
