"""Namespaces: no network, and a process tree of its own, for the fork server and for each worker.

The fork server gets private mount and network namespaces (no network; a user namespace too when not root).
Each worker gets new mount, PID, network and IPC namespaces: its whole process tree dies with it (its reaper
is the namespace's init, and every process of it asks to die with its parent), it sees only its own
processes in its own /proc, and no abstract Unix socket, System V segment or message queue of another worker.
Its private places (``jail_places``) are mounted in its new mount namespace before anything else runs there.
"""

from __future__ import annotations

import os
import signal

from .jail_kernel import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_PDEATHSIG,
    libc,
    mount,
    write_file,
)
from .jail_places import private_places


def die_with_parent() -> None:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def enter_server_namespaces() -> list[str]:
    """Private mount and network namespaces (and a user namespace when not root)."""
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWNS | CLONE_NEWNET | (0 if uid == 0 else CLONE_NEWUSER)) != 0:
        return []
    if uid != 0:
        try:
            write_file("/proc/self/setgroups", "deny")
            write_file("/proc/self/uid_map", f"0 {uid} 1")
            write_file("/proc/self/gid_map", f"0 {gid} 1")
        except OSError:  # a user namespace we may not map (some AppArmor policies): no mounts, but no network
            return ["no-network"]
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    return ["no-network"]


def enter_worker_namespaces(as_root: bool, places: dict | None = None) -> tuple[bool, bool]:
    """New mount, PID, network and IPC namespaces; as a non-root user, inside a new user namespace too. With
    ``places``, ``private_places(**places)`` in the new mount namespace. (namespaces, private places).

    Its own network and IPC namespaces: no abstract Unix socket, System V segment or message queue that one
    worker makes is seen by another (they all share the fork server's otherwise). As a non-root user the worker
    is root in its user namespace: its private places are mounted before that namespace exists, so that they
    reach it locked, like every other mount (it could unmount them, and find the shared folders below, else).
    """
    own = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
    if as_root:
        if libc.unshare(own) != 0:
            return False, False
        return True, places is not None and private_places(**places)
    private = places is not None and libc.unshare(CLONE_NEWNS) == 0 and private_places(**places)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | own) != 0:
        return False, False
    try:
        write_file("/proc/self/setgroups", "deny")
        write_file("/proc/self/uid_map", f"0 {uid} 1")
        write_file("/proc/self/gid_map", f"0 {gid} 1")
    except OSError:
        pass  # unmapped ids: the worker runs as the overflow user, which is stricter still
    return True, private


def probe_worker_namespaces(as_root: bool, places: dict | None = None) -> tuple[bool, bool]:
    """Can a worker get its own namespaces here, and then ``private_places(**places)``? Tried once in a
    throwaway child: (namespaces, private places)."""
    pid = os.fork()
    if pid == 0:
        isolated, private = enter_worker_namespaces(as_root, places)
        os._exit(0 if private else 2 if isolated else 1)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return code in (0, 2), code == 0


def mount_proc() -> None:
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
