"""Run inside a built student release (its folder first on PYTHONPATH): grades each request read from stdin, one
JSON line ``[folder, milestone]`` (or ``[folder, [milestone, ...]]``), with the release's own Grader, as
`grade check FOLDER -m MILESTONE --format json` does there, and answers one JSON line with the report.
test_public_checks.py starts one per module, so a process, torch and a fork server are started once and not once
per submission."""

import json
import os
import sys
from pathlib import Path

import grader
from grader.grading import Grader, Request
from grader.options import limits


def main() -> None:
    replies = os.fdopen(os.dup(1), "w")  # the replies' own descriptor: what grading prints goes to stderr
    os.dup2(2, 1)
    print(json.dumps({"grader": grader.__file__}), file=replies, flush=True)
    with Grader() as grading:
        for line in sys.stdin:
            folder, milestones = json.loads(line)
            milestones = (milestones,) if isinstance(milestones, str) else tuple(milestones)
            report = grading.grade(Request(Path(folder), milestones, name=folder), limits())
            print(json.dumps(report.to_json()), file=replies, flush=True)


if __name__ == "__main__":
    main()
