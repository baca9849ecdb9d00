"""A user id per worker: when the fork server runs as root, each worker runs as a user id of its own, with no
supplementary groups, no capabilities and no way to regain them (``no_new_privs``: setuid files included), its
copy of the submission readable by it alone. So RLIMIT_NPROC counts per worker, and a worker cannot signal,
trace or read another's processes and files.
"""

from __future__ import annotations

import os

from .jail_kernel import PR_SET_NO_NEW_PRIVS, libc

WORKER_UID_BASE = 2_000_000  # far above any real account; one id per worker, so RLIMIT_NPROC is per worker


def give_to(uid: int, folder: str) -> None:
    """Hand a worker's private copy of its submission to its user id, readable by nobody else."""
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)
    os.chmod(folder, 0o700)


def can_drop_privileges(needed: list[str]) -> bool:
    """Can workers get user ids of their own, and still read ``needed`` (the interpreter's and torch's files)?

    Root on the host can switch ids; root inside a user namespace may not. And without the private root,
    the interpreter may live where other users cannot go (a 0700 /root): then ids stay as they are.
    """
    if os.geteuid() != 0:
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(0 if drop_privileges(WORKER_UID_BASE) and all(os.access(p, os.R_OK) for p in needed) else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def drop_privileges(uid: int) -> bool:
    """Become ``uid`` with no supplementary groups, no capabilities, and no way back (setuid files included)."""
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError:
        return False
    return libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
