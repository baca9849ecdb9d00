"""The grading process's side of the sandbox: start the fork server, talk to workers.

Every value a worker sends back is decoded by ``protocol.decode`` (validated,
never unpickled); every decision is taken by the caller, in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import cache
from grader.errors import Finding, InternalError
from grader.milestones import MILESTONES, STUDENT_MODULES, preloads
from grader.submission import in_notebook_terms

from . import secrecy
from .common import wire
from .common.agreement import (
    NOT_IMPLEMENTED_MESSAGE,
    OUTPUT_LIMIT_EXIT,
    ErrorKind,
    Reply,
    Request,
    ServerRequest,
    signal_of_exit_code,
)
from .common.wire import ProtocolError
from .worker import jail

FORK_SERVER = Path(__file__).with_name("worker") / "fork_server.py"  # started as a script: see worker/__init__.py
PACKAGE_DIR = Path(__file__).resolve().parents[1]
PROJECT_DIR = PACKAGE_DIR.parent
# What the worker must not see: the grader (suites), the reference, the project's tests.
PRIVATE_NAMES = ("grader", "solutions", "tests", "exercises", "benchmarks", "gptkit", "__editable__")
MAX_SUBMISSION_BYTES = 20 << 20
LOG_NAME = "fork_server.log"  # the fork server's own output, in its folder


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 20.0
    test_seconds: float = 40.0
    memory_bytes: int = 3 << 30
    output_bytes: int = 8 << 20
    cpu_seconds: int = 300
    processes: int = 64
    open_files: int = 256
    submission_seconds: float | None = None  # all of one submission's checks together


class StudentError(Finding):
    """The student's code raised: type, message and where in their files."""

    def __init__(self, type_: str, message: str, where: list[str]):
        super().__init__(f"{type_}: {message}")
        self.type, self.message, self.where = type_, message, where

    def __str__(self) -> str:
        at = f" (at {', then '.join(map(in_notebook_terms, self.where))})" if self.where else ""
        if self.type == ErrorKind.NOT_IMPLEMENTED:
            return f"{NOT_IMPLEMENTED_MESSAGE}: your code raised {ErrorKind.NOT_IMPLEMENTED}{at}"
        if self.type in ErrorKind.ENDS_THE_GRADER:
            return f"your code raised {self.type}{at}: a submission must not try to end the grader"
        return f"your code raised {self.type}: {self.message}{at}"


class ProbeFault(Finding):
    """The grader's own code failed inside the worker (a probe, a hook): not the student's error.

    The worker reports it; like everything a worker says, a submission could forge it, which
    earns nothing but a check set aside and flagged for the instructor (see grader/results.py).
    """

    def __init__(self, message: str, trace: str):
        super().__init__(message)
        self.trace = trace


class WorkerCrash(Finding):
    """The worker died, hung, or sent garbage; the message says which, in plain words. ``limit``: the limit
    it ran into, "time" or "memory", where that is known; "" for any other end."""

    def __init__(self, message: str, limit: str = ""):
        super().__init__(message)
        self.limit = limit


class GraderError(InternalError):
    """The grader itself could not run (not the student's fault)."""


# ------------------------------------------------------------------ fork server


class ForkServer:
    """A ``python -I -S`` fork server (``worker/fork_server.py``) with torch preloaded, in its own namespaces.

    With ``clients``, it is a batch's server: up to that many grading processes each get a copy
    of it through ``ForkServer.attach(server.address)`` (see ``worker/shared_server.py``).
    """

    proc: subprocess.Popen | None  # the server's process; None for a batch server's copy

    def __init__(
        self,
        limits: Limits = Limits(),
        clients: int = 0,
        preload: tuple[str, ...] | None = None,
        many: bool | None = None,
    ):
        """``preload``: modules its workers need that are slow to import (``grader.milestones.preloads``),
        imported once in the server; None: those of every milestone (a batch or a contest grades them all).
        ``many``: the server will fork many workers (a batch, a watch), so it spends about 0.4 s at start on
        making each fork cheaper (``worker/hugepages.py``); None: only if it serves ``clients``. A single
        ``grade check`` forks three or four and is better off starting sooner."""
        self._init_state(limits, Path(tempfile.mkdtemp(prefix="gptkit-")), prefix="")
        self.tmp.chmod(0o711)  # workers with their own user ids reach their folders, and list nothing
        ours, theirs = socket.socketpair()
        passed, self.address = [theirs], None
        config = {
            "control_fd": theirs.fileno(),
            "sys_path": [str(self._site_view())],
            "scratch": str(self.tmp),
            "binds": [str(p) for p in _site_dirs()] + [sys.prefix, os.path.dirname(sys.executable)],
            "hide": [str(p) for p in self._private_paths()],
            "student_modules": list(STUDENT_MODULES),
            "preload": list(preloads(MILESTONES) if preload is None else preload),
            "many": bool(clients) if many is None else many,
        }
        if clients:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.address = str(self.tmp / "server.sock")
            listener.bind(self.address)
            os.chmod(self.address, 0o600)
            listener.listen(clients)
            passed.append(listener)
            config.update(listen_fd=listener.fileno(), listen_path=self.address, clients=clients)
        env = {
            "PATH": os.defpath,
            "LANG": "C.UTF-8",
            "HOME": str(self.tmp),
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        self._log = open(self.tmp / LOG_NAME, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(FORK_SERVER), json.dumps(config)],
            pass_fds=[s.fileno() for s in passed],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=env,
            cwd=self.tmp,
            start_new_session=True,
        )
        for s in passed:
            s.close()
        self.control = ours

    def _init_state(self, limits: Limits, tmp: Path, prefix: str) -> None:
        self.limits, self.tmp, self.prefix = limits, tmp, prefix
        self._workers: list[WorkerConnection] = []
        self.spawned = 0  # workers started so far
        self.worker_cpu = 0.0  # CPU seconds of every worker reaped so far, their process trees included
        self._hello: dict | None = None
        self.proc = None

    @classmethod
    def attach(cls, address: str, limits: Limits = Limits()) -> ForkServer:
        """This process's copy of a batch's server; OSError if it no longer takes new clients."""
        server = cls.__new__(cls)
        server._init_state(limits, Path(address).parent, prefix=f"p{os.getpid()}.{id(server)}-")
        server.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.control.connect(address)
            server.hello()  # the copy says hello once every grading process has connected
        except (OSError, GraderError) as e:
            server.control.close()
            raise OSError(f"the batch's fork server did not answer: {e}") from None
        return server

    # The worker gets site-packages through a folder of links that leaves out this project.
    def _site_view(self) -> Path:
        view = self.tmp / "site"
        view.mkdir()
        linked: set[str] = set()  # os calls, not pathlib: a site-packages folder holds hundreds of entries
        for site in _site_dirs():
            for name in os.listdir(site):
                if name.startswith(PRIVATE_NAMES) or name.endswith(".pth") or name in linked:
                    continue
                os.symlink(os.path.join(site, name), os.path.join(view, name))
                linked.add(name)
        return view

    @staticmethod
    def _private_paths() -> list[Path]:
        # The disk cache holds the reference's answers: hidden wherever the reference is.
        cached = [where] if (where := cache.folder()) is not None and where.is_dir() else []
        return [PACKAGE_DIR, *cached] + [
            PROJECT_DIR / n for n in ("solutions", "exercises", "tests", "benchmarks", "stretch", ".git")
        ]

    def hello(self) -> dict:
        """Wait for the fork server to be ready; says which protections took."""
        if self._hello is None:
            self.control.settimeout(120)
            try:
                self._hello, _ = wire.recv(self.control)
            except (OSError, EOFError, ProtocolError) as e:
                log = (self.tmp / LOG_NAME).read_text(errors="replace")[-2000:]
                raise GraderError(f"the grading worker did not start ({e}):\n{log}") from None
        return self._hello

    @property
    def protections(self) -> list[str]:
        return ["separate-process", "isolated-interpreter", "resource-limits", *self.hello()["protections"]]

    def spawn(self, submission: Path) -> WorkerConnection:
        """A fresh worker whose working directory is a private copy of the submission."""
        self.hello()
        self.spawned += 1
        copy = self.tmp / f"{self.prefix}sub{self.spawned}"
        copy_submission(submission, copy)
        ours, theirs = socket.socketpair()
        out_path = self.tmp / f"{self.prefix}out{self.spawned}.txt"
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        limits = {
            name: getattr(self.limits, name)
            for name in ("output_bytes", "memory_bytes", "cpu_seconds", "processes", "open_files")
        }
        wire.send(self.control, {"op": ServerRequest.SPAWN, "submission": str(copy), "limits": limits})
        socket.send_fds(self.control, [b"x"], [theirs.fileno(), out])
        theirs.close()
        os.close(out)
        reply, _ = wire.recv(self.control)
        worker = WorkerConnection(self, ours, reply["pid"], out_path, copy)
        self._workers.append(worker)
        return worker

    def cpu_of(self, pid: int) -> float:
        """A live worker's CPU seconds so far, its whole process tree, measured by the fork server."""
        wire.send(self.control, {"op": ServerRequest.CPU, "pid": pid})
        reply, _ = wire.recv(self.control)
        return float(reply.get("cpu", 0.0))

    def reap(self, pid: int, grace: float) -> dict:
        wire.send(self.control, {"op": ServerRequest.REAP, "pid": pid, "grace": grace})
        reply, _ = wire.recv(self.control)
        self.worker_cpu += float(reply.get("cpu", 0.0))
        return reply

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
        self.control.close()
        if self.proc is None:
            return  # a copy of a batch's server: ending that server is its owner's job
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        for parent in jail.CGROUP_PARENTS:  # this server's cgroups, now that it is gone (and any stale ones)
            jail.sweep(parent)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _site_dirs() -> list[Path]:
    return [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]


def copy_submission(src: Path, dst: Path) -> None:
    """Copy a submission's own files (no links, no caches), refusing absurd sizes."""
    total = 0
    dst.mkdir()
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_symlink() or "__pycache__" in rel.parts or rel.parts[0].startswith(".") or not path.is_file():
            continue
        total += path.stat().st_size
        if total > MAX_SUBMISSION_BYTES:
            raise GraderError(f"the submission is larger than {MAX_SUBMISSION_BYTES >> 20} MB")
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dst / rel)


# ------------------------------------------------------------------ one worker

SIGNALS: dict[int, str] = {  # signal.Signals are ints: looked up by exit code - 128
    signal.SIGSEGV: "crashed with a segmentation fault",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGBUS: "crashed with a bus error",
    signal.SIGFPE: "crashed with a floating-point exception",
    # Sent by the kernel at the memory limit, or by the code itself (os.kill(os.getpid(), 9)): not told apart here.
    signal.SIGKILL: "was killed (SIGKILL): by your code itself, or for using more memory than allowed",
    signal.SIGXCPU: "used more CPU time than allowed",
}
LIMIT_OF_SIGNAL: dict[int, str] = {signal.SIGKILL: "memory", signal.SIGXCPU: "time"}  # the limit each one means


class WorkerConnection:
    """The grading process's end of one worker process: sends it requests, checks its replies, reaps it."""

    def __init__(self, server: ForkServer, sock: socket.socket, pid: int, output: Path, copy: Path | None = None):
        self.server, self.sock, self.pid, self.output = server, sock, pid, output
        self.copy = copy  # its private copy of the submission: deleted once it is reaped, with what it wrote there
        self.alive = True
        self.deadline: float | None = None  # the current test's time budget, set by its MilestoneView
        self.hung = False
        self.cpu_at_end: float | None = None  # measured when it was reaped

    def request(
        self, header: dict, args: Sequence[Any] = (), kwargs: dict | None = None, timeout: float | None = None
    ) -> Any:
        """Send one request and decode the reply, within ``timeout`` seconds (default: the limits' call_seconds;
        either way no later than the current test's deadline)."""
        from .common import protocol  # torch: imported only once a worker is used

        timeout = self.server.limits.call_seconds if timeout is None else timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
        if not self.alive:
            raise WorkerCrash("the worker had already stopped")
        blobs: list[bytes] = []
        header = dict(
            header,
            args=[protocol.encode(a, blobs, _no_handle) for a in args],
            kwargs={k: protocol.encode(v, blobs, _no_handle) for k, v in (kwargs or {}).items()},
        )
        timeout = max(timeout, 0.1)
        self.sock.settimeout(timeout)
        try:
            wire.send(self.sock, header, blobs)
            reply, rblobs = wire.recv(self.sock, deadline=time.monotonic() + timeout)
            reply = secrecy.redact_reply(reply)  # before anything reads it: no trusted code reaches a report
            if Reply.ERROR in reply:
                err = reply[Reply.ERROR]
                if err.get(Reply.GRADER_FAULT) is True:
                    raise ProbeFault(f"{err.get('type')}: {err.get('message')}", str(err.get(Reply.TRACE, ""))[:4000])
                raise StudentError(
                    str(err.get("type")), str(err.get("message")), [str(w) for w in err.get("where", [])][:3]
                )
            return protocol.decode(reply[Reply.VALUE], rblobs, self._remote)
        except TimeoutError:
            self._end(grace=0)
            self.hung = True
            raise WorkerCrash(
                f"no answer within {timeout:.1f} s: an infinite loop, or far too much work?", limit="time"
            ) from None
        except (EOFError, OSError) as e:
            raise WorkerCrash(*self._why_it_died(e)) from None
        except (ProtocolError, KeyError, TypeError, AttributeError, RecursionError) as e:
            self._end(grace=0)
            raise WorkerCrash(f"the worker sent back malformed data ({e})") from None

    def _remote(self, id_: int, type_: str) -> Remote:
        return Remote(self, id_, type_)

    def _why_it_died(self, e: Exception) -> tuple[str, str]:
        """(what happened, the limit it ran into: LIMIT_OF_SIGNAL's, or "")."""
        status = self._end(grace=1.0)
        code = status.get("exit")
        if status.get("killed") or code is None:
            return f"the worker stopped answering ({e})", ""
        if code == OUTPUT_LIMIT_EXIT:
            return f"your code printed more than {self.server.limits.output_bytes >> 20} MB of output", ""
        sig = signal_of_exit_code(code) or 0
        if (what := SIGNALS.get(sig)) is not None:
            return f"the worker {what}", LIMIT_OF_SIGNAL.get(sig, "")
        return f"the worker process ended with exit code {code} (os._exit or sys.exit in your code?)", ""

    def restore(self, saved: Any) -> Remote:
        """``Remote.save``'s bytes (from another worker) as an object in this one, unpickled here."""
        return self.request({"op": Request.RESTORE, "keep": True}, (saved,))

    @property
    def cpu(self) -> float:
        """CPU seconds its whole process tree has used so far (children, killed ones too, where a cgroup counts
        them), as the fork server measures it: never a figure the worker sends."""
        return self.cpu_at_end if self.cpu_at_end is not None else self.server.cpu_of(self.pid)

    def _end(self, grace: float) -> dict:
        if not self.alive:
            return {}
        self.alive = False
        self.sock.close()
        status = self.server.reap(self.pid, grace)
        self.cpu_at_end = float(status.get("cpu", 0.0))
        if self.copy is not None:
            shutil.rmtree(self.copy, ignore_errors=True)
            self.output.unlink(missing_ok=True)  # what it printed: never read
        return status

    def close(self) -> None:
        self._end(grace=1.0)  # a worker ends by itself on EOF: its CPU time then reaches the fork server


def _no_handle(obj: Any) -> dict:
    if isinstance(obj, Remote):
        return {"t": "handle", "id": obj.id, "type": obj.type}
    raise TypeError(f"cannot send a {type(obj).__name__} to the worker")


class Remote:
    """A proxy for an object living in the worker (a module, a model, ...)."""

    def __init__(self, worker: WorkerConnection, id_: int, type_: str):
        self.worker, self.id, self.type = worker, id_, type_

    def __repr__(self) -> str:
        return f"<{self.short_type} in the worker>"

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    def _ask(self, op: str, *args: Any, kwargs: dict | None = None, **fields: Any) -> Any:
        return self.worker.request(dict(fields, op=op, handle=self.id), args, kwargs)

    def __call__(self, *args: Any, grad: bool = True, seed: int | None = None) -> Any:
        return self._ask(Request.CALL, *args, grad=grad, seed=seed)

    def call(self, method: str, *args: Any, grad: bool = True, keep: bool = False, **kwargs: Any) -> Any:
        return self._ask(Request.CALL, *args, kwargs=kwargs, name=method, grad=grad, keep=keep)

    def attr(self, name: str) -> Any:
        return self._ask(Request.GETATTR, name=name)

    def state_dict(self) -> dict:
        return self._ask(Request.STATE_DICT)

    def describe(self) -> dict:
        return self._ask(Request.DESCRIBE)

    def load(self, state: dict) -> None:
        self.worker.request({"op": Request.LOAD, "handle": self.id}, (dict(state),))

    def input_grad(self, x: Any, *rest: Any, via: str | None = None) -> Any:
        """The (T, T) gradient sizes of ``self(x, *rest)``'s positions with respect to ``x``'s."""
        return self._ask(Request.INPUT_GRAD, x, *rest, via=via)

    def grads(self, x: Any, w: Any) -> Any:
        """Each parameter's gradient of ``(self(x) * w).sum()``, by name (a shared one once)."""
        return self._ask(Request.GRADS, x, w)

    def save(self) -> Any:
        """The object as ``torch.save``'s bytes (a uint8 tensor), pickled in its worker: for ``restore``."""
        return self._ask(Request.SAVE)

    def count_positions(self, via: str) -> Remote:
        """A counter (read its ``positions`` attribute) of the positions fed to submodule ``via``."""
        return self._ask(Request.COUNT_POSITIONS, via=via, keep=True)
