"""Reading a student's files without following symbolic links: the one way the grading process reads them.

Whatever a link in a submission points to is not the student's work: the kit's ``solutions/``, which sits beside
the submission in Gradescope's layout, or another student's notebook in a class folder. So a file is opened with
``O_NOFOLLOW`` and must be a regular file (not a FIFO, whose open would wait forever, nor a device), and a folder
is walked one level at a time, each folder opened relative to its parent's descriptor with ``O_NOFOLLOW`` too: no
link is followed anywhere below the submission, even one swapped in after the submission was found. A walk is
bounded in depth and in entries, so a student's tree cannot exhaust the grader's recursion or its time.

Where a link is refused or skipped, ``LINK`` says why, in the words every path uses.
"""

from __future__ import annotations

import errno
import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from grader.errors import UserError

MAX_DEPTH = 32  # folders inside folders below a submission (a student's is 2 or 3 deep)
MAX_ENTRIES = 10_000  # files, folders and links in one submission's walk
LINK = "is a symbolic link, which the grader does not follow"


def refused(name: str) -> str:
    """Why a submission that is itself a link is not graded."""
    return f"{name} {LINK}: hand in the file itself, not a link to it"


class NotOwnFile(UserError, OSError):  # OSError: what a caller that reads a file catches already
    """Not a regular file of the student's own: a symbolic link, a FIFO, a device. The message names it."""

    def __str__(self) -> str:
        return str(self.strerror)  # the sentence alone, no "[Errno 40]"


class LinkFound(NotOwnFile):
    """A symbolic link, where a file or folder was expected."""


class TreeTooLarge(UserError, ValueError):
    """A folder nested deeper, or holding more entries, than a submission may. The message is for the student."""


def is_link(path: Path) -> bool:
    """``path`` itself is a symbolic link (whatever it points to, even nothing)."""
    return os.path.islink(path)


def open_file(name: str | Path, dir_fd: int | None = None) -> BinaryIO:
    """``name`` opened for reading without following a link: LinkFound if it is one (``name``'s last part: the
    folders above are the caller's to trust, or ``dir_fd``, a folder opened by :func:`walk`), NotOwnFile if it
    is anything but a regular file."""
    shown = os.path.basename(name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:  # what open(2) says of a link under O_NOFOLLOW
            raise LinkFound(errno.ELOOP, f"{shown} {LINK}") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotOwnFile(errno.EINVAL, f"{shown} is not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of the file ``path`` (see :func:`open_file`); ValueError if it holds more than ``limit``."""
    with open_file(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit >> 20} MB")
    return data


def not_submitted(rel: PurePosixPath) -> bool:
    """Not part of what is graded: caches anywhere, and hidden names at the top (.git, .venv, .ipynb_checkpoints)."""
    return "__pycache__" in rel.parts or rel.parts[0].startswith(".")


FILE, FOLDER, LINKED, OTHER = "file", "folder", "link", "other"


@dataclass(frozen=True)
class Entry:
    """One entry of a walk: its path below the walked folder, its kind (FILE, FOLDER, LINKED or OTHER) and its
    folder's descriptor, open only until the walk moves on."""

    path: PurePosixPath
    kind: str
    dir_fd: int

    def open(self) -> BinaryIO:
        """The file, opened without following a link (LinkFound if one was swapped in since it was listed)."""
        return open_file(self.path.name, dir_fd=self.dir_fd)


def walk(root: Path, skip: Callable[[PurePosixPath], bool] = not_submitted) -> Iterator[Entry]:
    """Every entry below the folder ``root``, in sorted order, without following any link: a link is listed as
    LINKED and not entered; ``skip``'s entries are left out (a folder of them not entered). ``root`` itself must
    not be a link (LinkFound). TreeTooLarge past MAX_DEPTH folders deep or MAX_ENTRIES entries."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise LinkFound(errno.ELOOP, f"{root.name} {LINK}") from None
        raise
    try:
        yield from _walk(fd, PurePosixPath(), skip, [0])
    finally:
        os.close(fd)


def _walk(fd: int, rel: PurePosixPath, skip: Callable[[PurePosixPath], bool], seen: list[int]) -> Iterator[Entry]:
    """What the folder open as ``fd`` (``rel`` below the walk's root) holds, in sorted order, folders entered."""
    for e in sorted(_listed(fd, seen), key=lambda e: e.name):
        path = rel / e.name
        if skip(path):
            continue
        if e.is_symlink():
            yield Entry(path, LINKED, fd)
        elif e.is_dir(follow_symlinks=False):
            yield from _enter(fd, e.name, path, skip, seen)
        elif e.is_file(follow_symlinks=False):
            yield Entry(path, FILE, fd)
        else:
            yield Entry(path, OTHER, fd)


def _listed(fd: int, seen: list[int]) -> list[os.DirEntry[str]]:
    """The entries of the folder open as ``fd``, each counted in ``seen`` (the walk's count so far) as it is
    listed: TreeTooLarge past MAX_ENTRIES, before the rest of a huge folder is read."""
    listed = []
    with os.scandir(fd) as it:
        for e in it:
            seen[0] += 1
            if seen[0] > MAX_ENTRIES:
                raise TreeTooLarge(f"the submission holds more than {MAX_ENTRIES} files and folders")
            listed.append(e)
    return listed


def _enter(
    fd: int, name: str, path: PurePosixPath, skip: Callable[[PurePosixPath], bool], seen: list[int]
) -> Iterator[Entry]:
    """The folder ``name`` of the folder open as ``fd`` (listed as one), then what it holds: opened relative to
    ``fd`` with O_NOFOLLOW, so a link swapped in since it was listed is listed as LINKED and never entered (a
    file swapped in, as OTHER). TreeTooLarge past MAX_DEPTH."""
    if len(path.parts) > MAX_DEPTH:
        raise TreeTooLarge(f"the submission's folders nest more than {MAX_DEPTH} deep ({path.parts[0]}/...)")
    try:
        sub = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):  # replaced by a link (or a file) since it was listed
            yield Entry(path, LINKED if err.errno == errno.ELOOP else OTHER, fd)
            return
        raise
    try:
        yield Entry(path, FOLDER, fd)
        yield from _walk(sub, path, skip, seen)
    finally:
        os.close(sub)


def links_in(root: Path) -> list[str]:
    """The symbolic links below the folder ``root`` that grading leaves out, as paths relative to it (folders
    with a slash); at most the first ten, which is enough to tell the student. Never raises for the tree's size."""
    found: list[str] = []
    try:
        for entry in walk(root):
            if entry.kind == LINKED:
                found.append(entry.path.as_posix())
                if len(found) == 10:
                    break
    except (OSError, TreeTooLarge):
        pass  # what was found so far; the grading itself refuses such a tree with its reason
    return found


def about(links: list[str]) -> str:
    """``links`` (names) said as one clause: "x is a symbolic link, which ..." or "x, y are symbolic links, ..."."""
    if len(links) == 1:
        return f"{links[0]} {LINK}"
    return f"{', '.join(links)} are symbolic links, which the grader does not follow"


def skipped_note(links: list[str]) -> str:
    """A sentence for the student on links left out of grading, or "" for none."""
    return f"Left out: {about(links)}; hand in the files themselves." if links else ""


def zip_link(info: zipfile.ZipInfo) -> bool:
    """A zip entry stored as a symbolic link (``zip -y``; its bytes are the link's target, not a file)."""
    return stat.S_ISLNK(info.external_attr >> 16)
