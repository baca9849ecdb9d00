"""What a contest upload may be, checked before anything is kept: the task's exercise files (``m1_attention.py``
for m1), one notebook, or a zip of either. A zip's member names are checked (no absolute path, no ``..``, no
deeper than a student's folders go), its entries counted (folders too), a symbolic link in it refused (its bytes
are a path, not the student's work), its unpacked size capped, and only its exercise files and notebook are
kept; a notebook must be valid JSON with cells. What passes is written as a plain folder, so the grader never
unpacks anything the server did not check.
"""

from __future__ import annotations

import io
import json
import os
import stat
import struct
import zipfile
from pathlib import Path, PurePosixPath

from grader.errors import UserError
from grader.milestones import GRADABLE

MAX_UPLOAD_BYTES = 20 << 20  # the request's body
MAX_ZIP_BYTES = 50 << 20  # a zip's files, unpacked
MAX_ZIP_MEMBERS = 200  # entries, folders included
MAX_ZIP_DEPTH = 16  # folders above a member
# The zip's directory, read before zipfile parses it: zipfile reads every entry it holds, whatever the count says
# (200,000 entries fit in a 16 MB upload: 1.3 s of the server's event loop). 200 entries with long names fit.
MAX_ZIP_DIRECTORY = 256 << 10
_END_OF_DIRECTORY = struct.Struct("<4s4H2LH")  # zip's end-of-central-directory record, comment excluded
MAX_FILES = 20  # files in one request
NOTEBOOK = "submission.ipynb"
# A notebook's JSON nesting: Jupyter's own are under 10 deep (ipywidgets' state a few more). json.loads, and the
# grader's notebook readers after it, recurse once a level: 200,000 levels end in a RecursionError, a 500.
MAX_NOTEBOOK_DEPTH = 100
_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # as int8: +1, +1, -1, -1


def too_big(size: int) -> str:
    """Why an upload of ``size`` bytes is refused (the server's 413 and `grade submit`'s check alike)."""
    return f"the upload is over {MAX_UPLOAD_BYTES >> 20} MB ({size / (1 << 20):.1f} MB)"


class UploadError(UserError, ValueError):  # ValueError: what callers caught before
    """An upload that is not a valid submission; the message is for the student."""


def allowed_files(task: str) -> tuple[str, ...]:
    """The exercise files a submission to ``task`` may hold."""
    return tuple(f"{module}.py" for module in GRADABLE[task].modules)


def _base(name: str) -> str:
    return name.replace("\\", "/").rsplit("/", 1)[-1]


def _unsafe(name: str) -> bool:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return name.startswith(("/", "\\")) or ".." in parts or (len(name) > 1 and name[1] == ":")


def _directory_size(data: bytes) -> int | None:
    """The size the zip's end record gives its directory (what zipfile will parse); None if it has no end record
    (zipfile then refuses it as not a zip). The record is in the last 64 KB, before a comment."""
    at = data.rfind(b"PK\x05\x06", max(0, len(data) - (1 << 16) - _END_OF_DIRECTORY.size))
    if at < 0 or len(data) - at < _END_OF_DIRECTORY.size:
        return None
    return _END_OF_DIRECTORY.unpack_from(data, at)[5]  # (signature, 4 counts, size, offset, comment length)


def _unzip(data: bytes, allowed: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """The exercise files and notebooks a zip upload holds, (name, bytes), once the whole zip is checked: its
    directory's size before zipfile parses it, then every entry (count, names, links, depth, unpacked size)."""
    size = _directory_size(data)
    if size is not None and size > MAX_ZIP_DIRECTORY:  # zip64's 0xFFFFFFFF too: no student's zip needs it
        raise UploadError(
            f"the zip's list of files is over {MAX_ZIP_DIRECTORY >> 10} KB: at most {MAX_ZIP_MEMBERS} files and folders"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UploadError("the .zip file is not a valid zip archive") from None
    with archive:
        members = _checked_members(archive.infolist())
        kept = _kept(archive, members, allowed)
    if not kept:
        raise UploadError(f"the zip holds none of {', '.join(allowed)} and no notebook")
    return list(kept.items())


def _checked_members(entries: list[zipfile.ZipInfo]) -> list[zipfile.ZipInfo]:
    """The zip's files (its folders left out), once every entry passed: no more than MAX_ZIP_MEMBERS, no unsafe
    name, no symbolic link, no deeper than MAX_ZIP_DEPTH, and MAX_ZIP_BYTES unpacked at most."""
    if len(entries) > MAX_ZIP_MEMBERS:
        raise UploadError(f"the zip holds {len(entries)} files and folders; at most {MAX_ZIP_MEMBERS}")
    for m in entries:
        if _unsafe(m.filename):
            raise UploadError(f"the zip holds a file with an unsafe path, {m.filename!r}: no absolute paths or ..")
        if stat.S_ISLNK(m.external_attr >> 16):
            raise UploadError(
                f"the zip holds {m.filename!r}, a symbolic link, not a file: zip the file itself "
                "(without zip's -y, which stores links)"
            )
        if m.filename.replace("\\", "/").strip("/").count("/") > MAX_ZIP_DEPTH:
            raise UploadError(f"the zip's folders nest more than {MAX_ZIP_DEPTH} deep, at {m.filename[:80]!r}")
    members = [m for m in entries if not m.is_dir()]
    if sum(m.file_size for m in members) > MAX_ZIP_BYTES:
        raise UploadError(f"the zip unpacks to more than {MAX_ZIP_BYTES >> 20} MB")
    return members


def _kept(archive: zipfile.ZipFile, members: list[zipfile.ZipInfo], allowed: tuple[str, ...]) -> dict[str, bytes]:
    """The bytes of the checked ``members`` that are ``allowed`` exercise files or notebooks, by base name (two
    of one name refused); the rest of a student's folder is left in the zip."""
    kept: dict[str, bytes] = {}
    for m in members:
        base = _base(m.filename)
        if "__MACOSX" in m.filename or base.startswith(".") or not (base in allowed or base.endswith(".ipynb")):
            continue  # the rest of a student's folder: other exercises, data, editor files
        if base in kept:
            raise UploadError(f"the zip holds two files named {base}: keep one")
        try:
            kept[base] = archive.read(m)
        except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as e:
            raise UploadError(f"cannot unpack {m.filename!r} from the zip: {e}") from None
    return kept


def json_depth(data: bytes) -> int:
    """How deep ``data``'s JSON arrays and objects nest (the brackets inside strings are text), counted without
    parsing it, in time linear in its size. Invalid JSON gets a number too: the parser refuses it after this."""
    import numpy as np  # here, not at the top: `grade submit` imports this module, and needs the standard library only

    # Escaped backslashes, then escaped quotes, go first: each quote left opens or closes a string, so the odd
    # pieces between quotes are the strings' text and the even ones the structure.
    outside = b"".join(data.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])
    steps = np.frombuffer(outside.translate(_STEPS, _NOT_BRACKETS), dtype=np.int8)  # +1 an opening, -1 a closing
    deepest = depth = 0
    for chunk in range(0, len(steps), 1 << 20):  # a running sum per MB of brackets: 8 MB of memory at a time
        running = np.cumsum(steps[chunk : chunk + (1 << 20)], dtype=np.int64) + depth
        deepest, depth = max(deepest, int(running.max())), int(running[-1])
    return deepest


def _notebook(name: str, data: bytes) -> None:
    depth = json_depth(data)
    if depth > MAX_NOTEBOOK_DEPTH:
        raise UploadError(
            f"{name} is nested more than {MAX_NOTEBOOK_DEPTH} levels deep: a notebook saved by Jupyter is under "
            "10; save yours again from Jupyter and upload that"
        )
    try:
        notebook = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UploadError(f"{name} is not a valid notebook: {e}") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise UploadError(f"{name} is not a valid notebook: it has no list of cells")
    if notebook.get("nbformat") != 4:
        raise UploadError(f"{name} is not a version 4 notebook (nbformat {notebook.get('nbformat')!r})")


def check_upload(task: str, files: list[tuple[str, bytes]]) -> dict[str, bytes]:
    """The files to keep for an upload of ``files`` (name, bytes) to ``task``: exercise files by name, or one
    notebook as ``submission.ipynb``. Raises UploadError with the reason otherwise."""
    allowed = allowed_files(task)
    files = [(name, data) for name, data in files if name]
    for name, _ in files:  # a browser or `grade submit` sends a plain name: a path or a control character is hostile
        if "/" in name or "\\" in name or name in (".", "..") or any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise UploadError(f"{name!r} is not a plain file name: upload {', '.join(allowed)}, a notebook or a zip")
    if not files:
        raise UploadError("no file: choose your exercise file(s), a notebook or a zip to upload")
    if len(files) == 1 and files[0][0].lower().endswith(".zip"):
        files = _unzip(files[0][1], allowed)
    notebooks = [(n, d) for n, d in files if n.endswith(".ipynb")]
    sources = [(n, d) for n, d in files if not n.endswith(".ipynb")]
    if notebooks:
        if len(notebooks) > 1 or sources:
            raise UploadError("upload one notebook on its own, or exercise files without a notebook")
        _notebook(*notebooks[0])
        return {NOTEBOOK: notebooks[0][1]}
    return _sources(task, sources, allowed)


def _sources(task: str, sources: list[tuple[str, bytes]], allowed: tuple[str, ...]) -> dict[str, bytes]:
    """The exercise files of an upload without a notebook, by name: each one of ``allowed``, once, not empty, and
    UTF-8 text."""
    kept: dict[str, bytes] = {}
    for name, data in sources:
        if name not in allowed:
            kind = "a zip inside a zip" if name.lower().endswith(".zip") else repr(name)
            raise UploadError(
                f"{kind} is not a file of task {task}: upload {', '.join(allowed)}, one .ipynb notebook, or a zip"
            )
        if name in kept:
            raise UploadError(f"{name} is uploaded twice")
        if not data.strip():
            raise UploadError(f"{name} is empty: upload the file with your work in it")
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            raise UploadError(f"{name} is not UTF-8 text") from None
        kept[name] = data
    return kept


def write(files: dict[str, bytes], folder: Path) -> str:
    """Write the checked ``files`` into ``folder`` (synced to disk); the path to grade, relative to it."""
    for name, data in files.items():
        # A new file, never through a link: the folder is the server's own, and stays so if anything else wrote it.
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with open(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    return NOTEBOOK if NOTEBOOK in files else "."
