"""Find the submissions under a folder: per-student folders, notebooks, zip files, or nbgrader's layout.

Every folder in it is a student's (nbgrader's: every assignment folder); so is every notebook (.ipynb) and
zip file. A student's folder that holds nothing to grade is still found, with a ``problem`` saying why, so
that no student is silently lost. Not students: other files (notes.txt, the gradebook), and names that begin
with "." or "_" (.git, __MACOSX).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.milestones import STUDENT_MODULES

MAX_ZIP_BYTES = 50 << 20
# What a submission must hold, the one wording of it (the reasons below, a zip's error).
EXERCISE_FILES = f"exercise file ({', '.join(f'{m}.py' for m in STUDENT_MODULES[:2])} ...)"
NOTHING_TO_GRADE = f"no {EXERCISE_FILES} or notebook found"


@dataclass(frozen=True)
class FoundSubmission:
    student: str  # a folder's or file's name; "student/assignment" in nbgrader's layout with several
    path: Path  # a folder of exercise files, a notebook, or a zip file; with a problem, the student's folder
    problem: str | None = None  # why there is nothing to grade (see nothing_to_grade); None: a submission

    def digest(self) -> str:
        """SHA-256 over the submission's files (names and bytes): a changed submission gets a new one."""
        h = hashlib.sha256()
        files = [self.path] if self.path.is_file() else sorted(_files(self.path))
        for f in files:
            h.update(f.relative_to(self.path).as_posix().encode() if self.path.is_dir() else b"")
            h.update(b"\0" + f.read_bytes() + b"\0")
        return h.hexdigest()


def discover(root: Path, skip: tuple[Path, ...] = (), *, empty: bool = False) -> list[FoundSubmission]:
    """Every submission under ``root``, sorted by student; with ``empty``, also each student's folder that
    holds nothing to grade (its ``problem`` says why)."""
    found = _nbgrader(root / "submitted") if (root / "submitted").is_dir() else _entries(root, skip)
    return [f for f in found if empty or f.problem is None]


def _entries(root: Path, skip: tuple[Path, ...]) -> list[FoundSubmission]:
    found, skipped = [], {s.resolve() for s in skip}
    for entry in sorted(root.iterdir()):
        if _ignored(entry) or entry.resolve() in skipped:
            continue
        if entry.is_file() and entry.suffix in (".ipynb", ".zip"):
            found.append(FoundSubmission(entry.stem, entry))
        elif entry.is_dir():
            found.append(_in_folder(entry.name, entry))
    return found


def _nbgrader(submitted: Path) -> list[FoundSubmission]:
    found = []
    for student in sorted(p for p in submitted.iterdir() if p.is_dir() and not _ignored(p)):
        assignments = sorted(p for p in student.iterdir() if p.is_dir() and not _ignored(p))
        if not assignments:
            found.append(FoundSubmission(student.name, student, f"no assignment folder in {student.name}/"))
        for a in assignments:
            found.append(_in_folder(student.name if len(assignments) == 1 else f"{student.name}/{a.name}", a))
    return found


def _ignored(entry: Path) -> bool:
    """Not a student's: a hidden or private name (.git, __MACOSX)."""
    return entry.name.startswith((".", "_"))


def _in_folder(student: str, folder: Path) -> FoundSubmission:
    inner = submission_in(folder)
    if inner is None:
        return FoundSubmission(student, folder, nothing_to_grade(folder))
    return FoundSubmission(student, inner)


def nothing_to_grade(folder: Path) -> str:
    """Why ``folder`` holds no submission (``submission_in`` found none), for the teacher and the student."""
    entries = sorted(p for p in folder.iterdir() if not _ignored(p))
    notebooks = [p.name for p in entries if p.suffix == ".ipynb"]
    folders = [f"{p.name}/" for p in entries if p.is_dir()]
    if not entries:
        what = "the folder is empty"
    elif len(notebooks) > 1:
        what = f"{len(notebooks)} notebooks ({', '.join(notebooks)}): which one is the submission?"
    elif len(folders) > 1:
        what = f"{len(folders)} folders ({', '.join(folders)}): which one is the submission?"
    else:
        shown = [p.name + "/" * p.is_dir() for p in entries]
        what = f"it holds only {', '.join(shown[:5])}{' ...' * (len(shown) > 5)}"
    return f"{NOTHING_TO_GRADE} ({what})"


def submission_in(folder: Path) -> Path | None:
    """The folder itself if it holds .py files; its one notebook; or the same one level down."""
    if any(folder.glob("*.py")):
        return folder
    notebooks = sorted(folder.glob("*.ipynb"))
    if len(notebooks) == 1:
        return notebooks[0]
    subfolders = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
    return submission_in(subfolders[0]) if len(subfolders) == 1 else None


def _files(folder: Path) -> Iterator[Path]:
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if p.is_file() and not p.is_symlink() and "__pycache__" not in rel.parts and not rel.parts[0].startswith("."):
            yield p


@contextlib.contextmanager
def unpacked(path: Path) -> Iterator[Path]:
    """A zip's contents in a temporary folder (names checked, size capped); anything else as it is."""
    if path.suffix != ".zip":
        yield path
        return
    folder = Path(tempfile.mkdtemp(prefix="gptkit-zip-"))
    try:
        with zipfile.ZipFile(path) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
                raise ValueError(f"{path.name} unpacks to more than {MAX_ZIP_BYTES >> 20} MB")
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
