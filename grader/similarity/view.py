"""One pair side by side (:func:`pair_view`): an HTML page from grader/templates/similarity/pair.html with both
students' files as compared, the code they have in common marked, the code most of the class wrote the same way
marked apart, and the files as handed in below each.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

from grader.similarity.common import Class, Written
from grader.similarity.fingerprints import K, _filtered_spans, _hashes
from grader.similarity.pairs import file_pairs
from grader.similarity.render import _overall

_PLAIN, _COMMON, _MATCH = 0, 1, 2  # how a character of a file is marked in a pair's view


def pair_view(klass: Class, a: str, b: str) -> str:
    """A page (HTML) with ``a``'s and ``b``'s files side by side, as compared (normalised), the code they have in
    common marked, and the code most of the class wrote the same way marked apart; the files as handed in below
    each. Every text the students wrote is escaped by the template (jinja2's autoescape)."""
    from jinja2 import Environment, PackageLoader, select_autoescape

    scores = {p.file: p for p in file_pairs(klass, (a, b))}
    sections = []
    for name in sorted(klass.files, key=lambda n: (-(scores[n].score if n in scores else -1), n)):
        by = klass.files[name]
        if a not in by and b not in by:
            continue
        left, right = by.get(a), by.get(b)
        own = klass.own[name]
        both = (left.prints & right.prints) if left and right else frozenset()
        counted = own[a] & own[b] if left and right else frozenset()
        sides = [_side(w, counted, both - counted) if w else None for w in (left, right)]
        sections.append({"file": name, "pair": scores.get(name), "sides": sides})
    env = Environment(loader=PackageLoader("grader.templates", "similarity"), autoescape=select_autoescape(["html"]))
    return env.get_template("pair.html").render(
        a=a, b=b, overall=_overall(list(scores.values())), compared=len(scores), sections=sections
    )


def _side(written: Written, match: frozenset[int], common: frozenset[int]) -> dict[str, Any]:
    return {"segments": _marked(written.normalised, match, common), "code": written.code}


def _marked(code: str, match: frozenset[int], common: frozenset[int]) -> list[tuple[str, str]]:
    """``code`` in runs of ``("", text)``, ``("common", text)`` and ``("match", text)``: the characters each
    k-gram whose fingerprint is in ``match`` (or ``common``) covers."""
    filtered, starts, ends = _filtered_spans(code)
    # Each k-gram marks a range of characters: +1 where it starts, -1 where it ends, summed along the text (a
    # character by character loop was 25 steps for each, seconds on a large file).
    edges = {_MATCH: [0] * (len(code) + 1), _COMMON: [0] * (len(code) + 1)}
    for i, h in enumerate(_hashes(filtered).tolist()):
        kind = _MATCH if h in match else _COMMON if h in common else _PLAIN
        if kind:
            edges[kind][starts[i]] += 1
            edges[kind][ends[i + K - 1]] -= 1
    inside = {kind: list(itertools.accumulate(e)) for kind, e in edges.items()}
    label = [_MATCH if inside[_MATCH][c] else _COMMON if inside[_COMMON][c] else _PLAIN for c in range(len(code))]
    runs: list[tuple[str, str]] = []
    names = {_PLAIN: "", _COMMON: "common", _MATCH: "match"}
    for kind, chars in itertools.groupby(zip(label, code), key=operator.itemgetter(0)):
        runs.append((names[kind], "".join(c for _, c in chars)))
    return runs
