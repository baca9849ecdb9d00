"""Nothing the contest server starts outlives it. Each grading process asks the kernel to kill it when its
parent (Python's fork server) dies (``PR_SET_PDEATHSIG``), and watches the server: once the server is gone
(``kill -9`` tells no one), it kills its own children (the sandboxes, in sessions of their own), the fork server
above it (which does not reliably exit by itself), and itself. Each grading process also writes its pid to
``DIR/grading.pids``; a server starting ends those still alive (a machine where the kernel did not, a grading
process stuck in a system call) before it starts its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import threading
import time
from pathlib import Path

log = logging.getLogger("grader.contest")

PIDFILE = "grading.pids"
PR_SET_PDEATHSIG = 1


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat, field 22): with the pid, it names one
    process, not another that reused its pid. None where there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _descendants(root: int) -> list[int]:
    """The processes under ``root`` (from /proc), deepest last."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: list[int] = []
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier and pid not in found}
        found.extend(sorted(frontier))
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _watch(server: int, started: str | None, every: float) -> None:
    """In a grading process: once the server is gone (killed with -9: nothing told us), end this process's own
    children (its sandboxes, in sessions of their own), the fork server it came from, and this process."""
    while _start_time(server) == started:
        time.sleep(every)
    parent = os.getppid()
    _kill(_descendants(os.getpid()))
    if parent not in (1, server) and b"forkserver" in _cmdline(parent):
        _kill([*[p for p in _descendants(parent) if p != os.getpid()], parent])
    os._exit(1)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def die_with_server(pidfile: str, server: int, every: float = 0.5) -> None:
    """In a grading process (the pool's initializer): its pid recorded in ``pidfile``; SIGKILL when its parent
    dies (PR_SET_PDEATHSIG); and a thread that, once ``server`` is gone, ends what this process started, the fork
    server above it, and itself (the fork server does not always exit when the server dies)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pidfile still lets the next server end it
        pass
    started = _start_time(server)
    if started is None:  # the server died before prctl: nobody will send the signal
        os._exit(1)
    with open(pidfile, "a") as out:
        out.write(f"{os.getpid()} {_start_time(os.getpid())}\n")
    threading.Thread(target=_watch, args=(server, started, every), daemon=True, name="die-with-server").start()


def end_leftovers(folder: Path) -> int:
    """End the grading processes an earlier server of ``folder`` left running (killed with -9 where the kernel
    did not end them), and their process groups; returns how many. The pidfile is then emptied."""
    path = folder / PIDFILE
    ended = 0
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            pid_text, started = line.split()
            pid = int(pid_text)
        except ValueError:
            continue
        if pid == os.getpid() or _start_time(pid) != started:
            continue  # gone, or its pid reused by another process
        try:
            os.kill(pid, signal.SIGKILL)
            ended += 1
        except OSError:
            pass
    if ended:
        log.warning("ended %d grading process(es) an earlier server left running", ended)
    path.write_text("")
    return ended
