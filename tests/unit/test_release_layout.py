"""What the student release ships is decided by where a file lives (grader/bundles/release.py).

Every file under exercises/ and grader/ ships, but a folder that holds a ``NEVER_SHIPS`` marker never does, with
everything under it. These tests check the rule both ways: a file put in a marked folder stays out with no change
to the release code, the secrets live in marked folders, and everything else the release shipped when it was a
full copy with those folders deleted still ships, nothing more. tests/e2e/test_release.py's text scan of the built
release (no reference body, no hidden check's text) is the second check.
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from grader.bundles import release
from grader.bundles.release import MARKER
from helpers import REPO

# The never-ships folders, and a secret each must hold (a marker in an empty decoy, the secret moved, would fail).
NEVER_SHIPS = {
    "grader/suites/hidden": "test_m1_attention.py",  # the hidden suites and their helpers
    "grader/sandbox/worker/trusted": "m1_attention.py",  # the grader's own earlier milestones
    "grader/lmbudget/heldout": "grader-corpus.txt.gz",  # lmbudget's default corpus: its held-out splits
}
OWN = {"README.md", "pyproject.toml"}  # written from the grader's templates


def old_rule(project: Path) -> set[str]:
    """The release as it was built before the allow-list: exercises/ and grader/ copied whole (no ``__pycache__``,
    no dot-file), the never-ships folders deleted from the copy, the two contract pages and the templates added;
    and the practice papers' files and READMEs."""
    names = set()
    for root in ("exercises", "grader"):
        for path in (project / root).rglob("*"):
            name = path.relative_to(project)
            if not path.is_file() or any(p == "__pycache__" or p.startswith(".") for p in name.parts):
                continue
            if not any(name.as_posix().startswith(f"{folder}/") for folder in NEVER_SHIPS):
                names.add(name.as_posix())
    # the practice papers to sit alone: each paper's file and README (never its solutions), added since
    papers = {
        f"papers/{paper.name}/{name}"
        for paper in (project / "papers").glob("*")
        for name in ("paper.toml", "README.md")
        if (paper / name).is_file()
    }
    return names | {"docs/contract.md", "docs/exercises.md"} | OWN | papers


def files_in(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def kit(tmp_path: Path) -> Path:
    """A copy of what the release is built from: exercises/, grader/ and docs/."""
    copy = tmp_path / "kit"
    for root in ("exercises", "grader", "docs"):
        shutil.copytree(REPO / root, copy / root, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_each_secret_lives_in_a_marked_folder_and_the_code_reads_it_there():
    assert release.never_ships(REPO) == sorted(NEVER_SHIPS), "a never-ships folder was marked or unmarked"
    for folder, secret in NEVER_SHIPS.items():
        assert (REPO / folder / MARKER).is_file() and (REPO / folder / secret).is_file(), folder
    from grader.lmbudget.corpus import FROZEN
    from grader.sandbox.secrecy import TRUSTED
    from grader.suites.points import HIDDEN

    assert [HIDDEN, TRUSTED, FROZEN.parent] == [REPO / folder for folder in NEVER_SHIPS]
    assert FROZEN.is_file()


def test_what_shipped_before_still_ships_and_nothing_more(tmp_path: Path):
    names = release.build(tmp_path / "release")
    assert names == sorted(files_in(tmp_path / "release"))
    assert set(names) == old_rule(REPO)
    assert not any(n.startswith(tuple(f"{folder}/" for folder in NEVER_SHIPS)) for n in names)
    assert len(names) > 150 and {"exercises/m1_attention.py", "grader/suites/public/test_m1_attention.py"} <= set(names)


def test_a_file_put_in_a_never_ships_folder_does_not_ship(kit: Path, tmp_path: Path):
    """No change to grader/bundles/release.py: a new hidden suite, a deeper helper, a second corpus stay out."""
    added = [f"{folder}/new_secret.py" for folder in NEVER_SHIPS] + ["grader/suites/hidden/deeper/helper.py"]
    for name in [*added, "grader/suites/public/new_check.py"]:
        (kit / name).parent.mkdir(parents=True, exist_ok=True)
        (kit / name).write_text("ANSWER = 'the new secret'\n")
    names = release.build(tmp_path / "release", project=kit)
    assert not set(added) & set(names)
    assert "grader/suites/public/new_check.py" in names  # the same file outside a marked folder ships
    assert set(names) == old_rule(kit) == files_in(tmp_path / "release")


def test_a_new_never_ships_folder_needs_only_its_marker(kit: Path, tmp_path: Path):
    folder = kit / "grader" / "answers"
    folder.mkdir()
    (folder / "keys.py").write_text("KEY = 42\n")
    (folder / MARKER).write_text("the answers\n")
    names = release.build(tmp_path / "marked", project=kit)
    assert not [n for n in names if n.startswith("grader/answers/")], names
    (folder / MARKER).unlink()
    assert "grader/answers/keys.py" in release.build(tmp_path / "unmarked", project=kit)


def test_the_checks_fail_for_a_rule_that_ignores_the_marker(kit: Path, tmp_path: Path, monkeypatch):
    """The other direction: with the marker unread, the secrets ship and the comparison above no longer holds."""
    monkeypatch.setattr(release, "MARKER", "NO-SUCH-MARKER")
    names = set(release.build(tmp_path / "release", project=kit))
    assert {f"{folder}/{secret}" for folder, secret in NEVER_SHIPS.items()} <= names
    assert names != old_rule(kit)


def test_a_zip_holds_the_same_files_and_a_folder_is_never_overwritten(tmp_path: Path):
    names = release.build(tmp_path / "release.zip")
    with zipfile.ZipFile(tmp_path / "release.zip") as zf:
        assert sorted(zf.namelist()) == names
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError, match="already exists"):
        release.build(tmp_path / "taken")
    assert files_in(tmp_path / "taken") == {"mine.txt"}


def test_pycache_and_dot_files_do_not_ship(kit: Path, tmp_path: Path):
    for name in ("grader/__pycache__/cli.cpython-312.pyc", "grader/.notes", "exercises/.cache/x.py"):
        (kit / name).parent.mkdir(parents=True, exist_ok=True)
        (kit / name).write_text("x")
    names = release.build(tmp_path / "release", project=kit)
    assert not [n for n in names if "__pycache__" in n or "/." in n], names
