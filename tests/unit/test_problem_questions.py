"""The `problems` exercise's bank (grader/suites/hidden/problem_questions.py) and its rule, without grading a
submission: the stub asks what the bank marks, the lesson's answers are the ones worked by hand, every part of a
problem shares its stem's numbers, each student's numbers keep the usual mistakes apart, each usual wrong answer
fails with the feedback that names it while the right one passes, and ``numpy-only`` reads torch in the source and
in the counts, and nothing else."""

from __future__ import annotations

import ast
import math

import pytest

from grader.paper.config import RULES, PaperFileError, load, parse
from grader.suites import rules
from grader.suites.bank import stub_comment
from grader.suites.hidden import problem_questions as bank
from grader.suites.questions import MultipleChoice
from grader.variants import LESSON, Variant, seed_of
from helpers import EXERCISES, REPO, reference_answers

STUB = (EXERCISES / "m13_problems.py").read_text()
REFERENCE = reference_answers("m13_problems")
STUDENTS = [Variant(seed_of("s" * 64, "practice-3", f"student{i}")) for i in range(40)]

# The lesson's checkpoints, worked by hand (solutions.md), not read back from the bank.
BY_HAND = {
    "Q_A1": 64,  # d_k
    "Q_A2": 1,
    "Q_A4": 2 * 1024 * 1024 * 64,
    "Q_A5": 4,  # the context doubled: 2^2
    "Q_B1": -0.3410,  # softmax([2, 1, 0.1])[0] = 0.6590, minus 1
    "Q_B2": 0.0986,
    "Q_B3": 7.44e18,  # 6 x 1.24e8 x 1e10
    "Q_C1": 37_748_736,  # 2 x 12 x 768 x 2 bytes x 1,024 tokens: 36 MiB
    "Q_C2": 390,  # 10 + 11 + ... + 29, the companion page's figure
    "Q_C3": 29,  # 10 + 19
    "Q_D1": 7e10,  # Chinchilla's own 70e9 parameters
    "Q_D2": 1.4e12,  # and 1.4e12 tokens
}


def test_the_stub_asks_the_banks_questions_in_its_order():
    tree = ast.parse(STUB)
    assigned = [n.targets[0].id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)]
    assert [name for name in assigned if name.startswith("Q_")] == bank.IDS
    for question in bank.DRAWN:  # one source for each statement: the stub's comment is the lesson's rendering
        assert stub_comment(STUB, question.id) == question.comment(question.lesson), question.id
    for spec in bank.REORDERED:  # each multiple choice's four options are read back whole from the stub
        comment = stub_comment(STUB, spec.id)
        assert comment is not None
        asked, options = spec.options(comment)
        assert asked.endswith("?") and len(options) == 4 and all(options), (spec.id, options)


@pytest.mark.parametrize("question_id", list(BY_HAND))
def test_the_lessons_answers_are_the_ones_worked_by_hand(question_id):
    question = bank.question(question_id, LESSON)
    assert math.isclose(question.answer, BY_HAND[question_id], rel_tol=2e-3), (question.answer, question_id)


@pytest.mark.parametrize("question_id", bank.IDS)
def test_the_references_answer_is_right_and_nothing_is_not(question_id):
    question = bank.question(question_id, LESSON)
    assert question.mark(REFERENCE[question_id]).correct
    assert question.mark(None).unanswered
    if isinstance(question, MultipleChoice):
        for letter in set(question.choices) - set(question.answer):
            verdict = question.mark(letter)
            assert not verdict.correct and question.wrong[letter] in verdict.message, letter


def test_the_parts_of_a_problem_share_its_numbers():
    stems: dict[str, list] = {}
    for question in bank.DRAWN:
        stems.setdefault(question.stem, []).append(question)  # type: ignore[attr-defined]
    assert sorted(stems) == ["A", "B", "B-flops", "C", "D"] and len(stems["A"]) == 4 and len(stems["C"]) == 3
    for variant in [LESSON, *STUDENTS[:10]]:
        for parts in stems.values():
            assert len({str(q.params(variant)) for q in parts}) == 1, [q.id for q in parts]


def test_students_get_numbers_of_their_own():
    lesson = [q.params(LESSON) for q in bank.DRAWN]
    drawn = [[q.params(v) for q in bank.DRAWN] for v in STUDENTS]
    assert all(d != lesson for d in drawn)
    for i, question in enumerate(bank.DRAWN):
        answers = {round(question.answer(d[i]), 9) for d in drawn}
        if question.id != "Q_A2":  # 1 for everyone: only the head size in its words is theirs
            assert len(answers) >= 5, (question.id, answers)
    assert drawn == [[q.params(v) for q in bank.DRAWN] for v in STUDENTS], "a student's numbers are the same each time"


@pytest.mark.parametrize("question", bank.DRAWN, ids=lambda q: q.id)
def test_each_usual_mistake_fails_with_what_it_missed_and_the_answer_passes(question):
    for variant in [LESSON, *STUDENTS]:
        params = question.params(variant)
        marked = question.marked(variant)
        assert marked.mark(question.answer(params)).correct
        assert marked.mark(f"{question.answer(params):,.6g}").correct, "three significant figures, written as text"
        for value, feedback in question.wrong(params):
            if value == question.answer(params):
                continue
            verdict = marked.mark(value)
            assert not verdict.correct and feedback in verdict.message, (question.id, variant, value, verdict)


def test_a_students_multiple_choice_is_marked_in_their_letters():
    for spec in bank.REORDERED:
        lesson = bank.question(spec.id, LESSON)
        assert isinstance(lesson, MultipleChoice)
        moved = next(v for v in STUDENTS if bank.question(spec.id, v).answer != lesson.answer)
        theirs = bank.question(spec.id, moved)
        assert theirs.mark(theirs.answer).correct and not theirs.mark(lesson.answer).correct


# ---------------------------------------------------------------- the numpy-only rule


def source_of(text: str, function: str = "f") -> rules.Source:
    tree = ast.parse(text)
    defined = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    return rules.Source("m13_problems.py", text.splitlines(), [defined[function]], {})


NUMPY = "import numpy as np\nimport torch\n\n\ndef f(x):\n    return np.exp(x - x.max())\n"
TORCH_IN_SOURCE = {
    "import-inside": ("import numpy as np\n\n\ndef f(x):\n    import torch\n    return x\n", "imports torch"),
    "from-import-inside": ("def f(x):\n    from torch.nn import functional\n    return x\n", "imports torch"),
    "module-alias": ("import torch as th\n\n\ndef f(x):\n    return th.tensor(x).numpy()\n", "uses th (from torch)"),
    "submodule-alias": (
        "import torch.nn.functional as F\n\n\ndef f(x):\n    return F.softmax(x, -1)\n",
        "uses F (from torch)",
    ),
    "from-import": ("from torch import softmax\n\n\ndef f(x):\n    return softmax(x, -1)\n", "uses softmax"),
    "by-its-name": ("def f(x):\n    return __import__('torch').tensor(x)\n", "names the module 'torch'"),
}


def test_numpy_code_follows_the_rule_even_in_a_file_that_imports_torch():
    assert rules.NumpyOnly().in_source(source_of(NUMPY)) is None


@pytest.mark.parametrize("case", list(TORCH_IN_SOURCE))
def test_torch_in_the_function_breaks_the_rule(case):
    text, said = TORCH_IN_SOURCE[case]
    found = rules.NumpyOnly().in_source(source_of(text))
    assert found is not None and said in found and "line" in found, found


def test_a_helper_that_uses_torch_breaks_the_rule_of_its_caller(tmp_path):
    text = "import torch\n\n\ndef helper(x):\n    return torch.exp(x)\n\n\ndef f(x):\n    return helper(x)\n"
    (tmp_path / "m13_problems.py").write_text(text)
    source = rules.read_source(tmp_path, "m13_problems", "f")  # the function with the helpers it calls
    assert source is not None
    found = rules.NumpyOnly().in_source(source)
    assert found is not None and "uses torch" in found and "line 5" in found, found


def counts(*seen: tuple[int, set[str]]) -> list[tuple[rules.Growth, list[rules.Count]]]:
    growth = rules.Growth("the batch", rules.Call((), "B = 2"), rules.Call((), "B = 8"))
    return [(growth, [rules.Count(ops, frozenset(names)) for ops, names in seen])]


def test_a_torch_function_dispatched_while_it_runs_breaks_the_rule_and_none_does_not():
    rule = rules.NumpyOnly()
    assert rule.at_run_time("f", counts((0, set()), (0, set()))) is None
    found = rule.at_run_time("f", counts((2, {"softmax", "numpy"}), (2, {"softmax", "numpy"})))
    assert found == "f called torch functions (numpy, softmax) while it ran", found


def test_practice_paper_3_sets_the_rule_on_problems_and_no_other_part_may_take_it():
    paper = load(REPO / "papers" / "practice-3")
    assert paper.feedback.value == "none" and 120 <= paper.minutes <= 180 and paper.total == 100
    assert paper.part("problems").rules == ("numpy-only",) and RULES["numpy-only"][0] == "problems"
    with pytest.raises(PaperFileError, match="applies to problems, not to attnvar"):
        parse('title = "P"\nminutes = 60\n[parts.attnvar]\nrules = ["numpy-only"]\n')
