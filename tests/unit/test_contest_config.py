"""The contest file: a valid one parses into the rules it says, and each kind of mistake is refused with the
key and the line it is on, so that a coach can fix it without reading Python."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from grader import templates
from grader.contest import config
from grader.contest.config import Board, ContestFileError, Scoring, parse
from grader.feedback import Feedback
from grader.milestones import MILESTONES
from grader.tomlfile import line_of

# The file's text is what these tests check (each mistake's message names the line it is on, found in the text
# by line_with), so it is written out here, not made by helpers.open_contest as the other contest tests' files are.
BASE = """\
title = "Round 1"

[window]
start = 2026-03-14T09:00:00-05:00
duration = 120

[feedback]
during = "passfail"

[tasks.m1]
points = 10
max_submissions = 5
min_interval = 30

[tasks.m2]
"""


def refusal(text: str) -> str:
    with pytest.raises(ContestFileError) as caught:
        parse(text)
    return str(caught.value)


def line_with(text: str, fragment: str) -> int:
    """The 1-based line of ``text`` that holds ``fragment`` (the tests' own way to know where a key is)."""
    return next(n for n, line in enumerate(text.splitlines(), start=1) if fragment in line)


# --- A valid file --------------------------------------------------------------------------------------------


def test_the_template_is_a_valid_contest_file():
    contest = parse(templates.text("contest.toml"))
    assert contest.title and contest.tasks, "the template `grade contest init` writes must pass `grade contest check`"


def test_a_valid_file_gives_the_rules_it_says():
    contest = parse(BASE)
    assert contest.title == "Round 1"
    assert contest.window.start == datetime(2026, 3, 14, 14, 0, tzinfo=timezone.utc)
    assert contest.window.duration == timedelta(minutes=120) and not contest.window.personal
    assert contest.feedback_during is Feedback.PASSFAIL
    m1 = contest.task("m1")
    assert m1 is not None
    assert (m1.points, m1.max_submissions, m1.min_interval) == (10, 5, timedelta(seconds=30))


def test_the_defaults_are_full_feedback_after_a_public_board_and_best_scoring():
    contest = parse(BASE)
    assert contest.feedback_after is Feedback.FULL, "after the window, a student sees everything unless told"
    assert contest.scoreboard is Board.PUBLIC
    m2 = contest.task("m2")
    assert m2 is not None and m2.scoring is Scoring.BEST
    assert m2.max_submissions is None and m2.min_interval == timedelta(0), "no cap or interval unless set"


@pytest.mark.parametrize(("task", "points"), [("m1", 27), ("m2", 24), ("lesson", 10), ("quiz", 8)])
def test_a_task_without_points_is_worth_its_exercises_own_points(task, points):
    contest = parse(BASE.split("[tasks.m1]")[0] + f"[tasks.{task}]\n")
    chosen = contest.task(task)
    assert chosen is not None and chosen.points == points, "docs/contract.md's points for the exercise"


def test_a_task_without_points_needs_them_where_the_grader_cannot_tell(monkeypatch):
    monkeypatch.setattr(config, "milestone_points", lambda milestone: None)  # as in the student release
    message = refusal(BASE)
    assert f"line {line_with(BASE, '[tasks.m2]')}: tasks.m2.points is required" in message


def test_the_defaults_table_applies_to_every_task_and_a_task_overrides_it():
    text = BASE.replace("[feedback]", '[defaults]\nmax_submissions = 3\nscoring = "last"\n\n[feedback]')
    contest = parse(text)
    m1, m2 = contest.task("m1"), contest.task("m2")
    assert m1 is not None and m2 is not None
    assert (m1.max_submissions, m2.max_submissions) == (5, 3)
    assert m2.scoring is Scoring.LAST


def test_a_personal_window_has_a_duration_and_an_optional_hard_end():
    text = BASE.replace("start = 2026-03-14T09:00:00-05:00", "personal = true\nhard_end = 2026-03-20T23:59:00Z")
    window = parse(text).window
    assert window.personal and window.start is None
    assert window.hard_end == datetime(2026, 3, 20, 23, 59, tzinfo=timezone.utc)


def test_extra_time_is_minutes_per_student_quoted_names_included():
    contest = parse(BASE + '\n[extra_time]\nalice = 30\n"Ada Lovelace" = 15\n')
    assert contest.extra_time == {"alice": timedelta(minutes=30), "Ada Lovelace": timedelta(minutes=15)}


def test_selected_scoring_keeps_how_many_a_student_may_select():
    task = parse(BASE.replace("[tasks.m2]", '[tasks.m2]\nscoring = "selected"\nselect = 2')).task("m2")
    assert task is not None and (task.scoring, task.select) == (Scoring.SELECTED, 2)


def test_a_frozen_board_keeps_its_freeze_minutes():
    contest = parse(BASE + '\n[scoreboard]\nmode = "frozen"\nfreeze_minutes = 15\n')
    assert (contest.scoreboard, contest.freeze) == (Board.FROZEN, timedelta(minutes=15))


# --- Each kind of mistake, refused with its key and line -------------------------------------------------------


def test_a_bad_value_names_the_file_the_line_the_key_and_the_value():
    text = BASE.replace("points = 10", 'points = "ten"')
    assert (
        refusal(text)
        == f'contest.toml, line {line_with(text, "ten")}: tasks.m1.points must be a positive number, not "ten"'
    )


# (what to change in BASE, the text on the line the error must name, what the message must say)
MISTAKES = {
    "points-zero": ("points = 10", "points = 0", "points = 0", "tasks.m1.points must be a positive number"),
    "points-bool": ("points = 10", "points = true", "points = true", "tasks.m1.points must be a positive number"),
    "unknown-task": ("[tasks.m2]", "[tasks.m9]", "[tasks.m9]", "tasks.m9 is not an exercise id; the ids are m1, m2"),
    "typo-in-a-task": ("min_interval = 30", "min_intervall = 30", "min_intervall", "unknown key min_intervall"),
    "unknown-top-level-key": ('title = "Round 1"', 'title = "Round 1"\ntitel = "x"', "titel", "unknown key titel"),
    "unknown-table": ("[tasks.m2]", "[tasks.m2]\n[scorebord]\nmode = 1", "[scorebord]", "unknown key scorebord"),
    "typo-in-window": ("duration = 120", "duration = 120\nhardend = 1", "hardend", "unknown key hardend in [window]"),
    "start-without-offset": ("09:00:00-05:00", "09:00:00", "start =", "window.start must be a date and time with"),
    "start-a-date": ("2026-03-14T09:00:00-05:00", "2026-03-14", "start =", "window.start must be a date and time"),
    "no-duration": ("duration = 120", "", "[window]", "window.duration is required"),
    "duration-text": ("duration = 120", 'duration = "2h"', "duration", "window.duration must be a positive number"),
    "personal-and-start": ("[window]", "[window]\npersonal = true", "start =", "window.start is for a fixed window"),
    "personal-not-bool": ("[window]", '[window]\npersonal = "yes"', "personal", "window.personal must be true or"),
    "hard-end-on-fixed": (
        "duration = 120",
        "duration = 120\nhard_end = 2026-03-20T00:00:00Z",
        "hard_end",
        "hard_end is",
    ),
    "feedback-typo": ('"passfail"', '"pass/fail"', "during", 'feedback.during must be one of "full", "score"'),
    "feedback-missing": ('during = "passfail"', "", "[feedback]", "feedback.during is required"),
    "selected-without-k": ("[tasks.m2]", '[tasks.m2]\nscoring = "selected"', "scoring", "needs select = K"),
    "select-without-selected": ("[tasks.m2]", "[tasks.m2]\nselect = 2", "select", "select only applies with"),
    "cap-not-whole": ("max_submissions = 5", "max_submissions = 2.5", "max_sub", "must be a positive whole number"),
    "negative-interval": ("min_interval = 30", "min_interval = -1", "min_interval", "must be a non-negative number"),
    "inline-task": ("[tasks.m2]", '[tasks]\nm3 = { points = "x" }', "m3 =", "tasks.m3.points must be a positive"),
    "extra-time-text": (
        "[tasks.m2]",
        '[tasks.m2]\n[extra_time]\n"Ada L" = "1h"',
        "Ada L",
        'extra_time."Ada L" must be',
    ),
}


@pytest.mark.parametrize(("old", "new", "on_line", "says"), MISTAKES.values(), ids=MISTAKES.keys())
def test_a_mistake_is_refused_with_its_key_and_line(old, new, on_line, says):
    text = BASE.replace(old, new, 1)
    assert text != BASE, "the test's replacement must change the file"
    message = refusal(text)
    assert message.startswith(f"contest.toml, line {line_with(text, on_line)}: "), message
    assert says in message, message


BOARD = '\n[scoreboard]\nmode = "{mode}"\n{more}'
BOARD_MISTAKES = {
    "frozen-without-minutes": ("frozen", "", "mode =", 'mode = "frozen" needs freeze_minutes'),
    "minutes-on-a-public-board": ("public", "freeze_minutes = 5", "freeze_minutes", "only applies with mode"),
    "freeze-longer-than-window": ("frozen", "freeze_minutes = 500", "freeze_minutes", "at most the window's"),
    "board-typo": ("frozn", "", "mode =", 'scoreboard.mode must be one of "public", "frozen", "hidden"'),
}


@pytest.mark.parametrize(("mode", "more", "on_line", "says"), BOARD_MISTAKES.values(), ids=BOARD_MISTAKES.keys())
def test_a_scoreboard_mistake_is_refused_with_its_key_and_line(mode, more, on_line, says):
    text = BASE + BOARD.format(mode=mode, more=more)
    message = refusal(text)
    assert message.startswith(f"contest.toml, line {line_with(text, on_line)}: "), message
    assert says in message, message


@pytest.mark.parametrize("mode", ["frozen", "hidden"])
def test_a_board_that_waits_for_the_end_needs_a_hard_end_with_personal_windows(mode):
    text = BASE.replace("start = 2026-03-14T09:00:00-05:00", "personal = true")
    text += BOARD.format(mode=mode, more="freeze_minutes = 5" if mode == "frozen" else "")
    assert "needs a common end to the contest" in refusal(text), "else the board would never be shown"


def test_an_unknown_task_lists_every_valid_id():
    message = refusal(BASE.replace("[tasks.m2]", "[tasks.attention]"))
    assert all(milestone in message for milestone in MILESTONES)


def test_a_file_that_is_not_toml_is_refused_with_the_parsers_line():
    message = refusal(BASE + "\npoints = = 3\n")
    assert message.startswith("contest.toml: not valid TOML") and "line" in message


def test_a_contest_without_tasks_is_refused():
    text = BASE.split("[tasks.m1]")[0]
    assert "the contest has no tasks" in refusal(text)


def test_a_contest_without_a_title_is_refused():
    assert "title is required" in refusal(BASE.replace('title = "Round 1"\n', ""))


# --- Finding a key's line --------------------------------------------------------------------------------------


def test_line_of_finds_keys_under_headers_dotted_and_quoted_keys():
    text = '[a]\nx = 1\n[ b . "c d" ]\ny.z = 2\n"q r" = 3\n'
    assert line_of(text, ("a", "x")) == 2
    assert line_of(text, ("b", "c d")) == 3
    assert line_of(text, ("b", "c d", "y", "z")) == 4
    assert line_of(text, ("b", "c d", "q r")) == 5


def test_line_of_falls_back_to_the_nearest_written_table():
    text = "[a]\nm = { k = 1 }\n"
    assert line_of(text, ("a", "m", "k")) == 2, "a key inside an inline table: the inline table's line"
    assert line_of(text, ("nowhere",)) is None


# --- A contest on a paper -----------------------------------------------------------------------------------------

ON_A_PAPER = BASE.split("[tasks.m1]")[0].replace('title = "Round 1"', 'title = "Round 1"\npaper = "paper1"')
PAPER = 'title = "Paper 1"\nminutes = 90\n[parts.m1]\npoints = 12\n[parts.quiz]\n'


def test_a_contest_on_a_paper_takes_its_tasks_and_points_from_the_paper(tmp_path):
    (tmp_path / "paper1").mkdir()
    (tmp_path / "paper1" / "paper.toml").write_text(PAPER)
    rules = parse(ON_A_PAPER + "[defaults]\nmax_submissions = 4\n", folder=tmp_path)
    assert rules.paper is not None and rules.paper.id == "paper1"
    assert [(t.id, t.points, t.max_submissions) for t in rules.tasks] == [("m1", 12, 4), ("quiz", 8, 4)]


def test_a_contest_on_a_paper_may_add_tasks_of_its_own(tmp_path):
    """A paper and other tasks in one round (one token per student): the paper's parts, then the contest's."""
    (tmp_path / "paper1").mkdir()
    (tmp_path / "paper1" / "paper.toml").write_text(PAPER)
    rules = parse(ON_A_PAPER + "[tasks.m2]\npoints = 5\n", folder=tmp_path)
    assert [(t.id, t.points) for t in rules.tasks] == [("m1", 12), ("quiz", 8), ("m2", 5)]


def test_a_contest_task_may_not_repeat_a_part_of_its_paper(tmp_path):
    (tmp_path / "paper1").mkdir()
    (tmp_path / "paper1" / "paper.toml").write_text(PAPER)
    with pytest.raises(ContestFileError, match=r"line \d+: m1 is a part of the paper, which sets its points"):
        parse(ON_A_PAPER + "[tasks.m1]\npoints = 5\n", folder=tmp_path)


def test_a_missing_or_broken_paper_is_refused_on_the_paper_line(tmp_path):
    with pytest.raises(ContestFileError, match=r'line 2: paper = "paper1": there is no '):
        parse(ON_A_PAPER, folder=tmp_path)
    (tmp_path / "paper1").mkdir()
    (tmp_path / "paper1" / "paper.toml").write_text(PAPER.replace("[parts.quiz]", "[parts.nothing]"))
    with pytest.raises(ContestFileError, match=r"line 2: .*paper.toml, line 5: parts.nothing is not an exercise id"):
        parse(ON_A_PAPER, folder=tmp_path)


def test_every_rule_a_paper_names_is_a_rule_of_its_parts_suite():
    """grader/paper/config.py RULES names rules the suites apply by ``name``: one spelling, checked here."""
    import importlib

    from grader.paper.config import RULES

    for name, (part, _) in RULES.items():
        for suites in ("hidden", "public"):
            suite = importlib.import_module(f"grader.suites.{suites}.{MILESTONES[part].suite.removesuffix('.py')}")
            assert name in {rule.name for rule in suite.RULES}, f"{suites} {part} suite has no rule {name!r}"


def test_clarifications_set_the_categories_and_the_canned_answers_and_refuse_what_is_not_a_list_of_texts():
    """[clarifications] (the jury's question categories and ready answers); the defaults without it."""
    head = 'title = "T"\n[window]\nstart = 2026-03-14T09:00:00Z\nduration = 60\n[feedback]\nduring = "full"\n'
    plain = parse(head + "[tasks.m1]\n")
    assert plain.categories == ("general", "technical") and plain.canned[0] == "No comment."
    chosen = parse(head + '[clarifications]\ncategories = ["rules"]\ncanned = [" Yes. "]\n[tasks.m1]\n')
    assert (chosen.categories, chosen.canned) == (("rules",), ("Yes.",))
    for bad in ('canned = "Yes."', "canned = []", 'categories = [""]', 'categories = ["a", 1]', 'sorted = ["a"]'):
        with pytest.raises(ContestFileError, match="clarifications"):
            parse(head + f"[clarifications]\n{bad}\n[tasks.m1]\n")
