"""Which held-out texts students have (grader/lmbudget/corpus.py ``public_reason``): the named
corpora and any file in the kit's folder or the grader package, a link followed; a coach's file elsewhere is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.lmbudget.corpus import FROZEN, GRADER_DIR, PROJECT_DIR, public_reason


@pytest.mark.parametrize("corpus", ["grader", "python", "shakespeare"])
def test_the_named_corpora_are_public(corpus):
    reason = public_reason(corpus)
    assert reason and reason.startswith(f"the {corpus!r} corpus is "), reason


def test_the_default_corpus_is_named_for_what_it_is():
    assert public_reason("grader") == (
        "the 'grader' corpus is a snapshot of the grader's own sources, which the student release ships"
    )


@pytest.mark.parametrize(
    "path,where",
    [(FROZEN, "the grader package"), (PROJECT_DIR / "docs" / "exercises.md", "the kit's folder")],
    ids=["the-frozen-corpus-as-a-file", "a-page-of-the-kit"],
)
def test_a_file_in_the_kit_is_public(path, where):
    reason = public_reason(f"file:{path}")
    assert reason and f"lies in {where}" in reason, reason


def test_a_relative_file_next_to_the_shipped_task_file_is_in_the_kit():
    reason = public_reason("file:my-text.txt", base=GRADER_DIR / "lmbudget")
    assert reason and "lies in the grader package" in reason, reason


def test_a_link_or_a_dotted_path_to_the_kit_is_followed(tmp_path: Path):
    (tmp_path / "text.txt").symlink_to(PROJECT_DIR / "README.md")
    assert public_reason(f"file:{tmp_path / 'text.txt'}")
    dotted = tmp_path / ".." / Path(*[".."] * len(tmp_path.parts)) / PROJECT_DIR.relative_to("/") / "README.md"
    assert public_reason(f"file:{dotted}")


def test_a_coachs_file_outside_the_kit_is_not_public(tmp_path: Path):
    (tmp_path / "mine.txt").write_text("a text of my own\n")
    assert public_reason(f"file:{tmp_path / 'mine.txt'}") is None
    assert public_reason("file:mine.txt", base=tmp_path) is None
