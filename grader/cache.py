"""Answers worked out once per machine instead of once per run: the reference's expected values, the redactor.

Grading a submission compares it with what the reference computes on the same inputs, and most of those
inputs are fixed (seeds, sizes): the reference's side does not depend on the submission. A cold ``grade
check`` used to recompute it every time. Here each such value is stored on disk, under a name that is a
digest of everything it depends on:

- the grader's fingerprint (its code and the reference's, ``grader/fingerprint.py``): a fix to a suite or
  to the reference makes every old entry unreachable;
- torch's version and the CPU kernels it picked (``AVX2``, ``AVX512``): floating-point results may differ
  between them, and a cache folder may be shared by several machines;
- the caller's own key (seeds, sizes, what is computed).

An entry is the value written by ``torch.save`` after a digest of those bytes and of its key. It is read
back with ``weights_only=True``, so a file can only ever hold data (tensors, numbers, strings, lists, dicts),
never code. An entry that is truncated, altered or unreadable is recomputed and written again, so deleting
the folder, or any file in it, is always safe: it costs only the time to fill it again. Values of other
types are kept in memory only.

``GPTKIT_CACHE`` names the folder (default ``$XDG_CACHE_HOME/gptkit``, else ``~/.cache/gptkit``); ``off``
turns the cache off. The folder is hidden from workers like the grader's own files.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from grader.fingerprint import grader_fingerprint

# torch is imported where a value is computed, read or written: `grade` starts without it.

T = TypeVar("T")
VARIABLE = "GPTKIT_CACHE"
FORMAT = b"gptkit-cache 1\n"  # a change of layout changes this line, and every old entry reads as corrupt
DIGEST_BYTES = 32


def folder() -> Path | None:
    """Where entries live, or None if the cache is off."""
    chosen = os.environ.get(VARIABLE, "")
    if chosen.lower() == "off":
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "gptkit"


def subfolder(name: str) -> Path:
    """A folder of the cache for a library's own files (Hypothesis's), or a private temporary one if it is off:
    never the folder the grader was started in, which may be a student's or a course's."""
    where = folder()
    return where / name if where is not None else _scratch(name)


_SCRATCH: dict[str, tempfile.TemporaryDirectory] = {}  # held until exit, when each removes its folder


def _scratch(name: str) -> Path:
    """One temporary folder per process and name, removed when the process exits."""
    if name not in _SCRATCH:
        _SCRATCH[name] = tempfile.TemporaryDirectory(prefix=f"gptkit-{name}-")
    return Path(_SCRATCH[name].name)


@functools.cache
def _machine() -> str:
    """What a value computed with torch on this machine depends on, beyond its own key."""
    import torch

    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")()
    return f"{grader_fingerprint()} torch {torch.__version__} {capability} {platform.machine()}"


def entry_path(key: str) -> Path | None:
    """The file for ``key`` (a stable description: seeds, sizes, what is computed), or None if the cache is off."""
    where = folder()
    if where is None:
        return None
    name = hashlib.blake2b(_full(key).encode(), digest_size=20).hexdigest()
    return where / "expected" / name[:2] / f"{name}.pt"


def _full(key: str) -> str:
    """The key with what it depends on beyond itself: named in the file name, and covered by the digest."""
    return f"{_machine()}\0{key}"


def stored(key: str, compute: Callable[[], T]) -> T:
    """``compute()``, read from disk if an intact entry for ``key`` is there, else computed and written."""
    path = entry_path(key)
    if path is None:
        return compute()
    found = _read(path, _full(key))
    if found is not _MISSING:
        return found
    value = compute()
    _write(path, _full(key), value)
    return value


_MISSING: Any = object()


def _digest(key: str, payload: bytes) -> bytes:
    return hashlib.blake2b(key.encode() + b"\0" + payload, digest_size=DIGEST_BYTES).digest()


def _read(path: Path, key: str) -> Any:
    import torch

    try:
        data = path.read_bytes()
    except OSError:
        return _MISSING
    start = len(FORMAT) + DIGEST_BYTES
    head, digest, payload = data[: len(FORMAT)], data[len(FORMAT) : start], data[start:]
    if head != FORMAT or digest != _digest(key, payload):
        return _MISSING  # truncated, altered, or another key's file: recomputed, then overwritten
    try:
        return torch.load(io.BytesIO(payload), weights_only=True)
    except Exception:  # noqa: BLE001 - any unreadable entry is only a cache miss
        return _MISSING


def _write(path: Path, key: str, value: Any) -> None:
    """Best effort: a value torch cannot store as plain data, or a folder we cannot write, is only not cached."""
    import torch

    buffer = io.BytesIO()
    try:
        torch.save(value, buffer)
        payload = buffer.getvalue()
        torch.load(io.BytesIO(payload), weights_only=True)  # what cannot be read back safely is not written
    except Exception:  # noqa: BLE001
        return
    tmp = None
    try:
        root = path.parents[2]
        root.mkdir(parents=True, exist_ok=True, mode=0o700)  # the reference's answers: for this user only
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as out:
            out.write(FORMAT + _digest(key, payload) + payload)
        os.replace(tmp, path)  # readers see the old entry or the whole new one, never half of it
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
