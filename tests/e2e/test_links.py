"""Every relative markdown link resolves inside the tree that holds it, and nothing shipped points outside the kit.

The trees: the repository itself, the student release (`grade release`), the Gradescope zip (`grade gradescope`)
and the nbgrader course (`grade nbgrader`, whose markdown lives in the notebook's markdown cells). A link
`[text](target)` must name a file or folder of the same tree without leaving it (URLs, mail addresses and
anchors in the same page are skipped). The kit's own contract is docs/contract.md: no shipped file, and nothing
in README.md or docs/, may mention the private source it was written from (EXERCISE_API.md) or ../shared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from grader.bundles.gradescope import unlinked
from helpers import REPO, SessionGrader, cli, command_here

# Code (a fenced block or an inline span; link syntax in it is not a link), an inline link or image
# [text](target "title"), or a reference definition [id]: target.
MARKDOWN = re.compile(
    r"(?P<code>^(?P<fence>`{3,}|~{3,})[^\n]*\n.*?^(?P=fence)[^\n]*$|(?P<ticks>`+).+?(?P=ticks))"
    r'|!?\[[^\]]*\]\(\s*<?(?P<inline>[^)\s>]*)>?(?:\s+"[^"]*")?\s*\)'
    r"|^ {0,3}\[[^\]]+\]:[ \t]*<?(?P<reference>[^\s>]+)>?",
    re.M | re.S,
)
SKIPPED = re.compile(r"(https?://|mailto:)", re.I)
OUTSIDE = ("../shared", "EXERCISE_API.md")  # the folder beside the clone, and the private source of the contract

# Files of the repository that mention ../shared on purpose. Each is about the local copy of the test data
# (CI keeps a shared/ folder beside the clone, with datasets/ in it), none is a link, and none ships:
# test_the_exceptions_do_not_ship checks that last point. Everything that ships, and README.md and docs/,
# may mention neither string.
MENTION_EXCEPTIONS = {
    "datasets/README.md": "says where the tests and benchmarks find tiny Shakespeare: ../shared/datasets",
    "tests/helpers.py": "SHARED_DATA: the tests read tiny Shakespeare from ../shared/datasets and skip without it",
    "benchmarks/train_speed.py": "its --data-dir defaults to ../shared/datasets",
    "tests/e2e/test_links.py": "this file names the strings it looks for",
}


def link_targets(text: str) -> list[str]:
    """The targets of the relative links in markdown ``text``, anchors stripped (URLs and same-page anchors skipped)."""
    targets = []
    for m in MARKDOWN.finditer(text):
        target = m["inline"] if m["inline"] is not None else m["reference"]
        if target is None or SKIPPED.match(target):
            continue
        target = target.split("#")[0]
        if target:
            targets.append(target)
    return targets


def broken_links(text: str, where: Path, root: Path) -> list[str]:
    """The links of markdown ``text``, read from a file in folder ``where``, that do not resolve inside ``root``."""
    root = Path(os.path.normpath(root.absolute()))
    broken = []
    for target in link_targets(text):
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("/"):
            broken.append(f"{target} (not a relative path)")
            continue
        path = Path(os.path.normpath(where.absolute() / target))
        if not path.is_relative_to(root):
            broken.append(f"{target} (leaves {root.name}/)")
        elif not path.exists():
            broken.append(f"{target} (no such file in {root.name}/)")
    return broken


def mentions(text: str) -> list[str]:
    return [s for s in OUTSIDE if s in text]


def template(path: Path) -> bool:
    """A file of grader/templates: its links point where a bundle writes it (the release README goes to the
    release's top), so it is checked there, as the README of the release, not where it is stored."""
    return path.parent.name == "templates" and path.parent.parent.name == "grader"


def markdown_texts(root: Path, files: list[Path]) -> list[tuple[Path, str]]:
    """(file, markdown) for each markdown file, and for each markdown cell of each notebook, among ``files``."""
    found = []
    for path in files:
        if path.suffix == ".md":
            found.append((path, path.read_text()))
        elif path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            found += [(path, "".join(c["source"])) for c in cells if c["cell_type"] == "markdown"]
    return found


def text_files(root: Path) -> dict[str, str]:
    """Every file under ``root`` that decodes as UTF-8 text, by its path relative to ``root``."""
    texts = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        try:
            texts[path.relative_to(root).as_posix()] = path.read_text()
        except UnicodeDecodeError:
            continue
    return texts


# ---------------------------------------------------------------- the trees


def repository_files() -> list[Path]:
    """The repository's files as git sees them: tracked, and new files not ignored (so an uncommitted page counts)."""
    proc = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True)
    if proc.returncode != 0:
        pytest.skip("not a git checkout: the repository's own files cannot be listed")
    return [REPO / name for name in proc.stdout.decode().split("\0") if name and (REPO / name).is_file()]


@pytest.fixture(scope="module")
def gradescope(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("links")
    proc = cli("gradescope", str(folder / "autograder.zip"))
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(folder / "autograder.zip") as zf:
        zf.extractall(folder / "source")
    return folder / "source"


@pytest.fixture(scope="module")
def nbgrader(tmp_path_factory) -> Path:
    """`grade nbgrader COURSE` run by click in this process, its grading of the reference on the session's warm
    Grader (the command's own Grader otherwise: a process and a fork server more, for a course whose files are
    what this module reads). An exception the command lets through is raised here, as it would end the command."""
    course = tmp_path_factory.mktemp("links") / "course"
    proc = command_here("nbgrader", str(course), patches={"grader.cli.Grader": SessionGrader})
    assert proc.returncode == 0, proc.stderr
    return course


# The nbgrader course runs nbgrader itself to build (seconds), so it is in the slow set only.
SHIPPED = ("release", "gradescope", pytest.param("nbgrader", marks=pytest.mark.slow))


@pytest.fixture(params=SHIPPED)
def shipped(request) -> Path:
    return request.getfixturevalue(request.param)


# ---------------------------------------------------------------- the checks


def test_the_helpers_flag_what_they_look_for(tmp_path):
    """The other direction: a link that leaves the tree, a missing target and a mention are all reported."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "contract.md").write_text("# contract\n")
    text = (
        "See [the API](../../shared/EXERCISE_API.md), [a page](missing.md#part), [ok](contract.md#m1),\n"
        '![a figure](../../outside.png "title"), [up](../README.md), [web](https://example.com/x.md),\n'
        "[mail](mailto:someone@example.com), [here](#top), [abs](/etc/passwd), `[in code](nope.md)`.\n"
        "```\nblocks[0](x)\n```\n[ref]: ../../shared/EXERCISE_API.md\n"
    )
    assert link_targets(text) == [
        "../../shared/EXERCISE_API.md",
        "missing.md",
        "contract.md",
        "../../outside.png",
        "../README.md",
        "/etc/passwd",
        "../../shared/EXERCISE_API.md",
    ]
    assert broken_links(text, tmp_path / "docs", tmp_path) == [
        f"../../shared/EXERCISE_API.md (leaves {tmp_path.name}/)",
        f"missing.md (no such file in {tmp_path.name}/)",
        f"../../outside.png (leaves {tmp_path.name}/)",
        f"../README.md (no such file in {tmp_path.name}/)",
        "/etc/passwd (not a relative path)",
        f"../../shared/EXERCISE_API.md (leaves {tmp_path.name}/)",
    ]
    assert broken_links("[c](docs/contract.md) [d](docs)", tmp_path, tmp_path) == []
    assert mentions(text) == ["../shared", "EXERCISE_API.md"] and mentions("see docs/contract.md") == []


def test_gradescope_unlinks_only_what_the_zip_lacks():
    names = {"README.md", "docs/contract.md", "docs/exercises.md", "grader/cli.py"}
    text = (
        "[`docs/contract.md`](docs/contract.md), [data](datasets/README.md#x), [api](../shared/EXERCISE_API.md), "
        "[web](https://example.com), [top](#top), [pkg](grader)\n```\ny = blocks[0](x)\n```\n`b[1](2)`\n"
    )
    assert unlinked(text, "README.md", names) == (
        "[`docs/contract.md`](docs/contract.md), data, api, [web](https://example.com), [top](#top), [pkg](grader)\n"
        "```\ny = blocks[0](x)\n```\n`b[1](2)`\n"
    )
    assert unlinked("[r](../README.md) [x](../x.md)", "docs/exercises.md", names) == "[r](../README.md) x"


def test_repository_links_resolve_inside_it():
    files = [p for p in repository_files() if p.suffix in (".md", ".ipynb") and not template(p)]
    assert REPO / "README.md" in files and REPO / "docs" / "contract.md" in files
    broken = {
        f"{path.relative_to(REPO)}: {b}"
        for path, text in markdown_texts(REPO, files)
        for b in broken_links(text, path.parent, REPO)
    }
    assert not broken, sorted(broken)


def test_readme_and_docs_mention_nothing_outside_the_repository():
    pages = {}
    for path in repository_files():
        name = path.relative_to(REPO).as_posix()
        if (name == "README.md" or name.startswith("docs/")) and path.suffix != ".png":  # docs/charts holds images
            pages[name] = path.read_text()
    assert "README.md" in pages and "docs/contract.md" in pages
    found = {name: m for name, text in pages.items() if (m := mentions(text))}
    assert not found, found


def test_shipped_links_resolve_inside_what_ships(shipped):
    files = [p for p in shipped.rglob("*") if p.is_file() and not template(p)]
    texts = markdown_texts(shipped, files)
    assert texts, f"no markdown in {shipped}"
    broken = {
        f"{path.relative_to(shipped)}: {b}" for path, text in texts for b in broken_links(text, path.parent, shipped)
    }
    assert not broken, sorted(broken)


def test_nothing_shipped_mentions_outside_the_kit(shipped):
    found = {name: m for name, text in text_files(shipped).items() if (m := mentions(text))}
    assert not found, found


def test_the_release_ships_the_contract_its_pages_link_to(release):
    assert (release / "docs" / "contract.md").read_text() == (REPO / "docs" / "contract.md").read_text()
    assert "docs/contract.md" in link_targets((release / "README.md").read_text())
    assert "contract.md" in link_targets((release / "docs" / "exercises.md").read_text())


def test_the_exceptions_do_not_ship(release, gradescope, nbgrader):
    """Files allowed to mention ../shared (about local test data) must stay out of every bundle."""
    for tree in (release, gradescope, nbgrader):
        shipped = set(text_files(tree))
        assert not shipped & set(MENTION_EXCEPTIONS), (tree, shipped & set(MENTION_EXCEPTIONS))
