"""The flagged pairs as text or JSON (:func:`render`: one row per pair, or per pair and file), and one pair's
scores file by file as text (:func:`render_pair`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from grader.similarity.common import Class
from grader.similarity.pairs import Pair, PairScore, file_pairs, pair_scores

SHOWN_FILES = 4  # the files a pair's line in the table names before "and N more"


def render(klass: Class, pairs: list[Pair], threshold: float, fmt: str = "table", by_file: bool = False) -> str:
    """The flagged pairs as a table or JSON: one row per pair (its score across files, the files behind it), or
    with ``by_file`` one row per pair and file."""
    flagged = [p for p in pairs if p.score >= threshold]
    rows = pair_scores(pairs, threshold)
    common = {name: len(prints) for name, prints in sorted(klass.common.items()) if prints}
    if fmt == "json":
        listed: list[dict[str, Any]] = (
            [asdict(p) for p in flagged]
            if by_file
            else [{**asdict(r), "files": [_file_json(p) for p in r.files]} for r in rows]
        )
        return json.dumps(
            {
                "students": len(klass.students),
                "threshold": threshold,
                "pairs": listed,
                "common_fingerprints": common,
                "no_files": klass.no_files,
                "not_on_roster": klass.not_on_roster,
            },
            indent=2,
        )
    lines = _file_table(flagged) if by_file else _pair_table(rows)
    n = len(flagged) if by_file else len(rows)
    what = "pair and file" if by_file else "pair"
    if not n:
        lines.append(
            f"no pair of the {len(klass.students)} students at or above {threshold:.0%} similarity on any file"
        )
    else:
        lines.append(
            f"{n} {what}{'s' * (n != 1)} of the {len(klass.students)} students at or above {threshold:.0%}: the same "
            "code up to names, order and comments; read them before concluding anything"
        )
    if not by_file and rows:
        lines.append(
            "score: their code in common over every file both wrote, each file weighed by how much code it holds"
        )
    if common:
        lines.append(
            f"not counted: the stubs' text, and code more than half of the class wrote the same way "
            f"({sum(common.values())} fingerprints in {len(common)} file{'s' * (len(common) != 1)})"
        )
    if klass.no_files:
        lines.append(f"no files to compare: {', '.join(klass.no_files)}")
    if klass.not_on_roster:
        lines.append(f"not on the roster (compared all the same): {', '.join(klass.not_on_roster)}")
    return "\n".join(lines)


def _file_json(p: Pair) -> dict[str, Any]:
    return {"file": p.file, "score": p.score, "shared": p.shared}


def _file_table(pairs: list[Pair]) -> list[str]:
    if not pairs:
        return []
    width = max(len(p.file) for p in pairs)
    return [
        f"{'score':>6}  {'file':<{width}}  pair",
        *(f"{p.score:6.0%}  {p.file:<{width}}  {p.a} / {p.b}" for p in pairs),
    ]


def _pair_table(rows: list[PairScore]) -> list[str]:
    if not rows:
        return []
    names = [f"{r.a} / {r.b}" for r in rows]
    width = max(len(n) for n in names)
    lines = [f"{'score':>6}  {'pair':<{width}}  files at or above the threshold"]
    for name, r in zip(names, rows):
        shown = ", ".join(f"{p.file} {p.score:.0%}" for p in r.files[:SHOWN_FILES])
        more = len(r.files) - SHOWN_FILES
        lines.append(f"{r.score:6.0%}  {name:<{width}}  {shown}{f' and {more} more' if more > 0 else ''}")
    return lines


def render_pair(klass: Class, a: str, b: str) -> str:
    """One pair's scores, file by file, as text."""
    pairs = file_pairs(klass, (a, b))
    lines = [f"{a} / {b}: {_overall(pairs)} across {len(pairs)} file{'s' * (len(pairs) != 1)} both wrote"]
    width = max((len(p.file) for p in pairs), default=0)
    lines += [f"{p.score:6.0%}  {p.file:<{width}}  {p.shared} of {p.smaller} fingerprints in common" for p in pairs]
    compared = {p.file for p in pairs}
    rest = sorted(n for n, by in klass.files.items() if n not in compared and (a in by or b in by))
    if rest:
        lines.append(f"not compared (one of them wrote little or none of it): {', '.join(rest)}")
    return "\n".join(lines)


def _overall(pairs: list[Pair]) -> str:
    smaller = sum(p.smaller for p in pairs)
    return f"{sum(p.shared for p in pairs) / smaller:.0%}" if smaller else "nothing to compare"
