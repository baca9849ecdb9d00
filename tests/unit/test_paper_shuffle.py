"""A paper asks each student its fixed questions in their own way: a multiple choice's options drawn from a hidden
pool (never the lesson's own words) in an order drawn from the student's seed, and a listing drawn from a hidden
pool, its lines numbered from a first line of their own. The release's locked answers hold the lesson's letters,
options and line numbers: hash-searched out of the release, and even carried across by the lesson's options' words
or the listing's code, they answer a contest student's paper no better than a guess (the attacks below). The
rendered notebook, the hidden grading (which ``grade check``, ``grade practice`` and the contest all run with the
student's variant) and the locks agree on what each student was asked.

The attacks' tests use only what the kit had before options were drawn per student, so that they run, and fail,
on it; the tests of the new pieces import them where they use them.
"""

from __future__ import annotations

import re
import statistics
from itertools import combinations
from typing import Any

import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.paper import render
from grader.paper.config import load
from grader.suites import locked
from grader.suites.bank import stub_comment
from grader.suites.hidden import concept_questions, kv_questions
from grader.suites.locked_answers import LOCKED
from grader.suites.questions import MultipleChoice
from grader.variants import LESSON, Variant, seed_of
from helpers import EXERCISES, REPO

SECRET = "9" * 64
PRACTICE_1, PRACTICE_2 = REPO / "papers" / "practice-1", REPO / "papers" / "practice-2"
STUDENTS = [f"student{i:03d}" for i in range(200)]
BANKS = {"concepts": (concept_questions, "m12_concepts"), "kvmemory": (kv_questions, "m11_kvmemory")}
POINTS_PER_QUESTION = 2  # practice paper 2: concepts' 66 points, each question 2 (papers/practice-2/README.md)


# ---------------------------------------------------------------- the attack: the release's locks, hash-searched


def search_locks(exercise: str) -> dict[str, Any]:
    """What a student with the release finds by hashing guesses against its locks (``locked.is_right``, the
    release's own check): every set of letters of each multiple choice, each whole number up to 100 and the
    attention variants' names. The red team's search: every multiple choice and the small numbers."""
    found: dict[str, Any] = {}
    for question, lock in LOCKED[exercise].items():
        if lock["kind"] == "letters":
            choices = lock["choices"]
            guesses: list[Any] = ["".join(c) for n in range(1, len(choices) + 1) for c in combinations(choices, n)]
        elif lock["kind"] == "number":
            guesses = list(range(101))
        else:
            guesses = ["mha", "mqa", "gqa", "mla"]
        hit = next((g for g in guesses if locked.is_right(question, g, lock)), None)
        if hit is not None:
            found[question] = hit
    return found


@pytest.fixture(scope="module")
def release_answers() -> dict[str, dict[str, Any]]:
    return {exercise: search_locks(exercise) for exercise in BANKS}


def marked(exercise: str, question: str, variant: Variant, value: Any) -> bool:
    """Whether the hidden grading (the contest's, with the student's variant) takes ``value`` for ``question``."""
    return BANKS[exercise][0].question(question, variant).mark(value).correct


def students(paper: str) -> list[Variant]:
    return [Variant(seed_of(SECRET, paper, who)) for who in STUDENTS]


def test_the_search_finds_the_lessons_answers_in_the_release(release_answers):
    """The attack works on the release's own check: every multiple choice and the line number, as the lesson asks."""
    concepts = release_answers["concepts"]
    fixed = [q.id for q in concept_questions.FIXED]
    assert set(fixed) <= set(concepts), set(fixed) - set(concepts)
    assert all(marked("concepts", q, LESSON, concepts[q]) for q in concepts)
    assert {"Q_MC1", "Q_MC2", "Q_TEXT1"} <= set(release_answers["kvmemory"])


def test_the_releases_answers_score_no_better_than_chance_on_a_contest_students_fixed_questions(release_answers):
    """Practice paper 2's concepts part for 200 students: the hash-searched answers used to score 26 of 66 each
    (12 multiple choice and the line number); now the multiple choice is right about as often as a guess (the right
    option is at any letter of a student's own, the lesson's one time in four) and the line number never."""
    concepts = release_answers["concepts"]
    choice = [q.id for q in concept_questions.FIXED if isinstance(q, MultipleChoice)]
    right = {q: [marked("concepts", q, v, concepts[q]) for v in students("practice-2")] for q in choice}
    rate = statistics.mean(r for q in choice for r in right[q])
    assert rate < 0.32, f"the release's letters are right {rate:.0%} of the time; a guess is 25%"
    assert all(statistics.mean(right[q]) < 0.4 for q in choice), {q: statistics.mean(right[q]) for q in choice}
    assert not any(marked("concepts", "Q_BUGLINE", v, concepts["Q_BUGLINE"]) for v in students("practice-2"))
    fixed_points = [
        POINTS_PER_QUESTION * sum(marked("concepts", q, v, concepts[q]) for q in [*choice, "Q_BUGLINE"])
        for v in students("practice-2")
    ]
    assert statistics.mean(fixed_points) < 8, "chance is 12 x 2 points / 4 = 6 of the 26"


def test_the_releases_answers_to_kvmemorys_multiple_choice_score_no_better_than_chance(release_answers):
    kv = release_answers["kvmemory"]
    for question in ("Q_MC1", "Q_MC2"):
        rate = statistics.mean(marked("kvmemory", question, v, kv[question]) for v in students("practice-1"))
        assert rate < 0.4, (question, rate)


def test_the_release_still_checks_a_student_grading_alone():
    """The lesson's variant keeps the stub's order: the locks (the lesson's) still say right or wrong there."""
    for exercise, (bank, _) in BANKS.items():
        for question in bank.IDS:
            assert bank.question(question, LESSON) == bank.question(question, Variant())
            lock = LOCKED[exercise][question]
            if lock["kind"] == "letters":
                answer = bank.question(question, LESSON).answer
                assert locked.is_right(question, answer, lock)


# ---------------------------------------------------------------- the notebook and the grading agree


def cells(notebook: dict) -> dict[str, str]:
    return {c["id"]: "".join(c["source"]) for c in notebook["cells"]}


OPTION_LINE = re.compile(r"^#   \(([a-z])\) (.*)$")


def shown_options(cell: str, question: str) -> dict[str, str]:
    """The options of ``question`` as the student's notebook shows them: letter -> text, each on its own line
    ("#   (b) text", continued by "#       more")."""
    comment = stub_comment(cell, question)
    assert comment is not None, cell
    options: dict[str, str] = {}
    letter = None
    for line in comment.splitlines():
        if found := OPTION_LINE.match(line):
            letter = found[1]
            options[letter] = found[2]
        elif letter and line.startswith("#       "):
            options[letter] += " " + line.removeprefix("#").strip()
    return options


def lesson_options(module: str, question: str) -> dict[str, str]:
    from grader.suites.bank import Shuffled

    comment = stub_comment((EXERCISES / f"{module}.py").read_text(), question)
    assert comment is not None
    choices = LOCKED["concepts" if module == "m12_concepts" else "kvmemory"][question]["choices"]
    _, options = Shuffled(question, choices).options(comment)
    return dict(zip(choices, options))


@pytest.mark.parametrize(
    "question,text",
    [
        ("Q_SHAPE", "(B, t, vocab_size)"),
        ("Q_FAMILIES", "BERT encoder-only, GPT decoder-only, T5 encoder-decoder"),
        ("Q_BLOCK", "it has no cross-attention"),
        ("Q_MASKDIR", "a mask pointing the wrong way, so each position sees its next token"),
        (
            "Q_LIE",
            "at a fixed compute budget Chinchilla grows parameters and tokens together, about 20 tokens per parameter",
        ),
    ],
)
def test_the_stubs_options_are_read_whole(question, text):
    assert text in lesson_options("m12_concepts", question).values()


def reletter(text: str, letters: dict[str, str]) -> str:
    """``text`` with each option it names, "(c)", named by ``letters`` (a lesson's letter -> a student's)."""
    return re.sub(r"\(([a-d])\)", lambda m: f"({letters[m[1]]})", text)


def pools(exercise: str) -> dict[str, Any]:
    from grader.suites.bank import Pooled

    return {spec.id: spec for spec in BANKS[exercise][0].REORDERED if isinstance(spec, Pooled)}


@pytest.mark.parametrize("paper,exercise", [(PRACTICE_2, "concepts"), (PRACTICE_1, "kvmemory")])
def test_each_students_notebook_shows_the_options_the_grading_marks(paper, exercise):
    """For 40 students: every option shown is one of the hidden pool's and none is the lesson's; the letters the
    grading takes are those of the pool's right options shown, as many as were drawn (exactly one where one is
    right); a wrong letter gets the feedback of the option shown there; and students see different options."""
    sheet = load(paper)
    bank, module = BANKS[exercise]
    drawn: dict[str, set[frozenset[str]]] = {}
    for who in STUDENTS[:40]:
        variant = Variant(seed_of(SECRET, sheet.id, who))
        book = cells(render.build(sheet, who, variant.seed))
        for lesson_question in [q for q in bank.FIXED if isinstance(q, MultipleChoice)]:
            qid, pool = lesson_question.id, pools(exercise)[lesson_question.id]
            shown = shown_options(book[f"{exercise}-{qid}-answer"], qid)
            right = {o.text: o.feedback for o in pool.right}
            wrong = {o.text: o.feedback for o in pool.wrong}
            assert len(shown) == 4 and set(shown.values()) <= set(right) | set(wrong), (who, qid, shown)
            assert not set(shown.values()) & set(lesson_options(module, qid).values()), (who, qid)
            asked = bank.question(qid, variant)
            assert asked.answer == "".join(c for c, text in sorted(shown.items()) if text in right), (who, qid)
            assert asked.mark(asked.answer).correct
            if not lesson_question.several:
                assert len(asked.answer) == 1
                for letter, text in shown.items():
                    if text in wrong:
                        assert asked.wrong[letter] == wrong[text], (who, qid, letter)
                        assert wrong[text] in asked.mark(letter).message
            else:
                missed = asked.answer[0]
                chosen = "".join(sorted(set(asked.answer) - {missed})) or next(c for c in "abcd" if c != missed)
                assert right[shown[missed]] in asked.mark(chosen).message, (who, qid)
            drawn.setdefault(qid, set()).add(frozenset(shown.values()))
    assert all(len(seen) >= 10 for seen in drawn.values()), {q: len(s) for q, s in drawn.items()}


def test_no_pool_option_is_the_lessons_or_holds_one():
    """A pool's option that were a lesson's option, or held one word for word, would carry the release's key across
    by its words: every option of every pool is checked, not only those drawn."""
    for exercise, (_, module) in BANKS.items():
        for qid, pool in pools(exercise).items():
            lesson = [text.lower() for text in lesson_options(module, qid).values()]
            for option in (*pool.right, *pool.wrong):
                text = option.text.lower()
                assert not any(text in own or own in text for own in lesson), (qid, option.text)


def test_each_students_listing_is_one_of_the_pools_numbered_from_their_own_line_and_marked_on_it():
    from grader.suites.hidden.concept_pools import BUGLINE

    sheet = load(PRACTICE_2)
    firsts, wrong_lines = set(), set()
    for who in STUDENTS[:40]:
        variant = Variant(seed_of(SECRET, sheet.id, who))
        cell = cells(render.build(sheet, who, variant.seed))["concepts-Q_BUGLINE-answer"]
        numbered = {int(n): code for n, code in re.findall(r"^#\s+(\d+)  (.*)$", cell, re.M)}
        first = min(numbered)
        drawn = next(pool for pool in BUGLINE if pool.lines == tuple(numbered[first + i] for i in range(5)))
        asked = concept_questions.question("Q_BUGLINE", variant)
        assert asked.answer == first + drawn.bug - 1, (who, cell)
        assert asked.mark(str(int(asked.answer))).correct and not asked.mark(drawn.bug).correct
        other = next(line for line in drawn.feedback)
        assert drawn.feedback[other] in asked.mark(first + other - 1).message
        assert drawn.feedback[other] not in asked.mark(first + other - 2).message, "a line number is exact"
        assert "targets = data[:, :-1]" not in numbered.values(), "the lesson's wrong line is no student's"
        firsts.add(first)
        wrong_lines.add(drawn.bug)
    assert len(firsts) >= 10 and 1 not in firsts
    assert len(wrong_lines) >= 4, "the wrong line is on a line of the listing's own, not the lesson's"


def test_the_lessons_notebook_is_the_stubs_own():
    """Without a student: the stub's comments as they are, the lesson's order and line numbers."""
    for paper, exercise in [(PRACTICE_2, "concepts"), (PRACTICE_1, "kvmemory")]:
        bank, module = BANKS[exercise]
        book = cells(render.build(load(paper)))
        stub = (EXERCISES / f"{module}.py").read_text()
        for question in bank.FIXED:
            assert stub_comment(book[f"{exercise}-{question.id}-answer"], question.id) == stub_comment(
                stub, question.id
            )


def test_a_students_order_is_stable_and_the_lessons_is_the_stubs():
    a, b = Variant(seed_of(SECRET, "p", "ann")), Variant(seed_of(SECRET, "p", "bob"))
    assert LESSON.order("Q_X", 4) == (0, 1, 2, 3)
    assert a.order("Q_X", 4) == a.order("Q_X", 4)
    assert sorted(a.order("Q_X", 4)) == [0, 1, 2, 3]
    orders = [Variant(seed_of(SECRET, "p", who)).order("Q_X", 4) for who in STUDENTS]
    assert len(set(orders)) == 24, "every order can be drawn"
    assert sum(o == (0, 1, 2, 3) for o in orders) < 30, "the lesson's order is one of 24, not a favourite"
    assert [a.order(q, 4) for q in ("Q_X", "Q_Y", "Q_Z")] != [b.order(q, 4) for q in ("Q_X", "Q_Y", "Q_Z")]
    # the order draws from a generator of its own: a question's numbers are as they were
    first = [q.params(a) for q in concept_questions.DRAWN]
    assert first == [q.params(a) for q in concept_questions.DRAWN]


def test_reordering_a_question_reletters_its_key_and_the_options_its_feedback_names():
    question = MultipleChoice(
        "Q", answer="ab", why="(a) and (b) both hold", wrong={"a": "(b) holds too", "c": "no", "abc": "not (c)"}
    )
    moved = question.reordered((2, 0, 1, 3))  # shown: c, a, b, d
    assert moved.answer == "bc" and moved.why == "(b) and (c) both hold"
    assert dict(moved.wrong) == {"b": "(c) holds too", "a": "no", "abc": "not (a)"}
    assert moved.mark("c, b").correct and not moved.mark("ab").correct
    assert "(c) holds too" in moved.mark("b").message
    with pytest.raises(ValueError):
        question.reordered((0, 0, 1, 2))


# ---------------------------------------------------------------- the release's check on a paper's notebook


def test_a_lock_of_a_question_asked_per_student_judges_only_the_lessons_numbers():
    """The public checks' rule (``locked.judges``): a lock holds the lesson's key, which a paper's student was not
    asked for their drawn and reordered questions: there it says only that they answered."""
    for exercise, (bank, _) in BANKS.items():
        own = {q.id for q in bank.DRAWN} | {r.id for r in bank.REORDERED}
        for question, lock in LOCKED[exercise].items():
            assert locked.judges(lock, seeded=False)
            assert locked.judges(lock, seeded=True) == (question not in own), question
    assert all(locked.judges(lock, seeded=True) for lock in LOCKED["quiz"].values())


def test_paper_check_says_what_is_each_students_own_and_what_the_release_answers():
    result = CliRunner().invoke(main, ["paper", "check", str(PRACTICE_2)])
    assert result.exit_code == 0, result.output
    assert "options drawn for each student from a hidden pool, in their own order, in Q_BLOCK" in result.output
    assert "numbered from each student's own first line in Q_BUGLINE" in result.output
    assert "they answer none of Q_BLOCK" in result.output and "Q_SHAPE, Q_BUGLINE" in result.output
    assert "the release's locked answers answer them: Q1, Q2" in result.output  # the quiz: the same for everyone
    assert "--no-answer-locks" in result.output, "what to hand a class for the questions the release answers"
    result = CliRunner().invoke(main, ["paper", "check", str(PRACTICE_1)])
    assert "own order, in Q_MC1, Q_MC2" in result.output and "answer them: Q_TEXT1" in result.output
    assert "answer none of Q_MC1, Q_MC2" in result.output


def test_the_release_answers_a_papers_student_only_where_a_question_keeps_the_lessons_words(monkeypatch):
    """What `grade contest check` and `grade paper check` warn of (``release_answers``): the questions asked alike
    (the quiz, Q_TEXT1), never those drawn or shown from a pool; a question only reordered would count again."""
    from grader.paper import commands
    from grader.suites.bank import Numbered, Shuffled

    assert commands.release_answers("concepts") == []
    assert commands.release_answers("kvmemory") == ["Q_TEXT1"]
    assert commands.release_answers("quiz") == [f"Q{i}" for i in range(1, 9)]
    monkeypatch.setattr(render, "reordered", lambda part: [Shuffled("Q_BLOCK"), Numbered("Q_BUGLINE", lines=5)])
    assert commands.release_answers("concepts") == ["Q_BLOCK", "Q_BUGLINE"]


# ---------------------------------------------------------------- the attack, one step further: by the options' words

LISTING_LINE = re.compile(r"^#\s+(\d+)  (.*)$")


def listing(cell: str) -> dict[str, int]:
    """Q_BUGLINE's listing as a notebook or the stub shows it: each line's code -> its number."""
    comment = stub_comment(cell, "Q_BUGLINE")
    assert comment is not None, cell
    return {found[2]: int(found[1]) for line in comment.splitlines() if (found := LISTING_LINE.match(line))}


def likeness(a: str, b: str) -> float:
    """The share of words two texts have in common (Jaccard): how a student finds the lesson's option, or line, among
    their own without reading the question."""
    x, y = (set(re.findall(r"[a-z0-9_]+", t.lower())) for t in (a, b))
    return len(x & y) / len(x | y) if x | y else 0.0


def nearest(texts: dict[str, Any], keys: list[str], n: int) -> list[Any]:
    """The ``n`` names in ``texts`` (name -> text) whose texts are nearest in words to any of ``keys``."""
    return sorted(texts, key=lambda name: -max(likeness(texts[name], key) for key in keys))[:n]


def test_attack_the_releases_key_carried_across_by_the_options_words_scores_no_better_than_chance(release_answers):
    """The search above, then one mechanical step: each right lesson option's words are looked for among the student's
    own options (the options, as many as the lesson's key has letters, that share the most words with the lesson's
    right ones), and the listing's wrong line by its code (the line nearest it in words). When a student's notebook
    showed the lesson's options and listing lines, reordered, this found every key: 26 of the 26 points for 40
    students of practice paper 2. A student shown options and a listing drawn from the hidden pools scores what a
    guess scores (12 questions of four options, 2 points each: 6 points, and a few for Q_BLOCK and the line)."""
    sheet = load(PRACTICE_2)
    concepts = release_answers["concepts"]
    stub = (EXERCISES / "m12_concepts.py").read_text()
    lesson_lines = {number: code for code, number in listing(stub).items()}
    choice = [q.id for q in concept_questions.FIXED if isinstance(q, MultipleChoice)]
    points = []
    for who in STUDENTS[:40]:
        variant = Variant(seed_of(SECRET, sheet.id, who))
        book = cells(render.build(sheet, who, variant.seed))
        right = 0
        for qid in choice:
            lesson = lesson_options("m12_concepts", qid)
            keys = [lesson[letter] for letter in concepts[qid]]
            shown = shown_options(book[f"concepts-{qid}-answer"], qid)
            right += marked("concepts", qid, variant, "".join(sorted(nearest(shown, keys, len(keys)))))
        lines = {number: code for code, number in listing(book["concepts-Q_BUGLINE-answer"]).items()}
        (line,) = nearest(lines, [lesson_lines[concepts["Q_BUGLINE"]]], 1)
        right += marked("concepts", "Q_BUGLINE", variant, line)
        points.append(POINTS_PER_QUESTION * right)
    assert statistics.mean(points) < 8, f"the carried-across key scores {statistics.mean(points)} of 26 on average"


def test_a_pool_that_cannot_fill_every_draw_or_lacks_feedback_is_refused_with_a_message():
    from grader.suites.bank import Listing, Numbered, Option, Pooled

    right = tuple(Option(f"right {i}", "why it holds") for i in range(3))
    wrong = tuple(Option(f"wrong {i}", "what it gets wrong") for i in range(3))
    assert Pooled("Q", right=right[:1], wrong=wrong).drawn(Variant(1))  # one right and three wrong fill a draw
    with pytest.raises(ValueError, match="cannot fill 4 options"):
        Pooled("Q", right=right, wrong=wrong[:2])
    with pytest.raises(ValueError, match="cannot fill 4 options"):
        Pooled("Q", right=right[:2], wrong=wrong, several=True)  # up to three may be drawn right
    with pytest.raises(ValueError, match="its own text and its feedback"):
        Pooled("Q", right=(Option("right 0", ""),), wrong=wrong)
    with pytest.raises(ValueError, match="the lesson's options are the stub's"):
        Pooled("Q", right=right, wrong=wrong).drawn(LESSON)
    listing = Listing(("a", "b", "c"), bug=2, feedback={1: "a is right", 3: "c is right"}, why="b is wrong")
    assert Numbered("Q", lines=3, pool=(listing,)).listing(Variant(1)) == listing
    with pytest.raises(ValueError, match="feedback on each other"):
        Listing(("a", "b", "c"), bug=2, feedback={1: "a is right"}, why="b is wrong")
    with pytest.raises(ValueError, match="has 5 lines"):
        Numbered("Q", lines=5, pool=(listing,))
