"""Grade many submissions in one process, with one warm fork server: the corpus's fast path.

``python tests/grade_many.py JOBS.json`` reads ``[{"submission", "milestones", "out"}, ...]`` and
writes each report (``--format json``'s content) to its ``out``. The verdicts are the ones
``grade check`` gives (the same runner, suites and sandbox); only the start-up is shared.
"""

import json
import sys
import warnings
from pathlib import Path

from grader.sandbox.client import ForkServer, Limits


def main(jobs_file: str) -> None:
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    jobs = json.loads(Path(jobs_file).read_text())
    with ForkServer(Limits()) as server:
        from grader.runner import grade

        for job in jobs:
            report = grade(Path(job["submission"]), job["milestones"], fork_server=server)
            Path(job["out"]).write_text(json.dumps(report.to_json()))


if __name__ == "__main__":
    main(sys.argv[1])
