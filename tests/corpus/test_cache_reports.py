"""The disk cache of the reference's answers (grader/cache.py) never changes a report.

The same submission is graded three times, each in a fresh grading process: with an empty
cache (every answer computed, then written), with the cache that run filled (every answer
read), and with that cache damaged (every entry truncated, altered, emptied, or swapped with
another's). The three reports must agree check by check, message by message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from corpus import BUGGY
from helpers import SOLUTIONS, Variant, grade_many

pytestmark = pytest.mark.slow  # every test here grades whole submissions

# The milestones whose checks use the cache (checks.remembered), each with a bug that makes the report
# carry the reference's numbers in its messages.
BUGS = ("tied-head-counted-twice", "m3-no-zero-grad", "position-not-advanced")
MILESTONES = ["scaling", "m3", "lesson", "kvcache", "attnvar"]


def checks(report: dict) -> list[tuple]:
    return [(c["name"], c["passed"], c["score"], c["message"]) for m in report["milestones"] for c in m["checks"]]


def damage(entries: list[Path]) -> dict[Path, bytes]:
    """Four kinds of damage, in turn; returns what each file was made to hold."""
    done = {}
    for i, path in enumerate(entries):
        data = path.read_bytes()
        kind = i % 4
        if kind == 0:
            data = data[: len(data) // 2]
        elif kind == 1:
            data = data[:-20] + bytes([data[-20] ^ 0x55]) + data[-19:]
        elif kind == 2:
            data = b""
        else:
            data = entries[(i + 1) % len(entries)].read_bytes()  # another key's entry, intact
        path.write_bytes(data)
        done[path] = data
    return done


def mtimes(folder: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*.pt")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("cache")
    variants = [v for v in BUGGY if v.name in BUGS]
    assert len(variants) == len(BUGS), "a bug named here is no longer in the corpus"
    buggy = Variant("cached", edits={f: e for v in variants for f, e in v.edits.items()}).build(root / "buggy")
    folder = root / "cache"
    out: dict = {"reports": {}}

    def grade(name: str) -> None:
        (root / name).mkdir()
        graded = grade_many([(buggy, MILESTONES), (SOLUTIONS, MILESTONES)], root / name, new_process=True)
        assert all(g.report for g in graded), "\n".join(g.stderr for g in graded)
        out["reports"][name] = [g.report for g in graded]

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPTKIT_CACHE", str(folder))  # the grading processes inherit it
        grade("cold")
        out["after cold"] = mtimes(folder)
        grade("warm")
        out["after warm"] = mtimes(folder)
        out["damaged"] = damage(sorted(folder.rglob("*.pt")))
        grade("damaged")
        out["after damaged"] = {p: p.read_bytes() for p in folder.rglob("*.pt")}
    return out


@pytest.mark.parametrize("name", ["warm", "damaged"])
def test_the_report_is_the_same_as_with_an_empty_cache(runs, name):
    """Every check's verdict, points and message are those of the run that computed every answer."""
    for cold, other in zip(runs["reports"]["cold"], runs["reports"][name], strict=True):
        assert checks(other) == checks(cold)


def test_the_comparison_is_not_vacuous(runs):
    """The cold run wrote entries, each milestone with a bug loses points to it, the reference keeps full marks."""
    assert len(runs["after cold"]) >= 20, "the cold run cached almost nothing"
    buggy, reference = runs["reports"]["cold"]
    for milestone in buggy["milestones"]:
        if milestone["id"] != "attnvar":  # no bug there: it is graded for its cached reference tensors
            assert milestone["score"] < milestone["max_score"], f"{milestone['id']} kept full marks"
    assert reference["score"] == reference["max_score"]


def test_a_warm_cache_is_read_not_rewritten(runs):
    """The warm run found every entry it needed: it wrote none, new or old."""
    assert runs["after warm"] == runs["after cold"]


def test_damaged_entries_are_rewritten(runs):
    """After the damaged run, no entry still holds what the damage left in it."""
    after = runs["after damaged"]
    assert after.keys() == runs["damaged"].keys()
    assert not [p for p, data in runs["damaged"].items() if after[p] == data]
