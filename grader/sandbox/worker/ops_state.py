"""The requests that read and write a student's model as a whole: state_dict, describe, load, grads, save,
restore.

Parameters are named as the contract names them (``naming.ListNames``). ``save`` and ``restore`` move
``torch.save``'s bytes between workers: the grading process passes them on and never unpickles them.
Every exception here is the student's (their model's code runs in each of these).
"""

from __future__ import annotations

from .handles import Handles
from .naming import ListNames


class StateOps(Handles):
    """A model's parameters, buffers and gradients by the contract's names, and the model as bytes."""

    # Parameters are named as the contract names them: see ListNames.
    def op_state_dict(self, req, blobs):
        module = self.handles[req["handle"]]
        names = ListNames(module)
        return {names.contract(k): v.detach() for k, v in module.state_dict().items()}

    def op_describe(self, req, blobs):
        """Names and shapes of parameters (shared ones listed once) and buffers."""
        module = self.handles[req["handle"]]
        names = ListNames(module)
        return {
            "parameters": {names.contract(k): list(p.shape) for k, p in module.named_parameters()},
            "all_parameters": [names.contract(k) for k, _ in module.named_parameters(remove_duplicate=False)],
            "buffers": {names.contract(k): list(b.shape) for k, b in module.named_buffers()},
        }

    def op_load(self, req, blobs):
        import torch

        module = self.handles[req["handle"]]
        names = ListNames(module)
        state = self.value(req["args"][0], blobs)
        with torch.no_grad():
            for name, tensor in state.items():
                module.get_parameter(names.actual(name)).copy_(tensor)
        return None

    def op_grads(self, req, blobs):
        """Gradients of ``(module(x) * w).sum()`` for each distinct parameter, by name."""
        module = self.handles[req["handle"]]
        x, w = (self.value(a, blobs) for a in req["args"])
        module.zero_grad(set_to_none=True)
        (module(x) * w).sum().backward()
        names = ListNames(module)
        return {names.contract(k): None if p.grad is None else p.grad.detach() for k, p in module.named_parameters()}

    def op_save(self, req, blobs):
        """The handle's object, pickled by ``torch.save``: bytes the grading process passes on, never reads."""
        import io

        import torch

        buffer = io.BytesIO()
        torch.save(self.handles[req["handle"]], buffer)
        return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)

    def op_restore(self, req, blobs):
        """An object from ``op_save``'s bytes (another worker's), unpickled here, in the submission's process."""
        import io

        import torch

        data = self.value(req["args"][0], blobs)
        return torch.load(io.BytesIO(data.numpy().tobytes()), weights_only=False)
