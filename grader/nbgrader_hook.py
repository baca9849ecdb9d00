"""What an nbgrader test cell calls: grade the saved notebook out of process, fail the cell unless all passed.

``check("tinygpt.ipynb", "m1")`` runs ``grade check`` on the notebook file (the
isolated workers, the hidden suites) once per saved version, then raises
AssertionError listing the milestone's failing checks. ``public=True`` runs the
public checks only. Nothing goes to stderr: nbgrader would count it as a failure.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_reports: dict[tuple[str, float, bool], dict] = {}


def check(notebook: str, milestone: str, public: bool = False) -> None:
    report = _report(Path(notebook).resolve(), public)
    found = [m for m in report.get("milestones", []) if m["id"] == milestone]
    if not found:
        raise AssertionError(f"{milestone} was not graded: {report.get('error', 'no report')}")
    failed = [c for c in found[0]["checks"] if not c["passed"] and c.get("counted", True)]  # set aside: no verdict
    if failed:
        lines = [f"- {c['name']}: {c['message']}" for c in failed[:3]]
        more = f"\n(and {len(failed) - 3} more)" if len(failed) > 3 else ""
        kind = "public" if public else "hidden"
        raise AssertionError(f"{len(failed)} {kind} check(s) of {milestone} failed "
                             f"({found[0]['score']:g}/{found[0]['max_score']:g}):\n" + "\n".join(lines) + more)
    print(f"{milestone}: all {len(found[0]['checks'])} {'public ' if public else ''}checks passed")


def _report(notebook: Path, public: bool) -> dict:
    if not notebook.is_file():
        return {"error": f"{notebook.name} is not in {notebook.parent}: save the notebook under that name"}
    key = (str(notebook), notebook.stat().st_mtime, public)
    if key not in _reports:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report.json"
            args = [sys.executable, "-m", "grader", "check", str(notebook), "--format", "json", "-o", str(out)]
            proc = subprocess.run(args + (["--public"] if public else []), capture_output=True, text=True,
                                  env={**os.environ, "PYTHONWARNINGS": "ignore"}, timeout=1200)
            _reports[key] = json.loads(out.read_text()) if out.exists() else {
                "error": f"the grader did not finish (exit {proc.returncode}): {proc.stderr[-500:]}"}
    return _reports[key]
