"""The requests that import the student's files and call into them: import, call, getattr, value, count_ops,
standin, and a contest's test run (run).

Every exception raised here or in what it calls is the student's (unmarked: see ``faults.py``), except the
op counter's own setup and read-out in ``op_count_ops``, marked as the grader's.
"""

from __future__ import annotations

import sys
from typing import Any

from .faults import blame, missing, student_traceback
from .handles import Handles
from .op_counter import op_counter_class
from .student_imports import import_student_module
from .trusted_code import load_trusted, override_notebook, take_trusted


class CallOps(Handles):
    """Import the student's modules, call their functions, classes and methods, read their names."""

    student_modules: tuple[str, ...]
    standin: Any  # standin.py, loaded by path

    def op_import(self, req, blobs):
        trusted = [load_trusted(name, code) for name, code in take_trusted(req).items()]
        for name in req["modules"]:
            import_student_module(name, self.student_modules)
        override_notebook(trusted)
        return None

    def op_call(self, req, blobs):
        import torch

        fn, args, kwargs = self.callee(req, blobs)
        if req.get("seed") is not None:
            torch.default_generator.manual_seed(req["seed"])  # the CPU's: seeding absent GPUs costs ms
        # meta: build a large model without its memory (shapes and parameter counts only)
        with torch.set_grad_enabled(req.get("grad", True)), torch.device("meta" if req.get("meta") else "cpu"):
            return fn(*args, **kwargs)

    def callee(self, req, blobs):
        """What a call request names (a module's function or class, a handle or its method), and its arguments."""
        if "module" in req:
            if req["module"] not in sys.modules and req["module"] in self.student_modules:
                # an earlier milestone the public checks build on
                import_student_module(req["module"], self.student_modules)
            module = sys.modules[req["module"]]
            if not hasattr(module, req["name"]):
                raise missing(module, req["name"])
            fn = getattr(module, req["name"])
        else:
            fn = self.handles[req["handle"]]
            if req.get("name"):
                fn = getattr(fn, req["name"])
        args = [self.value(a, blobs) for a in req.get("args", [])]
        kwargs = {k: self.value(v, blobs) for k, v in req.get("kwargs", {}).items()}
        return fn, args, kwargs

    def op_count_ops(self, req, blobs):
        """Call like ``op_call`` (without gradients), counting the tensor operations the call dispatches:
        ``{"ops": how many, "names": the distinct functions' names}``. The result itself stays here.

        The grading process decides what the counts mean (grader/suites/rules.py): a rule that the work
        must not grow with a size, or that some functions must not be called. The student's exceptions
        inside the call are theirs, as in any call.
        """
        import torch

        fn, args, kwargs = self.callee(req, blobs)
        with blame("grader"):
            counter = op_counter_class()()
        with torch.no_grad(), counter:
            fn(*args, **kwargs)
        with blame("grader"):
            return {"ops": counter.ops, "names": sorted(counter.names)}

    def op_getattr(self, req, blobs):
        return getattr(self.handles[req["handle"]], req["name"])

    def op_value(self, req, blobs):
        """A module-level name of a student's file (the quiz's answers)."""
        module = sys.modules[req["module"]]
        if not hasattr(module, req["name"]):
            raise missing(module, req["name"])
        return getattr(module, req["name"])

    def op_standin(self, req, blobs):
        return self.standin.make_standin(req["vocab_size"], req["d"], req["max_T"], req["seed"], bool(req.get("tied")))

    def op_run(self, req, blobs):
        """A contest's test run: the student's own script (a file of their copy) run as ``__main__``. What it
        prints goes to the worker's output file, which the grading side reads the tail of; an exception's
        traceback, their files' frames only, is printed there too, then raised as any student error.
        ``sys.exit(0)`` is a normal end."""
        import runpy

        try:
            runpy.run_path(req["script"], run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                raise
        except BaseException as e:
            sys.stdout.flush()  # what it printed first comes first: stdout is buffered, stderr is not
            print(student_traceback(e), end="", file=sys.stderr)
            raise
        finally:
            for stream in (sys.stdout, sys.stderr):  # buffered: flushed before the reply says it is done
                stream.flush()
        return None
