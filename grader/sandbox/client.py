"""The grading process's side of the sandbox: start the fork server, talk to workers.

Every value a worker sends back is decoded by ``protocol.decode`` (validated,
never unpickled); every decision is taken by the caller, in this process.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import cache, nofollow
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
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 20.0
    test_seconds: float = 40.0
    memory_bytes: int = 3 << 30
    output_bytes: int = 8 << 20
    cpu_seconds: int = 300
    processes: int = 64
    open_files: int = 256
    # All of one submission's checks together, the grading side's own work on its replies included: checks
    # past it fail at once. None: no limit (only for callers that bound the grading themselves).
    submission_seconds: float | None = 600.0
    # What a worker may write into its copy of the submission: a tmpfs of this size in its own mount namespace,
    # paid from its memory cgroup and gone with it (jail.private_places); on disk, each file's size only.
    copy_bytes: int = 256 << 20


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


class ReplyTooLarge(WorkerCrash):
    """A reply the grading side will not process: more text, items or depth than any honest value has.

    Checked before anything reads the reply (redaction included, which costs about a microsecond a character):
    what the submission returned is its own failed check, never minutes of the grading process's time."""


# The most a worker's reply may hold, checked before the grading process reads it. An honest reply carries its
# tensors as raw blobs, names and messages of at most a few KB (an error's message: 2,000 characters).
MAX_STRING_CHARS = 64 << 10  # one string (a dictionary key too)
MAX_REPLY_CHARS = 256 << 10  # every string of a reply together
MAX_REPLY_ITEMS = 100_000  # values, at every level
MAX_REPLY_DEPTH = 64  # nesting (protocol.decode then allows MAX_DEPTH values deep)


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n / 1024:.0f} KB" if n >= 1024 else f"{n} characters"


def check_reply_size(reply: Any) -> None:
    """Raise ReplyTooLarge if ``reply`` (a worker's decoded JSON header) is past any of the bounds above.

    Iterative, and stops at the first bound passed: its cost is bounded by the header's 4 MB, whatever it holds."""
    chars, items, stack = 0, 0, [(reply, 0)]
    while stack:
        value, depth = stack.pop()
        items += 1
        if items > MAX_REPLY_ITEMS:
            raise ReplyTooLarge(
                f"your code sent back more than {MAX_REPLY_ITEMS:,} values in one reply: the grader "
                f"reads at most {MAX_REPLY_ITEMS:,} (return tensors, not long lists)"
            )
        if depth > MAX_REPLY_DEPTH:
            raise ReplyTooLarge(f"your code sent back a value nested more than {MAX_REPLY_DEPTH} levels deep")
        if isinstance(value, dict):
            stack.extend((k, depth + 1) for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
        elif isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                raise ReplyTooLarge(
                    f"your code returned a {_size(len(value))} string; the grader reads at most "
                    f"{_size(MAX_STRING_CHARS)} in one string"
                )
            chars += len(value)
            if chars > MAX_REPLY_CHARS:
                raise ReplyTooLarge(
                    f"your code sent back more than {_size(MAX_REPLY_CHARS)} of text in one reply; "
                    f"the grader reads at most {_size(MAX_REPLY_CHARS)}"
                )


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
            with unix_name(self.address) as name:
                listener.bind(name)
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
            with unix_name(address) as name:
                server.control.connect(name)
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
    def alive(self) -> bool:
        """The server still serves: its process runs (a batch's copy: its end of the connection is open). Asked
        between gradings, when no reply is due, so anything readable on the connection means it was closed."""
        if self.proc is not None and self.proc.poll() is not None:
            return False
        try:
            # Polled, not received: the socket's timeout (hello's) would make a receive wait for it.
            readable, _, _ = select.select([self.control], [], [], 0)
        except (OSError, ValueError):  # closed on this side
            return False
        return not readable  # readable: closed by the server, or bytes that are no reply we await

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
            for name in ("output_bytes", "memory_bytes", "cpu_seconds", "processes", "open_files", "copy_bytes")
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
        remove_tree(self.tmp)
        for parent in jail.CGROUP_PARENTS:  # this server's cgroups, now that it is gone (and any stale ones)
            jail.sweep(parent)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# A Unix socket's name holds 107 bytes at most (Linux); a folder under a long TMPDIR (a test's, a CI's) is longer.
MAX_UNIX_NAME = 100


@contextlib.contextmanager
def unix_name(path: str) -> Iterator[str]:
    """A name ``bind`` and ``connect`` take for the socket at ``path``: the path itself, or where it is too long,
    the same file reached through a descriptor of its folder (``/proc/self/fd/N/name``, Linux)."""
    if len(os.fsencode(path)) <= MAX_UNIX_NAME or not os.path.isdir("/proc/self/fd"):
        yield path
        return
    folder = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        yield f"/proc/self/fd/{folder}/{os.path.basename(path)}"
    finally:
        os.close(folder)


def _site_dirs() -> list[Path]:
    return [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]


def copy_submission(src: Path, dst: Path) -> list[str]:
    """Copy a submission's own files (no caches, no links: none is followed, none copied), refusing absurd sizes;
    returns the links it left out. Read without following links (grader/nofollow.py), so a link swapped in for
    a file or a folder after the submission was found is left out too."""
    total, links = 0, []
    dst.mkdir()
    try:
        for entry in nofollow.walk(src):
            if entry.kind == nofollow.LINKED:
                links.append(entry.path.as_posix())
            if entry.kind != nofollow.FILE:
                continue
            try:
                f = entry.open()
            except nofollow.LinkFound:
                links.append(entry.path.as_posix())
                continue
            with f:
                budget = MAX_SUBMISSION_BYTES - total
                data = f.read(budget + 1)
                total += len(data)
                if total > MAX_SUBMISSION_BYTES:
                    raise GraderError(f"the submission is larger than {MAX_SUBMISSION_BYTES >> 20} MB")
                (dst / entry.path).parent.mkdir(parents=True, exist_ok=True)
                (dst / entry.path).write_bytes(data)
    except (nofollow.NotOwnFile, nofollow.TreeTooLarge) as e:
        raise GraderError(str(e)) from None
    return links


# ------------------------------------------------------------------ deleting what a worker wrote

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_cleanup_said = False  # a failed clean-up is said once per process (and logged every time)


def remove_tree(path: Path) -> bool:
    """Delete ``path`` (a folder with everything in it, or a file); never raises. False, said once, if some
    of it stayed.

    A worker decides the shape of what it wrote: thousands of nested folders (a path longer than the system
    takes, and past Python's recursion limit in 3.11's ``shutil.rmtree``), folders it made unreadable. So the
    walk is iterative, by directory descriptors (names are relative, never a long path), one descriptor open at
    a time, and links are removed, never followed. The worker is reaped first: nothing changes the tree meanwhile.
    """
    try:
        _remove_tree(os.fspath(path))
        return True
    except OSError as e:
        global _cleanup_said
        log.warning("could not delete %s: %s", path, e)
        if not _cleanup_said:
            _cleanup_said = True
            print(f"grade: warning: could not delete {path} ({e}); delete it by hand", file=sys.stderr)
        return False


def _open_dir(name: str, dir_fd: int | None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:  # a folder the worker made unreadable: ours to open again
        # chmod through a descriptor of the folder itself: by name it would follow a link swapped in meanwhile
        # (by a process of the worker's that outlived it, where no PID namespace took) to anything on the machine
        if not hasattr(os, "O_PATH"):  # not Linux: no worker there has a user id of its own to outlive it with
            os.chmod(name, 0o700, dir_fd=dir_fd)
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        where = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            os.chmod(f"/proc/self/fd/{where}", 0o700)
        finally:
            os.close(where)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _remove_tree(path: str) -> None:
    """remove_tree's walk (see there); OSError where some of ``path`` stays."""
    fd = _open_top(path)
    if fd is None:
        return
    # One frame per folder on the way down: (its name in its parent, its identity, its subfolders left to visit).
    frames: list[tuple[str, tuple[int, int], list[str]]] = [(path, _identity(fd), [])]
    try:
        fresh = True  # the current folder has not been listed yet
        while True:
            if fresh:
                _list_folder(fd, frames[-1][2])
            if frames[-1][2]:  # down into the next subfolder
                name = frames[-1][2].pop()
                child = _open_dir(name, fd)
                os.close(fd)
                fd = child
                frames.append((name, _identity(fd), []))
                fresh = True
                continue
            name, _, _ = frames.pop()  # empty now: up, and remove it
            if not frames:
                os.close(fd)
                fd = -1
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(path)
                return
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            if _identity(fd) != frames[-1][1]:
                raise OSError(f"{path} changed while it was being deleted")
            os.rmdir(name, dir_fd=fd)
            fresh = False
    finally:
        if fd >= 0:
            os.close(fd)


def _open_top(path: str) -> int | None:
    """A descriptor of the folder ``path``, where the walk starts; None where there is no folder to walk: ``path``
    is gone, or was a file or a link, unlinked here (a link itself, never what it points to)."""
    try:
        return _open_dir(path, None)
    except FileNotFoundError:
        return None
    except (NotADirectoryError, OSError) as e:
        if isinstance(e, NotADirectoryError) or os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
            return None
        raise


def _identity(fd: int) -> tuple[int, int]:
    """The folder open as ``fd``, as (device, inode): what going up by ".." must arrive at again."""
    info = os.fstat(fd)
    return info.st_dev, info.st_ino


def _list_folder(fd: int, subfolders: list[str]) -> None:
    """List the folder open as ``fd`` once: its subfolders into ``subfolders``, everything else (files, links,
    anything that is not a folder) unlinked by name relative to ``fd``, never followed."""
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subfolders.append(entry.name)
            else:
                with contextlib.suppress(FileNotFoundError):  # gone already: what was wanted
                    os.unlink(entry.name, dir_fd=fd)


# ------------------------------------------------------------------ one worker

SIGNALS: dict[int, str] = {  # signal.Signals are ints: looked up by exit code - 128
    signal.SIGSEGV: "crashed with a segmentation fault",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGBUS: "crashed with a bus error",
    signal.SIGFPE: "crashed with a floating-point exception",
    # Sent by the kernel at the memory limit, or by the code itself (os.kill(os.getpid(), 9)): not told apart here.
    signal.SIGKILL: "was killed (SIGKILL) by your code itself or for using more memory than allowed",
    signal.SIGXCPU: "used more CPU time than allowed",
}
LIMIT_OF_SIGNAL: dict[int, str] = {signal.SIGXCPU: "time"}  # the limit each one means, whoever sent it
# SIGKILL is "memory" only when the worker's memory cgroup counted an OOM kill (the fork server's ``oom``): a
# submission can SIGKILL itself, and a verdict of "memory limit exceeded" would then send the student hunting for
# a memory bug they do not have.
OOM_KILLED = "was killed for using more memory than allowed (--memory-mb)"
# No ": " inside them: a report takes a message's cause from after its last one (batch/summary.likely_cause).
NOT_OOM_KILLED = "was killed (SIGKILL) by your code itself (os.kill?) or from outside, not for its memory"


class WorkerConnection:
    """The grading process's end of one worker process: sends it requests, checks its replies, reaps it."""

    def __init__(self, server: ForkServer, sock: socket.socket, pid: int, output: Path, copy: Path | None = None):
        self.server, self.sock, self.pid, self.output = server, sock, pid, output
        self.copy = copy  # its private copy of the submission: deleted once it is reaped, with what it wrote there
        self.alive = True
        self.deadline: float | None = None  # the current test's time budget, set by its MilestoneView
        self.hung = False
        self.cpu_at_end: float | None = None  # measured when it was reaped
        self.keep_output = False  # a test run reads what it printed once it is reaped (grader/sandbox/testrun.py)

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
            check_reply_size(reply)  # first: every later step's cost grows with the reply's text
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
        except wire.TooLarge as e:  # left unread: the worker's stream is out of step
            self._end(grace=0)
            raise ReplyTooLarge(f"your code sent back {e}") from None
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
        if sig == signal.SIGKILL and status.get("oom") is not None:  # measured by the kernel, not guessed
            return (f"the worker {OOM_KILLED}", "memory") if status["oom"] else (f"the worker {NOT_OOM_KILLED}", "")
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
            remove_tree(self.copy)
            if not self.keep_output:
                remove_tree(self.output)  # what it printed: never read
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
