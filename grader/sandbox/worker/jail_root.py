"""The private root: the fork server pivots into a tmpfs holding read-only binds of the system (``/usr``,
``/etc``, the Python installation and its site-packages) and its own scratch folder, nothing else: the project,
the reference, the suites, other submissions and the gradebook do not exist in it. Whatever of the grader is
still inside a bound folder is then covered with empty mounts (``hide``).

Done in the fork server's own mount namespace (``jail_namespaces``), once, before any worker is forked.
"""

from __future__ import annotations

import os
import platform

from .jail_kernel import MNT_DETACH, MS_BIND, MS_NODEV, MS_NOSUID, MS_RDONLY, MS_REC, MS_REMOUNT, libc, mount

SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")


def private_root(scratch: str, binds: list[str]) -> bool:
    """Pivot into a tmpfs that holds only the system, ``binds`` (read-only) and ``scratch`` (writable)."""
    if SYS_PIVOT_ROOT is None:
        return False
    new = os.path.join(scratch, "root")
    os.makedirs(new, exist_ok=True)
    if not mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m"):
        return False
    try:
        os.mkdir(new + "/tmp")  # first: binds may lie under /tmp (a clone's .venv, the scratch folder)
        os.chmod(new + "/tmp", 0o1777)
        for path in _minimal(list(SYSTEM) + binds):
            _bind(path, new + path, readonly=True)
        _dev(new)
        _bind(scratch, new + scratch, readonly=False, recursive=False)  # not the new root inside it
        _bind("/proc", new + "/proc", readonly=False)
        os.mkdir(new + "/.old")
    except OSError:
        libc.umount2(new.encode(), MNT_DETACH)
        return False
    os.chdir(new)
    if libc.syscall(SYS_PIVOT_ROOT, b".", b".old") != 0:
        os.chdir("/")
        libc.umount2(new.encode(), MNT_DETACH)
        return False
    os.chdir("/")
    libc.umount2(b"/.old", MNT_DETACH)
    os.rmdir("/.old")
    return True


def outermost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another of them."""
    return [p for p in sorted(set(paths)) if not any(p.startswith(q.rstrip("/") + "/") for q in paths if q != p)]


def _minimal(paths: list[str]) -> list[str]:
    """Existing paths, resolved, without those already inside another one; top-level links kept as links."""
    out: list[str] = []
    for path in sorted(
        {
            p if os.path.islink(p) and os.path.dirname(p) == "/" else os.path.realpath(p)
            for p in paths
            if os.path.lexists(p)
        }
    ):
        if not any(path.startswith(kept.rstrip("/") + "/") for kept in out):
            out.append(path)
    return out


def _bind(source: str, target: str, readonly: bool, recursive: bool = True) -> None:
    if os.path.islink(source):  # /bin -> usr/bin on merged-/usr systems
        os.symlink(os.readlink(source), target)
        return
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    if not mount(source, target, None, MS_BIND | (MS_REC if recursive else 0)):
        raise OSError(f"cannot bind {source}")
    if readonly:  # may fail inside a user namespace (locked flags): the files stay protected by their modes
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)


def _dev(new: str) -> None:
    os.makedirs(new + "/dev")
    for name in DEVICES:
        _bind("/dev/" + name, new + "/dev/" + name, readonly=False)
    os.symlink("/proc/self/fd", new + "/dev/fd")
    os.makedirs(new + "/dev/shm", mode=0o1777)
    os.chmod(new + "/dev/shm", 0o1777)


def hide(paths: list[str]) -> bool:
    """Cover each existing path with an empty, unreadable tmpfs; True if all of them are covered."""
    present = [p for p in paths if os.path.isdir(p)]
    return all(mount("tmpfs", p, "tmpfs", 0, "size=4k,mode=000") for p in present)
