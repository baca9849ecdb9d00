"""The Gradescope autograder zip, run locally against a fake /autograder tree (same layout, in a temp dir): the
script itself for what it grades, shows and hides; its grading step in this process (``results_here``) for how an
upload is found and read, which that step decides."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

import pytest

from grader.bundles.gradescope import VISIBILITIES
from grader.milestones import GRADABLE
from grader.results import CheckResult, Report, gradescope_results
from helpers import EXERCISES, SOLUTIONS, Variant, autograder_here, cli

pytestmark = pytest.mark.slow  # every test here grades whole submissions

LEAKY = Variant("leaky", "m1", edits={"m1_attention.py": [("torch.tril(", "torch.triu(")]})


def unpacked_autograder(root: Path, *args: str) -> Path:
    """/autograder with the zip (built with ARGS) unpacked into source/, as Gradescope does (setup.sh's install
    is this venv)."""
    bundle = root / "autograder.zip"
    proc = cli("gradescope", str(bundle), *args)
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")
    return root


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Path:
    return unpacked_autograder(tmp_path_factory.mktemp("autograder"))


@pytest.fixture(scope="module")
def reference_results(autograder) -> dict:
    return run_autograder(autograder, SOLUTIONS)


@pytest.fixture(scope="module")
def leaky_results(autograder, tmp_path_factory) -> dict:
    """A flat upload of a submission with one bug in m1."""
    return run_autograder(autograder, LEAKY.build(tmp_path_factory.mktemp("leaky") / "leaky"))


def scored(results: dict) -> list[dict]:
    """The hidden suites' tests (the ones with points)."""
    return [t for t in results["tests"] if "public" not in t["tags"]]


def public(results: dict) -> list[dict]:
    return [t for t in results["tests"] if "public" in t["tags"]]


def place(root: Path, submission: Path, under: str = "") -> None:
    """Put ``submission`` (a folder's files, or one notebook) in submission/ (in its folder UNDER, if given), as
    Gradescope does, with no results yet."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    target = root / "submission" / under
    if submission.is_dir():
        shutil.copytree(submission, target, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        target.mkdir(parents=True)
        shutil.copy(submission, target)


def run_autograder(root: Path, submission: Path, under: str = "") -> dict:
    """``submission`` placed (``place``), then run_autograder run as Gradescope runs it."""
    place(root, submission, under)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADE_PYTHON": sys.executable}
    subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, timeout=600)
    return json.loads((root / "results" / "results.json").read_text())


def results_here(root: Path, submission: Path, under: str = "") -> dict:
    """``submission`` placed, then what run_autograder writes, its grading step run in this process
    (helpers.autograder_here): for the tests of how an upload is found and read."""
    place(root, submission, under)
    return autograder_here(root)


def test_the_zip_holds_the_scripts_the_grader_and_the_reference(autograder):
    names = {p.relative_to(autograder / "source").as_posix() for p in (autograder / "source").rglob("*")}
    assert {
        "setup.sh",
        "run_autograder",
        "pyproject.toml",
        "grader/cli.py",
        "grader/suites/hidden/test_m1_attention.py",
        "solutions/m1_attention.py",
    } <= names
    assert not any("__pycache__" in n or n.startswith(("tests/", "exercises/")) for n in names)
    assert "\nVISIBILITY=after_published\n" in (autograder / "source" / "run_autograder").read_text()  # the default


def test_the_zip_holds_every_file_its_pyproject_names(autograder):
    """setuptools refuses (from 2027-02-18, a warning before) a project whose license-files match nothing."""
    source = autograder / "source"
    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    for pattern in project.get("license-files", []):
        assert list(source.glob(pattern)), f"pyproject.toml's license-files names {pattern}, not in the zip"
    assert (source / project["readme"]).is_file()


def test_reference_scores_full_marks(reference_results):
    results = reference_results
    assert scored(results) and all(t["status"] == "passed" for t in results["tests"]), results
    assert results["score"] == pytest.approx(sum(t["max_score"] for t in scored(results)))
    for test in results["tests"]:
        assert {"name", "score", "max_score", "status", "output", "visibility", "tags"} <= test.keys()
    assert len({t["number"] for t in results["tests"]}) == len(results["tests"])


def test_the_reference_holds_one_test_per_milestone_by_default(reference_results):
    """The default zip: a test per milestone, named by its title, worth its declared points, each check a line
    of its output; the public checks' milestones follow, worth 0."""
    tests = scored(reference_results)
    milestones = [t["tags"][0] for t in tests]
    assert len(milestones) == len(set(milestones)) and "m1" in milestones, [t["name"] for t in tests]
    for test in tests:
        spec = GRADABLE[test["tags"][0]]
        assert test["name"] == f"{spec.id}: {spec.title}"
        assert test["score"] == test["max_score"] == pytest.approx(spec.points), test
        lines = test["output"].splitlines()
        assert len(lines) > 1 and all(line.startswith("PASS ") for line in lines), test["output"]
    assert len(public(reference_results)) == len({t["tags"][0] for t in public(reference_results)})


def test_a_zip_built_per_check_lists_every_check(tmp_path):
    """`grade gradescope --tests check`: the flat list, one test per check, written into run_autograder."""
    root = unpacked_autograder(tmp_path, "--tests", "check")
    assert "\nTESTS=check\n" in (root / "source" / "run_autograder").read_text()
    results = run_autograder(root, LEAKY.build(tmp_path / "leaky"))
    m1 = [t for t in scored(results) if t["tags"] == ["m1"]]
    assert len(m1) > 1 and any(t["status"] == "failed" for t in m1) and any(t["status"] == "passed" for t in m1)
    assert all("\n" not in t["output"] for t in m1)  # a check's own message, not a milestone's lines
    assert {t["visibility"] for t in scored(results)} == {"after_published"}


def test_a_failed_milestone_shows_each_check_and_keeps_the_visibility(leaky_results):
    """The grouped test of the buggy milestone: failed, its points the checks' sum, each failed check's message
    on its line, hidden until published as the zip's default says."""
    m1 = next(t for t in scored(leaky_results) if t["tags"] == ["m1"])
    lines = m1["output"].splitlines()
    assert m1["status"] == "failed" and 0 <= m1["score"] < m1["max_score"], m1
    assert any(line.startswith("FAIL ") and ": " in line for line in lines), m1["output"]
    assert any(line.startswith("PASS ") for line in lines), m1["output"]
    assert {t["visibility"] for t in scored(leaky_results)} == {"after_published"}
    assert {t["visibility"] for t in public(leaky_results)} == {"visible"}


def test_grouping_keeps_totals_visibility_and_what_is_set_aside():
    """gradescope_results(layout="milestone"): a milestone's points are its counted checks', a check set aside is
    a line that says so, public milestones are visible and worth 0, and the numbers run on."""
    checks = [
        CheckResult("a", "m1", 2.0, 2.0, True),
        CheckResult("b", "m1", 0.0, 1.0, False, "wrong"),
        CheckResult("c", "m2", 0.0, 3.0, False, "x", counted=False),
    ]
    publics = [CheckResult("(public) p", "m1", 1.0, 1.0, True)]
    results = gradescope_results(
        checks, score=2.0, output="hi", visibility="hidden", public=publics, layout="milestone"
    )
    m1, m2, p1 = results["tests"]
    assert (m1["score"], m1["max_score"], m1["status"]) == (2.0, 3.0, "failed")
    assert m1["output"].splitlines() == ["PASS a [2/2]", "FAIL b [0/1]: wrong"]
    assert m2["max_score"] == 0.0 and "status" not in m2 and "not counted" in m2["output"]
    assert (p1["max_score"], p1["visibility"], p1["tags"]) == (0.0, "visible", ["m1", "public"])
    assert "(public)" in p1["name"] and [t["number"] for t in results["tests"]] == ["1", "2", "3"]
    assert {m1["visibility"], m2["visibility"]} == {"hidden"}
    with pytest.raises(ValueError):
        gradescope_results(checks, output="", layout="flat")


def test_public_checks_are_listed_visible_and_worth_nothing(reference_results):
    """The checks students run themselves: listed after the hidden suites, 0 points, so the total stays theirs."""
    tests = public(reference_results)
    assert tests and all(t["max_score"] == 0 and t["score"] == 0 and "(public)" in t["name"] for t in tests)
    assert all(t["status"] == "passed" for t in tests)
    assert not any("(public)" in t["name"] for t in scored(reference_results))
    assert sum(t["max_score"] for t in reference_results["tests"]) == pytest.approx(reference_results["score"])
    # the default zip keeps the scored checks for the instructor until the grades are published
    assert {t["visibility"] for t in scored(reference_results)} == {"after_published"}
    assert {t["visibility"] for t in tests} == {"visible"}
    assert "once your instructor publishes the grades" in reference_results["output"]


def test_stubs_score_zero(autograder):
    results = run_autograder(autograder, EXERCISES)
    assert results["score"] == 0 and scored(results) and public(results), results
    lines = [line for t in results["tests"] for line in t["output"].splitlines()]
    assert lines and all(line.startswith("FAIL ") and ": not implemented yet" in line for line in lines), lines
    assert public(results)[0]["status"] == "failed"  # a public check the stubs fail shows as failed


def test_buggy_submission_loses_points_in_its_milestone(leaky_results):
    results = leaky_results
    by_tag = {}
    for test in results["tests"]:
        got, top = by_tag.get(test["tags"][0], (0, 0))
        by_tag[test["tags"][0]] = (got + test["score"], top + test["max_score"])
    assert by_tag["m1"][0] < by_tag["m1"][1], by_tag
    lost = {
        tag: (got, top)
        for tag, (got, top) in by_tag.items()
        if tag not in ("m1", "lesson") and got != pytest.approx(top)
    }
    assert not lost, f"points lost outside m1 (where the bug is) and the lesson: {lost}"


def test_files_in_one_folder_score_as_a_flat_upload(autograder, leaky_results, tmp_path):
    """`exercises/*.py` dragged in as a folder: found one level down, graded exactly as the flat upload
    (the bug still costs its points, so the files really were graded, not skipped or replaced)."""
    results = results_here(autograder, LEAKY.build(tmp_path / "leaky"), under="exercises")
    assert 0 < results["score"] == pytest.approx(leaky_results["score"]), results["output"]
    assert results["score"] < sum(t["max_score"] for t in results["tests"])
    assert [(t["name"], t["score"]) for t in results["tests"]] == [
        (t["name"], t["score"]) for t in leaky_results["tests"]
    ]
    assert "Graded exercises/, found inside your submission" in results["output"]
    assert "inside your submission" not in leaky_results["output"]
    assert not any("there is no" in t["output"] for t in results["tests"])


def test_a_notebook_in_one_folder_is_found(autograder, tmp_path):
    """A single notebook one level down is graded as a notebook: here it holds only m1, which scores full."""
    source = (SOLUTIONS / "m1_attention.py").read_text().splitlines(keepends=True)
    cell = {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
    (tmp_path / "work.ipynb").write_text(
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [cell]})
    )
    results = results_here(autograder, tmp_path / "work.ipynb", under="my work")
    m1 = [t for t in scored(results) if t["tags"] == ["m1"]]
    assert m1 and all(t["status"] == "passed" for t in m1), results["output"]
    assert 0 < results["score"] < sum(t["max_score"] for t in results["tests"])
    assert "Graded my work/work.ipynb, found inside your submission" in results["output"]


def test_a_notebook_cell_that_kills_its_process_costs_only_that_cell(autograder, tmp_path):
    """The reference's cells and, in m3's section, a demo cell that kills its own process: every milestone the
    notebook answers keeps full marks (the cell is left out and the cells run again without it), and the output
    blames no memory limit for a signal the code sent itself."""
    sources = [(SOLUTIONS / f"{m}.py").read_text() for m in ("m1_attention", "m2_model", "m3_train")]
    sources += ["import os\nos.kill(os.getpid(), 9)\n", (SOLUTIONS / "m4_generate.py").read_text()]
    cells = [
        {"cell_type": "code", "metadata": {}, "source": s, "outputs": [], "execution_count": None} for s in sources
    ]
    (tmp_path / "work.ipynb").write_text(
        json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
    )
    results = run_autograder(autograder, tmp_path / "work.ipynb")
    core = [t for t in scored(results) if t["tags"][0] in ("m1", "m2", "m3", "m4")]
    assert core and all(t["status"] == "passed" for t in core), results["output"]
    outputs = [t.get("output", "") for t in results["tests"]] + [results["output"]]
    assert not any("most likely for using more memory" in o for o in outputs), results["output"]
    assert any("cell 4 of the notebook was left out: running it, its process was killed (SIGKILL" in o for o in outputs)


def test_an_upload_with_nothing_to_grade_says_so(autograder, tmp_path):
    """Two folders of files: nothing to choose between, so the folder itself is graded and the output says why."""
    for name in ("a", "b"):
        (tmp_path / "upload" / name).mkdir(parents=True)
        shutil.copy(SOLUTIONS / "m1_attention.py", tmp_path / "upload" / name)
    results = results_here(autograder, tmp_path / "upload")
    assert results["score"] == 0 and "no exercise file" in results["output"], results["output"]
    assert any("m1_attention.py" in t["output"] for t in scored(results))


@pytest.mark.parametrize(
    "text,reason",
    [
        ("{not json", "work.ipynb is not a readable Jupyter notebook (JSONDecodeError"),
        (
            json.dumps({"nbformat": 4, "cells": [{"cell_type": "code", "source": "# only a comment"}]}),
            "work.ipynb has no code in its code cells",
        ),
    ],
)
def test_an_ungradable_notebook_gets_its_reason_in_the_output(autograder, tmp_path, text, reason):
    """The reason goes where students look (the output), not only to stdout, which they do not see."""
    (tmp_path / "work.ipynb").write_text(text)
    results = results_here(autograder, tmp_path / "work.ipynb")
    assert results["score"] == 0 and results["tests"] == [], results
    assert "could not grade" in results["output"] and reason in results["output"], results["output"]
    assert str(autograder) not in results["output"]  # no paths of the autograder's machine
    assert "please tell your instructor" not in results["output"]  # it is the student's to fix


def test_a_zip_built_hidden_hides_the_hidden_suites_only(tmp_path):
    root = unpacked_autograder(tmp_path, "--visibility", "hidden")
    assert "\nVISIBILITY=hidden\n" in (root / "source" / "run_autograder").read_text()
    results = run_autograder(root, EXERCISES)
    assert scored(results) and {t["visibility"] for t in scored(results)} == {"hidden"}, results["output"]
    assert public(results) and {t["visibility"] for t in public(results)} == {"visible"}
    assert results["visibility"] == "visible" and "are not shown to you" in results["output"]


@pytest.mark.parametrize("level", list(VISIBILITIES))
def test_each_level_goes_to_the_hidden_checks_only(level):
    """to_gradescope: the level on each hidden-suite check, public ones visible and worth 0, totals unchanged."""
    checks = [
        CheckResult("a", "m1", 2.0, 2.0, True),
        CheckResult("b", "m1", 0.0, 1.0, False, "wrong"),
        CheckResult("c", "m2", 0.0, 3.0, False, "not counted: x", counted=False),
    ]
    hidden = Report("s", checks)
    publics = Report(
        "s",
        [CheckResult("(public) p", "m1", 1.0, 1.0, True), CheckResult("q", "m2", 0.0, 1.0, False, "no")],
        public=True,
    )
    results = hidden.to_gradescope(visibility=level, public=publics)
    assert [t["visibility"] for t in results["tests"]] == [level] * 3 + ["visible"] * 2
    assert results["score"] == 2.0 and [t["max_score"] for t in results["tests"]] == [2.0, 1.0, 0.0, 0.0, 0.0]
    assert "status" not in results["tests"][2]  # a check set aside shows no verdict, as before
    assert [t.get("status") for t in results["tests"][3:]] == ["passed", "failed"]
    assert [t["name"] for t in results["tests"][3:]] == ["m1: (public) p", "m2: (public) q"]
    assert [t["number"] for t in results["tests"]] == ["1", "2", "3", "4", "5"]
    assert {t["visibility"] for t in publics.to_gradescope(visibility=level)["tests"]} == {"visible"}
    assert hidden.to_gradescope() == hidden.to_gradescope(visibility="visible")  # the old call is the default


def test_visibility_is_one_of_gradescopes_levels(tmp_path):
    with pytest.raises(ValueError):
        Report("s", []).to_gradescope(visibility="after_due")
    proc = cli("gradescope", str(tmp_path / "a.zip"), "--visibility", "after_due")
    assert proc.returncode == 2 and not (tmp_path / "a.zip").exists(), proc.stderr
    help_text = " ".join(cli("gradescope", "--help").stdout.split())
    assert all(level in help_text for level in VISIBILITIES) and "[default: after_published]" in help_text


def test_the_scripts_are_the_templates_filled_and_pass_shellcheck(autograder, tmp_path):
    """setup.sh and run_autograder are grader/templates' files, every blank filled; both are sound shell."""
    templates = Path(__file__).resolve().parents[2] / "grader" / "templates"
    source = autograder / "source"
    assert (source / "setup.sh").read_text() == (templates / "gradescope-setup.sh").read_text()
    run = (source / "run_autograder").read_text()
    template = (templates / "gradescope-run_autograder.sh").read_text()
    assert run == template.replace("@visibility", "after_published").replace("@tests", "milestone")
    assert "@" not in run.replace('"$@"', "")
    for script in ("setup.sh", "run_autograder"):
        assert subprocess.run(["bash", "-n", str(source / script)]).returncode == 0, script
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed (.ci/run installs it)")
    proc = subprocess.run(
        ["shellcheck", str(source / "setup.sh"), str(source / "run_autograder")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout


def test_a_missing_source_folder_still_writes_results(autograder, tmp_path):
    """run_autograder writes the grader-failure results when it cannot even reach the grader's folder."""
    root = tmp_path / "elsewhere"
    (root / "submission").mkdir(parents=True)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADE_PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(autograder / "source" / "run_autograder")], env=env, capture_output=True)
    assert proc.returncode != 0
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "tell your instructor" in results["output"]


def test_one_builder_for_every_results_json():
    """gradescope_results: what grade check, the autograder and grade export all write; each test has its
    visibility and output format, a check set aside shows no verdict, and a failed grading has no test."""
    checks = [CheckResult("a", "m1", 2.0, 2.0, True), CheckResult("c", "m2", 0.0, 3.0, False, "x", counted=False)]
    results = gradescope_results(checks, score=2.0, seconds=1.234, output="hi", visibility="after_due_date")
    assert results["execution_time"] == 1.23 and results["visibility"] == "visible"
    assert results["stdout_visibility"] == "hidden"
    assert all(t["visibility"] == "after_due_date" and t["output_format"] == "text" for t in results["tests"])
    assert "status" not in results["tests"][1] and results["tests"][1]["max_score"] == 0.0
    failed = gradescope_results(output="could not grade")
    assert failed == {
        "score": 0,
        "output": "could not grade",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
    }
    with pytest.raises(ValueError):
        gradescope_results(output="", visibility="later")
