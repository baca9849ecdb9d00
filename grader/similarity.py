"""`grade similarity FOLDER`: pairs of students whose exercise files hold the same code, up to renamed
identifiers, reordered functions and changed comments.

Each student's exercise file (a folder's ``mN_name.py``; a notebook's code cells, as one file) is tokenized and
normalised by copydetect (https://github.com/blingenf/copydetect): every name becomes ``V``, ``F`` or ``O``,
strings ``S``, comments and spacing go; its k-grams are hashed and winnowed into fingerprints (Schleimer, Wilkerson
and Aiken's winnowing, copydetect's). The stub's own fingerprints (``exercises/``: its signatures, docstrings and
skeleton, which every student starts from) are taken out first, so that only what a student wrote counts. A
pair's score on a file is the share of the smaller side's fingerprints that the other also has: reordering
functions moves k-grams but keeps them, so it keeps the score.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path

from grader import nofollow
from grader.batch.discover import discover
from grader.errors import BadUsage
from grader.milestones import STUDENT_MODULES
from grader.submission import SubmissionError, notebook_cells

MAX_FILE_BYTES = 1 << 20  # an exercise file far larger than any solution is left out, not read whole

STUBS = Path(__file__).resolve().parents[1] / "exercises"
K = 25  # characters of normalised code per k-gram (copydetect's default)
WINDOW = 4  # winnowing window (copydetect's default)
THRESHOLD = 0.6  # a pair at or above this share on a file is flagged
MIN_FINGERPRINTS = 8  # a file with fewer of its own (a stub barely touched) is compared with no one
NOTEBOOK = "notebook"


class MissingLibrary(BadUsage):
    """copydetect is not installed: `pip install 'gptkit[similarity]'`."""


@dataclass(frozen=True)
class Pair:
    file: str
    a: str
    b: str
    score: float  # the share of the smaller side's fingerprints the other has too, 0..1
    shared: int  # fingerprints in common


def _utils():
    try:
        from copydetect import utils  # type: ignore[import-untyped]  # it ships no type hints
    except ImportError:
        raise MissingLibrary(
            "grade similarity needs copydetect: pip install 'gptkit[similarity]' (or pip install copydetect)"
        ) from None
    return utils


def fingerprints(code: str, boilerplate: frozenset[int] | set[int] = frozenset()) -> set[int]:
    """The winnowed fingerprints of Python ``code``, normalised by copydetect, less ``boilerplate``'s.

    The k-grams are hashed with BLAKE2 rather than Python's ``hash`` (copydetect's), which changes from one
    process to the next: the same class gives the same scores every time."""
    utils = _utils()
    import numpy as np  # copydetect's own dependency

    filtered, _ = utils.filter_code(code, "code.py", language="python")
    if len(filtered) < K:
        return set()
    grams = (filtered[i : i + K].encode() for i in range(len(filtered) - K + 1))
    hashes = np.array(
        [int.from_bytes(hashlib.blake2b(g, digest_size=7).digest(), "big") for g in grams], dtype=np.int64
    )
    selected, _ = utils.winnow(hashes, WINDOW)
    return {int(h) for h in selected} - set(boilerplate)


def student_files(path: Path) -> dict[str, str]:
    """A submission's exercise files by name: a folder's ``mN_name.py``, or a notebook's code cells as one."""
    if path.is_dir():
        files = {}
        for m in STUDENT_MODULES:
            try:  # a submission's file: read without following a link, and bounded (a huge one is not code)
                data = nofollow.read_bytes(path / f"{m}.py", MAX_FILE_BYTES)
            except (OSError, ValueError):
                continue
            files[f"{m}.py"] = data.decode("utf-8", errors="replace")
        return files
    if path.suffix == ".ipynb":
        try:
            cells, _ = notebook_cells(path)
        except SubmissionError:
            return {}
        return {NOTEBOOK: "\n\n".join(c.source for c in cells)}
    return {}  # a zip: not unpacked here


def stub_fingerprints(stubs: Path) -> dict[str, set[int]]:
    """Each stub file's fingerprints (and, for a notebook, all of them together)."""
    out = {
        f"{m}.py": fingerprints((stubs / f"{m}.py").read_text())
        for m in STUDENT_MODULES
        if (stubs / f"{m}.py").is_file()
    }
    out[NOTEBOOK] = set().union(*out.values()) if out else set()
    return out


def compare(folder: Path, stubs: Path = STUBS, threshold: float = THRESHOLD) -> tuple[list[Pair], int]:
    """The pairs of students at or above ``threshold`` on some file, highest first, and how many students were
    compared. ``folder`` is a class as `grade batch` reads it (student folders, notebooks, nbgrader's layout)."""
    boiler = stub_fingerprints(stubs)
    prints: dict[str, dict[str, set[int]]] = {}
    found = discover(folder)
    for f in found:
        for name, code in student_files(f.path).items():
            mine = fingerprints(code, boiler.get(name, set()))
            if len(mine) >= MIN_FINGERPRINTS:
                prints.setdefault(name, {})[f.student] = mine
    pairs = []
    for name, by_student in prints.items():
        for a, b in combinations(sorted(by_student), 2):
            shared = len(by_student[a] & by_student[b])
            score = shared / min(len(by_student[a]), len(by_student[b]))
            if score >= threshold:
                pairs.append(Pair(name, a, b, round(score, 3), shared))
    return sorted(pairs, key=lambda p: (-p.score, p.file, p.a, p.b)), len(found)


def render(pairs: list[Pair], students: int, fmt: str, threshold: float) -> str:
    if fmt == "json":
        return json.dumps({"students": students, "threshold": threshold, "pairs": [asdict(p) for p in pairs]}, indent=2)
    if not pairs:
        return f"no pair of the {students} students at or above {threshold:.0%} similarity on any file"
    width = max(len(p.file) for p in pairs)
    lines = [
        f"{'score':>6}  {'file':<{width}}  pair",
        *(f"{p.score:6.0%}  {p.file:<{width}}  {p.a} / {p.b}" for p in pairs),
    ]
    lines.append(
        f"{len(pairs)} pair{'s' * (len(pairs) != 1)} of the {students} students at or above {threshold:.0%}: "
        "the same code up to names, order and comments; read them before concluding anything"
    )
    return "\n".join(lines)
