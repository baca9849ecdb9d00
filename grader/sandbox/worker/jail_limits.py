"""Resource limits (rlimits), the protection every machine has: each worker's CPU seconds, data size, file
size (a flood of output kills it), open files, no core dumps, and its process count where it has a user id of
its own (RLIMIT_NPROC counts per user). Set last, in the worker itself, just before it runs student code.
"""

from __future__ import annotations

import resource


def set_limits(limits: dict, own_uid: bool) -> None:
    """rlimits for the worker; RLIMIT_NPROC only when the worker has a user id of its own (it counts per user)."""
    wanted = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, limits["output_bytes"]),
        (resource.RLIMIT_DATA, limits["memory_bytes"]),
        (resource.RLIMIT_NOFILE, limits.get("open_files", 256)),
    ]
    if own_uid:
        wanted.append((resource.RLIMIT_NPROC, limits.get("processes", 64)))
    for kind, value in wanted:
        try:
            resource.setrlimit(kind, (value, value))
        except (ValueError, OSError):  # a platform that refuses a limit still grades, without it
            pass
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 5))
    except (ValueError, OSError):
        pass
