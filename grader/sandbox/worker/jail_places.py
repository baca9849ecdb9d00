"""Each worker's private places: its own /tmp and /dev/shm, and its own copy of the submission, each a fresh,
capped tmpfs in the worker's mount namespace. What a worker writes anywhere is then capped, paid from its
memory cgroup and gone with its namespace, never on the machine's disk, and no worker sees another's files
(one student's code could otherwise leave its answers in /tmp for the next).
"""

from __future__ import annotations

import os

from .jail_kernel import MS_BIND, MS_NODEV, MS_NOSUID, MS_RDONLY, MS_REC, MS_REMOUNT, mount

PRIVATE_TMPFS = "size=256m"  # each worker's own /tmp and /dev/shm: its memory cgroup pays for what it writes
COPY_INODES = 65536  # files and folders a worker's copy may hold (each costs kernel memory, not tmpfs bytes)


def private_places(
    cover: list[str], keep: dict[str, bool], readonly_root: bool, copy_bytes: int = 256 << 20, owner: int = -1
) -> bool:
    """In a worker's own mount namespace: a new, empty tmpfs over each folder of ``cover`` (/tmp, /dev/shm, the
    fork server's scratch folder, which holds every worker's copy), then each folder of ``keep`` given back where
    it was: read-only ones (False: the site-packages view) bound, and a writable one (True: the worker's own copy
    of the submission) as a fresh tmpfs of ``copy_bytes``, the copy's files copied in (handed to ``owner``, a user
    id, unless -1). With ``readonly_root``, the private root itself made read-only. What a worker writes anywhere
    is then capped, paid from its memory cgroup and gone with its namespace, never on the machine's disk, and no
    worker sees another's files. False if a step failed (then nothing is claimed)."""
    # reachable once covered; a copy's folder is read, so it is opened for reading
    flags = {path: os.O_RDONLY if writable else os.O_PATH for path, writable in keep.items()}
    fds = {path: os.open(path, flags[path] | os.O_DIRECTORY | os.O_NOFOLLOW) for path in keep}
    try:
        for path in cover:
            if os.path.isdir(path) and not mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, PRIVATE_TMPFS):
                return False
            os.chmod(path, 0o1777 if path in ("/tmp", "/dev/shm") else 0o711)
        for path, writable in keep.items():
            os.makedirs(path, exist_ok=True)
            if writable:
                size = f"size={copy_bytes},nr_inodes={COPY_INODES},mode=700"
                if not mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, size):
                    return False
                copy_tree(fds[path], path, owner)
                continue
            # recursive: the empty mounts that hide the grader's files inside a bound folder come along
            if not mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC):
                return False
            mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    except OSError:
        return False
    finally:
        for fd in fds.values():
            os.close(fd)
    return not readonly_root or mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def copy_tree(src_fd: int, dst: str, owner: int = -1) -> None:
    """Copy the folder open as ``src_fd`` (a worker's copy of a submission: plain files and folders, made by the
    grading process) into the existing folder ``dst``; links and anything else not plain are left out. Iterative:
    a folder's depth costs no recursion."""
    if owner >= 0:
        os.chown(dst, owner, owner)
    folders = [""]  # relative to both
    while folders:
        rel = folders.pop()
        fd = os.open(rel or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_fd)
        try:
            with os.scandir(fd) as entries:
                listed = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in entries]
        finally:
            os.close(fd)
        for name, is_dir, is_file in listed:
            here, there = os.path.join(rel, name), os.path.join(dst, rel, name)
            if is_dir:
                os.mkdir(there, 0o700)
                folders.append(here)
            elif is_file:
                _copy_file(src_fd, here, there)
            else:
                continue
            if owner >= 0:
                os.chown(there, owner, owner)


def _copy_file(src_fd: int, rel: str, there: str) -> None:
    source = os.open(rel, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=src_fd)
    try:
        target = os.open(there, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            while chunk := os.read(source, 1 << 20):
                os.write(target, chunk)
        finally:
            os.close(target)
    finally:
        os.close(source)
