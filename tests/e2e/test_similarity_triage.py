"""`grade similarity` as an instructor sorts through it: one row per pair, ranked; what most of the class wrote the
same way (the quiz's answers, a function from the same tutorial) counts for no pair, and a copy of what most did
not write that way still does; a pair's files side by side in a page that shows a student's hostile text as text;
a roster's missing students and strangers named.

The classes are generated (tests/similarity_class.py): every student fills the stubs with code of their own and
answers the quiz, mostly right; most open their functions with the same line."""

from __future__ import annotations

import html
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from helpers import SOLUTIONS, cli
from similarity_class import COMMON_OPENING, disguise, make_class

pytest.importorskip("copydetect")

from grader import similarity as sim  # noqa: E402  # after the skip: it needs copydetect to fingerprint

COPY = ("s03", "s17")


@pytest.fixture(scope="module")
def a_class(tmp_path_factory) -> Path:
    """25 students, s17's files a disguised copy of s03's (names, order, comments, a dead line after each)."""
    root = tmp_path_factory.mktemp("similarity") / "class"
    make_class(root, 25, seed=0, copy=(3, 17))
    return root


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> Path:
    """25 students, no copy; 15 of them wrote m4's generate as the reference does (the same tutorial)."""
    root = tmp_path_factory.mktemp("similarity") / "honest"
    make_class(root, 25, seed=1, copy=None)
    reference = (SOLUTIONS / "m4_generate.py").read_text()
    for i in range(1, 16):
        (root / f"s{i:02d}" / "m4_generate.py").write_text(reference)
    return root


@pytest.fixture(scope="module")
def read(a_class) -> sim.Class:
    return sim.read_class(a_class)


def share(one: frozenset[int], other: frozenset[int]) -> float:
    return len(one & other) / min(len(one), len(other))


def test_the_disguised_pair_is_flagged_first_and_alone(a_class, read):
    found = json.loads(sim.render(read, sim.file_pairs(read), sim.THRESHOLD, "json"))
    assert found["students"] == 25
    assert [(p["a"], p["b"]) for p in found["pairs"]] == [COPY], found["pairs"]
    top = found["pairs"][0]
    assert top["score"] >= 0.95 and len(top["files"]) >= 12, top  # every file they wrote, not one
    proc = cli("similarity", str(a_class))
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout
    assert table.splitlines()[1].split()[:4] == ["100%", "s03", "/", "s17"], table
    assert "1 pair of the 25 students at or above 60%" in table


def test_the_quiz_answers_every_student_shares_flag_no_pair(read):
    """Those who answered every question right hold the same quiz, 100% alike before the discount; with it they
    are compared on nothing, and no pair is flagged on the quiz but the copy (who shares s03's wrong answers)."""
    klass = read
    quiz = klass.files["quiz.py"]
    reference = sim.file_fingerprints((SOLUTIONS / "quiz.py").read_text(), sim.read_stubs(sim.STUBS)["quiz.py"])
    right = [s for s, w in quiz.items() if w.prints and w.prints <= reference]
    assert len(right) >= 3, right
    assert all(quiz[s].prints == quiz[right[0]].prints for s in right)  # what the discount has to undo
    assert all(not klass.own["quiz.py"][s] for s in right)
    flagged = {(p.a, p.b) for p in sim.file_pairs(klass) if p.file == "quiz.py" and p.score >= sim.THRESHOLD}
    assert flagged == {COPY}, flagged


def test_an_honest_class_flags_nothing(honest):
    """Nobody copied; 15 of 25 wrote m4 as the reference does, which the stubs' text does not cover: most of the
    class, so it counts for none of them."""
    klass = sim.read_class(honest)
    m4 = klass.files["m4_generate.py"]
    assert share(m4["s01"].prints, m4["s02"].prints) == 1.0  # the same function: 100% before the discount
    assert len(klass.common["m4_generate.py"]) >= sim.MIN_FINGERPRINTS
    assert json.loads(sim.render(klass, sim.file_pairs(klass), sim.THRESHOLD, "json"))["pairs"] == []
    proc = cli("similarity", str(honest))
    assert proc.returncode == 0 and "no pair of the 25 students at or above 60%" in proc.stdout, proc.stdout


def test_the_discount_does_not_hide_a_copy_of_what_most_wrote_otherwise(honest, tmp_path):
    """s20's m2 becomes a disguised copy of s21's: most of the class opens functions with the same line (taken
    out), but nobody else wrote the rest of s21's m2, so the pair is flagged on it all the same."""
    root = tmp_path / "class"
    shutil.copytree(honest, root)
    original = (root / "s21" / "m2_model.py").read_text()
    assert COMMON_OPENING in original  # the common line is in the copied file: the discount applies to it
    chunks = original.split("\n\n\n")
    (root / "s20" / "m2_model.py").write_text(disguise(chunks, random.Random(0)))
    klass = sim.read_class(root)
    assert klass.common["m2_model.py"], "the class shares code in m2: the discount is at work on this file"
    rows = sim.pair_scores(sim.file_pairs(klass), sim.THRESHOLD)
    assert [(r.a, r.b) for r in rows] == [("s20", "s21")], rows
    assert [(p.file, p.score) for p in rows[0].files] == [("m2_model.py", 1.0)]


def test_a_pair_side_by_side_escapes_hostile_text(tmp_path):
    """The page shows both files, the shared code marked, the score at the top; a student's `</script>`,
    `<img onerror>` and even their folder's name are text in it, never markup."""
    root = tmp_path / "class"
    make_class(root, 4, seed=2, copy=None)
    hostile = '"<img src=x onerror=alert(1)>"'
    body = (
        f"\n\n\ndef _banner(x):\n    # </script><script>alert(1)</script>\n    return x + {hostile} * 3 + x.sum(-1)\n"
    )
    m1 = (root / "s01" / "m1_attention.py").read_text() + body
    (root / "s01" / "m1_attention.py").write_text(m1)
    evil = root / "<b onmouseover=alert(2)>eve"
    evil.mkdir()
    (evil / "m1_attention.py").write_text(disguise(m1.split("\n\n\n"), random.Random(1)))
    out = tmp_path / "view.html"
    proc = cli("similarity", str(root), "--pair", "s01", evil.name, "--html", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;/script&gt;&lt;script&gt;" in page
    assert "&lt;b onmouseover=alert(2)&gt;eve" in page
    assert "<img" not in page and "<script" not in page and "<b onmouseover" not in page
    assert "100%" in page.split("<h2>")[0]  # the score at the top
    assert marked(page, "m1_attention.py") > 0.8  # the copy: nearly all of it marked
    other = tmp_path / "other.html"  # an honest pair: little of theirs marked
    assert cli("similarity", str(root), "--pair", "s02", "s03", "--html", str(other)).returncode == 0
    assert marked(other.read_text(), "m1_attention.py") < 0.3


def marked(page: str, file: str) -> float:
    """The share of the characters shown of ``file`` (both sides, as compared) marked in common and counted."""
    section = next(s for s in page.split("<h2>") if s.startswith(file))
    shown = re.findall(r"<h3>.*?</h3>\s*<pre>(.*?)</pre>", section, re.S)
    total = sum(len(html.unescape(re.sub("<[^>]+>", "", text))) for text in shown)
    inside = re.findall(r'<mark class="match">(.*?)</mark>', "".join(shown), re.S)
    return sum(len(html.unescape(text)) for text in inside) / total


def test_a_roster_names_who_has_no_files_and_who_is_not_on_it(tmp_path):
    root = tmp_path / "class"
    make_class(root, 3, seed=3, copy=None)
    (root / "stray").mkdir()
    (root / "stray" / "m1_attention.py").write_text((SOLUTIONS / "m1_attention.py").read_text())
    roster = tmp_path / "roster.csv"
    roster.write_text("student,email\ns01,a@x\ns02,b@x\ns03,c@x\nzoe,z@x\n")
    found = json.loads(cli("similarity", str(root), "--roster", str(roster), "--format", "json").stdout)
    assert found["no_files"] == ["zoe"] and found["not_on_roster"] == ["stray"], found
    table = cli("similarity", str(root), "--roster", str(roster)).stdout
    assert "no files to compare: zoe" in table and "not on the roster (compared all the same): stray" in table
    plain = cli("similarity", str(root)).stdout  # optional: without one, nobody is missing or a stranger
    assert "zoe" not in plain and "not on the roster" not in plain


def test_bad_options_are_said_plainly(tmp_path):
    root = tmp_path / "class"
    make_class(root, 2, seed=4, copy=None)
    alone = cli("similarity", str(root), "--html", str(tmp_path / "x.html"))
    assert alone.returncode == 2 and "--html needs --pair A B" in alone.stderr, alone.stderr
    unknown = cli("similarity", str(root), "--pair", "s01", "nobody")
    assert unknown.returncode == 2 and "nobody is not one" in unknown.stderr, unknown.stderr
    assert "Traceback" not in alone.stderr + unknown.stderr
    bad = tmp_path / "roster.csv"
    bad.write_text("name\ns01\n")
    refused = cli("similarity", str(root), "--roster", str(bad))
    assert refused.returncode == 2 and "student column" in refused.stderr and "Traceback" not in refused.stderr
