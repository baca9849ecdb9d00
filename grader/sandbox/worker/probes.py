"""The grader's probes of a student's model: input gradients by position, embedding-table use, positions fed.

They back the causality checks (``Request.INPUT_GRAD``) and the KV cache's "each position fed once"
(``Request.COUNT_POSITIONS``). A probe's own logic is the grader's (a failure there is re-checked, never
the student's: see ``faults.py``); what the student's model hands it is checked first, and an unusable
value is the student's ``StudentFault``. Every value a probe returns is compared in the grading process.
"""

from __future__ import annotations

from .faults import StudentFault, blame


def model_output(out, x):
    """A model's output, checked before a probe uses it: a float tensor (B, T, ...) that carries gradients."""
    import torch

    if type(out) is not torch.Tensor:  # a subclass could make the probe's own steps fail
        raise StudentFault(f"the forward returned {type(out).__name__}, not a plain tensor")
    if out.dim() < 2 or tuple(out.shape[:2]) != tuple(x.shape[:2]) or not out.is_floating_point():
        raise StudentFault(
            f"the forward returned a {out.dtype} tensor of shape {tuple(out.shape)} for an input of "
            f"shape {tuple(x.shape)}: expected floats of shape {tuple(x.shape[:2])} + (...)"
        )
    if not out.requires_grad:
        raise StudentFault("the output carries no gradient (is the forward run under torch.no_grad(), or detached?)")
    return out


def position_gradients(out, candidates, at):
    """(T, T): the gradient size of ``out[:, t]`` at each position s of the first candidate that gets any.

    ``candidates`` are tensors the output was computed from; ``at`` turns a candidate's gradient into
    one of shape (B, T, ...). A position whose output does not reach the candidate gets a zero row.
    """
    import torch

    T = out.shape[1]
    for wrt in candidates:
        rows, reached = [], False
        for t in range(T):
            with blame("student"):  # backward runs through the student's code
                (g,) = torch.autograd.grad(out[:, t].sum(), wrt, retain_graph=True, allow_unused=True)
            reached = reached or g is not None
            g = at(torch.zeros_like(wrt) if g is None else g)
            rows.append(g.abs().sum(dim=tuple(i for i in range(g.dim()) if i != 1)))
        if reached:
            return torch.stack(rows).detach()
    raise StudentFault(
        "the output does not depend on the token embeddings through autograd (are they detached, "
        "or read through .data?)"
    )


class TableProbe:
    """While active, sees how a model uses an embedding table: the table's output each time it is called as
    a module (a forward hook), and each read of its weight (a parametrization that hands out a copy)."""

    def __init__(self, table):
        self.table, self.outputs, self.weights = table, [], []

    def __enter__(self):
        import torch.nn as nn
        from torch.nn.utils import parametrize

        weights = self.weights

        class Seen(nn.Module):
            def forward(self, weight):
                weights.append(weight.clone())
                return weights[-1]

        self.hook = self.table.register_forward_hook(lambda _m, _i, out: self.outputs.append(out))
        parametrize.register_parametrization(self.table, "weight", Seen())
        return self

    def __exit__(self, *exc):
        from torch.nn.utils import parametrize

        self.hook.remove()
        parametrize.remove_parametrizations(self.table, "weight", leave_parametrized=False)


class PositionCounter:
    """Positions fed to a submodule, each call's input shape, and how many of its calls ran with gradients enabled.

    ``shapes`` keeps the first ``KEPT`` calls' shapes (a list of ints each; ``[]`` for an input that is not a
    tensor), ``calls`` counts them all: enough to tell one pass from one per prefix, while a model called without
    end keeps no more than that."""

    KEPT = 1024

    def __init__(self) -> None:
        self.positions = 0
        self.calls = 0
        self.calls_with_grad = 0
        self.shapes: list[list[int]] = []

    def __call__(self, _module, inputs) -> None:
        import torch

        first = inputs[0] if inputs else None
        shape = [int(n) for n in first.shape] if isinstance(first, torch.Tensor) else []
        self.positions += shape[-2] if len(shape) >= 2 else 0
        self.calls += 1
        self.calls_with_grad += int(torch.is_grad_enabled())
        if len(self.shapes) < self.KEPT:
            self.shapes.append(shape)
