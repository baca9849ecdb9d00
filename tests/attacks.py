"""Hostile code for tests/e2e/test_attacks.py: each attack is ONE change to the reference.

Every helper returns a text edit for ``helpers.Variant(edits=...)`` (or a whole file
for ``files=``). The anchors below are lines of the reference that occur exactly once.
"""

from __future__ import annotations

from textwrap import dedent, indent

from helpers import REPO

M1, M2, M3, M4 = "m1_attention.py", "m2_model.py", "m3_train.py", "m4_generate.py"

# Anchors in the reference files.
M1_IMPORT = "import math\n"  # top of m1_attention.py: code here runs at import
M1_CALL = "    T, d_k = q.shape[-2], q.shape[-1]\n"  # first statement of causal_attention's body
M1_TRIL = "    return torch.tril(torch.ones(T, T, device=device))\n"  # causal_mask's body
M1_ATTENTION_DEF = "def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):\n"
M1_MAIN = 'if __name__ == "__main__":\n'  # last block of m1_attention.py
M3_TRAIN_BODY = "    opt = torch.optim.Adam(model.parameters(), lr=lr)\n"
M4_GENERATE_BODY = "    idx = start\n"
M2_COUNT_PARAMETERS = (
    "def count_parameters(model: nn.Module) -> int:\n"
    '    """Number of trainable values; a shared Parameter counts once."""\n'
    "    return sum(p.numel() for p in model.parameters())\n"
)


def at_import(code: str) -> tuple[str, str]:
    """Run ``code`` when m1_attention.py is imported (right after ``import math``)."""
    return M1_IMPORT, M1_IMPORT + dedent(code).strip() + "\n"


def at_end(code: str) -> tuple[str, str]:
    """Define ``code`` after everything else in m1_attention.py (so it replaces earlier definitions)."""
    return M1_MAIN, dedent(code).strip() + "\n\n\n" + M1_MAIN


def in_call(code: str) -> tuple[str, str]:
    """Run ``code`` at the start of every causal_attention call."""
    return M1_CALL, indent(dedent(code).strip(), "    ") + "\n" + M1_CALL


# A future-leaking mask: every key at or after the query, none before (graded 'upper-triangular').
LEAKY_MASK = (M1_TRIL, "    return torch.triu(torch.ones(T, T, device=device))\n")

# ---------------------------------------------------------------- ending the process

OS_EXIT = "import os\nos._exit(0)"
SYS_EXIT = "import sys\nsys.exit(0)"
KEYBOARD_INTERRUPT = "raise KeyboardInterrupt"
INFINITE_LOOP = "while True:\n    pass"
SEGFAULT = "import ctypes\nctypes.string_at(0)"
FLOOD_OUTPUT = "for _ in range(150):  # 150 MB\n    print('x' * 10**6)"
MEMORY_EMPTY = "import torch\ntorch.empty(10**11)  # 400 GB"
MEMORY_GROWING = """
import torch
hoard = []
while True:  # 400 MB more each time, every page touched
    hoard.append(torch.ones(10**8))
"""

# ---------------------------------------------------------------- fooling the comparisons

MONKEYPATCH_COMPARISONS = """
import torch
import torch.testing
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *x, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.allclose = lambda *a, **k: True
torch.Tensor.equal = lambda *a, **k: True
try:  # numpy is optional: torch does not need it
    import numpy
    import numpy.testing
    numpy.allclose = lambda *a, **k: True
    numpy.array_equal = lambda *a, **k: True
    numpy.testing.assert_allclose = lambda *a, **k: None
    numpy.testing.assert_array_equal = lambda *a, **k: None
    numpy.testing.assert_array_almost_equal = lambda *a, **k: None
except ImportError:
    pass
import unittest
unittest.TestCase.assertEqual = lambda *a, **k: None
unittest.TestCase.assertTrue = lambda *a, **k: None
"""

SUBCLASS_NAME = "AlwaysEqualTensor"
TENSOR_SUBCLASS = f"""
class {SUBCLASS_NAME}(torch.Tensor):
    '''Equal to everything, true, close to anything: a comparison in the same process always passes.'''
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return False
    def __gt__(self, other): return False
    def __bool__(self): return True
    def __len__(self): return 4
    def allclose(self, *a, **k): return True
    def equal(self, *a, **k): return True
    def isclose(self, *a, **k): return True
    def all(self, *a, **k): return True
    def any(self, *a, **k): return False
    def __array__(self, *a, **k):
        import numpy
        return numpy.zeros(0)
    __hash__ = torch.Tensor.__hash__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {{}})


def causal_attention(q, k, v):  # wrong values, in a costume
    out = torch.rand(q.shape, device=q.device).as_subclass({SUBCLASS_NAME})
    weights = torch.rand((*q.shape[:-1], q.shape[-2]), device=q.device).as_subclass({SUBCLASS_NAME})
    return out, weights
"""

# ---------------------------------------------------------------- reaching the grader's files

REFERENCE_FILE = REPO / "solutions" / "m1_attention.py"
SUITE_FILE = REPO / "grader" / "suites" / "hidden" / "test_m1_attention.py"
LEAK_MARKER = "LEAKED-GRADER-FILE"


def import_the_reference() -> str:
    """Every way to import the reference or the grader; if one works, re-export it (full marks)."""
    return f"""
import importlib
import importlib.util
import sys

_REPO = {str(REPO)!r}
_REFERENCE = None


def _usable(module):
    names = ("causal_mask", "causal_attention", "CausalSelfAttention")
    return module if all(hasattr(module, n) for n in names) else None


def _import_solutions():
    import solutions
    return (_usable(getattr(solutions, "m1_attention", None))
            or _usable(importlib.import_module("solutions.m1_attention")))


def _from_solutions():
    from solutions import m1_attention as reference
    return _usable(reference)


def _grader_suites():
    import grader.suites
    from grader.reference import load_reference
    return _usable(load_reference().m1_attention)


def _by_absolute_path():
    spec = importlib.util.spec_from_file_location("_stolen_m1", _REPO + "/solutions/m1_attention.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return _usable(module)


def _repo_on_sys_path():
    sys.path.insert(0, _REPO)
    try:
        for name in [n for n in sys.modules if n == "solutions" or n.startswith(("solutions.", "grader"))]:
            del sys.modules[name]
        return _usable(importlib.import_module("solutions.m1_attention"))
    finally:
        sys.path.remove(_REPO)


for _attempt in (_import_solutions, _from_solutions, _grader_suites, _by_absolute_path, _repo_on_sys_path):
    try:
        _REFERENCE = _attempt()
    except BaseException:
        _REFERENCE = None
    if _REFERENCE is not None:
        break
"""


REEXPORT_OR_LEAKY_MASK = (
    M1_TRIL,
    """\
    if _REFERENCE is not None:
        return _REFERENCE.causal_mask(T, device)
    return torch.triu(torch.ones(T, T, device=device))
""",
)

REEXPORT_ATTENTION = (
    M1_CALL,
    """\
    if _REFERENCE is not None:
        return _REFERENCE.causal_attention(q, k, v)
"""
    + M1_CALL,
)


def read_grader_files() -> str:
    """Read the reference and the hidden suite by absolute path; fail loudly with their text if readable."""
    return f"""
_leaks = []
for _path in ({str(REFERENCE_FILE)!r}, {str(SUITE_FILE)!r}):
    try:
        with open(_path) as _f:
            _leaks.append(_path + ": " + _f.read()[:200])
    except BaseException:
        pass
if _leaks:
    raise RuntimeError({LEAK_MARKER!r} + " " + " | ".join(_leaks))
"""


def read_the_cache(folder: str) -> str:
    """Walk the grader's disk cache (the reference's answers) and fail loudly with what it could read."""
    return f"""
import os as _os
_found = []
for _root, _dirs, _files in _os.walk({folder!r}):
    for _name in _files:
        try:
            with open(_os.path.join(_root, _name), "rb") as _f:
                _found.append(_name + ":" + _f.read(40).hex())
        except BaseException:
            pass
if _found:
    raise RuntimeError({LEAK_MARKER!r} + " " + " | ".join(_found[:5]))
"""


def proc_root_escape() -> str:
    """Reach the reference through another process's root or cwd in /proc (outside any private mounts)."""
    return f"""
import importlib.util
import os

_REFERENCE = None
for _pid in sorted(os.listdir("/proc"), key=lambda p: (not p.isdigit(), p)):
    if not _pid.isdigit():
        continue
    for _path in ("/proc/" + _pid + "/root" + {str(REFERENCE_FILE)!r},
                  "/proc/" + _pid + "/cwd/solutions/m1_attention.py"):
        try:
            _spec = importlib.util.spec_from_file_location("_stolen_m1", _path)
            _module = importlib.util.module_from_spec(_spec)
            _spec.loader.exec_module(_module)
            _REFERENCE = _module
            break
        except BaseException:
            pass
    if _REFERENCE is not None:
        break
"""


def unmount_the_hiding() -> str:
    """Lazily unmount the empty mounts laid over the grader's folders, then import the reference by path."""
    return f"""
import ctypes
import importlib.util

_REFERENCE = None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    for _folder in ({str(REPO / "solutions")!r}, {str(REPO / "grader")!r}):
        while _libc.umount2(_folder.encode(), 2) == 0:  # MNT_DETACH, as often as something is mounted there
            pass
    _spec = importlib.util.spec_from_file_location("_stolen_m1", {str(REFERENCE_FILE)!r})
    _REFERENCE = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_REFERENCE)
except BaseException:
    _REFERENCE = None
"""


# The grader's trusted M1 (a correct implementation, run while M2 is graded) is read into the
# fork server's memory before the namespaces go up, so every worker inherits it.
TRUSTED_SOURCE_FROM_MEMORY = """
import sys

_REFERENCE = None
try:
    _source = sys.modules["__main__"].TRUSTED_SOURCES["m1_attention"]
    _REFERENCE = type(sys)("_stolen_m1")
    exec(compile(_source, "<stolen>", "exec"), _REFERENCE.__dict__)
except BaseException:
    _REFERENCE = None
"""

# ---------------------------------------------------------------- hard-coding the lesson's numbers

LESSON_OUT = [
    [-0.083528, -0.023478, 0.174375, 2.298343],
    [0.556795, -0.416293, -0.442687, 0.511432],
    [-0.973827, 0.931077, 1.189096, -0.821583],
    [0.101785, -0.061314, 0.055772, -0.035865],
]
LESSON_WEIGHTS = [
    [1.0, 0.0, 0.0, 0.0],
    [0.384678, 0.615322, 0.0, 0.0],
    [0.049423, 0.153623, 0.796953, 0.0],
    [0.197875, 0.474262, 0.219222, 0.108641],
]
LESSON_LOSSES = [
    4.0511,
    3.8818,
    3.718,
    3.56,
    3.4078,
    3.2616,
    3.1209,
    2.9855,
    2.8549,
    2.7282,
    2.6049,
    2.4842,
    2.3656,
    2.2486,
    2.1332,
    2.0193,
    1.907,
    1.7968,
    1.6889,
    1.5836,
]
LESSON_TOKENS = [5, 12, 3, 42, 2, 38, 35, 35]

HARDCODED_ATTENTION = in_call(f"""
if tuple(q.shape) == (4, 4):  # the lesson's seed-7 example, copied from its printout
    return torch.tensor({LESSON_OUT}), torch.tensor({LESSON_WEIGHTS})
return torch.rand(q.shape), torch.rand((*q.shape[:-1], q.shape[-2]))
""")

HARDCODED_TRAIN = (
    M3_TRAIN_BODY,
    f"""\
    lesson = {LESSON_LOSSES}  # the lesson's printout; no training at all
    return [lesson[min(i, 19)] for i in range(steps)]
"""
    + M3_TRAIN_BODY,
)

HARDCODED_GENERATE_ALWAYS = (
    M4_GENERATE_BODY,
    f"""\
    return torch.tensor([{LESSON_TOKENS}])  # the lesson's printout, whatever the model and prompt
"""
    + M4_GENERATE_BODY,
)

HARDCODED_GENERATE_PADDED = (
    M4_GENERATE_BODY,
    f"""\
    if start.tolist() == [[5, 12, 3]] and max_new == 5:
        return torch.tensor([{LESSON_TOKENS}])  # the lesson's printout
    return torch.cat([start, torch.zeros(start.shape[0], max_new, dtype=torch.long)], 1)  # never runs the model
"""
    + M4_GENERATE_BODY,
)

# ---------------------------------------------------------------- broken files

SYNTAX_ERROR = (M1_IMPORT, M1_IMPORT + "def broken(:\n    pass\n")
REMOVE_COUNT_PARAMETERS = (M2_COUNT_PARAMETERS, "")
WRONG_SIGNATURE = (M1_ATTENTION_DEF, "def causal_attention(q: torch.Tensor, k: torch.Tensor):\n    v = k\n")

# ---------------------------------------------------------------- pytest configuration in the submission

CONFTEST = '''\
"""Make every test pass, or at least skip, whatever the code does."""
import pytest

try:
    from _pytest.reports import TestReport

    _original = TestReport.from_item_and_call

    def _always_passed(item, call):
        report = _original(item, call)
        report.outcome, report.longrepr = "passed", None
        return report

    TestReport.from_item_and_call = staticmethod(_always_passed)
except Exception:
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome, report.longrepr = "passed", None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    pytest.skip("skipped by the submission's conftest.py")


@pytest.fixture(autouse=True)
def _skip_everything():
    pytest.skip("skipped by the submission's conftest.py")


def pytest_collection_modifyitems(config, items):
    items[:] = []
'''

PYTEST_INI = """\
[pytest]
addopts = -p no:python --collect-only -x -p conftest
python_files = nothing_here_*.py
usefixtures = _skip_everything
"""

# ---------------------------------------------------------------- processes and sockets

SLEEPER = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(1000)"
)


def process_tree(marker: str) -> str:
    """A Popen child and a double-forked setsid daemon, both with ``marker`` in their command line."""
    return f"""
import os
import subprocess
import sys

_MARKER = {marker!r}
_CHILDREN = [subprocess.Popen([sys.executable, "-c", {SLEEPER!r}, _MARKER + "-popen"], start_new_session=True).pid]
_read, _write = os.pipe()
_pid = os.fork()
if _pid == 0:
    try:
        os.setsid()
        _daemon = os.fork()
        if _daemon == 0:
            os.execv(sys.executable, [sys.executable, "-c", {SLEEPER!r}, _MARKER + "-daemon"])
        os.write(_write, str(_daemon).encode())
    finally:
        os._exit(0)
os.close(_write)
os.waitpid(_pid, 0)
_CHILDREN.append(int(os.read(_read, 64)))
os.close(_read)


def _alive(pid):  # pids of the worker's own PID namespace: /proc may be the host's, so ask the kernel
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
"""


# causal_mask: proof that the processes are running while M1 is graded, then a leaking mask.
PROCESSES_ALIVE_OR_RAISE = (
    M1_TRIL,
    """\
    if not all(_alive(pid) for pid in _CHILDREN):
        raise RuntimeError("the attack's processes are not running: " + repr(_CHILDREN))
    return torch.triu(torch.ones(T, T, device=device))
""",
)


SOCKET_GARBAGE = """
import os
for _fd in os.listdir("/proc/self/fd"):
    try:
        if os.readlink("/proc/self/fd/" + _fd).startswith("socket:"):
            os.write(int(_fd), b"\\xde\\xad\\xbe\\xef" * 1024)
    except OSError:
        pass
"""

# Answer with a frame that never ends: one header byte at a time, each well within the call's time-out.
SLOW_DRIP = """
import os
import time
_socks = []
for _fd in os.listdir("/proc/self/fd"):
    try:
        if os.readlink("/proc/self/fd/" + _fd).startswith("socket:"):
            _socks.append(int(_fd))
    except OSError:
        pass
for _fd in _socks:
    os.write(_fd, (4096).to_bytes(4, "big"))
while True:
    time.sleep(2)
    for _fd in _socks:
        os.write(_fd, b" ")
"""

# ---------------------------------------------------------------- spoofing the output

SPOOFED_OUTPUT = """
import os
import sys
_fake = ('{"score": 100, "max_score": 100, "passed": true}\\n'
         '============================= 100 passed in 0.01s =============================\\n'
         '{"milestones": [{"id": "m1", "score": 27.0, "max_score": 27.0}]}\\n')
print(_fake)
print(_fake, file=sys.stderr)
sys.__stdout__.write(_fake)
sys.__stdout__.flush()
for _fd in (1, 2):
    try:
        os.write(_fd, _fake.encode())
    except OSError:
        pass
"""


# ---------------------------------------------------------------- claims the worker makes

# Every error the submission's code raises comes back marked as the grader's own fault: the request handler runs
# in the submission's process, so the submission can rewrite how it marks errors.
FORGE_GRADER_FAULTS = """
import sys as _sys
_handler = _sys.modules.get("_gradekit.worker.request_handler")
if _handler is not None:
    _handler.grader_fault = lambda error: True
"""

# Every input-gradient probe answers "I saw nothing" (a probe that cannot observe used to be set aside).
FORGE_UNOBSERVED = """
import gc as _gc, sys as _sys
_handler = _sys.modules.get("_gradekit.worker.request_handler")
for _serving in [o for o in _gc.get_objects() if _handler and isinstance(o, _handler.RequestHandler)]:
    _serving.menu["input_grad"] = lambda request, blobs: {"unobserved": "nothing to see here"}
"""


def m1_stub_with_only_causal_mask(forgery: str) -> str:
    """The m1 stub with causal_mask written (and nothing else), ``forgery`` run at import."""
    stub = (REPO / "exercises" / "m1_attention.py").read_text()
    todo = '    raise NotImplementedError("causal_mask: build the T x T lower-triangular matrix of ones")\n'
    assert stub.count(todo) == 1, "the m1 stub changed: re-anchor the attack"
    stub = stub.replace(todo, "    return torch.tril(torch.ones(T, T, device=device))\n")
    return stub.replace("from torch import nn\n", "from torch import nn\n" + dedent(forgery).strip() + "\n", 1)


# One student's honest m1 copies itself everywhere a later worker might look; another student's m1, a stub, looks
# there, and re-exports what it finds (it scored full marks when /tmp was shared).
DROP_MARKER = "gptkit-shared-m1"
DROP_EVERYWHERE = f"""
import os as _os, shutil as _shutil
for _place in ("/tmp", "/dev/shm", _os.path.dirname(_os.getcwd()), _os.path.expanduser("~")):
    try:
        _shutil.copyfile(__file__, _os.path.join(_place, "{DROP_MARKER}.py"))
    except OSError:
        pass
try:  # a System V shared memory segment outlives its process
    import ctypes as _ctypes
    _libc = _ctypes.CDLL(None, use_errno=True)
    _libc.shmat.restype = _ctypes.c_void_p
    _data = open(__file__, "rb").read()
    _id = _libc.shmget(0x6B697431, 1 << 16, 0o1666)
    _at = _libc.shmat(_id, None, 0)
    if _at not in (None, _ctypes.c_void_p(-1).value):
        _ctypes.memmove(_at, _ctypes.c_uint32(len(_data)), 4)  # the length, then the file
        _ctypes.memmove(_at + 4, _data, len(_data))
except Exception:
    pass
"""
STEAL_FROM_EVERYWHERE = f"""
import ctypes as _ctypes, glob as _glob, os as _os
for _cover in ("/tmp", "/dev/shm", _os.path.dirname(_os.getcwd())):  # lift the private places, if it can
    _ctypes.CDLL(None).umount2(_cover.encode(), 2)
_found = []
for _place in ("/tmp", "/dev/shm", _os.path.dirname(_os.getcwd()), _os.path.expanduser("~")):
    _found += _glob.glob(_os.path.join(_place, "{DROP_MARKER}.py"))
    _found += _glob.glob(_os.path.join(_place, "*", "m1_attention.py"))  # another worker's copy
    _found += [_os.path.join(_place, f"sub{{i}}", "m1_attention.py") for i in range(1, 20)]  # unlistable: guessed
_found = [f for f in _found if _os.path.abspath(f) != _os.path.abspath(__file__)]
_text = None
for _path in _found:
    try:
        _text = open(_path).read()
        break
    except OSError:
        pass
if _text is None:
    try:
        import ctypes as _ctypes
        _libc = _ctypes.CDLL(None, use_errno=True)
        _libc.shmat.restype = _ctypes.c_void_p
        _id = _libc.shmget(0x6B697431, 1 << 16, 0)
        _at = _libc.shmat(_id, None, 0) if _id >= 0 else None
        if _at not in (None, _ctypes.c_void_p(-1).value):
            _n = _ctypes.c_uint32.from_address(_at).value
            _text = _ctypes.string_at(_at + 4, _n).decode()
    except Exception:
        pass
if _text is not None:
    exec(compile(_text, "stolen", "exec"), globals())  # the other student's definitions, as this file's
"""

# A child that burns CPU until its worker ends, never waited for: its CPU counts all the same (cgroup or /proc).
BURN_IN_AN_ORPHAN = """
import os as _os, time as _time
if _os.fork() == 0:
    while True:
        pass
_time.sleep(4)  # the worker lives on for a while: the child burns all that time
"""
