"""What a teacher reads from a batch: the summary `grade batch` ends with, every attempt kept (the latest
exported), scores rounded to points, full check names, failures grouped by likely cause, stubs set apart, and
the charts of `grade report --png`.

Most tests here build gradebooks with Gradebook.record (no grading: fast); one grades a small class for real.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from corpus import BUGGY
from grader.batch.charts import CAUSES, HEATMAP, HISTOGRAM, RATES, best_first, wrap
from grader.batch.gradebook import EMPTY, Gradebook
from grader.batch.summary import (
    CRASHED,
    HUNG,
    broken,
    cause_key,
    check_name,
    class_causes,
    ended,
    failure_causes,
    failure_counts,
    failure_rates,
    is_stub,
    likely_cause,
    milestone_shares,
    points,
    untouched_counts,
)
from grader.fingerprint import ROOT_VARIABLE
from helpers import EXERCISES, REPO, SOLUTIONS, Variant, batch_here, cli

STUB = "not implemented yet: your code raised NotImplementedError (at m1_attention.py:40 in causal_mask)"
NO_SCALING = (
    "weights differs from the reference at query {q}, key 3: got {got}, expected 0.591347 ({n} of 49 "
    "values off by more than 1e-05 + 0.0001 x |expected|). Likely cause: the scores are not divided by "
    "sqrt(d_k)"
)
TRIU = (
    "causal_attention's out: position 0 (batch {b}) changes by {by} when the inputs from position 1 on change; "
    "information leaks from the future: is the mask lower-triangular (tril, not triu), applied to the scores "
    "before the softmax, and sliced to the input's length?"
)


def check(
    name: str, passed: bool, message: str = "", score: float | None = None, max_score: float = 1, milestone: str = "m1"
) -> dict:
    return {
        "name": name,
        "score": (max_score if passed else 0) if score is None else score,
        "max_score": max_score,
        "passed": passed,
        "message": message,
        "seconds": 0.01,
        "internal_error": False,
        "counted": True,
        "milestone": milestone,
    }


def report_of(*checks: dict) -> dict:
    ids = list(dict.fromkeys(c["milestone"] for c in checks))
    return {
        "score": sum(c["score"] for c in checks),
        "max_score": sum(c["max_score"] for c in checks),
        "seconds": 1.0,
        "protections": [],
        "worker_cpu_seconds": 0.1,
        "milestones": [{"id": m, "checks": [c for c in checks if c["milestone"] == m]} for m in ids],
    }


def record(book: Gradebook, student: str, *checks: dict) -> int:
    return book.record(student, f"/class/{student}", "abc", "0.2.0", ["m1"], report_of(*checks), fingerprint="f" * 16)


def a_class(db: Path) -> None:
    """alice full marks; bob an untouched stub; carol and dave the same cause (different numbers), erin another;
    frank a fractional score; names with brackets inside and parametrized cases."""
    book = Gradebook(db)
    try:
        record(book, "alice", check("shapes [B1-T1]", True), check("pick logits[:, -1] [B2]", True))
        record(book, "bob", check("shapes [B1-T1]", False, STUB), check("pick logits[:, -1] [B2]", False, STUB))
        record(
            book,
            "carol",
            check("shapes [B1-T1]", False, NO_SCALING.format(q=5, got=0.902116, n=27)),
            check("pick logits[:, -1] [B2]", True),
        )
        record(
            book,
            "dave",
            check("shapes [B1-T1]", False, NO_SCALING.format(q=4, got=0.74663, n=81)),
            check("pick logits[:, -1] [B2]", False, TRIU.format(b=1, by=0.321)),
        )
        record(
            book,
            "erin",
            check("shapes [B1-T1]", True),
            check("pick logits[:, -1] [B2]", False, TRIU.format(b=2, by=1.71)),
        )
        record(
            book,
            "frank",
            check("shapes [B1-T1]", True, score=1 / 3 * 2, max_score=1),
            check("pick logits[:, -1] [B2]", True, score=2.0 / 7, max_score=1),
        )
    finally:
        book.close()


# ---------------------------------------------------------------- the pieces


def test_likely_cause_groups_the_same_cause_and_only_it():
    carol, dave = NO_SCALING.format(q=5, got=0.902116, n=27), NO_SCALING.format(q=4, got=0.74663, n=81)
    assert likely_cause(carol) == "the scores are not divided by sqrt(d_k)"
    assert cause_key(likely_cause(carol)) == cause_key(likely_cause(dave)), "numbers must not split a cause"
    leak_a, leak_b = TRIU.format(b=1, by=0.321), TRIU.format(b=2, by=1.12e3)
    assert likely_cause(leak_a).startswith("is the mask lower-triangular (tril, not triu)")
    assert cause_key(likely_cause(leak_a)) == cause_key(likely_cause(leak_b))
    # The same phrase with different numbers in it (a mask of 2 vs of 11) groups too.
    upper = "causal_mask({0}) is upper-triangular: row {0} must allow columns 0..{0} (torch.tril, not triu)"
    assert cause_key(likely_cause(upper.format(2))) == cause_key(likely_cause(upper.format(11)))
    # One bug worded for the function (d_k) and for the module (d_head) groups too.
    by_d = "out differs from the reference. Likely cause: the scores are divided by {0}, not sqrt({0})"
    assert cause_key(likely_cause(by_d.format("d_k"))) == cause_key(likely_cause(by_d.format("d_head")))
    # Different causes do not group.
    other = (
        "weights differs from the reference at query 0, key 0: got 0.0978751, expected 1 (28 of 49 values off). "
        "Likely cause: the softmax runs over the wrong dimension: normalise each row over the keys (dim=-1)"
    )
    assert likely_cause(other) == "the softmax runs over the wrong dimension"
    keys = {cause_key(likely_cause(m)) for m in (carol, leak_a, other, upper.format(3))}
    assert len(keys) == 4, keys
    assert (
        likely_cause("the kv cache is off. hint: append the new keys before attending")
        == "append the new keys before attending"
    )
    # Values alone name no cause; a stub's message is its own group.
    assert likely_cause("CausalSelfAttention(24, 4) differs at batch 0: got -0.63, expected 0.42 (504 of 504)") is None
    assert likely_cause("boom") is None
    assert likely_cause(STUB) == "not implemented yet"


def test_check_names_keep_their_brackets():
    assert (
        check_name("clm_inputs_targets(data) is (data[:, :-1], data[:, 1:]) [3-9]")
        == "clm_inputs_targets(data) is (data[:, :-1], data[:, 1:])"
    )
    assert (
        check_name("out is (..., T, d_k) and weights (..., T, T) for every T [B13-T1]")
        == "out is (..., T, d_k) and weights (..., T, T) for every T"
    )
    assert check_name("pick x [0] then y") == "pick x [0] then y", "only a trailing case id is a case id"
    assert check_name("no cases") == "no cases"


def test_a_worker_killed_is_a_cause_worded_whole():
    """How a worker ended is the cause a report groups by: the whole phrase, not a piece after a colon inside it
    ("by your code itself (os.kill?) or from outside)" told the instructor nothing)."""
    from grader.sandbox.client import NOT_OOM_KILLED, OOM_KILLED, SIGNALS

    for ending in (NOT_OOM_KILLED, OOM_KILLED, *SIGNALS.values()):
        assert likely_cause(f"forward runs: the worker {ending}") == f"the worker {ending}"
        # inside a list in parentheses, as a notebook's cells left out are named: the list's close is not the cause's
        assert likely_cause(f"no GPTBlock (cell 3: the worker {ending})") == f"the worker {ending}"


def test_a_message_that_sends_the_student_to_other_checks_names_no_cause():
    lesson = (
        "the loss at step 5 is 57.1234, the lesson prints 3.4078: this end-to-end check runs all your files "
        "together; fix the failing checks of m1 to m3 first, they say where"
    )
    assert likely_cause(lesson) is None
    assert likely_cause("the weights are not 0 even for ordinary inputs: see the check 'weights are 0'") is None
    assert likely_cause("logits differ: this check uses your TinyGPT too") is None


def test_failures_without_a_cause_are_not_listed_as_causes():
    failed = [{**check("shapes", False, "got (2, 3), expected (3, 2)"), "student": s, "case_id": ""} for s in "ab"] + [
        {**check("mask", False, "wrong. Likely cause: the mask is upper-triangular"), "student": "a"}
    ]
    assert failure_causes(failed) == [("m1", "the mask is upper-triangular", 1)]


def test_a_known_case_id_is_cut_exactly():
    assert check_name("pick x then y [0]", "") == "pick x then y [0]", "a plain check keeps a name ending in brackets"
    assert check_name("cut [a] [b [c]]", "b [c]") == "cut [a]"
    assert check_name("cut [3-9]", "3-9") == "cut"


def test_points_and_labels():
    assert points(58.181818) == 58.18 and points(2 / 3) == 0.67 and points(None) is None and points(9) == 9.0
    label = (
        "m1: is the mask lower-triangular (tril, not triu), applied to the scores before the softmax, and "
        "sliced to the input's length? " * 2
    )
    wrapped = wrap(label, width=30, lines=3)
    words = set(label.split())
    assert len(wrapped.splitlines()) == 3 and wrapped.endswith("…")
    assert all(word in words for line in wrapped.splitlines() for word in line.removesuffix(" …").split()), wrapped


def test_stubs_are_set_apart():
    assert is_stub([check("a", False, STUB), check("b", False, STUB.upper().lower())])
    assert not is_stub([check("a", False, STUB), check("b", True)]), "work done is not a stub"
    assert not is_stub([check("a", False, STUB), check("b", False, "wrong shape: use a view")])
    assert not is_stub([])


def test_checks_set_aside_decide_nothing(tmp_path):
    """A check not counted (or that the grader could not grade) is neither a failure nor a cause."""
    book = Gradebook(tmp_path / "grades.sqlite")
    try:
        record(
            book,
            "alice",
            check("shapes", True),
            {**check("timing", False, "not counted: the worker was not observed; hint: rerun it"), "counted": False},
        )
        record(
            book,
            "bob",
            check("shapes", False, STUB),
            {**check("timing", False, "the grader itself failed"), "internal_error": True, "counted": False},
        )
        checks = book.checks()
    finally:
        book.close()
    assert [(c["name"], c["counted"]) for c in checks if c["student"] == "alice"] == [("shapes", 1), ("timing", 0)]
    assert failure_rates([c for c in checks if c["student"] == "alice"]) == []
    assert failure_causes(checks) == [], "alice failed nothing counted; bob is a stub"
    assert is_stub([c for c in checks if c["student"] == "bob"])
    proc = cli("report", str(tmp_path / "grades.sqlite"))
    assert "1 check not counted (set aside: neither won nor lost)" in proc.stdout, proc.stdout


def test_failure_rates_and_causes_leave_stubs_out(tmp_path):
    a_class(tmp_path / "grades.sqlite")
    book = Gradebook(tmp_path / "grades.sqlite")
    try:
        checks = book.checks()
    finally:
        book.close()
    causes = failure_causes(checks)
    # dave's m1 counts once, under its first failing check's cause (no scaling), as his own table shows it
    assert causes == [
        ("m1", "the scores are not divided by sqrt(d_k)", 2),
        (
            "m1",
            "is the mask lower-triangular (tril, not triu), applied to the scores before the "
            "softmax, and sliced to the input's length?",
            1,
        ),
    ], causes
    assert all(cause != "not implemented yet" for _, cause, _ in causes), "stubs are counted apart"
    rates = dict(failure_rates(checks))
    assert rates[("m1", "pick logits[:, -1]")] == pytest.approx(2 / 5), "dave and erin failed it, of the 5 who tried"


def test_one_bug_worded_three_ways_is_one_cause():
    """A triu mask fails m1's checks with three wordings of its cause (as a real triu submission's report
    does): each student counts once, under the first."""
    wordings = [
        "causal_mask(4) differs at row 0. Likely cause: row i must allow columns 0..i (torch.tril, not triu)",
        "weights differ at query 0. Likely cause: the mask is upper-triangular (torch.triu)",
        TRIU.format(b=0, by=0.5),
    ]
    checks = [
        {**check(f"check {i}", False, message), "student": student}
        for student in ("carol", "dave", "erin")
        for i, message in enumerate(wordings)
    ]
    assert failure_causes(checks) == [("m1", "row i must allow columns 0..i (torch.tril, not triu)", 3)]


def test_an_exercise_left_untouched_is_counted_apart(tmp_path):
    """alice did m1 and left m4 as the stub; bob did both with one bug in m4: m4's failures are bob's alone,
    and alice's untouched m4 is a count of its own, in the report as in the batch's summary."""
    stub_m4 = "not implemented yet: your code raised NotImplementedError (at m4_generate.py:30 in generate)"
    book = Gradebook(tmp_path / "grades.sqlite")
    try:
        record(
            book,
            "alice",
            check("mask", True),
            check("greedy", False, stub_m4, milestone="m4"),
            check("crop", False, stub_m4, milestone="m4"),
        )
        record(
            book,
            "bob",
            check("mask", True),
            check("greedy", False, "tokens differ. Likely cause: the argmax is over the wrong axis", milestone="m4"),
            check("crop", True, milestone="m4"),
        )
        checks = book.checks()
    finally:
        book.close()
    assert failure_causes(checks) == [("m4", "the argmax is over the wrong axis", 1)]
    assert failure_rates(checks) == [(("m4", "greedy"), 1.0)], "of the one student who worked on m4"
    assert untouched_counts(checks) == {"m4": 1}
    out = cli("report", str(tmp_path / "grades.sqlite")).stdout
    assert "exercises left untouched (out of the failure rates and causes), students each: m4 1" in out, out
    assert "not implemented" not in out.split("most often failed checks")[1], out


# ---------------------------------------------------------------- attempts


def test_every_attempt_is_kept_and_the_latest_reported(tmp_path):
    db = tmp_path / "grades.sqlite"
    book = Gradebook(db)
    try:
        first = record(book, "alice", check("shapes", False, "wrong shape: use a view"))
        second = record(book, "alice", check("shapes", True), check("mask", True))
        record(book, "bob", check("shapes", True))
        assert second > first
        history = book.attempts("alice")
        assert [a["id"] for a in history] == [first, second] and [a["score"] for a in history] == [0, 2]
        assert all(a["graded_at"] for a in history)
        assert [(r["student"], r["score"], r["attempt"]) for r in book.rows()] == [
            ("alice", 2, second),
            ("bob", 1, second + 1),
        ]
        assert [(c["student"], c["name"], c["passed"]) for c in book.checks()] == [
            ("alice", "shapes", 1),
            ("alice", "mask", 1),
            ("bob", "shapes", 1),
        ], "only the latest attempt's checks"
        assert len(book.attempts()) == 3
    finally:
        book.close()
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM checks WHERE student = 'alice'").fetchone() == (3,), (
            "the first attempt's checks stay"
        )
    con.close()
    proc = cli("export", str(db), "--csv", str(tmp_path / "grades.csv"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "grades.csv").read_text().splitlines() == [
        "student,score,max_score,status,m1",
        "alice,2.0,2.0,graded,2.0",
        "bob,1.0,1.0,graded,1.0",
    ]


def test_the_gradebook_keeps_each_checks_case_and_the_rates_group_by_it(tmp_path):
    book = Gradebook(tmp_path / "grades.sqlite")
    try:
        plain = dict(check("index x[0] [0]", False, "wrong"), case="")  # a plain check whose name ends in brackets
        cases = [dict(check(f"shapes [B{b}]", b == 1, "wrong"), case=f"B{b}") for b in (1, 2)]
        record(book, "alice", plain, *cases)
        assert [c["case_id"] for c in book.checks()] == ["", "B1", "B2"]
        assert failure_rates(book.checks()) == [(("m1", "index x[0] [0]"), 1.0), (("m1", "shapes"), 1.0)]
    finally:
        book.close()


def test_an_old_gradebook_gets_its_results_as_first_attempts(tmp_path):
    from test_regrade import SCHEMA_0_1_0

    db = tmp_path / "grades.sqlite"
    with sqlite3.connect(db) as con:
        con.executescript(SCHEMA_0_1_0)
        con.execute(
            "INSERT INTO submissions VALUES ('alice', '/class/alice', 'abc', '0.1.0', '[\"m1\"]', 'graded', "
            "NULL, 1, 1, 1, 2.0, '[]', '2025-01-01T00:00:00', 0.5)"
        )
        con.execute("INSERT INTO checks VALUES ('alice', 'm1', 'shapes', 1, 1, 1, '', 0.1)")
    con.close()
    book = Gradebook(db)
    try:
        (old,) = book.attempts("alice")
        assert old["graded_at"] == "2025-01-01T00:00:00" and old["grader_hash"] is None
        assert [c["name"] for c in book.checks()] == ["shapes"]
        new = record(book, "alice", check("shapes", False, "wrong"))
        assert [a["id"] for a in book.attempts("alice")] == [old["id"], new]
        assert [c["passed"] for c in book.checks()] == [0]
    finally:
        book.close()
    Gradebook(db).close()  # opening again numbers nothing twice
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM attempts").fetchone() == (2,)
    con.close()


# ---------------------------------------------------------------- export and report


def test_export_rounds_to_points_and_report_keeps_full_names(tmp_path):
    db = tmp_path / "grades.sqlite"
    a_class(db)
    proc = cli("export", str(db), "--csv", str(tmp_path / "grades.csv"))
    assert proc.returncode == 0, proc.stderr
    table = {r["student"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert (table["frank"]["score"], table["frank"]["m1"]) == ("0.95", "0.95"), table["frank"]

    proc = cli("report", str(db), "--png", str(tmp_path / "charts"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert '1 untouched stub (every check "not implemented yet"), left out of the failure rates: bob' in out, out
    assert (
        "most often failed checks (students failing it, of the 5 graded those who worked on the milestone and did "
        "not hang or crash there):" in out
    ), out
    assert "  40.0%     2 of 5  m1: shapes\n" in out and "  40.0%     2 of 5  m1: pick logits[:, -1]\n" in out, out
    assert "     2  m1: the scores are not divided by sqrt(d_k)\n" in out, out
    for name in (HEATMAP, CAUSES, HISTOGRAM, RATES):
        data = (tmp_path / "charts" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000, name


def test_the_heatmap_puts_the_best_score_first(tmp_path):
    """Best students first means by score / max_score, not by the sum of each milestone's share: alice's one
    full small milestone does not outrank bob's 5 of 12 points (ties by name; a student with no graded row last)."""
    book = Gradebook(tmp_path / "grades.sqlite")
    try:
        record(book, "alice", check("a", True), check("b", False, max_score=10, milestone="m2"))  # 1 of 11
        record(
            book,
            "bob",
            check("a", True),
            check("c", False),  # m1 half done
            check("b", True, score=4, max_score=10, milestone="m2"),
        )  # 5 of 12, but shares 0.5 + 0.4 < alice's 1.0 + 0
        record(
            book, "carol", check("a", True), check("c", False), check("b", True, score=4, max_score=10, milestone="m2")
        )
        rows, checks = book.rows(), book.checks()
    finally:
        book.close()
    shares = milestone_shares(checks)
    assert sum(m["alice"] for m in shares.values()) > sum(m["bob"] for m in shares.values()), "the trap is set"
    assert best_first(rows, {"alice", "bob", "carol", "dave"}) == ["bob", "carol", "alice", "dave"]


def test_gradescope_export_keeps_each_tests_points_whole(tmp_path):
    """The tests of a full-marks student add up to their score, as the autograder's own results.json does: no
    test rounded to 2 decimals (three thirds of a point would make 0.99)."""
    db = tmp_path / "grades.sqlite"
    book = Gradebook(db)
    try:
        record(book, "alice", *(check(f"third {i}", True, score=1 / 3, max_score=1 / 3) for i in range(3)))
    finally:
        book.close()
    proc = cli("export", str(db), "--gradescope", str(tmp_path / "gradescope"))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "gradescope" / "alice" / "results.json").read_text())
    assert results["score"] == 1
    assert sum(t["score"] for t in results["tests"]) == pytest.approx(1, abs=1e-9), results["tests"]
    assert sum(t["max_score"] for t in results["tests"]) == pytest.approx(1, abs=1e-9), results["tests"]


def test_report_and_export_list_the_students_with_nothing_to_grade(tmp_path):
    """A student's folder that held nothing to grade is a row of its own: 0 points of the class's maximum, its
    status and error saying why, in the CSV and the report (grade batch records it)."""
    db = tmp_path / "grades.sqlite"
    book = Gradebook(db)
    try:
        record(book, "alice", check("shapes", True), check("mask", True))
        why = "no exercise file (m1_attention.py, m2_model.py ...) or notebook found (the folder is empty)"
        book.record_empty("bob", "/class/bob", "empty", "0.2.0", ["m1"], why, fingerprint="f" * 16)
        assert book.record_empty("bob", "/class/bob", "empty", "0.2.0", ["m1"], why, fingerprint="f" * 16) is None
        assert [(r["student"], r["status"], r["score"], r["max_score"], r["error"]) for r in book.rows()] == [
            ("alice", "graded", 2, 2, None),
            ("bob", EMPTY, 0, 2, why),
        ]
    finally:
        book.close()
    proc = cli("export", str(db), "--csv", str(tmp_path / "grades.csv"), "--gradescope", str(tmp_path / "gs"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "grades.csv").read_text().splitlines()[2] == f"bob,0.0,2.0,{EMPTY},"
    assert json.loads((tmp_path / "gs" / "bob" / "results.json").read_text())["output"] == why
    proc = cli("report", str(db))
    assert proc.returncode == 0 and "2 submissions: 1 graded, 0 with errors, 1 with nothing to grade (bob)" in (
        proc.stdout
    ), proc.stdout


# ---------------------------------------------------------------- a real class


@pytest.fixture
def pinned_grader(tmp_path, monkeypatch):
    """Rows are current against a snapshot of the grading code, not the shared checkout being edited."""
    for name in ("grader", "solutions"):
        shutil.copytree(REPO / name, tmp_path / "kit" / name, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path / "kit"))


@pytest.mark.slow
def test_batch_ends_with_a_summary_and_keeps_each_attempt(tmp_path, pinned_grader):
    root = tmp_path / "class"
    shutil.copytree(SOLUTIONS, root / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXERCISES, root / "bob", ignore=shutil.ignore_patterns("__pycache__"))
    next(v for v in BUGGY if v.name == "m1-no-scaling").build(root / "carol")
    db = root / "grades.sqlite"
    proc = batch_here(str(root), "--workers", "2", "-m", "m1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("3 graded, 0 already")))
    summary = lines[at + 1 :]
    assert summary[0] == "3 submissions: 3 graded, 0 with errors", summary
    assert summary[1].startswith("mean ") and ", median " in summary[1], summary
    assert summary[2].startswith("  m1 ") and summary[2].endswith("Causal self-attention"), summary
    assert summary[3] == "1 untouched stub (nothing implemented): bob", summary
    assert summary[4].startswith("lowest: bob 0.0% (0/") and ", carol " in summary[4], summary

    proc = batch_here(str(root), "--workers", "2", "-m", "m1", "--regrade")
    assert proc.returncode == 0 and "3 graded, 0 already" in proc.stderr, proc.stderr
    book = Gradebook(db)
    try:
        attempts = book.attempts()
        rows = {r["student"]: r for r in book.rows()}
    finally:
        book.close()
    assert sorted(a["student"] for a in attempts) == ["alice", "alice", "bob", "bob", "carol", "carol"]
    latest = {a["student"]: a["id"] for a in attempts}  # oldest first: the last of each is the latest
    assert {s: r["attempt"] for s, r in rows.items()} == latest
    proc = cli("export", str(db), "--csv", str(tmp_path / "grades.csv"))
    exported = {r["student"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert exported.keys() == {"alice", "bob", "carol"} and exported["alice"]["score"] == exported["alice"]["max_score"]


# ---------------------------------------------------------------- files that are not a gradebook


def nbgrader_gradebook(path: Path) -> Path:
    """What nbgrader's own gradebook.db holds (some of its tables): a file an instructor may well give by mistake."""
    with sqlite3.connect(path) as con:
        for table in ("assignment", "notebook", "grade_cell", "student", "submitted_assignment", "grade", "comment"):
            con.execute(f"CREATE TABLE {table} (id VARCHAR(32) PRIMARY KEY, name VARCHAR(128))")
    con.close()
    return path


@pytest.mark.parametrize("command", [["report"], ["export", "--csv", "grades.csv"]])
def test_nbgraders_gradebook_is_refused_and_left_as_it_was(tmp_path, command):
    """grade report printed "0 submissions" and added its tables to nbgrader's gradebook.db: it must name the
    file, say what it seems to be, and write nothing to it."""
    db = nbgrader_gradebook(tmp_path / "gradebook.db")
    before = db.read_bytes()
    proc = cli(command[0], str(db), *command[1:], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{db} is not a gptkit gradebook (it has tables: assignment, notebook, grade_cell" in proc.stderr, (
        proc.stderr
    )
    assert "nbgrader's gradebook? give grade batch's grades.sqlite" in proc.stderr, proc.stderr
    assert db.read_bytes() == before, "the refused file was written to"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gradebook.db"], "a file was made beside it"


@pytest.mark.parametrize("command", [["report"], ["export", "--csv", "grades.csv"]])
def test_a_file_that_is_no_database_is_a_usage_error(tmp_path, command):
    db = tmp_path / "bad.sqlite"
    db.write_text("garbage\n")
    proc = cli(command[0], str(db), *command[1:], cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{db} is not a gptkit gradebook: it is not an SQLite database" in proc.stderr, proc.stderr
    assert db.read_text() == "garbage\n"


@pytest.mark.parametrize("command", [["report"], ["export", "--csv", "grades.csv"]])
def test_a_missing_gradebook_is_not_created(tmp_path, command):
    proc = cli(command[0], str(tmp_path / "grades.sqlite"), *command[1:], cwd=tmp_path)
    assert proc.returncode == 2 and "does not exist" in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == [], "report and export read a gradebook: they must not make one"


def test_an_empty_database_is_no_gradebook_to_report_and_stays_empty(tmp_path):
    db = tmp_path / "grades.sqlite"
    sqlite3.connect(db).close()  # an empty file: no tables
    proc = cli("report", str(db))
    assert proc.returncode == 2 and "is not a gptkit gradebook: it holds no tables" in proc.stderr, proc.stderr
    assert db.read_bytes() == b""


@pytest.mark.parametrize(
    "option", [["--csv", "afile/grades.csv"], ["--gradescope", "afile/results"], ["--png", "afile/charts"]]
)
def test_an_output_path_through_a_file_is_a_usage_error(tmp_path, option):
    """A folder on the way to the output that is an existing file ended in a traceback (NotADirectoryError)."""
    db = tmp_path / "grades.sqlite"
    a_class(db)
    (tmp_path / "afile").write_text("not a folder")
    command = "report" if option[0] == "--png" else "export"
    proc = cli(command, str(db), *option, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"afile is a file, not a folder: {option[1]} cannot be written" in proc.stderr, proc.stderr


def test_a_hang_and_a_crash_are_set_apart_with_or_without_a_verdict():
    """A check whose process did not come back is a hang or a crash (by its verdict, or, in a gradebook from
    before the verdict was kept, by its words); the pair is out of the rates and causes, which keep their
    denominators and count each student once per cause across milestones."""
    hang = {**check("a", False, "no answer within 10.0 s: an infinite loop, or far too much work?"), "student": "h"}
    crash = {**check("a", False, "the worker process ended with exit code 3 (os._exit?)"), "student": "c"}
    assert (ended(hang), ended(crash)) == (HUNG, CRASHED)
    assert ended({**crash, "verdict": "wrong answer"}) is None  # the verdict, where kept, decides
    assert ended({**check("a", False, "boom"), "verdict": "time limit exceeded"}) == HUNG
    wrong = [
        {**check("a", False, NO_SCALING.format(q=1, got=0.5, n=3), milestone=m), "student": s}
        for s in ("x", "y")
        for m in ("m1", "lesson")
    ]
    fine = {**check("a", True), "student": "z"}
    checks = [hang, crash, *wrong, fine]
    assert broken(checks) == {("h", "m1"): HUNG, ("c", "m1"): CRASHED}
    assert failure_counts(checks) == [(("lesson", "a"), 2, 2), (("m1", "a"), 2, 3)]
    assert class_causes(checks) == [(("m1", "lesson"), "the scores are not divided by sqrt(d_k)", 2)]


# ---------------------------------------------------------------- a class with broken submissions, graded for real

HANG = Variant(
    "hangs-in-m1",
    edits={"m1_attention.py": [("    T, d_k = q.shape[-2], q.shape[-1]\n", "    while True:\n        pass\n")]},
)
CRASH = Variant(
    "crashes-in-m4",
    edits={"m4_generate.py": [("    idx = start\n", "    import os\n\n    os._exit(3)\n    idx = start\n")]},
)


def broken_class(root: Path) -> dict[str, str]:
    """Eight students on m1, m3, m4 and sampling: one full marks, one whose attention hangs, one whose generate
    kills its own process, and five with real bugs (two forget zero_grad). Returns student -> variant name."""
    real = {
        "carol": "m3-no-zero-grad",
        "dave": "m3-no-zero-grad",
        "erin": "m3-targets-not-shifted",
        "frank": "m4-no-cropping",
        "grace": "sampling-filter-before-temperature",
    }
    for student, name in real.items():
        next(v for v in BUGGY if v.name == name).build(root / student)
    shutil.copytree(SOLUTIONS, root / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    HANG.build(root / "hank")
    CRASH.build(root / "cris")
    return real


@pytest.fixture(scope="module")
def graded_broken_class(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("broken") / "class"
    broken_class(root)
    proc = batch_here(
        str(root), "--workers", "2", "-m", "m1", "-m", "m3", "-m", "m4", "-m", "sampling", "--timeout", "10"
    )
    assert proc.returncode == 0, proc.stderr
    return root, proc.stderr


@pytest.mark.slow
def test_batch_counts_a_hang_and_a_crash_as_errors(graded_broken_class):
    """The summary's first line: 8 graded, 2 with errors, naming who hung and who crashed and where."""
    _, stderr = graded_broken_class
    lines = stderr.splitlines()
    counts = next(line for line in lines if line.startswith("8 submissions: "))
    assert counts.startswith("8 submissions: 8 graded, 2 with errors (2 graded that hung or crashed"), counts
    apart = next(line for line in lines if "hung or crashed (the process" in line)
    assert "cris crashed in m4" in apart and "hank hung in m1" in apart, apart


@pytest.mark.slow
def test_report_ranks_the_real_bugs_first_and_shows_the_broken_apart(graded_broken_class, tmp_path):
    root, _ = graded_broken_class
    proc = cli("report", str(root / "grades.sqlite"), "--png", str(tmp_path / "charts"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    apart = next(line for line in lines if "hung or crashed (the process" in line)
    assert apart.startswith("2 submissions hung or crashed") and "hank hung in m1" in apart, apart
    assert "cris crashed in m4" in apart, apart
    at = next(i for i, line in enumerate(lines) if line.startswith("most often failed checks"))
    ranked = []
    for line in lines[at + 1 :]:
        if not line.startswith("  "):
            break
        ranked.append(line)
    # the denominators: the two who forgot zero_grad and the one with unshifted targets fail m3's training
    # checks, 3 of the 8 who worked on m3 (no one hung or crashed there)
    assert ranked and ranked[0].split()[1:4] == ["3", "of", "8"] and " m3: " in ranked[0], ranked
    # the hang's m1 and the crash's m4 rank nothing: m1's checks all pass for everyone else, and m4's
    # failures are frank's missing crop (1 of the 7 whose m4 did not crash)
    assert not any(" m1: " in line for line in ranked), ranked
    assert all(line.split()[3] == "7" for line in ranked if " m4: " in line), ranked
    causes_at = next(i for i, line in enumerate(lines) if line.startswith("most common likely causes"))
    causes = [line for line in lines[causes_at + 1 :] if line.startswith("  ")]
    assert causes and "never zeroed" in causes[0] and causes[0].split()[0] == "2", causes
    assert not any("hung" in line or "worker" in line or "no answer within" in line for line in causes), causes
    assert {p.name for p in (tmp_path / "charts").iterdir()} == {CAUSES, HEATMAP, HISTOGRAM, RATES}
    assert (root / "grades.sqlite").is_file()
