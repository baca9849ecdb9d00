"""The student release holds no answer and no hidden check, and its `grade` runs the public checks."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import EXERCISES, REPO, SOLUTIONS, cli, function_bodies, normalized, squashed

WORD = re.compile(r"[A-Za-z]{2,}")
HIDDEN_SUITES = sorted((REPO / "grader" / "suites" / "hidden").glob("test_*.py"))


CONTRACT = squashed(
    "\n".join(
        p.read_text() for p in (*sorted(EXERCISES.glob("*.py")), REPO / "docs/exercises.md", REPO / "docs/contract.md")
    )
)


def hidden_phrases(path: Path) -> list[str]:
    """Test names, check names and every message text (four words or more, not bare formulas) of a hidden suite.

    Text that the public contract itself states (the stubs, docs/exercises.md) is not hidden and is skipped.
    """
    tree = ast.parse(path.read_text())
    phrases = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(WORD.findall(node.value)) >= 4:
            phrases.append(node.value.strip().splitlines()[0])
    return [p for p in phrases if squashed(p) not in CONTRACT]


@pytest.fixture(scope="module")
def release_text(release) -> str:
    return "\n".join(normalized(p.read_text(errors="replace")) for p in release.rglob("*") if p.is_file())


def test_no_reference_file_and_no_hidden_suite(release):
    names = {p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file()}
    assert not any(n.startswith(("solutions/", "tests/")) for n in names), names
    never = ("grader/suites/hidden/", "grader/sandbox/worker/trusted/", "grader/lmbudget/heldout/")
    assert not any(n.startswith(never) or n.endswith(("NEVER_SHIPS", "grader-corpus.txt.gz")) for n in names), names
    assert {
        "README.md",
        "pyproject.toml",
        "exercises/m1_attention.py",
        "grader/suites/public/test_m1_attention.py",
        "grader/suites/checks.py",
        "grader/sandbox/worker/fork_server.py",
    } <= names


@pytest.mark.parametrize(
    "name,body",
    [b for f in sorted(SOLUTIONS.glob("*.py")) for b in function_bodies(f)],
    ids=lambda x: x if ":" in str(x) else "",
)
def test_no_solution_body(release_text, name, body):
    assert body not in release_text, f"the body of {name} is in the release"


@pytest.mark.parametrize("suite", HIDDEN_SUITES, ids=lambda p: p.name)
def test_no_hidden_test_name_or_message(release_text, suite):
    text = squashed(release_text)
    found = [p for p in hidden_phrases(suite) if squashed(p) in text]
    assert not found, f"{suite.name}'s hidden text is in the release: {found[:5]}"


def grade_in(release: Path, *args: str) -> dict:
    proc = cli("check", *args, "--format", "json", cwd=release)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_grade_in_the_release_runs_the_public_checks(release):
    stubs = grade_in(release, "exercises")
    assert stubs["checks"] == "public" and stubs["score"] == 0 < stubs["max_score"], stubs
    assert all(c["message"].startswith("not implemented yet") for m in stubs["milestones"] for c in m["checks"])
    shutil.copytree(SOLUTIONS, release / "finished", ignore=shutil.ignore_patterns("__pycache__"))
    done = grade_in(release, "finished")
    assert done["checks"] == "public" and done["score"] == done["max_score"], done
    table = cli("check", "exercises", "-m", "m1", cwd=release).stdout
    assert "PUBLIC checks only" in table


def test_the_scans_find_what_they_look_for():
    """The other direction: the same scans flag the reference and the hidden suites themselves."""
    for path in sorted(SOLUTIONS.glob("m*.py")):
        bodies = function_bodies(path)
        assert bodies and all(body in normalized(path.read_text()) for _, body in bodies), path.name
    for suite in HIDDEN_SUITES:
        phrases = hidden_phrases(suite)
        assert len(phrases) >= 5 and all(squashed(p) in squashed(suite.read_text()) for p in phrases), suite.name


def test_no_quiz_answer_in_the_release(release_text):
    """The quiz's whole-number answers (plain or with thousands separators) appear nowhere a student can read."""
    tree = ast.parse((SOLUTIONS / "quiz.py").read_text())
    answers = [
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.Constant)
        and type(n.value.value) is int
        and n.value.value >= 1000
    ]
    assert len(answers) >= 3
    found = [a for a in answers if str(a) in release_text or f"{a:,}" in release_text]
    assert not found, f"quiz answers printed in the release: {found}"


def test_no_concepts_answer_or_feedback_in_the_release(release_text):
    """concepts' question bank is hidden: neither its large numeric answers (plain or with separators) nor the
    feedback and working it gives on wrong answers appear anywhere a student can read."""
    from grader.suites.hidden import concept_questions
    from grader.variants import LESSON

    marked = [concept_questions.question(i, LESSON) for i in concept_questions.IDS]
    numbers = [int(q.answer) for q in marked if isinstance(q.answer, (int, float)) and q.answer >= 1000]
    assert len(numbers) >= 2
    found = [a for a in numbers if str(a) in release_text or f"{a:,}" in release_text]
    assert not found, f"concepts answers printed in the release: {found}"
    texts = [t for q in marked for t in (q.why, *q.wrong.values()) if len(WORD.findall(t)) >= 4]
    text = squashed(release_text)
    leaked = [t for t in texts if squashed(t) in text]
    assert not leaked, f"concepts feedback in the release: {leaked[:3]}"


def test_the_quiz_instructions_use_no_answer_as_an_example():
    """The stub's instructions show the answer format with examples; none of them may be an answer (every
    answer counts here, small numbers and words too: the questions themselves offer the word choices)."""
    instructions = ast.get_docstring(ast.parse((EXERCISES / "quiz.py").read_text()))
    tree = ast.parse((SOLUTIONS / "quiz.py").read_text())
    answers = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)]
    assert len(answers) == 8
    forms = {a: {str(a).lower()} if isinstance(a, str) else {str(a), f"{a:,}", f"{a:g}"} for a in answers}
    found = [
        a
        for a, texts in forms.items()
        if any(re.search(rf"(?<![\w.,]){re.escape(t)}(?![\w.,])", instructions.lower()) for t in texts)
    ]
    assert not found, f"the quiz stub's instructions give these answers as examples: {found}"


def test_setup_says_how_to_get_the_cpu_build(release):
    """On an ordinary machine `pip install torch==2.13.0` brings the CUDA build: the README, the student
    README and the Gradescope set-up all name PyTorch's CPU index, the same one."""
    index = re.search(r"--index-url (\S+)", (REPO / "grader/templates/gradescope-setup.sh").read_text())
    assert index, "setup.sh no longer installs torch from the CPU index"
    line = f"pip install torch==2.13.0 --index-url {index[1]}"
    for readme in (REPO / "README.md", release / "README.md"):
        text = readme.read_text()
        assert line in text and "CUDA build" in text, f"{readme} does not say how to get the CPU build"


def test_the_release_readme_installs_what_it_tells_students_to_use(release):
    """The README sends students to Jupyter: its set-up line installs the release's [notebook] extra, which
    brings JupyterLab and a kernel (measured: 113 packages with torch's CPU build, 29 without the extra)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11 and later")
    readme = (release / "README.md").read_text()
    extras = tomllib.loads((release / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    setup = next(line for line in readme.splitlines() if line.startswith("python3 -m venv"))
    assert 'pip install -e ".[notebook]"' in setup, setup
    assert "Jupyter" in readme and "jupyter lab" in readme
    names = {re.split(r"[<>=\[; ]", req)[0] for req in extras["notebook"]}
    assert {"jupyterlab", "ipykernel"} <= names, extras


def test_the_release_declares_only_what_it_ships(release):
    """Its pyproject.toml is its own: each script's module and each package-data folder is in the release."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11 and later")
    project = tomllib.loads((release / "pyproject.toml").read_text())
    scripts = project["project"]["scripts"]
    assert scripts, "the release declares no command"
    for name, target in scripts.items():
        module = target.split(":")[0]
        assert (release / (module.replace(".", "/") + ".py")).is_file(), f"{name} runs {module}, not in the release"
    for package, patterns in project["tool"]["setuptools"]["package-data"].items():
        folder = release / package.replace(".", "/")
        assert all(list(folder.glob(p)) for p in patterns), f"{package}: {patterns} match nothing in the release"


def test_the_release_docs_name_only_files_it_ships(release):
    """A file path the release's pages name (in backticks) is in the release: none points at the kit's own files."""
    missing = [
        f"{page.relative_to(release)}: {path}"
        for page in (release / "README.md", *sorted((release / "docs").glob("*.md")))
        for path in re.findall(r"`([\w.-]+(?:/[\w.-]+)*/[\w-]+\.\w+)`", page.read_text())
        if not (release / path).exists()
    ]
    assert not missing, missing


def test_the_release_is_a_distribution_of_its_own(release):
    """Installing the release beside the kit (`pip install -e .` in the kit's environment) must not replace the
    kit's distribution: the two are named apart, and `grade --version` reads no distribution's metadata."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11 and later")
    ours = tomllib.loads((release / "pyproject.toml").read_text())["project"]["name"]
    kit = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    assert ours != kit, ours
    assert 'package_name="' + kit + '"' not in (REPO / "grader" / "cli.py").read_text()


@pytest.mark.slow
def test_the_release_installs_and_each_declared_command_runs(tmp_path):
    """Installed from its folder (not editable) in a fresh venv, each command the release's pyproject.toml declares
    answers --help, and `grade` grades the stubs from the installed package (its package data included)."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11 and later")
    release = tmp_path / "gptkit-release"
    proc = cli("release", str(release))
    assert proc.returncode == 0, proc.stderr
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # torch, click, pip and the build backend come from the environment running the tests (no network); when that
    # is itself a venv, --system-site-packages reaches only its base Python, so its site-packages are added too.
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (Path(site) / "outer-environment.pth").write_text("".join(f"{path}\n" for path in outer))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(release),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    where = subprocess.run(
        [python, "-c", "import grader; print(grader.__file__)"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert where.stdout.startswith(str(venv)), f"grader is imported from {where.stdout or where.stderr}"
    scripts = tomllib.loads((release / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts
    for name in scripts:
        proc = subprocess.run(
            [venv / "bin" / name, "--help"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300
        )
        assert proc.returncode == 0, f"{name} --help: {proc.stdout}{proc.stderr}"
    version = subprocess.run(
        [venv / "bin" / "grade", "--version"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert version.returncode == 0 and version.stdout.startswith("grade, version "), version.stdout + version.stderr
    proc = subprocess.run(
        [venv / "bin" / "grade", "check", str(release / "exercises"), "-m", "m1", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    stubs = json.loads(proc.stdout)
    assert stubs["checks"] == "public" and stubs["score"] == 0 < stubs["max_score"], stubs


# --- The shipped paper's notebook, as a student receives it -------------------------------------------------------


@pytest.fixture(scope="module")
def paper_text() -> str:
    """papers/practice-1 rendered for one student, with their own numbers, as `grade paper render` writes it."""
    from grader.paper.config import load
    from grader.paper.render import build
    from grader.variants import seed_of

    paper = load(REPO / "papers" / "practice-1")
    notebook = build(paper, "a student", seed_of("0" * 64, paper.id, "a student"))
    return "\n".join(normalized("".join(cell["source"])) for cell in notebook["cells"])


def test_the_paper_notebook_holds_no_solution_body(paper_text):
    found = [name for f in sorted(SOLUTIONS.glob("*.py")) for name, body in function_bodies(f) if body in paper_text]
    assert not found, f"the paper's notebook holds the body of {found}"


def test_the_paper_notebook_holds_no_hidden_check_name_message_or_working(paper_text):
    from grader.suites.hidden import concept_pools, kv_pools

    text = squashed(paper_text)
    # the hidden pools' questions, options and listings are what a paper's student is shown (grader/suites/bank.py
    # Pooled); their feedback, and everything else in the hidden modules, is not
    pools = (*concept_pools.POOLS, *kv_pools.POOLS)
    shown = {squashed(t) for p in pools for t in (p.asked, *(o.text for o in (*p.right, *p.wrong))) if t}
    shown |= {squashed(line) for listing in concept_pools.BUGLINE for line in listing.lines}
    hidden = sorted((REPO / "grader" / "suites" / "hidden").glob("*.py"))
    found = {
        path.name: [p for p in hidden_phrases(path) if squashed(p) in text and squashed(p) not in shown]
        for path in hidden
    }
    assert not any(found.values()), (
        f"hidden text in the paper's notebook: { {k: v[:3] for k, v in found.items() if v} }"
    )
    assert "Q_NUM1" in paper_text and "attnvar" in paper_text  # the scan read the notebook it means to


def test_the_release_ships_each_practice_papers_file_and_readme_and_no_solutions(release):
    names = {p.relative_to(release).as_posix() for p in release.rglob("*") if p.is_file()}
    papers = sorted(p.name for p in (REPO / "papers").iterdir() if (p / "paper.toml").is_file())
    assert papers, "the kit has practice papers"
    for paper in papers:
        assert {f"papers/{paper}/paper.toml", f"papers/{paper}/README.md"} <= names, paper
    assert not [n for n in names if n.startswith("papers/") and not n.endswith(("/paper.toml", "/README.md"))], names


@pytest.mark.slow
def test_a_practice_session_in_the_release_says_it_counts_the_public_checks_only(release):
    """`grade practice` on a shipped paper, handed in at once: it runs, and says its score is the public checks'."""
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "practice", "papers/practice-2", "exercises", "--minutes", "5", "--new"],
        cwd=release,
        input="q\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "public checks only" in proc.stdout and "the paper's own marking" in proc.stdout, proc.stdout[:2000]
