"""Papers (grader/paper/): the paper file's errors, per-student seeds and numbers, the questions bank against the
stub, the rendered notebook and its metadata, and the `grade paper` commands (no grading: see tests/e2e)."""

from __future__ import annotations

import ast
import hashlib
import hmac
import json
import re
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.bundles.nbgrader import released
from grader.cli import main
from grader.milestones import MILESTONES
from grader.paper import render
from grader.paper.config import RULES, PaperFileError, load, parse
from grader.paper.sitting import Sitting, SittingError, sitting_of
from grader.paper.sitting import parse as parse_sitting
from grader.suites.bank import comment, stub_comment, with_statements
from grader.suites.hidden import kv_questions
from grader.variants import LESSON, Variant, seed_of, student_key

REPO = Path(__file__).resolve().parents[2]
PRACTICE = REPO / "papers" / "practice-1"
STUB = (REPO / "exercises" / "m11_kvmemory.py").read_text()
SOLUTION = (REPO / "solutions" / "m11_kvmemory.py").read_text()
SECRET = "0" * 64


# ---------------------------------------------------------------- the paper file


@pytest.mark.parametrize(
    "text,fragments",
    [
        ('title = "x"\nminutes = 10\n[parts.m1]\npoints = 5\nfoo = 1\n', ["line 5", "foo", "parts.m1"]),
        ('title = "x"\nminutes = 10\n[parts.nope]\npoints = 5\n', ["line 3", "parts.nope", "not an exercise id"]),
        ('title = "x"\nminutes = 10\n[parts.m1]\nrules = ["no-loops"]\n', ["line 4", "no-loops", "attnvar"]),
        ('title = "x"\nminutes = 10\n[parts.attnvar]\nrules = ["no-lops"]\n', ["line 4", "unknown rule 'no-lops'"]),
        ('title = "x"\nminutes = -1\n[parts.m1]\n', ["line 2", "minutes"]),
        ('title = "x"\nminutes = 10\ncolour = 1\n[parts.m1]\n', ["line 3", "colour"]),
        ('title = "x"\nminutes = 10\n[parts.m1\n', ["not valid TOML", "line 3"]),
        ("minutes = 10\n[parts.m1]\n", ["title"]),
        ('title = "x"\nminutes = 10\n', ["parts"]),
    ],
)
def test_paper_file_errors_name_the_key_and_the_line(text, fragments):
    with pytest.raises(PaperFileError) as caught:
        parse(text)
    assert all(f in str(caught.value) for f in fragments), str(caught.value)


def attnvar_rules() -> set[str]:
    """The rules a paper may set on attnvar (RULES holds other exercises' too)."""
    return {rule for rule, (part, _) in RULES.items() if part == "attnvar"}


def test_the_practice_paper_loads():
    paper = load(PRACTICE)
    assert paper.id == "practice-1" and paper.minutes == 180 and paper.total == 100
    assert [p.id for p in paper.parts] == ["m1", "attnvar", "kvmemory", "sampling", "quiz"]
    assert set(paper.part("attnvar").rules) == {"no-loops", "no-library-attention"} == attnvar_rules()
    assert not (PRACTICE / "paper.secret").exists() or ".secret" in (REPO / ".gitignore").read_text()


# ---------------------------------------------------------------- seeds and numbers


def test_seeds_differ_between_students_and_papers_and_are_stable():
    students = [f"student{i}" for i in range(200)]
    seeds = [seed_of(SECRET, "practice-1", s) for s in students]
    assert len(set(seeds)) == len(seeds)
    assert seeds == [seed_of(SECRET, "practice-1", s) for s in students]
    assert seed_of(SECRET, "practice-2", "student0") != seeds[0]
    assert seed_of("1" * 64, "practice-1", "student0") != seeds[0]
    assert all(0 <= s < 2**63 for s in seeds)


def test_a_seed_does_not_depend_on_letter_case_or_spaces_and_normalised_ids_keep_theirs():
    ada = seed_of(SECRET, "practice-1", "Ada Lovelace")
    for spelling in ("ada lovelace", " Ada Lovelace ", "ADA  LOVELACE", "\tada lovelace\n"):
        assert seed_of(SECRET, "practice-1", spelling) == ada, f"{spelling!r} is Ada Lovelace: her seed, her numbers"
    assert student_key(" Ada  Lovelace ") == "ada lovelace"
    for normalised in ("alice", "ada lovelace", "student0"):  # the seed they had before ids were normalised
        digest = hmac.new(SECRET.encode(), f"practice-1\0{normalised}".encode(), hashlib.sha256).digest()
        assert seed_of(SECRET, "practice-1", normalised) == int.from_bytes(digest[:8], "big") >> 1


def test_drawn_numbers_are_stable_differ_and_keep_every_mistake_apart():
    for question in kv_questions.DRAWN:
        answers = set()
        for seed in range(300):
            params = question.params(Variant(seed))
            assert params == question.params(Variant(seed))  # stable
            assert question.distinct(params), (question.id, params)
            assert 1 <= question.answer(params) <= 2000
            answers.add(round(question.answer(params), 6))
        assert len(answers) > 30, question.id  # neighbours rarely share an answer
        assert question.params(LESSON) == question.lesson


def test_a_drawn_question_marks_its_own_numbers_and_names_the_usual_mistakes():
    question = kv_questions.GQA_GIB
    params = question.params(Variant(12345))
    marked = question.marked(Variant(12345))
    want = question.answer(params)
    assert marked.mark(want).correct and marked.mark(f"{want:.4g}").correct
    assert not marked.mark(want / 2).correct and "factor 2" in marked.mark(want / 2).message
    assert "2^30" in marked.mark(want * 2**30 / 1e9).message
    heads = marked.mark(want * params["n_heads"] / params["n_groups"]).message
    assert f"only {params['n_groups']} K/V heads" in heads
    assert question.marked(LESSON).answer == 5  # the stub's Llama-2-70B: 5 GiB


# ---------------------------------------------------------------- one source per statement


@pytest.mark.parametrize("question", kv_questions.DRAWN, ids=lambda q: q.id)
def test_the_stub_states_the_bank_question_with_the_lessons_numbers(question):
    """The stub's comment is the statement rendered with the lesson's numbers, and so is the reference's."""
    assert stub_comment(STUB, question.id) == question.comment(question.lesson)
    assert stub_comment(SOLUTION, question.id) == question.comment(question.lesson)


@pytest.mark.parametrize("question", kv_questions.DRAWN, ids=lambda q: q.id)
def test_the_reference_answers_the_lessons_numbers(question):
    values = {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in ast.parse(SOLUTION).body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id.startswith("Q_")
    }
    assert question.marked(LESSON).mark(values[question.id]).correct


def test_the_bank_lists_the_stubs_questions_in_order():
    assigned = [
        n.targets[0].id
        for n in ast.parse(STUB).body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id.startswith("Q_")
    ]
    assert assigned == kv_questions.IDS


def test_comments_wrap_as_the_stubs_and_replace_in_place():
    text = comment("Q_X", "word " * 40)
    assert text.startswith("# Q_X. word") and all(len(line) <= 110 for line in text.splitlines())
    assert all(line.startswith("#   ") for line in text.splitlines()[1:])
    source = "a = 1\n\n# Q_X. old\n#   text\nQ_X = None\n"
    assert with_statements(source, {"Q_X": "# Q_X. new", "Q_Y": "# nowhere"}) == "a = 1\n\n# Q_X. new\nQ_X = None\n"


# ---------------------------------------------------------------- the notebook


def cells(notebook: dict) -> dict[str, str]:
    return {c["id"]: c["source"] for c in notebook["cells"]}


def test_render_without_a_student_has_the_lessons_numbers_and_no_seed():
    paper = load(PRACTICE)
    notebook = render.build(paper)
    meta = notebook["metadata"]["gptkit"]["paper"]
    assert meta == {
        "id": "practice-1",
        "title": paper.title,
        "student": None,
        "seed": None,
        "parts": [{"id": p.id, "points": p.points, "rules": list(p.rules)} for p in paper.parts],
    }
    by_id = cells(notebook)
    for question in kv_questions.DRAWN:
        assert question.comment(question.lesson) in by_id[f"kvmemory-{question.id}-answer"]
    title = by_id["paper-title"]
    assert paper.title in title and "180 minutes" in title and "| 35 |" in title
    assert all(RULES[rule][1] in title for rule in attnvar_rules())
    json.dumps(notebook)  # plain JSON


def test_render_for_a_student_has_their_numbers_and_seed():
    paper = load(PRACTICE)
    seed = seed_of(SECRET, paper.id, "alice")
    by_id = cells(render.build(paper, "alice", seed))
    other = cells(render.build(paper, "bob", seed_of(SECRET, paper.id, "bob")))
    lesson = cells(render.build(paper))
    for question in kv_questions.DRAWN:
        key = f"kvmemory-{question.id}-answer"
        assert question.comment(question.params(Variant(seed))) in by_id[key]
        assert by_id[key].rstrip().endswith(f"{question.id} = None")
    differ = [q.id for q in kv_questions.DRAWN if by_id[f"kvmemory-{q.id}-answer"] != other[f"kvmemory-{q.id}-answer"]]
    assert differ, "alice and bob were asked the same numbers"
    assert by_id["kvmemory-Q_TEXT1-answer"] == lesson["kvmemory-Q_TEXT1-answer"]  # asked of everyone alike
    options = [
        re.findall(r"\(([a-d])\) ([^(#\n]+?)\s*(?=\(|$)", book["kvmemory-Q_MC1-answer"], re.M)
        for book in (by_id, lesson)
    ]
    # alice's options are drawn from the hidden pool, none of them the lesson's, in her own order
    (pool,) = [spec for spec in kv_questions.REORDERED if spec.id == "Q_MC1"]
    texts = {o.text for o in (*pool.right, *pool.wrong)}
    assert len(options[0]) == 4 and {text for _, text in options[0]} <= texts, options[0]
    assert not {text for _, text in options[0]} & {text for _, text in options[1]}
    assert by_id["m1-answer"] == lesson["m1-answer"]
    assert "alice" in by_id["paper-title"]


def test_rendered_code_is_the_stubs_own():
    """Each part's cells hold the stub's code (less its docstring and demo), the questions split off."""
    notebook = render.build(load(PRACTICE))
    by_id = cells(notebook)
    code = by_id["kvmemory-answer"]
    assert "def kv_bytes_per_token(" in code and 'raise NotImplementedError("not implemented yet")' in code
    assert "Q_MC1" not in code and "__main__" not in code and "DTYPE_BYTES" not in code  # no reference code
    assert all("### BEGIN SOLUTION" not in c["source"] for c in notebook["cells"])
    quiz = [k for k in by_id if k.startswith("quiz-Q")]
    assert quiz == [f"quiz-Q{i}-answer" for i in range(1, 9)]
    assert by_id["quiz-Q5-answer"].startswith("# Parameter counts")  # a section heading goes with its question
    assert "Rules for this part" in by_id["attnvar-intro"] and "grade check" not in by_id["attnvar-intro"]
    assert released("a\n    ### BEGIN SOLUTION (release: Q = None)\n    Q = 3\n    ### END SOLUTION\nb") == (
        "a\n    Q = None\nb"
    )


def test_without_the_bank_only_the_lessons_numbers(monkeypatch):
    """The student release ships no hidden bank: the stub's own statements, and no student's numbers."""
    monkeypatch.setitem(render.BANKS, "kvmemory", "grader.suites.hidden.no_such_bank")
    paper = load(PRACTICE)
    assert render.drawn("kvmemory") is None and render.drawn("m1") == []
    by_id = cells(render.build(paper))
    assert kv_questions.MHA_GIB.comment(kv_questions.MHA_GIB.lesson) in by_id["kvmemory-Q_NUM2-answer"]
    with pytest.raises(render.RenderError, match="question bank is not here"):
        render.build(paper, "alice", 1)


def test_split_keeps_code_and_questions_apart():
    code = "import x\n\n\ndef f():\n    pass\n\n\n# Part A ---\n\n# Q1. one?\nQ1 = None\n\n# Q2. two?\nQ2 = None\n"
    assert render.split(code) == [
        (None, "import x\n\n\ndef f():\n    pass\n"),
        ("Q1", "# Part A ---\n\n# Q1. one?\nQ1 = None\n"),
        ("Q2", "# Q2. two?\nQ2 = None\n"),
    ]


# ---------------------------------------------------------------- the notebook's paper, read back


def test_a_rendered_notebook_is_read_back_as_its_sitting(tmp_path):
    paper = load(PRACTICE)
    seed = seed_of(SECRET, paper.id, "alice")
    path = tmp_path / "alice.ipynb"
    render.write(render.build(paper, "alice", seed), path)
    sitting = sitting_of(path)
    assert isinstance(sitting, Sitting)
    assert sitting.seed == seed and sitting.variant == Variant(seed) and sitting.student == "alice"
    assert sitting.milestones() == ["m1", "attnvar", "kvmemory", "sampling", "quiz"]
    assert sitting.milestones(["quiz", "m1"]) == ["m1", "quiz"]
    none = frozenset()  # a part that lists no rules has none: not its suite's default
    assert sitting.rules == {
        "m1": none,
        "attnvar": frozenset({"no-loops", "no-library-attention"}),
        "kvmemory": none,
        "sampling": none,
        "quiz": none,
    }
    with pytest.raises(SittingError, match="no part m2"):
        sitting.milestones(["m2"])
    plain = tmp_path / "plain.ipynb"
    plain.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert sitting_of(plain) is None and sitting_of(tmp_path) is None


def test_the_table_of_a_paper_notebook_has_the_papers_order_and_only_the_papers_total(tmp_path):
    from grader.results import CheckResult, Report
    from grader.table import render_text

    paper = load(PRACTICE)  # m1, attnvar, kvmemory, sampling, quiz: not the lesson's order
    seed = seed_of(SECRET, paper.id, "alice")
    path = tmp_path / "alice.ipynb"
    render.write(render.build(paper, "alice", seed), path)
    graded = ["m1", "sampling", "attnvar", "quiz", "kvmemory"]  # the lesson's order, as the report lists them
    checks = [CheckResult(f"{m} works", m, 1.0, 3.0, False, "wrong") for m in graded]
    report = Report(str(path), checks, variant=seed)
    text = render_text(report, color=False)
    rows = [line.split()[1] for line in text.splitlines() if line.startswith("│")]
    assert [row for row in rows if row in graded] == ["m1", "attnvar", "kvmemory", "sampling", "quiz"], text
    assert "Total" not in text, "the grader's total (15) would sit beside the paper's (of 100) below it"
    sitting = sitting_of(path)
    assert sitting is not None
    summary = sitting.summary(report, graded)
    assert [line.split()[0] for line in summary.splitlines()[1:]] == [
        "m1",
        "attnvar",
        "kvmemory",
        "sampling",
        "quiz",
        "total",
    ]
    assert "33.33 / 100" in summary
    report.variant = None  # not graded with the notebook's numbers: not the paper's grading
    assert "Total" in render_text(report, color=False)


@pytest.mark.parametrize(
    "change,key",
    [
        ({"seed": "12"}, "seed"),
        ({"seed": -1}, "seed"),
        ({"parts": []}, "parts"),
        ({"parts": [{"id": "m99", "points": 1}]}, "parts[0].id"),
        ({"parts": [{"id": "m1", "points": 0}]}, "parts[0].points"),
        ({"parts": [{"id": "m1", "points": 1, "rules": ["no-loops"]}]}, "parts[0].rules"),
        ({"parts": [{"id": "m1", "points": 1, "rules": [{}]}]}, "parts[0].rules"),
        ({"parts": [{"id": "m1", "points": 1}, {"id": "m1", "points": 2}]}, "parts"),
        ({"title": 3}, "title"),
    ],
)
def test_bad_paper_metadata_is_a_message(change, key):
    good = render.metadata(load(PRACTICE), "alice", 7)
    parse_sitting(good)
    with pytest.raises(SittingError) as caught:
        parse_sitting({**good, **change})
    assert f"gptkit.paper.{key} " in str(caught.value)


# ---------------------------------------------------------------- the commands


def test_paper_check_summarises_the_practice_paper():
    result = CliRunner().invoke(main, ["paper", "check", str(PRACTICE)])
    assert result.exit_code == 0, result.output
    for fragment in ("180 min", "attnvar: 35 points", "rule no-loops", "Q_NUM1, Q_NUM2, Q_NUM3", "total: 100 points"):
        assert fragment in result.output


@pytest.mark.parametrize(
    "content,fragment",
    [
        (None, "there is no"),
        ('title = "x"\nminutes = 10\n[parts.m1\n', "not valid TOML"),
        ('title = "x"\nminutes = 10\n[parts.m99]\n', "parts.m99 is not an exercise id"),
    ],
)
@pytest.mark.parametrize("command", ["check", "render"])
def test_bad_input_is_a_message_and_exit_2(tmp_path, content, fragment, command):
    folder = tmp_path / "p"
    folder.mkdir()
    if content is not None:
        (folder / "paper.toml").write_text(content)
    result = CliRunner().invoke(main, ["paper", command, str(folder)])
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_render_makes_an_owner_only_secret_once_and_writes_the_notebook(tmp_path):
    folder = tmp_path / "paper"
    folder.mkdir()
    (folder / "paper.toml").write_text((PRACTICE / "paper.toml").read_text())
    out = tmp_path / "alice.ipynb"
    result = CliRunner().invoke(main, ["paper", "render", str(folder), "--student", "alice", "--out", str(out)])
    assert result.exit_code == 0, result.output
    secret = folder / "paper.secret"
    assert "made a new secret" in result.output and stat.S_IMODE(secret.stat().st_mode) == 0o600
    meta = json.loads(out.read_text())["metadata"]["gptkit"]["paper"]
    assert meta["student"] == "alice" and meta["seed"] == seed_of(secret.read_text().strip(), "paper", "alice")
    again = CliRunner().invoke(main, ["paper", "render", str(folder), "--student", "alice", "--out", str(out)])
    assert again.exit_code == 2 and "exists" in again.output
    forced = CliRunner().invoke(
        main, ["paper", "render", str(folder), "--student", "alice", "--out", str(out), "--force"]
    )
    assert forced.exit_code == 0 and "made a new secret" not in forced.output
    assert json.loads(out.read_text())["metadata"]["gptkit"]["paper"]["seed"] == meta["seed"]
    other = tmp_path / "own.secret"
    other.write_text("1" * 64 + "\n")
    bob = tmp_path / "bob.ipynb"
    result = CliRunner().invoke(
        main, ["paper", "render", str(folder), "--student", "bob", "--out", str(bob), "--secret-file", str(other)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(bob.read_text())["metadata"]["gptkit"]["paper"]["seed"] == seed_of("1" * 64, "paper", "bob")


def test_render_makes_the_folder_of_out(tmp_path):
    folder = tmp_path / "paper"
    folder.mkdir()
    (folder / "paper.toml").write_text((PRACTICE / "paper.toml").read_text())
    out = tmp_path / "papers" / "round-1" / "alice.ipynb"
    result = CliRunner().invoke(main, ["paper", "render", str(folder), "--student", "alice", "--out", str(out)])
    assert result.exit_code == 0 and out.is_file(), result.output


def test_render_refuses_a_name_not_on_the_roster_and_names_the_close_ones(tmp_path, monkeypatch):
    folder = tmp_path / "practice-1"
    folder.mkdir()
    (folder / "paper.toml").write_text((PRACTICE / "paper.toml").read_text())
    (folder / "paper.secret").write_text(SECRET + "\n")
    (folder / "roster.csv").write_text("student,email\nAda Lovelace,ada@example.org\nAlan Turing,alan@example.org\n")
    monkeypatch.chdir(tmp_path)
    typo = CliRunner().invoke(main, ["paper", "render", str(folder), "--student", "Ada Lovlace"])
    assert typo.exit_code == 2, typo.output
    assert "'Ada Lovlace' is not on the roster" in typo.output and "did you mean 'Ada Lovelace'?" in typo.output
    assert "Traceback" not in typo.output and not list(tmp_path.glob("*.ipynb")), "a typo writes no notebook"
    far = CliRunner().invoke(main, ["paper", "render", str(folder), "--student", "Grace Hopper"])
    assert far.exit_code == 2 and "no name there is close to it (2 students)" in far.output, far.output
    lower = CliRunner().invoke(main, ["paper", "render", str(folder), "--student", " ada lovelace "])
    assert lower.exit_code == 0, lower.output
    meta = json.loads((tmp_path / "practice-1-Ada_Lovelace.ipynb").read_text())["metadata"]["gptkit"]["paper"]
    assert meta["student"] == "Ada Lovelace", "the roster's spelling, in the notebook and its name"
    assert meta["seed"] == seed_of(SECRET, "practice-1", "Ada Lovelace")
    elsewhere = tmp_path / "class.csv"
    elsewhere.write_text("student\nGrace Hopper\n")
    other = CliRunner().invoke(
        main, ["paper", "render", str(folder), "--student", "grace hopper", "--roster", str(elsewhere)]
    )
    assert other.exit_code == 0, other.output
    assert (tmp_path / "practice-1-Grace_Hopper.ipynb").is_file()


def test_render_refuses_a_roster_with_two_names_that_would_share_a_seed(tmp_path):
    folder = tmp_path / "paper"
    folder.mkdir()
    (folder / "paper.toml").write_text((PRACTICE / "paper.toml").read_text())
    (folder / "roster.csv").write_text("student\nAda Lovelace\nada  lovelace\n")
    result = CliRunner().invoke(
        main, ["paper", "render", str(folder), "--student", "Ada Lovelace", "--out", str(tmp_path / "a.ipynb")]
    )
    assert result.exit_code == 2 and "would get the same numbers" in result.output, result.output


def test_render_without_a_roster_says_the_name_is_not_checked(tmp_path):
    folder = tmp_path / "paper"
    folder.mkdir()
    (folder / "paper.toml").write_text((PRACTICE / "paper.toml").read_text())
    out = tmp_path / "x.ipynb"
    result = CliRunner().invoke(main, ["paper", "render", str(folder), "--student", "zed", "--out", str(out)])
    assert result.exit_code == 0 and "is not checked against one" in result.output, result.output


def test_one_name_for_a_students_notebook():
    assert render.notebook_name("practice-1", "Ada Lovelace") == "practice-1-Ada_Lovelace.ipynb"
    assert render.notebook_name("practice-1", " a/b ") == "practice-1-a_b.ipynb"
    assert render.notebook_name("practice-1", None) == "practice-1-lesson.ipynb"


def test_render_without_a_student_needs_no_secret(tmp_path):
    folder = tmp_path / "paper"
    folder.mkdir()
    (folder / "paper.toml").write_text('title = "Q"\nminutes = 30\n[parts.kvmemory]\npoints = 10\n')
    out = tmp_path / "lesson.ipynb"
    result = CliRunner().invoke(main, ["paper", "render", str(folder), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert not (folder / "paper.secret").exists()
    notebook = json.loads(out.read_text())
    assert notebook["metadata"]["gptkit"]["paper"]["seed"] is None
    assert set(MILESTONES) >= {p["id"] for p in notebook["metadata"]["gptkit"]["paper"]["parts"]}


# ---------------------------------------------------------------- the reference on every variant


def reference_answer(question_id: str, p: dict) -> float:
    """The answer the reference's own functions (solutions/m11_kvmemory.py) give with these numbers."""
    from grader.reference import load_reference

    kv = load_reference().m11_kvmemory
    if question_id == "Q_NUM3":
        return kv.kv_ratio(p["n_heads"], p["head_size"], latent_size=p["latent_size"])
    size = (p["batch"], p["length"], p["n_layers"], p["n_heads"], p["head_size"], p["dtype"])
    return kv.kv_bytes(*size, n_groups=p.get("n_groups")) / 2**30


@pytest.mark.parametrize("question", kv_questions.DRAWN, ids=lambda q: q.id)
def test_the_reference_scores_full_on_every_students_numbers(question):
    """50 students: the reference's functions, given each one's numbers, answer each one's question right, and
    the answers differ between students."""
    answers = set()
    for i in range(50):
        variant = Variant(seed_of(SECRET, "practice-1", f"student{i}"))
        want = reference_answer(question.id, question.params(variant))
        assert question.marked(variant).mark(want).correct, (question.id, i, question.params(variant), want)
        answers.add(round(want, 6))
    assert len(answers) >= 25, f"{question.id}: only {len(answers)} different answers among 50 students"


def test_two_students_statements_and_answers_differ():
    one, two = (Variant(seed_of(SECRET, "practice-1", name)) for name in ("ada", "alan"))
    for question in kv_questions.DRAWN:
        assert question.comment(question.params(one)) != question.comment(question.params(two)), question.id
    assert [q.answer(q.params(one)) for q in kv_questions.DRAWN] != [
        q.answer(q.params(two)) for q in kv_questions.DRAWN
    ]


def test_the_cli_help_spells_summarise_as_the_project_does():
    import click

    def helps(command: click.Command, path: str):
        yield path, command.help or ""
        for param in command.params:
            yield f"{path} {param.name}", getattr(param, "help", None) or ""
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from helps(sub, f"{path} {name}")

    american = [where for where, text in helps(main, "grade") if "summariz" in text.lower()]
    assert not american, f"the project writes British -ise (summarise, normalise): these say summarize: {american}"
