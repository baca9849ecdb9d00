"""The shared options: what `--timeout` gives a check and one call into the submission's code; output paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.options import DEFAULT, OutputPath, limits


def test_no_options_give_the_default_limits():
    assert limits() == DEFAULT


def test_a_longer_timeout_lets_one_call_take_longer_than_the_default():
    """--timeout 100: a check may take 100 s and one call 50 s (it was capped at the default's 20 s)."""
    chosen = limits(timeout=100)
    assert chosen.test_seconds == 100 and chosen.call_seconds == 50


def test_a_shorter_timeout_is_one_calls_limit_too():
    chosen = limits(timeout=5)
    assert chosen.test_seconds == 5 and chosen.call_seconds == 5


@pytest.mark.parametrize(
    "args",
    [
        ["nbgrader", "afile/course"],
        ["gradescope", "afile/autograder.zip"],
        ["release", "afile/release"],
        ["release", "afile/deeper/release.zip"],
        ["check", "exercises", "-o", "afile/report.json"],
    ],
)
def test_an_output_path_through_a_file_is_a_usage_error(tmp_path, monkeypatch, args):
    """A folder on the way to what a command writes is an existing file: one line saying so, exit 2, before any
    work (mkdir and open raised NotADirectoryError or FileExistsError, with a traceback)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("not a folder")
    (tmp_path / "exercises").mkdir()
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output  # a traceback would be exit 1 here
    assert f"afile is a file, not a folder: {args[-1]} cannot be written" in result.output, result.output
    assert (tmp_path / "afile").read_text() == "not a folder"


def test_an_output_path_in_folders_not_made_yet_is_fine(tmp_path):
    """Folders that do not exist yet get made: only an existing file on the way is refused."""
    path = OutputPath(path_type=Path).convert(str(tmp_path / "new" / "deeper" / "out.csv"), None, None)
    assert path == tmp_path / "new" / "deeper" / "out.csv"
