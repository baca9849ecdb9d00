"""A Gradescope autograder zip: the grader, its hidden suites and the reference, plus Gradescope's two scripts.

Gradescope unpacks the zip into ``/autograder/source``, runs ``setup.sh`` once
while building the image, then ``run_autograder`` for each submission; the
student's files are in ``/autograder/submission`` and the results go to
``/autograder/results/results.json``. Student code runs in the grader's
isolated workers as on any machine; the image's protections are listed in
each report.

``run_autograder`` calls ``results`` here (``python -m grader.bundles.gradescope``):
the exercise files or the one notebook are found in the submission folder or in
the one folder inside it, as ``grade batch`` finds them; the hidden suites carry
the points and the visibility chosen with ``grade gradescope --visibility``
(written into ``run_autograder``); the public checks follow, always visible and
worth 0 points. Why a submission cannot be graded goes into the results'
``output``, which students see (stdout they do not).

The zip's ``README.md`` is the project's, except that a markdown link to a file
the zip does not hold (``datasets/README.md``, say) is left as its text alone, so
that every link in the zip resolves inside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import posixpath
import re
import sys
import time
import warnings
import zipfile
from pathlib import Path

from grader import deadlines, nofollow, templates
from grader.batch.discover import nothing_to_grade, submission_in  # grade batch's rule and words, shared
from grader.errors import InputError
from grader.files import atomic_path, write_atomically
from grader.grading import Grader, Request, grader_failed, internal_errors_line
from grader.milestones import METRIC_TASKS, MILESTONES
from grader.options import limits
from grader.results import GRADESCOPE_LAYOUTS, GRADESCOPE_SHOWN, GRADESCOPE_VISIBILITIES, gradescope_results
from grader.roster import Roster, read_identities
from grader.sandbox.client import GraderError
from grader.submission import SubmissionError

PROJECT = Path(__file__).resolve().parents[2]
# What the autograder needs of the project: the package (suites and sandbox included), the reference,
# what pip needs to install it (pyproject.toml's license-files too: setuptools stops building a project
# whose license file is missing), and the contract pages the README links to.
SHIPPED = ("grader", "solutions", "pyproject.toml", "LICENSE", "README.md", "docs")
# Code (a fenced block or an inline span), left as it is, or an inline markdown link or image,
# [text](target "title"): the two things ``unlinked`` tells apart.
MARKDOWN = re.compile(
    r"(?P<code>^(?P<fence>`{3,}|~{3,})[^\n]*\n.*?^(?P=fence)[^\n]*$|(?P<ticks>`+).+?(?P=ticks))"
    r'|!?\[(?P<text>[^\]]*)\]\(\s*<?(?P<target>[^)\s>]*)>?(?:\s+"[^"]*")?\s*\)',
    re.M | re.S,
)

# Gradescope's visibility levels (grader.results has them), as `grade gradescope --visibility` explains them.
VISIBILITIES = dict(
    zip(
        GRADESCOPE_VISIBILITIES,
        (
            "students see every check, its points and its message as soon as the autograder finishes",
            "the hidden suites' checks appear once the (late) due date has passed",
            "the hidden suites' checks appear once you publish the assignment's grades",
            "students never see the hidden suites' checks",
        ),
        strict=True,
    )
)
# When the scored checks show, as the results' output tells the student (nothing to say when visible).
SHOWN = GRADESCOPE_SHOWN


LATE_POLICY = "late-policy.toml"  # in the zip: run_autograder passes it when it is there
# The class's roster, in the zip with the late policy: Gradescope names the submitter by email and name, the policy
# may name them by id (as `grade export` does); the roster maps the one to the other.
ROSTER = "roster.csv"
# What the autograder grades: the lesson's milestones. A metric task would need its held-out text in the zip, and
# the default one students have: ``build`` refuses one whose text is not secret (grader/lmbudget/task.py).
GRADED: tuple[str, ...] = tuple(MILESTONES)


def build(
    out: Path,
    project: Path = PROJECT,
    visibility: str = "after_published",
    tests: str = "milestone",
    late_policy: Path | None = None,
    roster: Path | None = None,
) -> list[str]:
    """Write the autograder zip to ``out``, its hidden checks shown to students at ``visibility``, its results
    laid out as ``tests`` says (a test per milestone or per check), with ``late_policy`` (a TOML file, checked
    here) as ``late-policy.toml`` and ``roster`` (checked here: every extension key must name a student on it) as
    ``roster.csv``; returns the names it holds."""
    identities = read_identities(roster) if roster is not None else None
    if late_policy is not None:
        policy = deadlines.load(late_policy)  # a mistake is the instructor's to fix now, not found at the first upload
        if identities is not None:
            policy.for_roster(Roster(identities))
    refuse_public_held_out(GRADED)
    if visibility not in VISIBILITIES:
        raise ValueError(f"visibility must be one of {', '.join(VISIBILITIES)}, not {visibility!r}")
    if tests not in GRADESCOPE_LAYOUTS:
        raise ValueError(f"tests must be one of {', '.join(GRADESCOPE_LAYOUTS)}, not {tests!r}")
    if not (project / "solutions" / "m1_attention.py").is_file():
        raise FileNotFoundError(f"no reference solutions in {project / 'solutions'}: build from a checkout of the kit")
    files = {name: (project / name).read_bytes() for name in shipped_files(project)}
    for name in [n for n in files if n.endswith(".md")]:
        files[name] = unlinked(files[name].decode(), name, set(files)).encode()
    files["setup.sh"] = templates.text("gradescope-setup.sh").encode()
    if late_policy is not None:
        files[LATE_POLICY] = late_policy.read_bytes()
    if roster is not None:
        files[ROSTER] = roster.read_bytes()
    files["run_autograder"] = templates.render(
        "gradescope-run_autograder.sh", visibility=visibility, tests=tests
    ).encode()
    with atomic_path(out) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible bytes
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return sorted(files)


def unreachable_keys(late_policy: Path) -> list[str]:
    """The late policy's extension keys that Gradescope cannot match without a roster: it names the submitter by
    email (else name), so a key that is no email (a student id) reaches no one there."""
    return [key for key in deadlines.load(late_policy).extensions if "@" not in key.partition("/")[0]]


def unreachable_warning(keys: list[str]) -> str:
    """What `grade gradescope` says of ``unreachable_keys``."""
    return (
        f"the late policy's extension{'s' * (len(keys) != 1)} {', '.join(map(repr, keys))} "
        f"{'are' if len(keys) != 1 else 'is'} keyed by no email, and Gradescope knows a submitter by their email: "
        "without a roster no submission matches, and the student is penalised as if it had no extension. Give "
        "--roster roster.csv (a student column with the ids, an email column), or key the extension by the email"
    )


class HeldOutRefused(InputError, ValueError):
    """A bundle would grade a metric task whose held-out text is not secret: the message says why and what to do."""


def refuse_public_held_out(graded: tuple[str, ...]) -> None:
    """Raise HeldOutRefused where ``graded`` holds a metric task whose held-out text students have or a worker can
    read (the contest's rule, grader/lmbudget/task.py): a model that carries the text would score full marks."""
    if not any(m in METRIC_TASKS for m in graded):
        return
    from grader.lmbudget.task import held_out_refusal  # lmbudget loads torch: only for a metric task

    if why := held_out_refusal(graded):
        raise HeldOutRefused(why)


def unlinked(text: str, name: str, names: set[str]) -> str:
    """``text`` (the markdown file ``name``) with each relative link to a file not in ``names`` replaced by its text."""
    folders = {posixpath.dirname(n) for n in names}
    folders |= {f[:i] for f in folders for i in range(len(f)) if f[i] == "/"}

    def link(m: re.Match) -> str:
        if m["code"] is not None:
            return m[0]
        target = m["target"].split("#")[0]
        if not target or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):
            return m[0]  # an anchor in the same page, or a URL
        path = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
        return m[0] if path in names or path in folders else m["text"]

    return MARKDOWN.sub(link, text)


def shipped_files(project: Path) -> list[str]:
    names = []
    for top in SHIPPED:
        path = project / top
        paths = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        names += [
            p.relative_to(project).as_posix()
            for p in paths
            if "__pycache__" not in p.parts and not p.name.startswith(".")
        ]
    return names


def locate(root: Path) -> tuple[Path, str]:
    """What to grade in Gradescope's submission folder ``root``, and a sentence for the student (or "").

    As ``grade batch`` finds a student's files: ``root`` itself if it holds .py files, its one notebook,
    or the same in the one folder inside it (a dragged-in ``exercises/``; Gradescope's ``__MACOSX`` and
    hidden folders do not count). Failing that, ``root`` itself: each check then names the file it misses.
    No symbolic link is followed (grader/nofollow.py): the kit's ``solutions/`` is in ``/autograder/source``,
    beside the submission, and a link to it is no one's work; the sentence names each link left out.
    """
    found = submission_in(root)
    if found is None:
        why = nothing_to_grade(root)
        return root, f"Your submission: {why}. Each check below names the file it could not find."
    left_out = nofollow.skipped_note(nofollow.links_in(found)) if found.is_dir() else ""
    if found == root:
        return root, left_out
    where = found.relative_to(root).as_posix() + ("/" if found.is_dir() else "")
    return found, " ".join(filter(None, [f"Graded {where}, found inside your submission.", left_out]))


def late(
    out: dict, policy_file: Path, metadata: Path | deadlines.GradescopeSubmission, roster: Path | None = None
) -> dict:
    """The results with the late policy applied: the time and due date from Gradescope's submission metadata
    (the submitter's own due date where Gradescope has an extension for them), an extension in the policy by
    the submitter's email, or, with ``roster``, by whatever the roster knows them as (their id, email or name:
    the same student `grade export` judges); an unknown time costs nothing and the output says so.
    ``metadata``: the file, or what was read from it before the student's code ran (``main`` reads it first)."""
    from grader.batch.exports import with_lateness

    policy = deadlines.load(policy_file)
    known = Roster(read_identities(roster)) if roster is not None else None
    if known is not None:
        policy = policy.for_roster(known)
    found = (
        metadata if isinstance(metadata, deadlines.GradescopeSubmission) else deadlines.gradescope_submission(metadata)
    )
    return with_lateness(out, policy.judge(found.who(known), found.submitted, due=found.due, source=found.source))


def results(root: Path, visibility: str = "visible", tests: str = "milestone") -> tuple[dict, int]:
    """Gradescope's results.json for the submission in ``root``, and an exit status (1: the grader failed).

    The hidden suites carry the points and ``visibility``; the public checks (what students run
    themselves) follow, always visible and worth 0 points. ``tests``: one test per milestone (each check a
    line of its output) or one per check.
    """
    path, found = locate(root)
    notes = [found] if found else []
    try:
        with Grader(limits(), many=False) as grader:  # one fork server for both gradings
            chosen, began = limits(), time.monotonic()
            report = grader.grade(Request(path, GRADED))
            # the public checks share the submission's time limit: what the hidden ones left of it
            left = (chosen.submission_seconds or math.inf) - (time.monotonic() - began)
            rest = dataclasses.replace(chosen, submission_seconds=max(1.0, left)) if math.isfinite(left) else chosen
            try:
                public = grader.grade(Request(path, GRADED, public=True), rest)
            except GraderError as e:
                print(f"the public checks did not run: {e}")
                public = None
                notes.append("The public checks could not run this time; they carry no points.")
    except SubmissionError as e:
        print(f"grade: cannot grade {path}: {e}")
        reason = str(e).replace(f"{root}{os.sep}", "")
        return gradescope_results(
            output=f"The autograder could not grade this submission: {reason}. "
            "Fix it and submit again (ask your instructor if you cannot see why)."
        ), 0
    except GraderError as e:
        print(grader_failed(e))
        return gradescope_results(
            output="The autograder could not grade this submission (the grader itself "
            "failed, not your code); please tell your instructor."
        ), 1
    out = report.to_gradescope(visibility=visibility, public=public, layout=tests)
    if visibility != "visible":
        notes.append(
            f"{SHOWN[visibility]}; the public checks (the ones you can run yourself, worth 0 points "
            "here) are shown now."
        )
    out["output"] = " ".join([out["output"], *notes])
    if faults := internal_errors_line(report):
        print(faults)
    return out, 1 if report.internal_errors else 0


def main(argv: list[str] | None = None) -> int:
    """run_autograder's entry: grade SUBMISSION_FOLDER, write RESULTS."""
    # torch warns when numpy is absent; the grader does not use numpy, so the warning is only noise.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    parser = argparse.ArgumentParser(prog="python -m grader.bundles.gradescope", description=main.__doc__)
    parser.add_argument("submission", type=Path)
    parser.add_argument("results", type=Path)
    parser.add_argument("--visibility", choices=list(VISIBILITIES), default="visible")
    parser.add_argument("--tests", choices=GRADESCOPE_LAYOUTS, default="milestone")
    parser.add_argument("--late-policy", type=Path, help="a late policy (grader/deadlines.py); none if absent")
    parser.add_argument("--metadata", type=Path, help="Gradescope's submission_metadata.json")
    parser.add_argument("--roster", type=Path, help="the class's roster.csv (grader/roster.py); none if absent")
    args = parser.parse_args(argv)
    policy = args.late_policy if args.late_policy is not None and args.late_policy.is_file() else None
    # Gradescope's record of the submission is read before any of the student's code runs: a submission that
    # reached the file while it was graded (a weaker sandbox than this machine's) would find its time taken.
    metadata = (
        deadlines.gradescope_submission(args.metadata or Path("/autograder/submission_metadata.json"))
        if policy is not None
        else None
    )
    out, status = results(args.submission, args.visibility, args.tests)
    if policy is not None and metadata is not None:
        roster = args.roster if args.roster is not None and args.roster.is_file() else None
        out = late(out, policy, metadata, roster)
    write_atomically(args.results, json.dumps(out, indent=2) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
