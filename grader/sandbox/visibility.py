"""Which files a worker can read, decided from the sandbox's real view: what the fork server binds into its
private root, what it hides, and which of those protections took on this machine (its hello).

For a task whose score rests on text the worker must not see (lmbudget's held-out splits). A path is out of
the worker's reach only when the private root took and the path lies outside every folder bound into it (or
inside one the sandbox hides, where hiding took), and each worker has its own ``/proc`` (without it,
``/proc/PID/root`` of a process outside the sandbox reaches the whole disk). The folders are the ones
``client.ForkServer`` and ``worker/fork_server.py`` bind; ``tests/e2e/test_lmbudget_attacks.py`` checks, by
a real worker, that the default corpus it calls unreadable is so.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from . import client
from .worker import jail


@dataclass(frozen=True)
class WorkerView:
    protections: frozenset[str]
    binds: tuple[str, ...]  # resolved, read-only (the scratch folder, writable, holds only the grader's copies)
    hidden: tuple[str, ...]  # resolved; covered only where "grader-files-hidden" took

    def why_readable(self, path: Path) -> str | None:
        """Why a worker can read ``path`` (one sentence), or None when it cannot."""
        if "private-root" not in self.protections:
            return "this machine's sandbox has no private root: a worker sees the whole disk"
        if "own-proc" not in self.protections:
            return "this machine's workers share the fork server's /proc, whose /proc/PID/root reaches the whole disk"
        real = os.path.realpath(path)
        if "grader-files-hidden" in self.protections and any(_inside(real, h) for h in self.hidden):
            return None
        bind = next((b for b in self.binds if _inside(real, b)), None)
        return None if bind is None else f"it lies in {bind}, which every worker sees (read-only)"

    def readable(self, paths: Iterable[Path]) -> str | None:
        """Why a worker can read at least one of ``paths`` (naming it), or None when it can read none."""
        for path in paths:
            why = self.why_readable(path)
            if why is not None:
                return f"{path}: {why}"
        return None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def worker_view(protections: Iterable[str]) -> WorkerView:
    """The view of a fork server whose hello listed ``protections`` (``ForkServer.protections``)."""
    binds = [
        *jail.SYSTEM,
        *(str(p) for p in client._site_dirs()),
        sys.prefix,
        os.path.dirname(sys.executable),
        sys.base_prefix,
        sys.base_exec_prefix,
        sys.exec_prefix,
    ]
    hidden = [str(p) for p in client.ForkServer._private_paths()]
    resolved = tuple(dict.fromkeys(os.path.realpath(b) for b in binds if os.path.lexists(b)))
    return WorkerView(frozenset(protections), resolved, tuple(os.path.realpath(h) for h in hidden))


def probe_protections() -> list[str]:
    """The protections a fork server gets on this machine: one is started (a few seconds), asked, and ended."""
    with client.ForkServer(preload=()) as server:
        return server.protections
