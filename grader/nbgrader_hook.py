"""What an nbgrader test cell calls: grade the saved notebook out of process, report the milestone.

``check("tinygpt.ipynb", "m1")`` runs ``grade check`` on the notebook file (the
isolated workers) once per saved version, then reports the milestone:

- where the hidden suites are installed (the instructor's kit, so ``nbgrader
  autograde``): it prints the milestone's points and every failing check with its
  message (what ``grade check -v`` shows; the cases of one check together), then returns the points won. The cell's
  output is that one number, which nbgrader takes as the cell's partial credit, so
  nbgrader's total is the kit's total (``grade batch``);
- with the public checks only (a student's kit, or ``public=True``): it raises
  AssertionError listing every failing public check, or prints that all passed, so a
  student (and ``nbgrader validate``) sees a failing cell as failed.

Nothing goes to stderr: nbgrader would count it as a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from grader import nofollow

_reports: dict[tuple[str, float, bool], dict] = {}
# The whole notebook's grading (`grade check`: about 15 s for the reference on 2 cores). Past it the grading is
# stopped and its failure kept like a report, so the other checks cells answer at once instead of waiting again;
# nbgrader_config.py.tmpl gives a checks cell more than this.
GRADE_SECONDS = 300
# Its grading's own limit (grade check --submission-timeout), inside GRADE_SECONDS with time to start and write:
# past it the checks left fail at once and the report is still written, so the notebook keeps what it earned.
SUBMISSION_SECONDS = GRADE_SECONDS - 60


def check(notebook: str, milestone: str, public: bool = False) -> float | None:
    report = _report(Path(notebook).absolute(), public)  # absolute, not resolved: a link is refused, not followed
    found = [m for m in report.get("milestones", []) if m["id"] == milestone]
    if not found:
        raise AssertionError(f"{milestone} was not graded: {report.get('error', 'no report')}")
    result = found[0]
    counted = [c for c in result["checks"] if c.get("counted", True)]  # set aside: no verdict, no point lost
    failed = [c for c in counted if not c["passed"]]
    lines = _grouped(failed)
    lines += [
        f"- not counted (not your code's fault): {c['name']}: {c['message']}"
        for c in result["checks"]
        if not c.get("counted", True)
    ]
    lines = [_wrapped(line) for line in lines]
    passed = f"{len(counted) - len(failed)}/{len(counted)}"
    if report.get("checks") == "all":  # the grading run: a score, which nbgrader reads from the cell's output
        print(
            f"{milestone}: {result['score']:g}/{result['max_score']:g} points, {passed} checks passed"
            + (". Failing checks:" if failed else "")
        )
        if lines:
            print("\n".join(lines))
        return float(result["score"])
    if failed:
        raise AssertionError(
            f"{len(failed)} public check(s) of {milestone} failed ({passed} passed):\n" + "\n".join(lines)
        )
    print(
        f"{milestone}: "
        + (f"all {len(counted)} public checks" if len(counted) != 1 else "its one public check")
        + " passed (the grade also counts hidden ones)"
        + ("\n" + "\n".join(lines) if lines else "")
    )
    return None


def _wrapped(line: str, width: int = 100) -> str:
    """A check's line cut at ``width`` columns, the rest indented under its ``- ``: nbgrader's feedback shows the
    output in a box that scrolls sideways, and a message's "Likely cause: ..." comes last."""
    return "\n".join(
        textwrap.fill(part, width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
        for part in line.splitlines()  # a message's own lines (a traceback) stay lines
    )


def _grouped(failed: list[dict]) -> list[str]:
    """One line per failing check, the cases of one parametrized check (``name [case]``) together: its first message.

    A case is known by its ``case`` id, which the runner records: a name that merely ends in brackets (a
    check's own title, such as ``weights are [0.2689, 0.7311]``) is kept whole."""
    groups: dict[str, list[dict]] = {}
    for c in failed:
        groups.setdefault(_base(c), []).append(c)
    return [
        f"- {name}" + (f" ({len(cases)} cases)" if len(cases) > 1 else "") + f": {cases[0]['message']}"
        for name, cases in groups.items()
    ]


def _base(check: dict) -> str:
    """The check's name without its case id: the name the runner gave the check itself."""
    name, case = check["name"], check.get("case", "")
    suffix = f" [{case}]"
    return name[: -len(suffix)] if case and name.endswith(suffix) else name


def _linked(notebook: Path) -> bool:
    """The notebook is a symbolic link, or was one in nbgrader's submitted/ folder: nbgrader copies
    submitted/STUDENT/ASSIGNMENT/ into autograded/ following links, so the copy graded here is a plain file
    holding what the link pointed to (another student's notebook, say), which is not this student's work."""
    parts = notebook.parts
    submitted = Path(*parts[:-4], "submitted", *parts[-3:]) if len(parts) > 4 and parts[-4] == "autograded" else None
    return nofollow.is_link(notebook) or (submitted is not None and nofollow.is_link(submitted))


def _report(notebook: Path, public: bool) -> dict:
    if _linked(notebook):
        return {"error": nofollow.refused(notebook.name)}
    if not notebook.is_file():
        return {"error": f"{notebook.name} is not in {notebook.parent}: save the notebook under that name"}
    key = (str(notebook), notebook.stat().st_mtime, public)
    if key not in _reports:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report.json"
            args = [sys.executable, "-m", "grader", "check", str(notebook), "--format", "json", "-o", str(out)]
            args += ["--submission-timeout", f"{SUBMISSION_SECONDS:g}"]
            try:
                proc = subprocess.run(
                    args + (["--public"] if public else []),
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PYTHONWARNINGS": "ignore"},
                    timeout=GRADE_SECONDS,
                )
            except subprocess.TimeoutExpired:
                _reports[key] = {"error": f"the grading took more than {GRADE_SECONDS} s and was stopped"}
                return _reports[key]
            _reports[key] = (
                json.loads(out.read_text())
                if out.exists()
                else {"error": f"the grader did not finish (exit {proc.returncode}): {proc.stderr[-500:]}"}
            )
    return _reports[key]
