"""Find the submissions under a folder: per-student folders, notebooks, zip files, or nbgrader's layout."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_ZIP_BYTES = 50 << 20


@dataclass(frozen=True)
class FoundSubmission:
    student: str  # a folder's or file's name; "student/assignment" in nbgrader's layout with several
    path: Path  # a folder of exercise files, a notebook, or a zip file

    def digest(self) -> str:
        """SHA-256 over the submission's files (names and bytes): a changed submission gets a new one."""
        h = hashlib.sha256()
        files = [self.path] if self.path.is_file() else sorted(_files(self.path))
        for f in files:
            h.update(f.relative_to(self.path).as_posix().encode() if self.path.is_dir() else b"")
            h.update(b"\0" + f.read_bytes() + b"\0")
        return h.hexdigest()


def discover(root: Path, skip: tuple[Path, ...] = ()) -> list[FoundSubmission]:
    """Every submission under ``root``, sorted by student."""
    if (root / "submitted").is_dir():
        return _nbgrader(root / "submitted")
    found, skipped = [], {s.resolve() for s in skip}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith((".", "_")) or entry.resolve() in skipped:
            continue
        if entry.is_file() and entry.suffix in (".ipynb", ".zip"):
            found.append(FoundSubmission(entry.stem, entry))
        elif entry.is_dir() and (inner := submission_in(entry)) is not None:
            found.append(FoundSubmission(entry.name, inner))
    return found


def _nbgrader(submitted: Path) -> list[FoundSubmission]:
    found = []
    for student in sorted(p for p in submitted.iterdir() if p.is_dir()):
        assignments = sorted(p for p in student.iterdir() if p.is_dir())
        for a in assignments:
            inner = submission_in(a)
            if inner is not None:
                name = student.name if len(assignments) == 1 else f"{student.name}/{a.name}"
                found.append(FoundSubmission(name, inner))
    return found


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
            raise ValueError(f"{path.name} holds no exercise files and no single notebook")
        yield inner
    finally:
        shutil.rmtree(folder, ignore_errors=True)
