"""Find the submissions under a folder: per-student folders, notebooks, zip files, or nbgrader's layout.

Every folder in it is a student's (nbgrader's: every assignment folder); so is every notebook (.ipynb) and
zip file. A student's folder that holds nothing to grade is still found, with a ``problem`` saying why, so
that no student is silently lost. Not students: other files (notes.txt, the gradebook), and names that begin
with "." or "_" (.git, __MACOSX).

No symbolic link is followed (grader/nofollow.py): what a link points to is not the student's work (another
student's notebook, the kit's solutions). A student entry that is a link is found with a ``problem`` that says
so; a link inside a student's folder is not looked into, and grading leaves it out.

Each submission is found with where its time may come from (``time_from``, grader/deadlines.py): nbgrader's
stamp in its assignment's folder, found here in nbgrader's layout and nowhere else; the own date of a zip or
notebook lying in the batch folder; nothing for a student's folder. It is decided here, where the layout is
known, because a path alone cannot tell nbgrader's layout from a student's folder that imitates it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from grader import nofollow
from grader.deadlines import ENTRY, FOLDER, NBGRADER, NBGRADER_SUBMITTED, NBGRADER_TIMESTAMP
from grader.errors import InputError
from grader.milestones import STUDENT_MODULES

MAX_ZIP_BYTES = 50 << 20
# nbgrader's own folders in a course folder (its steps' inputs and outputs): never a student's beside submitted/.
NBGRADER_FOLDERS = frozenset({"source", "release", NBGRADER_SUBMITTED, "autograded", "feedback"})
# A student's regrade request (grader/batch/regrades.py), in their folder: not their work, so not in the digest
# (filing a request does not make the next batch grade them again, nor change the score they ask about).
REQUEST_FILE = "regrade.txt"
# What a submission must hold, the one wording of it (the reasons below, a zip's error).
EXERCISE_FILES = f"exercise file ({', '.join(f'{m}.py' for m in STUDENT_MODULES[:2])} ...)"
NOTHING_TO_GRADE = f"no {EXERCISE_FILES} or notebook found"


class MixedLayout(InputError):
    """A batch folder that holds nbgrader's ``submitted/`` and students of its own: the message says which."""


@dataclass(frozen=True)
class FoundSubmission:
    student: str  # a folder's or file's name; "student/assignment" in nbgrader's layout with several
    path: Path  # a folder of exercise files, a notebook, or a zip file; with a problem, the student's folder
    problem: str | None = None  # why there is nothing to grade (see nothing_to_grade); None: a submission
    # Where its time may come from (grader/deadlines.py recorded_time): NBGRADER and the assignment's folder,
    # ENTRY (a zip or notebook in the batch folder), FOLDER (a student's folder); None: not known (not found
    # by ``discover``).
    time_from: str | None = None

    def digest(self) -> str:
        """SHA-256 over the submission's files (names and bytes): a changed submission gets a new one."""
        h = hashlib.sha256()
        if nofollow.is_link(self.path):
            h.update(b"a link: " + os.fsencode(self.path.name))  # not what it points to: that is not read
        elif not self.path.is_dir():
            with nofollow.open_file(self.path) as f:
                _hash_file(h, f)
        else:
            try:
                for entry in nofollow.walk(self.path, skip=_not_work):
                    h.update(entry.path.as_posix().encode() + b"\0" + entry.kind.encode())
                    if entry.kind == nofollow.FILE:
                        with entry.open() as f:
                            _hash_file(h, f)
            except (nofollow.NotOwnFile, nofollow.TreeTooLarge) as e:
                h.update(str(e).encode())  # grading refuses it with this reason; the digest is still one
        return h.hexdigest()


# The most a snapshot copies (``snapshot``): more than any submission graded holds (a zip's 50 MB, a folder's 20).
SNAPSHOT_BYTES = 64 << 20


@contextlib.contextmanager
def snapshot(path: Path) -> Iterator[tuple[Path, str | None]]:
    """A copy of the submission at ``path`` (a folder, a notebook or a zip) taken now, and the digest of what was
    copied, as ``FoundSubmission.digest`` computes it on ``path``: grading the copy grades the files that digest
    names, however the student's folder changes meanwhile (a class's folder students can still write, while a
    batch grades it; each worker used to copy the folder again, as it was then). Links are copied as links, never
    followed (grading leaves them out and says so). Where no copy can be taken (too large, unreadable, changed
    while it was copied), ``path`` itself and None: it is graded as it is, as before."""
    folder = Path(tempfile.mkdtemp(prefix="gptkit-snapshot-"))
    try:
        try:
            copy, digest = _copied(path, folder / path.name)
        except (OSError, ValueError):
            copy, digest = path, None
        yield copy, digest
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _copied(src: Path, dst: Path) -> tuple[Path, str]:
    """``src`` copied to ``dst`` and the digest of the copied bytes (``FoundSubmission.digest``'s framing)."""
    h, total = hashlib.sha256(), 0
    if nofollow.is_link(src):
        raise ValueError(f"{src.name} is a link")  # graded as it is: refused there, with its reason
    if not src.is_dir():
        with nofollow.open_file(src) as f:
            data = f.read(SNAPSHOT_BYTES + 1)
        if len(data) > SNAPSHOT_BYTES:
            raise ValueError(f"{src.name} is over {SNAPSHOT_BYTES >> 20} MB")
        h.update(b"\0" + data + b"\0")
        dst.write_bytes(data)
        return dst, h.hexdigest()
    dst.mkdir()
    for entry in nofollow.walk(src, skip=_not_work):
        h.update(entry.path.as_posix().encode() + b"\0" + entry.kind.encode())
        target = dst / entry.path
        if entry.kind == nofollow.FOLDER:
            target.mkdir()
        elif entry.kind == nofollow.LINKED:
            os.symlink(os.readlink(entry.path.name, dir_fd=entry.dir_fd), target)
        elif entry.kind == nofollow.FILE:
            with entry.open() as f:
                data = f.read(SNAPSHOT_BYTES - total + 1)
            total += len(data)
            if total > SNAPSHOT_BYTES:
                raise ValueError(f"{src.name} holds over {SNAPSHOT_BYTES >> 20} MB")
            h.update(b"\0" + data + b"\0")
            target.write_bytes(data)
    return dst, h.hexdigest()


def _not_work(rel: PurePosixPath) -> bool:
    """Left out of a submission's digest: what grading leaves out, and a regrade request at its top."""
    return nofollow.not_submitted(rel) or rel == PurePosixPath(REQUEST_FILE)


def _hash_file(h: hashlib._Hash, f: BinaryIO) -> None:
    """The file's bytes framed by NULs, read a megabyte at a time: a student's file may be of any size."""
    h.update(b"\0")
    while chunk := f.read(1 << 20):
        h.update(chunk)
    h.update(b"\0")


def discover(root: Path, skip: tuple[Path, ...] = (), *, empty: bool = False) -> list[FoundSubmission]:
    """Every submission under ``root``, sorted by student; with ``empty``, also each student's folder that
    holds nothing to grade (its ``problem`` says why). ``MixedLayout`` where ``root`` holds nbgrader's
    ``submitted/`` beside what a plain batch reads as students."""
    nbgrader = root / NBGRADER_SUBMITTED
    if nbgrader.is_dir() and not nofollow.is_link(nbgrader):
        # nbgrader's layout is read from submitted/ alone, and its stamps as the platform's: a student whose own
        # folder is named "submitted" in a plain batch would hide every other student and date their own work
        beside = [f.path.name for f in _entries(root, skip) if f.student not in NBGRADER_FOLDERS]
        if beside:
            raise MixedLayout(
                f"{root} holds {NBGRADER_SUBMITTED}/ (nbgrader's layout) beside what a batch folder holds of students "
                f"({', '.join(sorted(beside)[:5])}{' ...' * (len(beside) > 5)}): an nbgrader course folder holds no "
                f"students of its own, and in a class's folder {NBGRADER_SUBMITTED}/ may be a student's, whose files "
                "would then stand for the whole class. Move the one or the others out"
            )
        found = _nbgrader(nbgrader)
    else:
        found = _entries(root, skip)
    return [f for f in found if empty or f.problem is None]


def _entries(root: Path, skip: tuple[Path, ...]) -> list[FoundSubmission]:
    found, skipped = [], {s.resolve() for s in skip}
    for entry in sorted(root.iterdir()):
        if _ignored(entry):
            continue
        if nofollow.is_link(entry):  # before resolve(): a loop of links makes it raise
            if entry.suffix in (".ipynb", ".zip") or entry.is_dir():
                found.append(_linked(entry.stem if entry.suffix in (".ipynb", ".zip") else entry.name, entry))
            continue
        if entry.resolve() in skipped:
            continue
        if entry.is_file() and entry.suffix in (".ipynb", ".zip"):
            found.append(FoundSubmission(entry.stem, entry, time_from=ENTRY))
        elif entry.is_dir():
            found.append(_in_folder(entry.name, entry, FOLDER))
    return found


def _nbgrader(submitted: Path) -> list[FoundSubmission]:
    found = []
    for student in sorted(p for p in submitted.iterdir() if (p.is_dir() or nofollow.is_link(p)) and not _ignored(p)):
        if nofollow.is_link(student):
            found.append(_linked(student.name, student))
            continue
        assignments = sorted(p for p in student.iterdir() if (p.is_dir() or nofollow.is_link(p)) and not _ignored(p))
        if not assignments:
            found.append(FoundSubmission(student.name, student, f"no assignment folder in {student.name}/"))
        for a in assignments:
            name = student.name if len(assignments) == 1 else f"{student.name}/{a.name}"
            # nbgrader writes its stamp in the assignment's folder, over any the student handed in: the one place
            # a timestamp.txt is the platform's (any folder below is the student's own)
            found.append(_linked(name, a) if nofollow.is_link(a) else _in_folder(name, a, f"{NBGRADER}{a}"))
    return found


def _linked(student: str, link: Path) -> FoundSubmission:
    """A student's entry that is a symbolic link: found, with nothing graded, and the reason."""
    return FoundSubmission(student, link, nofollow.refused(link.name + "/" * link.is_dir()))


def _ignored(entry: Path) -> bool:
    """Not a student's: a hidden or private name (.git, __MACOSX)."""
    return entry.name.startswith((".", "_"))


def _in_folder(student: str, folder: Path, time_from: str) -> FoundSubmission:
    inner = submission_in(folder)
    if inner is None:
        return FoundSubmission(student, folder, nothing_to_grade(folder), time_from)
    return FoundSubmission(student, inner, time_from=time_from)


def own_stamps(root: Path, found: list[FoundSubmission]) -> list[str]:
    """The students whose own folder holds a timestamp.txt that is not nbgrader's (a plain batch's student
    folder, or a folder inside an nbgrader assignment's): never read for a time, and the batch says so."""
    students = []
    for f in found:
        if f.problem is not None or f.time_from is None or f.time_from == ENTRY:
            continue
        top = Path(f.time_from[len(NBGRADER) :]) if f.time_from.startswith(NBGRADER) else root / f.student
        folder = f.path if f.path.is_dir() else f.path.parent
        below = [folder, *folder.parents]
        places = below[: below.index(top) + 1] if top in below else [folder]
        if f.time_from.startswith(NBGRADER):
            places = [p for p in places if p != top]  # nbgrader's own stamp, the one that is read
        if any(os.path.lexists(p / NBGRADER_TIMESTAMP) for p in places):
            students.append(f.student)
    return students


def nothing_to_grade(folder: Path) -> str:
    """Why ``folder`` holds no submission (``submission_in`` found none), for the teacher and the student."""
    everything = sorted(p for p in folder.iterdir() if not _ignored(p))
    links = [p.name + "/" * p.is_dir() for p in everything if nofollow.is_link(p)]
    entries = [p for p in everything if not nofollow.is_link(p)]
    notebooks = [p.name for p in entries if p.suffix == ".ipynb"]
    folders = [f"{p.name}/" for p in entries if p.is_dir()]
    if links:
        what = f"{nofollow.about(links)}: hand in the files themselves"
    elif not entries:
        what = "the folder is empty"
    elif len(notebooks) > 1:
        what = f"{len(notebooks)} notebooks ({', '.join(notebooks)}): which one is the submission?"
    elif len(folders) > 1:
        what = f"{len(folders)} folders ({', '.join(folders)}): which one is the submission?"
    else:
        shown = [p.name + "/" * p.is_dir() for p in entries]
        what = f"it holds only {', '.join(shown[:5])}{' ...' * (len(shown) > 5)}"
    return f"{NOTHING_TO_GRADE} ({what})"


def submission_in(folder: Path, depth: int = 0) -> Path | None:
    """The folder itself if it holds .py files; its one notebook; or the same one level down. Links are not
    looked at (a link to a folder of .py files is no submission), nor folders past ``nofollow.MAX_DEPTH``."""
    entries = [p for p in folder.iterdir() if not nofollow.is_link(p)]
    if any(p.suffix == ".py" for p in entries):
        return folder
    notebooks = sorted(p for p in entries if p.suffix == ".ipynb")
    if len(notebooks) == 1:
        return notebooks[0]
    subfolders = [p for p in entries if p.is_dir() and not p.name.startswith((".", "_"))]
    if len(subfolders) != 1 or depth >= nofollow.MAX_DEPTH:
        return None
    return submission_in(subfolders[0], depth + 1)


@contextlib.contextmanager
def unpacked(path: Path) -> Iterator[Path]:
    """A zip's contents in a temporary folder (names checked, size capped); anything else as it is."""
    if path.suffix != ".zip":
        yield path
        return
    folder = Path(tempfile.mkdtemp(prefix="gptkit-zip-"))
    try:
        with zipfile.ZipFile(path) as zf:
            if len(zf.infolist()) > nofollow.MAX_ENTRIES:
                raise ValueError(f"{path.name} holds more than {nofollow.MAX_ENTRIES} files and folders")
            members = [m for m in zf.infolist() if not m.is_dir()]
            if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
                raise ValueError(f"{path.name} unpacks to more than {MAX_ZIP_BYTES >> 20} MB")
            for m in members:
                if nofollow.zip_link(m):
                    raise ValueError(f"{path.name} holds {m.filename}, which {nofollow.LINK}: zip the file itself")
                if m.filename.count("/") > nofollow.MAX_DEPTH:
                    raise ValueError(f"{path.name}'s folders nest more than {nofollow.MAX_DEPTH} deep")
            for m in members:
                target = (folder / m.filename).resolve()
                if folder.resolve() not in target.parents or "__MACOSX" in m.filename:
                    continue  # absolute paths, ../ escapes and macOS metadata are left out
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(m))
        inner = submission_in(folder)
        if inner is None:
            raise ValueError(f"{path.name}: {nothing_to_grade(folder)}")
        yield inner
    finally:
        shutil.rmtree(folder, ignore_errors=True)
