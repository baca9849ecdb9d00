"""The grading process's side of the sandbox: start the fork server, talk to workers.

Every value a worker sends back is decoded by ``protocol.decode`` (validated,
never unpickled); every decision is taken by the caller, in this process.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import mmap
import os
import resource
import select
import signal
import socket
import stat
import struct
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


# The bytes a worker's replies may hold (plain data and tensor data together), each measured before it is read:
# its header by the length prefix, its tensors by the header's list of blob sizes (``wire.recv_measured``).
# Measured on the reference with benchmarks/reply_bytes.py (2026-12-04): a whole `grade check solutions` (every
# milestone) receives about 1,400 replies, the largest 0.55 MiB (a state_dict), 4.6 MiB in all; `-m lmbudget`
# 47, the largest 0.76 MiB (32 windows' logits), 24.7 MiB in all, its saved model 0.46 MiB. A reply far past
# these costs the grading process its memory and minutes: 508 MiB tensors from every m1 function held it at
# 6.5 GB for 117 s.
MAX_REPLY_BYTES = 64 << 20  # one reply: 80 times the largest honest one
# One reply to Request.SAVE (lmbudget's trained model, as torch.save's bytes): its suite refuses a model over
# 256 MiB once saved with a message of its own, so the wire leaves that check its say, and refuses only past it.
MAX_SAVED_REPLY_BYTES = 257 << 20
# Every reply of one submission's grading together (``ReplyBudget``): 17 times what every milestone and lmbudget
# together receive (29 MiB), and still 8 times it beside a saved model at its limit.
MAX_SUBMISSION_REPLY_BYTES = 512 << 20
REPLY_SLOTS_BYTES = 4096  # each grading process's part of a ReplyBudget's shared page: its count and its words

# The most a worker's reply may hold in plain data, checked before the grading process reads it. An honest reply
# carries its tensors as raw blobs, names and messages of at most a few KB (an error's message: 2,000 characters).
MAX_STRING_CHARS = 64 << 10  # one string (a dictionary key too)
MAX_REPLY_CHARS = 256 << 10  # every string of a reply together
MAX_REPLY_ITEMS = 100_000  # values, at every level
MAX_REPLY_DEPTH = 64  # nesting (protocol.decode then allows MAX_DEPTH values deep)


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n / 1024:.0f} KB" if n >= 1024 else f"{n} characters"


def _mb(n: int) -> str:
    """Bytes in MB (MiB), a whole number without its ".0": "508 MB", "63.5 MB", "0.2 MB"."""
    return f"{n / (1 << 20):.1f}".removesuffix(".0") + " MB"


class ReplyBudget:
    """What one submission's grading may still receive from its workers, in bytes, and, once a reply was refused
    as too large, why its grading ended there (``ended``): every later check of it is then not run.

    Counted over every grading process of the submission: ``ReplyBudget(processes=n)`` is made before they are
    forked (an anonymous shared mapping, one slot each), and each takes its own with ``slot(i)``. A process
    writes only its own slot and reads them all, so no lock is needed; two processes reading at once may each
    take one reply more than what is left, which ``MAX_REPLY_BYTES`` bounds."""

    def __init__(self, total: int = MAX_SUBMISSION_REPLY_BYTES, processes: int = 1):
        self.total, self.processes, self.index = total, processes, 0
        self._page = mmap.mmap(-1, REPLY_SLOTS_BYTES * processes)  # MAP_SHARED: the forked processes share it

    def slot(self, index: int) -> ReplyBudget:
        """The same budget, counted in slot ``index`` (one per grading process: 0 for the first)."""
        budget = copy.copy(self)
        budget.index = index
        return budget

    @property
    def left(self) -> int:
        used = sum(self._used(i) for i in range(self.processes))
        return max(0, self.total - used)

    def take(self, n: int) -> None:
        """Count ``n`` bytes received (after they were measured against ``left``)."""
        struct.pack_into("!Q", self._page, self.index * REPLY_SLOTS_BYTES, self._used(self.index) + n)

    def end(self, why: str) -> None:
        """End the grading: ``why`` (the refused reply's words) is what each later check says."""
        if self.ended is None:
            data = why.encode()[: REPLY_SLOTS_BYTES - 10]
            at = self.index * REPLY_SLOTS_BYTES + 8
            struct.pack_into("!H", self._page, at, len(data))
            self._page[at + 2 : at + 2 + len(data)] = data

    @property
    def ended(self) -> str | None:
        """Why the grading ended (a reply refused in any of its processes), or None."""
        for i in range(self.processes):
            at = i * REPLY_SLOTS_BYTES + 8
            (length,) = struct.unpack_from("!H", self._page, at)
            if length:
                return self._page[at + 2 : at + 2 + length].decode(errors="replace")
        return None

    def _used(self, index: int) -> int:
        return struct.unpack_from("!Q", self._page, index * REPLY_SLOTS_BYTES)[0]


# The grading process's own memory: RLIMIT_DATA's soft limit, while it grades, at what it held when the grading
# began plus this (``grading_memory_limit``). Measured with benchmarks/reply_bytes.py -j 1 (every milestone in
# one process, 2026-12-04): its data size (VmData, what RLIMIT_DATA counts) grew from 226 MiB by 25 MiB, and by
# 127 MiB with an empty disk cache (GPTKIT_CACHE=off: every reference answer computed); `-m lmbudget` by 37 MiB,
# and by 525 MiB for a model saved at 250 MiB, near lmbudget's 256 (its grading process's peak: 746 MiB). Its
# virtual size (VmSize, 633 to 830 MiB) is mostly torch's libraries and reservations, no memory at all:
# RLIMIT_AS would count it, RLIMIT_DATA does not.
GRADING_MEMORY_BYTES = 1 << 30  # 8 times what honest grading adds; twice what the largest saved model does
MEMORY_PROTECTION = "grading-memory-limit"  # in a report's protections where the limit took
_memory_cap: tuple[int, int] | None = None  # (the soft limit before, the one set) while a grading is capped


def _data_bytes() -> int | None:
    """This process's data size as RLIMIT_DATA counts it (VmData: its private writable memory), or None where
    /proc does not say (not Linux)."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return None


@contextlib.contextmanager
def grading_memory_limit(allowance: int = GRADING_MEMORY_BYTES) -> Iterator[bool]:
    """This process (a grading process) may grow by ``allowance`` bytes of data while the block runs, and no
    more: past it, an allocation fails (MemoryError, or torch's "can't allocate memory"), which the runner counts
    as the check's, never a crash of the grader. Yields whether the limit took: not where /proc cannot say how
    much the process holds, or the system refuses it. Only the soft limit: the fork server this process starts
    and its workers set their own (``ForkServer`` lifts this one for them). Nested, the outer limit stands."""
    global _memory_cap
    if _memory_cap is not None:
        yield True
        return
    data = _data_bytes()
    if data is None or not hasattr(resource, "RLIMIT_DATA"):
        yield False
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = data + allowance
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft)  # a lower limit set by whoever started this process stays
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    except (ValueError, OSError):
        yield False
        return
    _memory_cap = (soft, cap)
    try:
        yield True
    finally:
        _memory_cap = None
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


@contextlib.contextmanager
def _memory_uncapped() -> Iterator[None]:
    """The soft limit of ``grading_memory_limit`` lifted while a process is started (it would inherit it)."""
    if _memory_cap is None:
        yield
        return
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    resource.setrlimit(resource.RLIMIT_DATA, (_memory_cap[0], hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (_memory_cap[1], hard))


def grading_ended(why: str) -> str:
    """What a check says that a refused reply left not run (``why``: that reply's refusal)."""
    return f"not run: an earlier check's reply was too large to read ({why}), which ended this submission's grading"


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
        self._init_state(limits, Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX)), prefix="")
        self.tmp.chmod(0o711)  # workers with their own user ids reach their folders, and list nothing
        _write_owner(self.tmp)  # whose it is: a folder whose owner died without closing it is swept (sweep_scratch)
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
        with _memory_uncapped():
            self.proc = self._start(config, passed, env)
        for s in passed:
            s.close()
        self.control = ours

    def _start(self, config: dict, passed: list[socket.socket], env: dict[str, str]) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(FORK_SERVER), json.dumps(config)],
            pass_fds=[s.fileno() for s in passed],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            env=env,
            cwd=self.tmp,
            start_new_session=True,
        )

    def _init_state(self, limits: Limits, tmp: Path, prefix: str) -> None:
        self.limits, self.tmp, self.prefix = limits, tmp, prefix
        self._workers: list[WorkerConnection] = []
        self.spawned = 0  # workers started so far
        self.worker_cpu = 0.0  # CPU seconds of every worker reaped so far, their process trees included
        self._hello: dict | None = None
        self.proc = None
        # The grading under way's budget of reply bytes (runner.grade sets it, as Grader.grade sets ``limits``):
        # each worker spawned counts its replies there. None: each reply's own limit alone (a contest's test run).
        self.replies: ReplyBudget | None = None

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
            if readable and self._hello is None:
                # Its hello, not read yet: a warm-up starts the server without waiting for it. Taken for a closed
                # connection, it made every warmed server be replaced by the first grading (2 CPU-s and 2 s late).
                self.hello()
                readable, _, _ = select.select([self.control], [], [], 0)
        except (OSError, ValueError, GraderError):  # closed on this side, or by the server before its hello
            return False
        return not readable  # readable: closed by the server, or bytes that are no reply we await

    @property
    def protections(self) -> list[str]:
        return ["separate-process", "isolated-interpreter", "resource-limits", *self.hello()["protections"]]

    def spawn(self, submission: Path) -> WorkerConnection:
        """A fresh worker whose working directory is a private copy of the submission."""
        if self.replies is not None and (why := self.replies.ended) is not None:
            raise ReplyTooLarge(grading_ended(why))  # none of its requests would be sent: no worker to start
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
        worker = WorkerConnection(self, ours, reply["pid"], out_path, copy, self.replies)
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


# ------------------------------------------------------------------ scratch folders left behind

SCRATCH_PREFIX = "gptkit-"  # a fork server's scratch folder, in the temporary folder
OWNER_FILE = "owner.json"  # in it: the process that made it (a ForkServer's), to tell a folder left behind


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22): with the pid, it names one
    process, not another that reused its pid. None where there is no such process (or no /proc), or it has ended
    and waits to be reaped (a zombie: a pool's processes, ended, until the process that forked them reaps them)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fields:
            state, *rest = fields.read().rsplit(b")", 1)[1].split()
    except (OSError, ValueError):
        return None
    return None if state in (b"Z", b"X") or len(rest) < 19 else rest[18].decode()


def _machine() -> dict[str, str]:
    """What says which processes a pid names: this boot, and this PID namespace (another container sharing the
    temporary folder sees other processes under the same pids). Empty where there is no /proc."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return {"boot": boot.read().strip(), "pids": os.readlink("/proc/self/ns/pid")}
    except OSError:
        return {}


def _write_owner(folder: Path) -> None:
    pid = os.getpid()
    started = _process_start(pid)
    if started is not None:  # else no /proc: nothing can tell later whether this process is gone, so none is swept
        (folder / OWNER_FILE).write_text(json.dumps({"pid": pid, "started": started, **_machine()}))


def _owner_gone(folder: str) -> bool:
    """Whether the process that made ``folder`` (a scratch folder of this user's) is gone: False where it lives,
    where the folder records no owner (not a fork server's, or one still being made), or where its owner was of
    another PID namespace of this boot, which this process cannot see."""
    try:
        fd = os.open(os.path.join(folder, OWNER_FILE), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as record:
            owner = json.loads(record.read(4096))
        pid, started, machine = int(owner["pid"]), str(owner["started"]), _machine()
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not machine:
        return False
    if owner.get("boot") != machine["boot"]:
        return True  # an earlier boot's: every process of it is gone
    return owner.get("pids") == machine["pids"] and _process_start(pid) != started


def sweep_scratch(folder: str | None = None) -> int:
    """Remove the scratch folders of fork servers whose owner process is gone (killed, or a contest server's
    grading process ended by its pool's stop: it never closed its ForkServer), and the cgroups of their fork
    servers; returns how many folders. Only folders of this user, named ``gptkit-``, whose owner record names
    a process that has ended. ``folder``: where to look (the temporary folder)."""
    where = folder or tempfile.gettempdir()
    removed = 0
    try:
        names = [n for n in os.listdir(where) if n.startswith(SCRATCH_PREFIX)]
    except OSError:
        return 0
    for name in names:
        path = os.path.join(where, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or not _owner_gone(path):
            continue
        try:
            _remove_tree(path)
            removed += 1
        except OSError as e:  # a worker's file still held: the next sweep takes it
            log.warning("could not delete the scratch folder %s left behind: %s", path, e)
    if removed:
        log.info("removed %d scratch folder(s) left behind by processes that are gone", removed)
        for parent in jail.CGROUP_PARENTS:  # their fork servers' cgroups, too
            jail.sweep(parent)
    return removed


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

    def __init__(
        self,
        server: ForkServer,
        sock: socket.socket,
        pid: int,
        output: Path,
        copy: Path | None = None,
        replies: ReplyBudget | None = None,
    ):
        self.server, self.sock, self.pid, self.output = server, sock, pid, output
        self.copy = copy  # its private copy of the submission: deleted once it is reaped, with what it wrote there
        self.replies = replies  # the bytes its grading may still receive (None: each reply's own limit alone)
        self.alive = True
        self.deadline: float | None = None  # the current test's time budget, set by its MilestoneView
        self.hung = False
        self.cpu_at_end: float | None = None  # measured when it was reaped
        self.keep_output = False  # a test run reads what it printed once it is reaped (grader/sandbox/testrun.py)

    def request(
        self,
        header: dict,
        args: Sequence[Any] = (),
        kwargs: dict | None = None,
        timeout: float | None = None,
        reply_bytes: int = MAX_REPLY_BYTES,
    ) -> Any:
        """Send one request and decode the reply, within ``timeout`` seconds (default: the limits' call_seconds;
        either way no later than the current test's deadline). A reply of more than ``reply_bytes``, or than
        its grading has left (``replies``), is refused unread, and ends that grading (``ReplyTooLarge``)."""
        from .common import protocol  # torch: imported only once a worker is used

        timeout = self.server.limits.call_seconds if timeout is None else timeout
        if self.deadline is not None:
            timeout = min(timeout, self.deadline - time.monotonic())
        if not self.alive:
            raise WorkerCrash("the worker had already stopped")
        limit = self._reply_limit(reply_bytes)
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
            return self._read_reply(time.monotonic() + timeout, limit)
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
            if not e.size:  # past the wire's own bounds on plain data: this check's failure alone
                raise ReplyTooLarge(f"your code sent back {e}") from None
            raise self._refused(e.size, reply_bytes) from None
        except MemoryError:  # the grading process's own limit (runner.py), met while it read: decided there
            self._end(grace=0)
            raise
        except (ProtocolError, KeyError, TypeError, AttributeError, RecursionError) as e:
            self._end(grace=0)
            raise WorkerCrash(f"the worker sent back malformed data ({e})") from None

    def _reply_limit(self, reply_bytes: int) -> int:
        """The most bytes the next reply may hold: ``reply_bytes``, or what its grading has left where that is
        less; ReplyTooLarge, not run, where a refused reply ended the grading."""
        if self.replies is None:
            return reply_bytes
        if (why := self.replies.ended) is not None:
            raise ReplyTooLarge(grading_ended(why))
        return min(reply_bytes, self.replies.left)

    def _read_reply(self, deadline: float, limit: int) -> Any:
        """The reply, read (at most ``limit`` bytes), counted, checked, redacted and decoded; the worker's error
        as a StudentError or a ProbeFault."""
        from .common import protocol

        reply, blobs, size = wire.recv_measured(self.sock, deadline, limit)
        if self.replies is not None:
            self.replies.take(size)
        check_reply_size(reply)  # first: every later step's cost grows with the reply's text
        reply = secrecy.redact_reply(reply)  # before anything reads it: no trusted code reaches a report
        if Reply.ERROR in reply:
            err = reply[Reply.ERROR]
            if err.get(Reply.GRADER_FAULT) is True:
                raise ProbeFault(f"{err.get('type')}: {err.get('message')}", str(err.get(Reply.TRACE, ""))[:4000])
            raise StudentError(
                str(err.get("type")), str(err.get("message")), [str(w) for w in err.get("where", [])][:3]
            )
        return protocol.decode(reply[Reply.VALUE], blobs, self._remote)

    def _refused(self, size: int, reply_bytes: int) -> ReplyTooLarge:
        """A reply of ``size`` bytes refused unread: past ``reply_bytes`` (one reply's limit) or what its grading
        had left. Either ends the grading (``replies.end``): the worker that sent it is gone, and the next check
        would start another to ask it the same, one worker after another, each flooding the grading process.
        No ": " in the words: a report takes a check's cause from after its last one (batch/summary.py)."""
        if size > reply_bytes:
            why = f"{_mb(size)} in one reply, more than the {_mb(reply_bytes)} the grader reads in one"
            instead = (
                "a model trained within the budget saves to far less, the reference's to under 1 MB"
                if reply_bytes == MAX_SAVED_REPLY_BYTES
                else "no check's values take more than a few MB, so return tensors of the shapes each check asks for"
            )
        else:
            total = self.replies.total if self.replies is not None else reply_bytes
            why = f"its replies came to more than the {_mb(total)} the grader reads from one submission in all"
            instead = (
                f"this one {_mb(size)}; an honest submission's come to a few tens of MB at most, so return "
                "tensors of the shapes each check asks for"
            )
        what = f"your code sent back too much, {why} ({instead})"
        if self.replies is not None:
            self.replies.end(why)
            what += "; this submission's grading ended with this check, and its later checks are not run"
        return ReplyTooLarge(what)

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
        return self.worker.request({"op": Request.SAVE, "handle": self.id}, reply_bytes=MAX_SAVED_REPLY_BYTES)

    def count_positions(self, via: str) -> Remote:
        """A counter (read its ``positions`` attribute) of the positions fed to submodule ``via``."""
        return self._ask(Request.COUNT_POSITIONS, via=via, keep=True)
