"""Grade many submissions in one process, with one warm Grader: the corpus's fast path.

``python tests/grade_many.py JOBS.json`` reads ``[{"submission", "milestones", "out"}, ...]`` and
writes each report (``--format json``'s content) to its ``out``. The verdicts are the ones
``grade check`` gives (the same runner, suites and sandbox); only the start-up is shared.
"""

import json
import sys
import warnings
from pathlib import Path

from grader.grading import Grader, Request


def main(jobs_file: str) -> None:
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    jobs = json.loads(Path(jobs_file).read_text())
    with Grader() as grader:
        for job in jobs:
            report = grader.grade(Request(Path(job["submission"]), tuple(job["milestones"])))
            Path(job["out"]).write_text(json.dumps(report.to_json()))


if __name__ == "__main__":
    main(sys.argv[1])
