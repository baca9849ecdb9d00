"""Cheaper forks: the fork server's private memory in 2 MiB pages.

The fork server holds about 200 MiB of private memory once torch is loaded. Every
fork copies a page-table entry for each of its 4 KiB pages, and every exit tears
them down again, three times per worker (reaper, namespace init, worker): that was
most of a worker's set-up cost. Collapsed into huge pages, the same memory takes
one entry per 2 MiB; a worker that writes to one gets only that 4 KiB copied (the
kernel splits the huge page on a copy-on-write fault, since Linux 5.8, and
``MADV_COLLAPSE`` exists only from 6.1).

Loaded by path into the fork server (imports nothing from ``grader``). Best effort:
on an older kernel, without transparent huge pages, or on macOS, nothing changes.
"""

from __future__ import annotations

import ctypes

MADV_HUGEPAGE, MADV_COLLAPSE = 14, 25
HUGE = 2 << 20


def collapse() -> int:
    """Collapse the process's anonymous writable memory into huge pages; returns the bytes collapsed."""
    try:
        maps = open("/proc/self/maps").read().splitlines()
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    done = 0
    for line in maps:
        fields = line.split()
        if "w" not in fields[1] or (len(fields) > 5 and fields[5] != "[heap]"):
            continue  # only the heap and anonymous mappings: files and stacks stay as they are
        start, end = (int(x, 16) for x in fields[0].split("-"))
        start, end = -(-start // HUGE) * HUGE, end // HUGE * HUGE  # whole huge pages inside the mapping
        if (
            end > start
            and madvise(start, end - start, MADV_HUGEPAGE) == 0
            and madvise(start, end - start, MADV_COLLAPSE) == 0
        ):
            done += end - start
    return done
