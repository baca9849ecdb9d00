"""What a worker runs: it answers the grading process's requests inside a forked child.

The fork server (``fork_server.py``) forks one worker per request for one; the worker
imports the student's modules and answers a small menu of requests (``Request`` in
``../common/agreement.py``: import, call, getattr, value, state_dict, describe, load,
input_grad, grads, count_positions, standin, count_ops, save, restore) with plain data.

Nothing here decides a grade: the grading process checks every value it gets.
Loaded by path by the fork server, so it imports nothing from the ``grader`` package.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import traceback
import types
from typing import Any

try:
    from ..common.agreement import ErrorKind, Reply, Request
except ImportError:  # loaded by path in the worker, after ../common/agreement.py
    from _gradekit_agreement import ErrorKind, Reply, Request  # type: ignore[no-redef]


class RequestHandler:
    """Answers the grading process's requests inside a forked child, one at a time, until it hangs up."""

    def __init__(self, sock, student_modules: tuple[str, ...], files):
        self.sock, self.student_modules = sock, student_modules
        self.wire, self.protocol, self.standin = files.wire, files.protocol, files.standin
        self.handles: dict[int, Any] = {}  # the student's objects: anything at all
        self.menu = {
            Request.IMPORT: self.op_import,
            Request.CALL: self.op_call,
            Request.GETATTR: self.op_getattr,
            Request.VALUE: self.op_value,
            Request.STATE_DICT: self.op_state_dict,
            Request.DESCRIBE: self.op_describe,
            Request.LOAD: self.op_load,
            Request.INPUT_GRAD: self.op_input_grad,
            Request.GRADS: self.op_grads,
            Request.COUNT_POSITIONS: self.op_count_positions,
            Request.STANDIN: self.op_standin,
            Request.COUNT_OPS: self.op_count_ops,
            Request.SAVE: self.op_save,
            Request.RESTORE: self.op_restore,
        }

    def handle(self, obj) -> dict:
        self.handles[len(self.handles) + 1] = obj
        kind = type(obj)
        return {"t": "handle", "id": len(self.handles), "type": f"{kind.__module__}.{kind.__qualname__}"}

    def value(self, enc, blobs):
        return self.protocol.decode(enc, blobs, lambda i, _t: self.handles[i], make_info=self.protocol.meta_tensor)

    def serve(self) -> None:
        while True:
            try:
                request, blobs = self.wire.recv(self.sock)
            except EOFError:
                return
            out: list[bytes] = []
            BLAME.clear()
            try:
                result = self.menu[request["op"]](request, blobs)
                keep = request.get("keep", False)
                reply = {Reply.VALUE: self.handle(result) if keep else self.protocol.encode(result, out, self.handle)}
            except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are student errors too
                out = []
                reply = {Reply.ERROR: describe(e)}
                if grader_fault(e):  # the grading process must not blame the student for it
                    reply[Reply.ERROR].update({Reply.GRADER_FAULT: True, Reply.TRACE: grader_trace(e)})
            self.wire.send(self.sock, reply, out)

    # --- the menu
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

    def op_grads(self, req, blobs):
        """Gradients of ``(module(x) * w).sum()`` for each distinct parameter, by name."""
        module = self.handles[req["handle"]]
        x, w = (self.value(a, blobs) for a in req["args"])
        module.zero_grad(set_to_none=True)
        (module(x) * w).sum().backward()
        names = ListNames(module)
        return {names.contract(k): None if p.grad is None else p.grad.detach() for k, p in module.named_parameters()}

    def op_count_positions(self, req, blobs):
        """Count the positions (size of the second-to-last axis) fed to a submodule from now on."""
        counter = PositionCounter()
        submodule(self.handles[req["handle"]], req["via"]).register_forward_pre_hook(counter)
        return counter

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

    def op_standin(self, req, blobs):
        return self.standin.make_standin(req["vocab_size"], req["d"], req["max_T"], req["seed"], bool(req.get("tied")))


def take_trusted(req: dict) -> dict:
    """The trusted modules' code, taken out of the request (and so out of the serve loop's hands too)
    before any student code runs: nothing the student's code could walk to (gc, frames) still holds it."""
    trusted = req.pop("trusted", None) or {}
    return trusted if isinstance(trusted, dict) else {}


def load_trusted(name: str, code: str) -> types.ModuleType:
    """One of the grader's own earlier milestones (its code only: no comments nor docstrings), run from a
    code object: no file, loader or spec to read it back from, no ``linecache`` entry, and no copy of the
    text kept once compiled. What remains is the code objects themselves, as any module has."""
    module = sys.modules[name] = types.ModuleType(name)
    compiled = compile(code, f"<the grader's {name}>", "exec", dont_inherit=True)
    del code
    exec(compiled, module.__dict__)
    return module


class ListNames:
    """The contract's names for a model's parameters. Blocks kept in a plain Python list and registered
    with ``add_module`` (``self.blocks = [...]``, then ``add_module(f"block{i}", block)``) are named by
    their list path, ``blocks.0``, as an ``nn.ModuleList`` would name them."""

    def __init__(self, root):
        import torch.nn as nn

        self.aliases: dict[str, str] = {}  # registered prefix -> list path
        for prefix, module in root.named_modules():
            registered = {id(child): name for name, child in module.named_children()}
            dot = f"{prefix}." if prefix else ""
            for attr, value in vars(module).items():
                if attr.startswith("_") or not isinstance(value, (list, tuple)):
                    continue
                for i, item in enumerate(value):
                    if isinstance(item, nn.Module) and id(item) in registered:
                        self.aliases[dot + registered[id(item)]] = f"{dot}{attr}.{i}"

    @staticmethod
    def _swap(name: str, table: dict[str, str]) -> str:
        for old, new in table.items():
            if name.startswith(old + "."):
                return new + name[len(old) :]
        return name

    def contract(self, name: str) -> str:
        return self._swap(name, self.aliases)

    def actual(self, name: str) -> str:
        return self._swap(name, {v: k for k, v in self.aliases.items()})


def submodule(root, path: str):
    """The submodule at a dotted path, through attributes and list indices (``blocks.0.attn.qkv``)."""
    for part in path.split("."):
        root = root[int(part)] if part.isdigit() else getattr(root, part)
    return root


class StudentFault(TypeError):
    """What the student's code handed a probe is unusable: their doing, found by the grader's checks."""


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


def override_notebook(trusted: list[types.ModuleType]) -> None:
    """In a notebook every milestone shares one namespace (``notebook_code``, see grader/submission.py),
    so the student's GPTBlock would find the student's own CausalSelfAttention there: put the grader's
    trusted definitions in its place, as a folder submission gets them through its imports."""
    notebook = sys.modules.get("notebook_code")
    if notebook is None:
        return
    for module in trusted:
        for name, value in list(vars(module).items()):
            if getattr(value, "__module__", None) == module.__name__:
                setattr(notebook, name, value)


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


class PositionCounter:
    """Positions fed to a submodule, and how many of its calls ran with gradients enabled."""

    def __init__(self) -> None:
        self.positions = 0
        self.calls_with_grad = 0

    def __call__(self, _module, inputs) -> None:
        import torch

        self.positions += int(inputs[0].shape[-2]) if inputs and inputs[0].dim() >= 2 else 0
        self.calls_with_grad += int(torch.is_grad_enabled())


class MissingName(LookupError):
    """The contract's name is not defined in the student's file."""


def missing(module: types.ModuleType, name: str) -> MissingName:
    """A contract name is absent; for a notebook, say which cells raised (they may have held it)."""
    failed = module.__dict__.get("__notebook__")
    if isinstance(failed, list):
        raised = f"; what went wrong while the notebook ran: {'; '.join(map(str, failed[:3]))}" if failed else ""
        return MissingName(f"the notebook defines no {name}{raised}")
    return MissingName(f"{module.__name__}.py defines no {name}")


def _student_file(filename: str) -> bool:
    return os.path.isfile(filename) and os.path.dirname(os.path.abspath(filename)) == os.getcwd()


BLAME: dict[int, tuple[BaseException, str]] = {}  # this request's exceptions, by whose code raised them


@contextlib.contextmanager
def blame(whose: str):
    """Mark who is at fault for an exception raised inside: the innermost block decides. Probes wrap their
    own logic in ``blame("grader")`` and every use of the student's objects in ``blame("student")``;
    anything unmarked is the student's, as are the checks a probe makes of what it was handed."""
    try:
        yield
    except BaseException as e:
        BLAME.setdefault(id(e), (e, whose))
        raise


def grader_fault(e: BaseException) -> bool:
    """Whether ``e`` came from the grader's own code: marked so, not a StudentFault, no frame the student's."""
    marked = BLAME.get(id(e))
    if marked is None or marked[0] is not e or marked[1] != "grader" or isinstance(e, StudentFault):
        return False
    return not any(_student_file(f.filename) for f in traceback.extract_tb(e.__traceback__))


def grader_trace(e: BaseException) -> str:
    """Where the grader's code failed: file, line and function of each frame (no source text)."""
    frames = traceback.extract_tb(e.__traceback__)
    return "\n".join(f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" for f in frames[-12:])


def describe(e: BaseException) -> dict:
    """A student's exception as plain data: type, message, and where in their files."""
    try:
        message = str(e)[:2000]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        message = "<the exception's message could not be printed>"
    where = []
    for frame in traceback.extract_tb(e.__traceback__):
        if _student_file(frame.filename):
            where.append(f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}")
    if isinstance(e, SyntaxError) and e.filename:
        where.append(f"{os.path.basename(e.filename)}:{e.lineno}")
    if isinstance(e, StudentFault):
        kind = ErrorKind.TYPE_ERROR
    elif isinstance(e, MissingName):
        kind = ErrorKind.MISSING_NAME
    else:
        kind = type(e).__name__
    return {"type": kind, "message": message, "where": where[-3:]}


def import_student_module(name: str, student_modules: tuple[str, ...]) -> None:
    """Import a milestone's file; a broken sibling it imports is replaced by a placeholder.

    So ``from m2_model import TinyGPT`` at the top of m3_train.py does not zero M3
    when m2_model.py has a syntax error: the placeholder only fails if it is used.
    """
    for _ in student_modules:
        try:
            importlib.import_module(name)
            return
        except BaseException as e:  # noqa: BLE001
            culprit = _failing_sibling(e, name, student_modules)
            if culprit is None:
                raise
            for mod in student_modules:
                if mod != culprit and sys.modules.get(mod) is None:
                    sys.modules.pop(mod, None)
            sys.modules[culprit] = _placeholder(culprit, e)


def _failing_sibling(e: BaseException, name: str, student_modules: tuple[str, ...]) -> str | None:
    files = [e.filename] if isinstance(e, SyntaxError) and e.filename else []
    files += [f.filename for f in traceback.extract_tb(e.__traceback__)]
    if isinstance(e, ModuleNotFoundError) and e.name in student_modules and e.name != name:
        return e.name
    for path in reversed(files):
        stem = os.path.splitext(os.path.basename(path))[0]
        if os.path.dirname(os.path.abspath(path)) == os.getcwd() and stem in student_modules:
            return stem if stem != name and not isinstance(sys.modules.get(stem), _Placeholder) else None
    return None


class _Placeholder(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        reason = self.__dict__["_reason"]

        def unusable(*_a, **_k):
            raise ImportError(f"{self.__name__}.py could not be imported ({reason}), so {attr} is unusable")

        return unusable


def _placeholder(name: str, e: BaseException) -> types.ModuleType:
    module = _Placeholder(name)
    module.__dict__["_reason"] = f"{type(e).__name__}: {e}"  # read back in __getattr__
    return module
