"""The pieces of `grade similarity`'s triage: the filtered text it marks a pair's view with is copydetect's, and
the class's common code is what more than half of the writers (and never only a pair) hold."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("copydetect")

from copydetect import utils  # type: ignore[import-untyped]  # noqa: E402

from grader import similarity as sim  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TRICKY = '''\
#!/usr/bin/env python
@decorated(1)
class A(B, metaclass=M):
    """Doc."""
    x: int = 0x1F  # a comment
    def f(self, *a, **k):
        return f"{self.x!r:>{a[0]}} and {'q'}" + r'raw\\n' + b"bytes".decode() + """three"""
lambda y: y ** 2 @ z
'''


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_the_marked_text_is_the_fingerprinted_text(folder):
    """Where each character of the filtered text came from is read by the same walk as copydetect's: the same
    text, on every file as handed in and as compared, so the marks fall on the code the fingerprints came from."""
    texts = [TRICKY]
    for path in sorted((REPO / folder).glob("*.py")):
        code = path.read_text()
        texts += [code, sim.normalise(code, sim.defined_names(code))]
    for code in texts:
        filtered, starts, ends = sim._filtered_spans(code)
        assert filtered == utils.filter_code(code, "code.py", language="python")[0]
        assert len(starts) == len(ends) == len(filtered)
        for letter, start, end in zip(filtered, starts, ends):
            piece = code[start:end]
            assert piece and (letter in 'VFOPS"' or piece == letter), (letter, piece)


def written(*lines: str) -> sim.Written:
    code = "\n".join(lines)
    covers = sim._located(code)
    return sim.Written(code, code, frozenset(covers), covers, frozenset(line.strip() for line in lines))


SHARED = ("def common(x):", "    return (x.softmax(-1) * 3 + x.sum(0)) / 7", "")
OWN = [
    (f"def own{i}(y):", f"    return (y.tanh() + {i * 31}) * y.relu().mean({i}) - {i * 7 + 2}", "") for i in range(9)
]


def test_what_most_of_the_writers_hold_is_discounted_and_what_a_pair_holds_is_not():
    """Five of nine students wrote ``common`` the same way: it counts for none of them; two who share ``own0``
    keep it; with three students, two who share everything keep it all (a pair is never the class)."""
    students = {f"s{i}": written(*(SHARED if i < 5 else ()), *OWN[i], *OWN[i + 1 if i < 2 else i]) for i in range(9)}
    own = sim._discounted(students)
    common = frozenset.intersection(*(students[f"s{i}"].prints for i in range(5)))  # the common function
    assert common and not common & own["s0"]
    pair = (students["s0"].prints & students["s1"].prints) - common  # own1, which s0 and s1 both wrote
    assert pair and pair <= own["s0"] & own["s1"]
    few = {"a": written(*SHARED), "b": written(*SHARED), "c": written(*OWN[3])}
    assert sim._discounted(few)["a"] == few["a"].prints
