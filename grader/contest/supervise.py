"""``grade contest serve --supervise``: a small parent process that keeps the contest server running.

It binds the server's port itself, once, and hands the listening socket to each server it starts (``serve
--listen-fd``). So while a server that died is replaced, the port stays open: a student's request waits in the
socket's queue for the new server instead of being refused, and uploads (idempotent by their client key) are
not lost. When the server exits for any reason but a stop the supervisor asked for, the supervisor writes it to
the contest's event log (the coach's page) and to stderr, and starts another: at once, or after 1 s, 2, 4, ... up
to ``MAX_DELAY`` when it keeps dying (at once again after a server that ran ``HEALTHY_SECONDS``). A server that
cannot start at all the first time (a mistake in contest.toml, another server on the folder: exit status 2) is
not retried: the coach is at the terminal and must fix it.

Ctrl-C or SIGTERM stops it cleanly: the server is asked to stop as Ctrl-C asks it (its grading pools ended),
killed with its process group if it has not within ``STOP_SECONDS``, and whatever grading process it left is
ended (reaper.end_leftovers) before the supervisor exits. Each server is started with ``PR_SET_PDEATHSIG``, so a
supervisor killed with -9 takes its server along (and the server its grading processes: reaper.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

MAX_DELAY = 30.0  # seconds: the longest wait before a restart
HEALTHY_SECONDS = 60.0  # a server that ran this long resets the backoff to its first step
STOP_SECONDS = 30.0  # a server asked to stop is killed if it has not after this long
GRACE_SECONDS = 1.0  # a dead server's grading processes end themselves within 0.5 s (reaper.py): given this
REFUSED = 2  # the exit status of a server that refused to start (an InputError): not retried on the first start
PR_SET_PDEATHSIG = 1


def process_age() -> float:
    """Seconds since this process started (its exec, interpreter and imports included), from /proc: the server's
    start timestamps count from the command, not from when Python got round to importing the grader."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):  # not Linux: from the first call, which the server makes early
        return time.monotonic() - _FIRST_CALL


_FIRST_CALL = time.monotonic()


def backoff(failures: int) -> float:
    """The wait before the restart that follows ``failures`` exits in a row: none after a server that had been
    running well (every second is an outage), then 1, 2, 4, ... at most MAX_DELAY, so that a server that dies
    at once each time does not spin."""
    return 0.0 if failures <= 1 else min(MAX_DELAY, 2.0 ** (failures - 2))


def _die_with_parent() -> None:
    """In the server, before it runs: SIGTERM when the supervisor dies (killed with -9, it tells no one)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the next server's start ends what is left (reaper.py)
        pass


def record(folder: Path, kind: str, detail: str) -> None:
    """``detail`` on stderr and, as ``kind``, in the contest's event log (the coach's page). The log is the store's
    (contest.sqlite), written between two servers, never beside one; a store that cannot be opened is said on
    stderr only: the supervisor's job is to restart the server, not to keep a record."""
    print(f"{datetime.now().strftime('%H:%M:%S')} supervisor: {detail}", file=sys.stderr, flush=True)
    try:
        from grader.contest.store import Store  # sqlite and the store: only once there is something to record

        store = Store(folder)
        try:
            store.event(datetime.now(timezone.utc), None, kind, detail)
        finally:
            store.close()
    except Exception as e:  # noqa: BLE001 - any failure to record must not stop the restarts
        print(f"supervisor: could not write it to the event log: {e}", file=sys.stderr, flush=True)


class Supervisor:
    """Runs ``command`` (a ``grade contest serve`` that serves on ``listening``, passed as an inherited file
    descriptor) again each time it exits, until ``stop``. ``sleep`` waits (the tests shorten it)."""

    def __init__(
        self,
        folder: Path,
        command: Callable[[int], list[str]],
        listening: socket.socket,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.folder = folder
        self.command = command  # the server's command line, given the listening socket's descriptor
        self.listening = listening
        self.sleep = sleep
        self.stopping = False
        self.child: subprocess.Popen | None = None
        self.restarts = 0

    def stop(self, signum: int = signal.SIGTERM, _frame: object = None) -> None:
        """Stop (a signal handler): the server is asked to stop as Ctrl-C asks it; a second signal kills it."""
        again = self.stopping
        self.stopping = True
        child = self.child
        if child is not None and child.poll() is None:
            try:
                os.killpg(child.pid, signal.SIGKILL if again else signal.SIGINT)
            except OSError:
                pass

    def run(self) -> int:
        """Serve until stopped; the exit status: 0 once stopped, that of a server that refused its first start."""
        failures = 0
        first = True
        while not self.stopping:
            started = time.monotonic()
            status = self._serve()
            ran = time.monotonic() - started
            if self.stopping:
                break
            if first and status == REFUSED:
                print("supervisor: the server refused to start (above): not restarted", file=sys.stderr, flush=True)
                return REFUSED
            first = False
            failures = 1 if ran >= HEALTHY_SECONDS else failures + 1
            delay = backoff(failures)
            self.restarts += 1
            record(
                self.folder,
                "server restarted",
                f"the server exited ({describe(status)}) after {ran:.0f} s: restart {self.restarts} "
                f"{f'in {delay:g} s' if delay else 'at once'}; the port stayed open, requests meanwhile wait",
            )
            self._wait(delay)
        return 0

    def _serve(self) -> int:
        """One server, from its start to its exit; its exit status (negative: the signal that ended it)."""
        fd = self.listening.fileno()
        self.child = subprocess.Popen(
            self.command(fd), pass_fds=(fd,), start_new_session=True, preexec_fn=_die_with_parent
        )
        if self.stopping:  # stopped while it was being started: the handler found no child to tell
            self.stop()
        try:
            return self._wait_child(self.child)
        finally:
            self._end(self.child)

    def _wait_child(self, child: subprocess.Popen) -> int:
        """``child``'s exit status; asked to stop and still running after STOP_SECONDS, it is killed."""
        deadline: float | None = None
        while True:
            try:
                return child.wait(timeout=0.2)  # in steps: a stop's signal does not end a wait without one
            except subprocess.TimeoutExpired:
                if not self.stopping:
                    continue
                deadline = deadline or time.monotonic() + STOP_SECONDS
                if time.monotonic() > deadline:
                    _killpg(child.pid)

    def _end(self, child: subprocess.Popen) -> None:
        """Nothing of this server outlives it. Its grading processes end their sandboxes and themselves within
        half a second of its death (reaper.py): they are given that, then what is left of its process group is killed,
        and any grading process it recorded (reaper.end_leftovers) too."""
        ends = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < ends and _group_alive(child.pid):
            time.sleep(0.1)
        _killpg(child.pid)
        from grader.contest.reaper import end_leftovers  # /proc reading: only once a server is gone

        end_leftovers(self.folder)

    def _wait(self, seconds: float) -> None:
        """Wait ``seconds`` before a restart, in short steps: a stop meanwhile ends the wait at once."""
        ends = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < ends:
            self.sleep(min(0.1, max(0.0, ends - time.monotonic())))


def _killpg(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:  # gone already
        pass


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    return True


def describe(status: int) -> str:
    """A server's exit status in words: "killed by SIGKILL", "status 1"."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"status {status}"


def supervise(folder: Path, command: Callable[[int], list[str]], listening: socket.socket) -> int:
    """Run the supervisor until Ctrl-C or SIGTERM; the exit status for ``grade contest serve --supervise``."""
    supervisor = Supervisor(folder, command, listening)
    previous = {s: signal.signal(s, supervisor.stop) for s in (signal.SIGINT, signal.SIGTERM)}
    print(
        f"supervisor: keeping `grade contest serve {folder}` running (pid {os.getpid()}); Ctrl-C stops both",
        file=sys.stderr,
        flush=True,
    )
    try:
        return supervisor.run()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
