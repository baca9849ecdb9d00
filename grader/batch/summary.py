"""What a teacher reads from a gradebook: scores rounded to points, per-milestone means, the lowest scorers,
untouched stubs set apart, and failures grouped by check and by their likely cause."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator

from grader.batch.gradebook import EMPTY, NO_SUBMISSION
from grader.milestones import GRADABLE, METRIC_TASKS
from grader.results import Verdict
from grader.sandbox.common.agreement import NOT_IMPLEMENTED_MESSAGE
from grader.sandbox.session import IMPORT_FAILED

NOT_IMPLEMENTED = NOT_IMPLEMENTED_MESSAGE  # how an untouched stub's failures begin
# The one check of a milestone a student submitted nothing for (a contest's task, grader/contest/export.py): it
# puts the student's 0 in the milestone's mean, but it is no check the class failed, so no failure rate has it.
NOT_SUBMITTED = "a graded submission"
# A parametrized check's case id, the last thing in its name: "out is (..., T, d_k) [B13-T1]".
_CASE = re.compile(r"\s+\[[^\[\]]*\]$")
_CAUSE = re.compile(r"(?:likely cause|hint)\s*:\s*", re.IGNORECASE)
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)
# A segment that only reports values ("got 0.42, expected 1 (...)") names no cause.
_VALUES_ONLY = re.compile(r"^(?:got|expected|shape|value|values)\b", re.IGNORECASE)
# Nor one that sends the student to other checks ("see the check ...", "this end-to-end check runs all your
# files together", "this check uses your TinyGPT too"): the cause is in those checks' own messages.
_REFERRAL = re.compile(r"^(?:see the check|this (?:end-to-end )?check (?:runs|uses)|if milestone)", re.IGNORECASE)


# What the metric tasks' suite (grader/suites/hidden/test_lmbudget.py) writes into each of its checks' messages
# when the held-out text is one students have or a worker can read (a warning naming "this task's held-out text"
# and who can read it): a model that carries the text scores
# full marks, so such a score proves nothing. Read from the checks, every gradebook says it: one graded before
# `grade batch` refused such a text, and a student graded on other milestones since (their results carried over).
HELD_OUT_MARK = "this task's held-out text"
UNTRUSTED = (
    "graded on a held-out text that students have or a worker can read (each check's message says which), so a "
    "model that carries the text scores full marks: these scores prove nothing"
)


def untrusted_scores(checks: Iterable[dict]) -> dict[str, list[str]]:
    """Each metric task whose scores prove nothing (see HELD_OUT_MARK), with the students who have such a score."""
    found: dict[str, list[str]] = {}
    for c in checks:
        if c["milestone"] in METRIC_TASKS and HELD_OUT_MARK in str(c["message"]):
            who = found.setdefault(c["milestone"], [])
            if c["student"] not in who:
                who.append(c["student"])
    return found


def untrusted_line(checks: Iterable[dict]) -> str | None:
    """The warning every summary, report and export gives where a metric task's scores prove nothing."""
    found = untrusted_scores(checks)
    if not found:
        return None
    tasks = "; ".join(f"{m} ({len(who)} student{'s' * (len(who) != 1)}: {names(who)})" for m, who in found.items())
    return (
        f"WARNING: {tasks}: {UNTRUSTED}. Grade again on a text of your own that students have not seen "
        '(corpus = "file:PATH" in the task file: docs/instructors.md, "A metric task")'
    )


# How a submission that hung or crashed is named: its process did not come back from a check (grader/sandbox's
# WorkerCrash words it), not a wrong answer. Real bugs (a missing zero_grad, unshifted targets) never do this.
HUNG, CRASHED = "hung", "crashed"
# The words of a worker that did not come back, where a gradebook predates the verdict column.
_HANG_WORDS = ("no answer within", "your code already hung", "the submission's time was up")
_CRASH_WORDS = ("the worker process ended", "the worker was killed", "the worker stopped answering", "the worker ")


def ended(c: dict) -> str | None:
    """HUNG or CRASHED where the check's process did not come back (a time limit, a crash, a memory limit, a
    signal), None for any other failure: a wrong answer, an exception the code raised, a stub."""
    if c["passed"] or set_aside(c):
        return None
    verdict, message = c.get("verdict"), str(c["message"])
    if verdict == Verdict.TIME_LIMIT.value or (verdict is None and any(w in message for w in _HANG_WORDS)):
        return HUNG
    if verdict == Verdict.MEMORY_LIMIT.value:
        return CRASHED
    if verdict in (Verdict.RUNTIME_ERROR.value, None) and any(w in message for w in _CRASH_WORDS):
        return CRASHED
    return None


def broken(checks: Iterable[dict]) -> dict[tuple[str, str], str]:
    """The (student, milestone) pairs whose code hung or crashed there, each with HUNG or CRASHED (HUNG where a
    check of each kind is in it): counted apart from the failure rates and causes, where they would rank first
    and hide the class's real bugs."""
    out: dict[tuple[str, str], str] = {}
    for c in checks:
        if kind := ended(c):
            pair = (c["student"], c["milestone"])
            out[pair] = HUNG if HUNG in (kind, out.get(pair)) else kind
    return out


def broken_students(checks: Iterable[dict]) -> dict[str, str]:
    """Each student whose code hung or crashed, with where and how: "hung in m1", "crashed in m3, hung in m4"."""
    where: dict[str, list[str]] = {}
    order = {m: i for i, m in enumerate(GRADABLE)}
    pairs = broken(checks)
    for (student, milestone), kind in sorted(pairs.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        where.setdefault(student, []).append(f"{kind} in {milestone}")
    return {s: ", ".join(w) for s, w in sorted(where.items())}


def broken_line(checks: list[dict], named: bool = True) -> str | None:
    """The students whose code hung or crashed, counted apart: how many, and (``named``) who and where."""
    who = broken_students(checks)
    if not who:
        return None
    listed = "; ".join(f"{s} {w}" for s, w in who.items())
    n = len(who)
    return (
        f"{n} submission{'s' * (n != 1)} hung or crashed (the process did not come back from a check), "
        f"counted apart, out of the failure rates and causes" + f": {listed}" * named
    )


def set_aside(c: dict) -> bool:
    """A check that decides nothing: the grader could not grade it, or it was not counted (neither won nor lost)."""
    return bool(c.get("internal_error")) or not c.get("counted", True)


def points(x: float | None) -> float | None:
    """A score as points mean it: 2 decimals (58.18181818 -> 58.18)."""
    return None if x is None else round(float(x), 2)


def check_name(name: str, case: str | None = None) -> str:
    """A check's name without its parametrized case id ``case`` (the gradebook's ``case_id``).

    Where the case is not known (a gradebook from before it was kept), a trailing ' [...]' is taken for it:
    brackets inside stay."""
    if case is None:
        return _CASE.sub("", name)
    return name.removesuffix(f" [{case}]") if case else name


def likely_cause(message: str) -> str | None:
    """The cause phrase of a failing check's message, or None where it names none.

    The text after the last "Likely cause:" (or "hint:"), else after the last ": " of its first line; cut at
    its first clause break (": ", "; ", ". "), so that the one cause worded with different details groups
    together. `cause_key` normalises it further (case, numbers, spaces).
    """
    text = message.strip()
    if text.lower().startswith(NOT_IMPLEMENTED):
        return NOT_IMPLEMENTED
    found = list(_CAUSE.finditer(text))
    if found:
        phrase = text[found[-1].end() :].splitlines()[0] if text[found[-1].end() :] else ""
    else:
        first = (text.splitlines() or [""])[0]
        if ": " not in first:
            return None
        phrase = first.rsplit(": ", 1)[1]
        if _VALUES_ONLY.match(phrase):
            return None
    phrase = re.split(r": |; |\. (?=[A-Z])", phrase, maxsplit=1)[0].strip().rstrip(".;,")
    while phrase.endswith(")") and phrase.count(")") > phrase.count("("):  # the close of a list it stood in
        phrase = phrase[:-1].rstrip(".;,")
    if len(re.findall(r"[A-Za-z]{2,}", phrase)) < 2:  # too little text to be a cause ("got 3")
        return None
    return None if _REFERRAL.match(phrase) else phrase


# One head's width is d_k where the checks call causal_attention and d_head where they call the module:
# "divided by d_k" and "divided by d_head" are one bug.
_SAME = {"d_head": "d_k"}


def cause_key(phrase: str) -> str:
    """What groups causes: lower case, each number as '#', spaces collapsed, no trailing punctuation."""
    key = re.sub(r"\s+", " ", _NUMBER.sub("#", phrase.lower())).strip(" .;,:?!")
    for word, same in _SAME.items():
        key = key.replace(word, same)
    return key


def is_stub(checks: Iterable[dict]) -> bool:
    """An untouched stub: checks ran, none passed, and every failure begins with NOT_IMPLEMENTED."""
    mine = [c for c in checks if not set_aside(c)]
    return bool(mine) and all(
        not c["passed"] and c["message"].strip().lower().startswith(NOT_IMPLEMENTED) for c in mine
    )


def by_student(checks: Iterable[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in checks:
        out.setdefault(c["student"], []).append(c)
    return out


def stubs(checks: list[dict]) -> set[str]:
    """The students whose submissions are untouched stubs."""
    return {s for s, mine in by_student(checks).items() if is_stub(mine)}


def milestone_shares(checks: list[dict]) -> dict[str, dict[str, float]]:
    """Each student's share of each milestone's points (checks set aside left out, as the reports' scores do)."""
    got: dict[str, Counter] = {}
    top: dict[str, Counter] = {}
    for c in checks:
        if set_aside(c):
            continue
        got.setdefault(c["milestone"], Counter())[c["student"]] += c["score"]
        top.setdefault(c["milestone"], Counter())[c["student"]] += c["max_score"]
    return {m: {s: got[m][s] / top[m][s] for s in top[m] if top[m][s]} for m in GRADABLE if m in top}


def milestone_means(checks: list[dict]) -> dict[str, float]:
    """The class's mean share of each milestone's points, in the milestones' order."""
    return {m: sum(shares.values()) / len(shares) for m, shares in milestone_shares(checks).items() if shares}


def fraction(row: dict) -> float | None:
    return row["score"] / row["max_score"] if row.get("status") == "graded" and row.get("max_score") else None


def counts_line(rows: list[dict], named: bool = True, checks: list[dict] | None = None) -> str:
    """How many rows, graded, with errors and with nothing to grade (``named``: who): a summary's first line.
    With ``checks``, the graded whose files could not be run at all are counted too (see ``could_not_run``)."""
    graded = sum(r["status"] == "graded" for r in rows)
    empty = [r["student"] for r in rows if r["status"] == EMPTY]
    absent = [r["student"] for r in rows if r["status"] == NO_SUBMISSION]  # on the roster, nothing handed in
    errors = len(rows) - graded - len(empty) - len(absent)
    unrun = could_not_run(rows, checks or [])
    graded_students = {r["student"] for r in rows if r["status"] == "graded"}
    crashed = {s: w for s, w in broken_students(checks or []).items() if s in graded_students}
    # with the roster's absent students among the rows, they count students, not submissions
    counted = "student" if absent else "submission"
    line = f"{len(rows)} {counted}{'s' * (len(rows) != 1)}: {graded} graded"
    if unrun:
        line += (
            f" ({len(unrun)} of them could not be run at all, every check failing on the import of their files"
            + f": {names(unrun)}" * named
            + ")"
        )
    line += f", {errors + len(crashed)} with errors"
    if crashed:  # graded, but their code hung or crashed: errors, though the grader recorded their checks
        line += (
            f" ({len(crashed)} graded that hung or crashed"
            + (": " + "; ".join(f"{s} {w}" for s, w in crashed.items())) * named
            + ")"
        )
    line += f", {len(empty)} with nothing to grade" + f" ({names(empty)})" * named if empty else ""
    return line + (f", {len(absent)} with {NO_SUBMISSION} (0 points)" + f" ({names(absent)})" * named if absent else "")


def could_not_run(rows: list[dict], checks: list[dict]) -> list[str]:
    """The graded students whose files could not be imported or run at all (a notebook whose cells could not be
    run, a missing file, a syntax error everywhere): each of their counted checks failed on the import, so their
    0 is their files', not the grader's error, and says nothing about any answer."""
    graded = {r["student"] for r in rows if r["status"] == "graded"}
    failed_import: dict[str, list[bool]] = {}
    for c in checks:
        if c["student"] in graded and not set_aside(c):
            failed = not c["passed"] and str(c["message"]).startswith(IMPORT_FAILED)
            failed_import.setdefault(c["student"], []).append(failed)
    return sorted(s for s, failed in failed_import.items() if all(failed))


def names(students: list[str], shown: int = 10) -> str:
    return ", ".join(students[:shown]) + (f" and {len(students) - shown} more" if len(students) > shown else "")


def mean_line(rows: list[dict]) -> str | None:
    """The mean and median share of the graded rows, saying over how many: errors and empty folders have none."""
    values = [share for r in rows if (share := fraction(r)) is not None]
    if not values:
        return None
    others = len(rows) - len(values)
    left_out = f" (the other {others} {'is' if others == 1 else 'are'} not in it)" if others else ""
    return (
        f"mean {100 * statistics.mean(values):.1f}%, median {100 * statistics.median(values):.1f}%, "
        f"over the {len(values)} graded{left_out}"
    )


def class_lines(rows: list[dict], checks: list[dict], lowest: int = 5) -> list[str]:
    """The summary a batch ends with: count, mean and median, per-milestone means, the lowest scorers."""
    shares = {r["student"]: share for r in rows if (share := fraction(r)) is not None}
    graded = [r for r in rows if r["student"] in shares]
    errors = [r for r in rows if r["status"] not in ("graded", EMPTY, NO_SUBMISSION)]
    lines = [counts_line(rows, named=False, checks=checks)]  # the batch names them next, each with why
    if mean := mean_line(rows):
        lines.append(mean)
    for m, share in milestone_means(checks).items():
        lines.append(f"  {m:<9} {100 * share:5.1f}%  {GRADABLE[m].title}")
    if stub := stubs(checks):
        lines.append(
            f"{len(stub)} untouched stub{'s' * (len(stub) != 1)} (nothing implemented): {', '.join(sorted(stub))}"
        )
    if left := untouched_line(checks):
        lines.append(left)
    if crashed := broken_line(checks):
        lines.append(crashed)
    if graded:
        low = sorted(graded, key=lambda r: (shares[r["student"]], r["student"]))[:lowest]
        lines.append(
            "lowest: "
            + ", ".join(
                f"{r['student']} {100 * shares[r['student']]:.1f}% ({points(r['score']):g}/{points(r['max_score']):g})"
                for r in low
            )
        )
    for r in errors[:lowest]:
        lines.append(f"error: {r['student']}: {((r['error'] or '').strip().splitlines() or [''])[0][:160]}")
    return lines


def untouched(checks: Iterable[dict]) -> set[tuple[str, str]]:
    """The (student, milestone) pairs a student left as the stub: every counted check there is not implemented."""
    mine: dict[tuple[str, str], list[dict]] = {}
    for c in checks:
        mine.setdefault((c["student"], c["milestone"]), []).append(c)
    return {pair for pair, theirs in mine.items() if is_stub(theirs)}


def untouched_counts(checks: list[dict]) -> dict[str, int]:
    """How many students left each milestone untouched (untouched stubs, counted apart, not among them)."""
    stub = stubs(checks)
    counts = Counter(m for s, m in untouched(checks) if s not in stub)
    return {m: counts[m] for m in GRADABLE if counts[m]}


def untouched_line(checks: list[dict]) -> str | None:
    """The milestones students left untouched, and how many: counted apart from the failure rates and causes."""
    counts = untouched_counts(checks)
    if not counts:
        return None
    listed = ", ".join(f"{m} {n}" for m, n in counts.items())
    return f"exercises left untouched (out of the failure rates and causes), students each: {listed}"


def failure_counts(checks: list[dict]) -> list[tuple[tuple[str, str], int, int]]:
    """Each failed check with how many students failed it (any of its cases) and of how many who worked on its
    milestone: ((milestone, check), failed, of), the highest share first.

    A case the grader could not grade (internal_error) or did not count is not the student's failure: it is left
    out. So is a milestone a student left untouched (``untouched``): it would list every check of an exercise
    half the class did not reach as failed by them. So is a milestone where the student's code hung or crashed
    (``broken``): every check there fails for that one reason, and would rank above the class's real bugs."""
    skip = untouched(checks) | set(broken(checks))
    seen: dict[tuple[str, str], set[str]] = {}
    failed: dict[tuple[str, str], set[str]] = {}
    for c in checks:
        if set_aside(c) or c["name"] == NOT_SUBMITTED or (c["student"], c["milestone"]) in skip:
            continue
        key = (c["milestone"], check_name(c["name"], c.get("case_id")))  # the parametrized cases of one check together
        seen.setdefault(key, set()).add(c["student"])
        if not c["passed"]:
            failed.setdefault(key, set()).add(c["student"])
    return sorted(((k, len(failed[k]), len(seen[k])) for k in failed), key=lambda t: (-t[1] / t[2], -t[2], t[0]))


def failure_rates(checks: list[dict]) -> list[tuple[tuple[str, str], float]]:
    """Each check's share of the submissions that worked on its milestone which failed it, most failed first
    (``failure_counts``' shares)."""
    return [(k, n / of) for k, n, of in failure_counts(checks)]


def first_causes(checks: list[dict]) -> Iterator[tuple[str, str, str]]:
    """(student, milestone, cause) for each student's milestone whose failing checks name a likely cause: the
    first such check's (in the suite's order, the hint the student's own table shows). Passed, set-aside,
    untouched and broken (hung or crashed) milestones are passed over."""
    skip = untouched(checks) | set(broken(checks))
    named: set[tuple[str, str]] = set()  # the (student, milestone) pairs already counted under a cause
    for c in checks:
        pair = (c["student"], c["milestone"])
        if c["passed"] or set_aside(c) or pair in skip or pair in named:
            continue
        phrase = likely_cause(c["message"])
        if phrase is not None:
            named.add(pair)
            yield c["student"], c["milestone"], phrase


def failure_causes(checks: list[dict]) -> list[tuple[str, str, int]]:
    """Failures grouped by likely cause: (milestone, cause, students who hit it), most students first.

    Each student's milestone counts once, under the cause its first failing check names (in the suite's order,
    the hint the student's own table shows): one bug fails several checks, each wording the cause its own way
    (a triu mask is "row i must allow columns 0..i" in one and "the mask is upper-triangular" in the next), and
    counted check by check it would be three causes. A failure whose message names no cause is passed over:
    the failure rates list its check. Untouched milestones (``untouched``) and checks the grader could not
    grade are left out, and so are the milestones where the code hung or crashed (``broken``). The label of a
    group is its most frequent wording."""
    students: dict[tuple[str, str], set[str]] = {}
    wordings: dict[tuple[str, str], Counter] = {}
    for student, milestone, phrase in first_causes(checks):
        key = (milestone, cause_key(phrase))
        students.setdefault(key, set()).add(student)
        wordings.setdefault(key, Counter())[phrase] += 1
    return sorted(
        ((m, wordings[m, k].most_common(1)[0][0], len(s)) for (m, k), s in students.items()),
        key=lambda t: (-t[2], t[0], t[1]),
    )


def class_causes(checks: list[dict]) -> list[tuple[tuple[str, ...], str, int]]:
    """Failures by likely cause across the class: (the milestones it shows in, cause, students), most first.

    ``failure_causes`` counts a student once per milestone; one bug shows in several (a mask's fault in m1 and
    in the lesson), and here each student counts once per cause, wherever it showed."""
    students: dict[str, set[str]] = {}
    milestones: dict[str, set[str]] = {}
    wordings: dict[str, Counter] = {}
    for student, milestone, phrase in first_causes(checks):
        key = cause_key(phrase)
        students.setdefault(key, set()).add(student)
        milestones.setdefault(key, set()).add(milestone)
        wordings.setdefault(key, Counter())[phrase] += 1
    order = {m: i for i, m in enumerate(GRADABLE)}
    return sorted(
        (
            (tuple(sorted(milestones[k], key=lambda m: order.get(m, 99))), wordings[k].most_common(1)[0][0], len(v))
            for k, v in students.items()
        ),
        key=lambda t: (-t[2], t[0], t[1]),
    )
