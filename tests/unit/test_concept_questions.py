"""concepts' questions (grader/suites/hidden/concept_questions.py): every wrong option teaches, the stub states the
drawn questions with the lesson's numbers, the reference answers them, a student's numbers are stable and keep
each usual mistake apart, and every item has a wrong answer or implementation in the corpus whose message says
what it misses."""

from __future__ import annotations

import ast
import runpy

import pytest

from corpus import concepts as corpus
from grader.suites.bank import stub_comment
from grader.suites.hidden import concept_questions
from grader.suites.questions import MultipleChoice
from grader.variants import LESSON, Variant, seed_of
from helpers import EXERCISES, SOLUTIONS

STUB = (EXERCISES / "m12_concepts.py").read_text()
REFERENCE = runpy.run_path(str(SOLUTIONS / "m12_concepts.py"))
SECRET = "3" * 64


def test_the_stub_asks_the_banks_questions_in_order():
    assigned = [n.targets[0].id for n in ast.parse(STUB).body if isinstance(n, ast.Assign)]
    assert [name for name in assigned if name.startswith("Q_")] == concept_questions.IDS


@pytest.mark.parametrize("question", concept_questions.FIXED, ids=lambda q: q.id)
def test_every_wrong_option_of_a_multiple_choice_has_feedback_of_its_own(question):
    if not isinstance(question, MultipleChoice):
        pytest.skip("not multiple choice")
    if question.several:  # each wrong choice alone, and each right set missing one letter
        wanted = [c for c in question.choices if c not in question.answer]
        wanted += ["".join(sorted(set(question.answer) - {c})) for c in question.answer]
    else:
        wanted = [c for c in question.choices if c != question.answer]
    for option in wanted:
        verdict = question.mark(option)
        assert not verdict.correct and question.wrong.get(option), (question.id, option)
        assert question.wrong[option] in verdict.message


@pytest.mark.parametrize("question", concept_questions.DRAWN, ids=lambda q: q.id)
def test_the_stub_states_the_drawn_question_with_the_lessons_numbers(question):
    assert stub_comment(STUB, question.id) == question.comment(question.lesson)


@pytest.mark.parametrize("question_id", concept_questions.IDS)
def test_the_reference_answers_every_question(question_id):
    assert concept_questions.question(question_id, LESSON).mark(REFERENCE[question_id]).correct


@pytest.mark.parametrize("question", concept_questions.DRAWN, ids=lambda q: q.id)
def test_a_students_numbers_are_stable_vary_and_keep_the_usual_mistakes_apart(question):
    variants = [Variant(seed_of(SECRET, "practice-2", f"student{i}")) for i in range(40)]
    drawn = [question.params(v) for v in variants]
    assert drawn == [question.params(v) for v in variants], "the same student, the same numbers"
    assert len({question.answer(p) for p in drawn}) >= 4, "students' answers differ"
    for params, variant in zip(drawn, variants):
        marked = question.marked(variant)
        assert marked.mark(question.answer(params)).correct
        for value, feedback in question.wrong(params):  # each mistake is recognised and named, never passed
            verdict = marked.mark(value)
            assert not verdict.correct and feedback.split(";")[0] in verdict.message, (params, value)


def body_lines(name: str) -> str:
    source = (SOLUTIONS / "m12_concepts.py").read_text()
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name)
    return "\n".join(source.splitlines()[node.lineno - 1 : node.end_lineno])


GRADED_FUNCTIONS = ["decoder_layer_extra", "teacher_forced_losses", "prefix_losses", "counterexample", "overflow_error"]


@pytest.mark.parametrize("item", [*GRADED_FUNCTIONS, *concept_questions.IDS])
def test_every_item_has_a_wrong_version_in_the_corpus_that_fails_with_a_teaching_message(item):
    """The corpus grades each variant (tests/corpus/test_corpus.py); here: each item has one, and for a question
    its expected phrase is the feedback on that wrong answer, not the working every wrong answer gets."""
    olds = [(v, old) for v in corpus.BUGGY for old, _ in v.edits["m12_concepts.py"]]
    if item in GRADED_FUNCTIONS:
        assert any(old.strip() in body_lines(item) for _, old in olds), f"no corpus bug in {item}"
        return
    variants = [v for v, old in olds if old.startswith(f"{item} = ")]
    assert variants, f"no wrong answer to {item} in the corpus"
    question = concept_questions.question(item, LESSON)
    for variant in variants:
        assert variant.expect not in question.why, f"{variant.name}: its phrase is the working, not its feedback"
