"""The kernel calls every protection of the jail makes: libc's ``unshare``, ``mount``, ``prctl``... through
ctypes, and their flags. Not a protection itself: the one place they are spelled, so that each protection's
file reads as what it asks of the kernel.

Loaded into the fork server as part of ``_gradekit.worker`` (imports nothing from ``grader``). On a system
without them (macOS) each call simply reports failure, and the protection that needed it is not claimed.
"""

from __future__ import annotations

import ctypes

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC = 0x8000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 0x4000, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38


class _Libc:
    """libc's Linux-only calls; elsewhere (macOS) each one simply reports failure."""

    def __init__(self) -> None:
        self._lib = ctypes.CDLL(None, use_errno=True)

    def __getattr__(self, name: str):
        return getattr(self._lib, name, lambda *_args: -1)


libc = _Libc()


def write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> bool:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    return libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) == 0
