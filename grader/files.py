"""Writing a file atomically: readers (and a crash) see the old file or the whole new one, never half of it.

The one place the kit does it: results and CSVs, the zips, checkpoints, downloaded corpora.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write to; on a clean exit its file replaces ``path`` (flushed to disk
    first), on an exception it is removed and ``path`` is left as it was.

    The file gets an ordinary file's permissions (0666 less the umask), not a temp file's 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o666 & ~umask)
        yield tmp
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text is UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)
