"""Counting the tensor operations a call dispatches (``Request.COUNT_OPS``).

The counts back the rules on how code is written (grader/suites/rules.py): work that must not grow with a
size, functions that must not be called. They are the student's word (docs/sandbox.md): a forger can pass
those style checks, and only those. The class is made on first use, as it needs torch, which the worker's
files import lazily.
"""

from __future__ import annotations

import functools


@functools.cache
def op_counter_class():
    """``OpCounter``, made on first use: a ``TorchFunctionMode`` needs torch, which this file imports lazily."""
    from torch.overrides import TorchFunctionMode

    class OpCounter(TorchFunctionMode):
        """While active, counts every torch function the code calls (``torch.*``, ``F.*``, tensor methods and
        attributes), each once however much work it does inside, and remembers their names (at most
        ``MAX_NAMES``). Nested calls (inside ``F.softmax``, say) are not seen: torch turns the mode off while
        one of its calls runs."""

        MAX_NAMES = 500

        def __init__(self) -> None:
            super().__init__()
            self.ops = 0
            self.names: set[str] = set()

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.ops += 1
            if len(self.names) < self.MAX_NAMES:
                name = getattr(func, "__name__", None)
                self.names.add(name[:100] if type(name) is str else type(func).__name__[:100])
            return func(*args, **(kwargs or {}))

    return OpCounter
