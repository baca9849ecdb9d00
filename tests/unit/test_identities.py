"""One identity per student (grader/roster.py, grader/deadlines.py, grader/batch/term.py): a roster's optional email
and name columns, a late policy's extension keyed by any of them, the rows the commands read with the students who
handed nothing in, and a check's points shown to two decimals in its milestone's test."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.batch.charts import histogram
from grader.batch.gradebook import NO_SUBMISSION
from grader.batch.summary import counts_line
from grader.batch.term import late_penalty, penalised, with_roster
from grader.deadlines import LatePolicy, PolicyError, gradescope_submission
from grader.results import CheckResult, gradescope_results
from grader.roster import Identity, Roster, RosterError, read_identities, read_roster

DUE = datetime(2026, 12, 1, 23, 59, tzinfo=timezone.utc)


def roster(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(text)
    return path


def test_a_roster_of_ids_alone_reads_as_before_and_emails_and_names_are_optional(tmp_path):
    plain = roster(tmp_path, "student,seat\nada,1\nbo,2\n")
    assert read_roster(plain) == ("ada", "bo")
    assert read_identities(plain) == (Identity("ada"), Identity("bo"))
    full = roster(tmp_path, "name,student,email\nAda L,ada,Ada@Uni.edu\nBo,bo,\n")
    assert read_identities(full) == (Identity("ada", "Ada@Uni.edu", "Ada L"), Identity("bo", "", "Bo"))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("student,email\nada,a@x\nbo,A@X\n", "line 3: the email 'A@X' is already on line 2"),
        ("student,email\nada,ada\n", "line 2: 'ada' is not an email address"),
        ("student,email\nada,a@x\nada,b@x\n", "'ada' is already on line 2"),
    ],
)
def test_a_roster_that_would_send_one_students_extension_to_another_is_refused(tmp_path, text, says):
    with pytest.raises(RosterError, match=says):
        read_identities(roster(tmp_path, text))


def test_a_student_is_found_by_id_email_in_any_case_or_name_but_a_shared_name_finds_no_one():
    known = Roster([Identity("s1", "s1@uni.edu", "Kim"), Identity("s2", "s2@uni.edu", "Kim"), Identity("s3")])
    assert known.find("s1").id == "s1" and known.find("S1@UNI.EDU").id == "s1"  # type: ignore[union-attr]
    assert known.find("Kim") is None and len(known.matches("Kim")) == 2
    assert known.find("nobody") is None


def test_an_extension_keyed_by_email_or_name_reaches_the_student_by_id_and_a_stray_key_is_refused():
    known = Roster([Identity("s1", "s1@uni.edu", "Ann"), Identity("s2", "s2@uni.edu", "Kim")])
    policy = LatePolicy(
        due=DUE, penalty=10, extensions={"S1@uni.edu": timedelta(hours=48), "Kim/hw1": timedelta(hours=24)}
    )
    keyed = policy.for_roster(known)
    assert set(keyed.extensions) == {"s1", "s2/hw1"}
    late = DUE + timedelta(hours=30)
    assert keyed.judge("s1", late).percent == 0 and policy.judge("s1", late).percent == 20
    with pytest.raises(PolicyError, match="'nobody' names no student on the roster"):
        LatePolicy(due=DUE, extensions={"nobody": timedelta(hours=1)}).for_roster(known)
    shared = Roster([Identity("a", name="Kim"), Identity("b", name="Kim")])
    with pytest.raises(PolicyError, match="names 2 students on the roster"):
        LatePolicy(due=DUE, extensions={"Kim": timedelta(hours=1)}).for_roster(shared)
    assert LatePolicy(extensions={"s1": timedelta(0), "x@y/hw1": timedelta(0)}).unmatched(["s1", "s2"]) == ["x@y/hw1"]


def test_gradescopes_submitter_is_judged_by_their_roster_id(tmp_path):
    meta = tmp_path / "meta.json"
    meta.write_text('{"users": [{"email": "S2@uni.edu", "name": "Kim"}]}')
    found = gradescope_submission(meta)
    assert found.who(Roster([Identity("s2", "s2@uni.edu")])) == "s2"
    assert found.who(Roster([Identity("s9", name="Kim")])) == "s9", "by name where the email is not on it"
    assert found.who(None) == "S2@uni.edu" and found.who(Roster([Identity("s3")])) == "S2@uni.edu"


def row(student: str, score: float, status: str = "graded") -> dict:
    return {"student": student, "score": score, "max_score": 10.0, "status": status, "source": f"/c/{student}"}


def test_the_rows_gain_the_missing_students_at_0_and_name_those_not_on_the_roster():
    rows = [row("ada", 8), row("zed", 5), row("bo/hw1", 6)]
    plain = with_roster(rows, None)
    assert plain.rows == rows and not plain.missing and not plain.strangers
    view = with_roster(rows, [Identity("ada"), Identity("bo"), Identity("cy")])
    assert view.missing == ["cy"] and view.strangers == ["zed"], "nbgrader's bo/hw1 is bo's"
    (cy,) = [r for r in view.rows if r["student"] == "cy"]
    assert (cy["score"], cy["max_score"], cy["status"]) == (0.0, 10.0, NO_SUBMISSION)
    line = counts_line(view.rows)
    assert f"1 with {NO_SUBMISSION} (0 points) (cy)" in line and "0 with errors" in line, line


def test_the_one_late_penalty_judges_each_row_and_the_penalised_rows_carry_it(tmp_path):
    stamp = tmp_path / "submitted" / "ada" / "hw1"
    stamp.mkdir(parents=True)
    (stamp / "timestamp.txt").write_text((DUE + timedelta(hours=30)).isoformat())
    policy = LatePolicy(due=DUE, penalty=10)
    graded = {**row("ada", 8), "source": str(stamp), "time_from": f"nbgrader:{stamp}"}
    absent = with_roster([], [Identity("bo")]).rows[0]
    judged = {"ada": late_penalty(graded, policy), "bo": late_penalty(absent, policy)}
    assert judged["ada"].percent == 20 and judged["bo"].percent == 0 and NO_SUBMISSION in judged["bo"].source
    assert [r["score"] for r in penalised([graded, absent], judged)] == [6.4, 0.0]
    assert graded["score"] == 8, "the gradebook's rows are left as they are"


def test_the_score_chart_counts_the_missing_at_0_and_says_when_it_is_after_penalties():
    graded = [row("ada", 8), row("bo", 6)]
    figure = histogram(graded, set(), ["cy"], late=True)
    title = figure.axes[0].get_title()
    assert title == f"Score distribution (2 graded, 1 with {NO_SUBMISSION} at 0, after late penalties)", title
    assert histogram(graded, set()).axes[0].get_title() == "Score distribution (2 graded)"


def test_a_checks_points_show_to_2_decimals_and_the_milestone_still_adds_up_exactly():
    checks = [CheckResult(f"c{i}", "m1", 2 / 11, 2 / 11, True) for i in range(11)]
    (test,) = gradescope_results(checks, output="", score=2.0, layout="milestone")["tests"]
    assert "[0.18/0.18]" in test["output"] and "0.181818" not in test["output"], test["output"]
    assert test["score"] == 2.0 and test["max_score"] == 2.0
