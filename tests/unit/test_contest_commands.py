"""``grade contest init``, ``tokens`` and ``check``: they prepare a contest folder, and every mistake a coach
can make is a message and exit status 2, never a traceback."""

from __future__ import annotations

import csv
import re
import stat

import pytest
from click.testing import CliRunner

from grader.cli import main


def grade(*args: str):
    return CliRunner().invoke(main, ["contest", *args])


def refused(result, says: str) -> None:
    assert result.exit_code == 2, f"a coach's mistake exits 2; got {result.exit_code}: {result.output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), "no traceback for a mistake"
    assert says in result.output, result.output


# Not the tests' ``contest`` fixture (tests/conftest.py): the file `grade contest init` writes, and a coach's edits of
# it, are what these tests check (its line numbers, its examples), so each starts from that file.
@pytest.fixture
def folder(tmp_path):
    """A contest folder made by `grade contest init`."""
    result = grade("init", str(tmp_path / "round"))
    assert result.exit_code == 0, result.output
    return tmp_path / "round"


def test_init_writes_a_contest_file_that_check_accepts(folder):
    result = grade("check", str(folder))
    assert result.exit_code == 0, result.output
    assert "tasks:" in result.output and "window:" in result.output and "feedback:" in result.output


def test_init_writes_a_roster_with_a_student_column(folder):
    with open(folder / "roster.csv") as f:
        assert "student" in (csv.DictReader(f).fieldnames or [])


def test_init_refuses_to_overwrite(folder):
    (folder / "contest.toml").write_text("# the coach's edits\n")
    refused(grade("init", str(folder)), "not overwritten")
    assert (folder / "contest.toml").read_text() == "# the coach's edits\n"


def test_tokens_gives_each_student_a_distinct_token_readable_by_the_owner_only(folder):
    result = grade("tokens", str(folder))
    assert result.exit_code == 0, result.output
    with open(folder / "tokens.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["student"] for r in rows] == ["Ada Lovelace", "Alan Turing"]
    assert len({r["token"] for r in rows}) == 2 and all(len(r["token"]) >= 32 for r in rows)
    for name in ("tokens.csv", "admin.token"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600, f"{name} must be readable by its owner only"
    assert (folder / "admin.token").read_text().strip() not in {r["token"] for r in rows}


def test_tokens_refuses_to_replace_tokens_without_rotate(folder):
    grade("tokens", str(folder))
    before = (folder / "tokens.csv").read_text()
    refused(grade("tokens", str(folder)), "--rotate")
    assert (folder / "tokens.csv").read_text() == before, "the tokens students hold must keep working"


def test_tokens_rotate_replaces_every_token(folder):
    grade("tokens", str(folder))
    before = (folder / "tokens.csv").read_text(), (folder / "admin.token").read_text()
    assert grade("tokens", "--rotate", str(folder)).exit_code == 0
    after = (folder / "tokens.csv").read_text(), (folder / "admin.token").read_text()
    assert before[0] != after[0] and before[1] != after[1]
    assert stat.S_IMODE((folder / "tokens.csv").stat().st_mode) == 0o600


def test_tokens_in_a_missing_folder_is_refused(tmp_path):
    refused(grade("tokens", str(tmp_path / "nowhere")), "there is no folder")


def test_tokens_without_a_roster_is_refused(tmp_path):
    refused(grade("tokens", str(tmp_path)), "roster.csv")


BAD_ROSTERS = {
    "no-student-column": ("name\nann\n", "line 1: the header needs a student column"),
    "duplicate": ("student\nann\nbob\nann\n", "line 4: 'ann' is already on line 2"),
    "empty-name": ("student,group\nann,a\n ,b\n", "line 3: the student name is empty"),
    "no-students": ("student\n", "no students"),
    # each name is a folder's name in the exports (STUDENT/results.json): none may lead out of the folder
    "a-parent-path": ("student\nann\n../../escaped\n", "line 3: '../../escaped' cannot be a student name"),
    "a-slash": ("student\na/b\n", "line 2: 'a/b' cannot be a student name: it holds a / or \\"),
    "a-backslash": ("student\na\\b\n", "line 2: 'a\\\\b' cannot be a student name: it holds a / or \\"),
    "dot-dot": ("student\n..\n", "line 2: '..' cannot be a student name: it starts with a dot"),
    "dot": ("student\n.\n", "line 2: '.' cannot be a student name: it starts with a dot"),
    "hidden-folder": ("student\n.ann\n", "line 2: '.ann' cannot be a student name: it starts with a dot"),
    "control-character": ('student\n"an\x07n"\n', "line 2: 'an\\x07n' cannot be a student name: it holds a control"),
}


@pytest.mark.parametrize(("roster", "says"), BAD_ROSTERS.values(), ids=BAD_ROSTERS.keys())
def test_a_bad_roster_is_refused_with_its_line(tmp_path, roster, says):
    (tmp_path / "roster.csv").write_text(roster)
    refused(grade("tokens", str(tmp_path)), says)
    assert not (tmp_path / "tokens.csv").exists()


def test_check_refuses_a_bad_contest_file_with_the_key_and_line(folder):
    text = (folder / "contest.toml").read_text().replace("duration = 180", 'duration = "3h"')
    (folder / "contest.toml").write_text(text)
    refused(grade("check", str(folder)), 'contest.toml, line 10: window.duration must be a positive number, not "3h"')


def test_check_refuses_extra_time_for_a_student_not_on_the_roster(folder):
    text = (folder / "contest.toml").read_text().replace('# "Ada Lovelace" = 30', '"Ada Lovelce" = 30')
    (folder / "contest.toml").write_text(text)
    refused(grade("check", str(folder)), "not in roster.csv: Ada Lovelce")


def test_check_without_a_contest_file_is_refused(tmp_path):
    refused(grade("check", str(tmp_path)), "contest.toml: `grade contest init` writes an example")


# --- `grade contest serve`: one server per folder, and a busy port said in one line ----------------------------------


@pytest.fixture
def busy_port():
    """A port something else listens on: a server that tried to run there would stop at once."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own: then a second bind passes
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_serve_refuses_a_second_server_on_the_same_folder(folder, busy_port):
    import fcntl

    assert grade("tokens", str(folder)).exit_code == 0
    with open(folder / "serve.lock", "ab") as held:  # the first server's lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        result = grade("serve", str(folder), "--port", str(busy_port), "--workers", "1")
    refused(result, "another `grade contest serve` is running on")
    assert "twice" in result.output and "serving" not in result.output


def test_serve_on_a_busy_port_says_so_in_one_line_and_never_says_serving(folder, busy_port):
    assert grade("tokens", str(folder)).exit_code == 0
    result = grade("serve", str(folder), "--port", str(busy_port), "--workers", "1")
    refused(result, f"cannot listen on 127.0.0.1:{busy_port}")
    assert "serving" not in result.output and "--port" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    # the folder is not left locked by the refused server
    again = grade("serve", str(folder), "--port", str(busy_port), "--workers", "1")
    assert "another `grade contest serve`" not in again.output


def test_init_lists_every_task_the_grader_knows(folder):
    from grader.milestones import GRADABLE

    text = (folder / "contest.toml").read_text()
    line = next(line for line in text.splitlines() if line.startswith("# The tasks: exercise ids"))
    assert all(task in line for task in GRADABLE), line
    assert {"attnvar", "kvmemory", "lmbudget"} <= set(line.split("(")[1].rstrip(").").split(", "))
    assert "@" not in text and 'paper = "../papers/practice-1" (relative to this contest folder)' in text


def test_init_shows_every_table_and_key_a_contest_file_takes(folder):
    """The example is where a coach learns the keys: each table and key the reader knows is in it (or commented)."""
    from grader.contest.config import KNOWN

    text = (folder / "contest.toml").read_text()
    for table, keys in KNOWN.items():
        if table:
            assert f"[{table[0]}]" in text, f"`grade contest init` does not show [{table[0]}]"
        missing = [k for k in keys if f"{k} =" not in text and f"[{k}" not in text]
        assert not missing, f"`grade contest init` does not show {missing} of [{'.'.join(table)}]"


def test_check_refuses_a_roster_name_that_is_not_one_folders_name(folder):
    (folder / "roster.csv").write_text("student\nAda Lovelace\n../../escaped_student\n")
    refused(grade("check", str(folder)), "roster.csv, line 3: '../../escaped_student' cannot be a student name")


def test_a_name_with_inner_spaces_and_accents_is_a_fine_roster_name(tmp_path):
    (tmp_path / "roster.csv").write_text("student\nAda  Lovelace\nJosé Núñez-O'Brien\n")
    result = grade("tokens", str(tmp_path))
    assert result.exit_code == 0, result.output


# --- A contest on a paper: each roster name draws its student's numbers ------------------------------------------


@pytest.fixture
def paper_folder(folder):
    """The init folder made a contest on a paper (paper1, one part)."""
    (folder / "paper1").mkdir()
    (folder / "paper1" / "paper.toml").write_text('title = "P"\nminutes = 60\n[parts.m1]\npoints = 30\n')
    text = (folder / "contest.toml").read_text().split("[tasks")[0]
    (folder / "contest.toml").write_text(text.replace("title = ", 'paper = "paper1"\ntitle = ', 1))
    assert grade("check", str(folder)).exit_code == 0, "the paper contest is a valid one"
    return folder


SAME_SEED = "differ only in letter case or spaces, so they would get the same numbers"


def test_check_refuses_a_paper_roster_with_two_names_that_draw_the_same_numbers(paper_folder):
    (paper_folder / "roster.csv").write_text("student\nAda Lovelace\nada  lovelace\n")
    refused(grade("check", str(paper_folder)), f"'Ada Lovelace' and 'ada  lovelace' {SAME_SEED}")


def test_tokens_refuses_a_paper_roster_with_two_names_that_draw_the_same_numbers(paper_folder):
    (paper_folder / "roster.csv").write_text("student\nAda Lovelace\nada lovelace\n")
    refused(grade("tokens", str(paper_folder)), SAME_SEED)
    assert not (paper_folder / "tokens.csv").exists()


def test_a_contest_without_a_paper_keeps_names_that_differ_in_case(folder):
    (folder / "roster.csv").write_text("student\nAda Lovelace\nada lovelace\n")
    assert grade("tokens", str(folder)).exit_code == 0, "no paper, no seed: the names are two ids"


# --- Warnings: allowed, but likely not meant -------------------------------------------------------------------------


def contest_with(folder, during: str, mode: str):
    """The init folder's contest with feedback ``during`` the window and scoreboard ``mode``."""
    text = (folder / "contest.toml").read_text()
    text = re.sub(r'(?m)^during = ".*"', f'during = "{during}"', text)
    if mode != "frozen":
        text = re.sub(r"(?m)^freeze_minutes = .*$", "", text)
    (folder / "contest.toml").write_text(re.sub(r'(?m)^mode = ".*"', f'mode = "{mode}"', text))


@pytest.mark.parametrize("during", ["passfail", "none"])
@pytest.mark.parametrize("mode", ["public", "frozen"])
def test_check_warns_when_the_scoreboard_shows_the_points_the_feedback_hides(folder, during, mode):
    contest_with(folder, during, mode)
    result = grade("check", str(folder))
    assert result.exit_code == 0, f"a warning, not a refusal: {result.output}"
    warning = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and f'feedback during = "{during}" hides' in warning[0], result.output
    assert 'mode = "hidden"' in warning[0] and 'during = "score"' in warning[0], "it says what to change"


@pytest.mark.parametrize(("during", "mode"), [("passfail", "hidden"), ("score", "public"), ("full", "frozen")])
def test_check_does_not_warn_when_the_scoreboard_hides_nothing_more(folder, during, mode):
    contest_with(folder, during, mode)
    result = grade("check", str(folder))
    assert result.exit_code == 0 and "warning:" not in result.output, result.output


SECRETS = (
    "tokens.csv",
    "admin.token",
    "contest.sqlite",
    "contest.sqlite-wal",
    "uploads/alice/1/m1.py",
    "grades.sqlite",
)


def test_the_secrets_are_ignored_by_git_and_the_rules_are_not(folder):
    """A coach who keeps the contest folder in git commits contest.toml and roster.csv, never a token, the
    database or a student's upload."""
    import shutil
    import subprocess

    if not shutil.which("git"):
        pytest.skip("git is not installed")
    assert grade("tokens", str(folder)).exit_code == 0
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    for name in SECRETS:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).touch()
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *SECRETS, "contest.toml", "roster.csv"],
        cwd=folder,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert sorted(ignored) == sorted(SECRETS), ignored


def test_a_gitignore_already_there_gains_the_secrets_and_keeps_its_lines(tmp_path):
    folder = tmp_path / "round"
    folder.mkdir()
    (folder / ".gitignore").write_text("*.log\ntokens.csv\n")
    assert grade("init", str(folder)).exit_code == 0
    lines = (folder / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["*.log", "tokens.csv"] and lines.count("tokens.csv") == 1
    assert {"admin.token", "contest.sqlite", "uploads/"} <= set(lines)


def test_check_warns_that_a_papers_checks_wait_for_every_window_and_personal_ones_never_all_end(paper_folder):
    text = (paper_folder / "contest.toml").read_text()
    text = re.sub(r'(?m)^during = ".*"', 'during = "score"', text)
    text = re.sub(r'(?m)^after = ".*"', 'after = "full"', text)
    text = re.sub(r"(?m)^mode = .*$", 'mode = "public"', re.sub(r"(?m)^freeze_minutes = .*$", "", text))
    (paper_folder / "contest.toml").write_text(text)
    fixed = grade("check", str(paper_folder))
    assert fixed.exit_code == 0 and "once every student's window on the paper ends" in fixed.output, fixed.output
    assert "hard_end" not in fixed.output, "a fixed window ends for everyone: nothing to warn of"
    personal = re.sub(r"(?m)^\[window\]\n", "[window]\npersonal = true\n", text)
    personal = re.sub(r"(?m)^start = .*$", "", personal)
    (paper_folder / "contest.toml").write_text(personal)
    result = grade("check", str(paper_folder))
    assert result.exit_code == 0, f"a warning, not a refusal: {result.output}"
    warning = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "set window.hard_end" in warning[0], result.output


def test_check_warns_that_a_release_with_locked_answers_answers_a_papers_questions(paper_folder):
    sheet = paper_folder / "paper1" / "paper.toml"
    sheet.write_text(sheet.read_text() + "[parts.quiz]\npoints = 16\n")
    result = grade("check", str(paper_folder))
    assert result.exit_code == 0, f"a warning, not a refusal: {result.output}"
    warning = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "quiz's answers locked" in warning[0], result.output
    assert "grade release --no-answer-locks" in warning[0], "it says what to hand the class instead"
