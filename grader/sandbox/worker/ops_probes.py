"""The requests that probe a student's model: input_grad (gradients by position) and count_positions.

These run the grader's own logic (``probes.py``) around the student's code: the probe's steps are marked
``blame("grader")``, every use of the student's objects ``blame("student")`` (see ``faults.py``). A probe
that cannot see what it looks for says so (``Reply.UNOBSERVED``) and the grading process decides otherwise.
"""

from __future__ import annotations

from ..common.agreement import Reply
from .faults import blame
from .handles import Handles
from .naming import submodule
from .probes import PositionCounter, TableProbe, model_output, position_gradients


class ProbeOps(Handles):
    """Gradients of a model's outputs by input position, and the positions fed to one of its submodules."""

    def op_input_grad(self, req, blobs):
        """(T, T) matrix: entry [t, s] is the gradient size of output t with respect to input s.

        Without ``via``, gradients are taken at the (float) input itself. With ``via`` naming the token
        table (an embedding submodule), at the table's output: a forward hook sees it where the model
        calls the table as a module; otherwise (``F.embedding(idx, tok.weight)``, ``tok.weight[idx]``, ...)
        the gradient of the table's rows, read at each position's token, is that position's gradient, as
        every token occurs once in x. Where the model never uses the table where the grader can see it,
        the answer says so instead: ``{Reply.UNOBSERVED: why}``.
        """
        with blame("grader"):  # the probe's own logic; every use of the student's objects is theirs
            module = self.handles[req["handle"]]
            x = self.value(req["args"][0], blobs)
            rest = [self.value(a, blobs) for a in req["args"][1:]]  # a function's other arguments (weights, sizes)
            if not req.get("via"):
                x.requires_grad_(True)
                with blame("student"):
                    out = module(x, *rest)
                return position_gradients(model_output(out, x), [x], lambda g: g)
            with blame("student"), TableProbe(submodule(module, req["via"])) as probe:
                out = module(x)
            out = model_output(out, x)
            if probe.outputs:
                return position_gradients(out, probe.outputs, lambda g: g)
            if probe.weights:
                if x.unique().numel() != x.numel():
                    raise ValueError("the grader's tokens repeat: a row's gradient would mix positions")
                return position_gradients(out, probe.weights, lambda g: g[x])
            return {Reply.UNOBSERVED: f"your model never called {req['via']} nor read {req['via']}.weight while it ran"}

    def op_count_positions(self, req, blobs):
        """Count the positions (size of the second-to-last axis) fed to a submodule from now on, the calls, and
        each call's input shape (``PositionCounter``)."""
        counter = PositionCounter()
        submodule(self.handles[req["handle"]], req["via"]).register_forward_pre_hook(counter)
        return counter
