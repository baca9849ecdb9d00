"""A batch's digest of a student's files: any size, never held in memory whole."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from helpers import REPO


def test_a_huge_file_is_digested_in_bounded_memory(tmp_path):
    """A 1 GB notebook in the class folder (sparse: it costs no disk) is digested with the process's peak memory
    grown by under 100 MB; read whole, as before, it grew by 2 GB (the file, then its framed copy)."""
    huge = tmp_path / "eve.ipynb"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)
    script = textwrap.dedent(f"""
        import resource
        from pathlib import Path
        from grader.batch.discover import FoundSubmission
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        FoundSubmission("eve", Path({str(huge)!r})).digest()
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) < 100, f"peak memory grew by {proc.stdout.split()[-1]} MB for a 1 GB file"
