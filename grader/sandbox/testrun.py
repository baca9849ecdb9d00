"""A contest's test run (CMS's "user test"): the student's own script run once in a fresh worker, in the same
jail and under the same limits as grading, and what it printed given back to them.

Nothing here grades. The worker runs ``Request.RUN`` (``worker/ops_calls.py``): the script as ``__main__`` in its
private copy of the student's files; its output goes, as every worker's does, to a file the kernel caps at
``Limits.output_bytes``. Only here, once the worker is reaped, is that file read, and only its last
``OUTPUT_KEPT`` bytes: what a hostile worker sends back is bounded in time (the call's limit), in size (the
tail) and in shape (the reply's own bounds, ``client.check_reply_size``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from grader import nofollow

from .client import ForkServer, ProbeFault, StudentError, WorkerCrash, remove_tree
from .common.agreement import ErrorKind, Request

OUTPUT_KEPT = 64 << 10  # the bytes of a test run's output given back: its end, where a traceback is
SCRIPT = "test_run.py"  # the script's name in the test run's folder, beside the student's files

OK, ERROR, TIME, MEMORY, OUTPUT, CRASHED = "ok", "error", "time limit", "memory limit", "output limit", "crashed"


def tail(data: bytes, size: int, kept: int = OUTPUT_KEPT) -> tuple[str, bool]:
    """The text of ``data``'s last ``kept`` bytes (``data`` being the end of an output of ``size`` bytes), and
    whether the output was cut. A character split by the cut is replaced, never an error."""
    cut = size > kept or len(data) > kept
    return data[-kept:].decode("utf-8", errors="replace"), cut


def read_tail(path: Path, kept: int = OUTPUT_KEPT) -> tuple[str, bool]:
    """The last ``kept`` bytes of the output file ``path`` as text, and whether it was longer: never more read,
    whatever the worker wrote; a file that is gone or not a plain file reads as nothing."""
    try:
        with nofollow.open_file(path) as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - kept))
            return tail(f.read(kept), size, kept)
    except (OSError, nofollow.LinkFound, nofollow.NotOwnFile):
        return "", False


def verdict_of(e: Exception) -> str:
    """The verdict of a test run that ended in ``e``: the limit it met, or an error in the student's code."""
    if isinstance(e, WorkerCrash):
        if e.limit == "time":
            return TIME
        if e.limit == "memory":
            return MEMORY
        return OUTPUT if "printed more than" in str(e) else CRASHED
    if isinstance(e, StudentError) and e.type == ErrorKind.MEMORY_ERROR:  # the address-space limit, met in their code
        return MEMORY
    return ERROR


def run_script(server: ForkServer, folder: Path, seconds: float) -> dict[str, Any]:
    """Run ``folder``'s ``SCRIPT`` in a fresh worker of ``server`` within ``seconds`` of wall time: ``{"verdict",
    "error" (None when ok), "output", "cut", "seconds"}``."""
    worker = server.spawn(folder)
    worker.keep_output = True
    verdict, error = OK, None
    started = time.monotonic()
    try:
        try:
            worker.request({"op": Request.RUN, "script": SCRIPT}, timeout=seconds)
        except (StudentError, ProbeFault, WorkerCrash) as e:  # a probe fault is the worker's word: its own error
            verdict, error = verdict_of(e), str(e)
        finally:  # the grader's own failure too: the worker reaped before its output is read
            elapsed = time.monotonic() - started
            worker.close()
        output, cut = read_tail(worker.output)
    finally:  # its output file never left on disk
        remove_tree(worker.output)
    return {"verdict": verdict, "error": error, "output": output, "cut": cut, "seconds": round(elapsed, 3)}
