"""Keeping the grader's trusted earlier milestones secret from the students they are graded against.

While a later milestone is graded, the worker runs the grader's own ``m1_attention`` (and, for the
later exercises, ``m2_model`` and ``m3_train``) in place of the student's. The student's code shares
that process, so it can reach those modules' code. Two defences:

* The worker gets as little as it needs (``worker_text``): the code without its comments and
  docstrings, compiled there without a file, a loader or a ``linecache`` entry, and then dropped.
* The real guarantee, here in the grading process: every text a worker sends passes through
  ``redact_reply`` as it arrives (``WorkerConnection.request``, the one place a worker's replies
  are read), and every message of a report through ``redact`` once more as the check's result is
  recorded (``grader/runner.py``). Any run of at least ``MIN_CHARS`` non-space characters of the
  trusted code (as tokens: spacing, line breaks, indentation, quotes and ``\\n`` escapes do not
  matter) becomes ``WITHHELD``, unless the student was given it (the stubs in ``exercises/``) or the
  grader's own messages spell it (a hint quoting the contract's ``nn.Linear(d, 3 * d)``).

A submission could still encode what it finds (base64, say) before showing it: no filter of text
can stop that, and none is tried here.
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import io
import re
import tokenize
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grader import cache
from grader.milestones import MILESTONES
from grader.reference import SOLUTIONS

TRUSTED = Path(__file__).with_name("worker") / "trusted"  # the grader's own earlier milestones (hidden)
GIVEN = SOLUTIONS.parent / "exercises"  # the stubs every student has: what they contain is not secret
WITHHELD = "[grader source withheld]"
MIN_CHARS = 20  # the shortest run of trusted code (non-space characters) that is withheld
# Tokens: words, then single other characters. Spacing and backslashes (escapes such as \n, as repr()
# and JSON write a line break) only separate tokens; both quote characters count as one.
_TOKEN = re.compile(r"\w+|[^\w\s\\]")
_ESCAPE = re.compile(r"\\[nrt]")


def trusted_source(module: str) -> str | None:
    """The grader's own version of an earlier milestone, as written (comments and docstrings included).

    A dedicated ``worker/trusted/<module>.py`` where one exists (it differs from the reference, so the worker
    never holds the reference's attention); otherwise the reference file itself. None in a
    student release, which has neither: the student's own earlier files are used.
    """
    for path in (TRUSTED / f"{module}.py", SOLUTIONS / f"{module}.py"):
        if path.is_file():
            return path.read_text()
    return None


def worker_text(source: str) -> str:
    """What a worker gets of a trusted module: its code alone, without comments or docstrings."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and _docstring(node):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.unparse(tree) + "\n"


def code_text(source: str) -> str:
    """``source``'s tokens without its comments and docstrings, as written (``worker_text`` rewrites them)."""
    docstrings = {
        (node.body[0].lineno, node.body[0].col_offset)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and _docstring(node)
    }
    kept = [
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type != tokenize.COMMENT and not (tok.type == tokenize.STRING and tok.start in docstrings)
    ]
    return " ".join(kept)


def _docstring(node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    first = node.body[0] if node.body else None
    return isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)


def _tokens(text: str) -> tuple[list[str], list[int], list[int]]:
    """Each token of ``text``, where it starts and where it ends (escapes read as spaces)."""
    text = _ESCAPE.sub(lambda m: "  ", text)  # same length: positions stay those of the original
    words, starts, ends = [], [], []
    for m in _TOKEN.finditer(text):
        words.append('"' if m[0] == "'" else m[0])
        starts.append(m.start())
        ends.append(m.end())
    return words, starts, ends


def _runs(words: list[str]) -> Iterable[tuple[int, int]]:
    """(first, last + 1) of each shortest run of tokens of at least MIN_CHARS characters: one starting at
    each token, and one ending at each token (so that a line's tail is a run of its own too)."""
    total = [0]
    for w in words:
        total.append(total[-1] + len(w))
    for i in range(len(words)):
        j = bisect.bisect_left(total, total[i] + MIN_CHARS)  # the run words[i:j] has >= MIN_CHARS
        if j <= len(words):
            yield i, j
        k = bisect.bisect_right(total, total[i + 1] - MIN_CHARS) - 1  # words[k:i + 1]
        if k >= 0:
            yield k, i + 1


class Redactor:
    """Replaces every run of the ``secret`` texts' code found in a text by ``WITHHELD``.

    A run is a shortest sequence of tokens of at least MIN_CHARS characters; those that also occur in a
    ``given`` text (what the student was given anyway) are not secret.
    """

    def __init__(self, secret: Iterable[str], given: Iterable[str] = ()):
        self.runs: set[tuple[str, ...]] = set()
        for text in secret:
            words = _tokens(text)[0]
            self.runs.update(tuple(words[i:j]) for i, j in _runs(words))
        for text in given:
            words = _tokens(text)[0]
            self.runs.difference_update(tuple(words[i:j]) for i, j in _runs(words))

    @classmethod
    def of_runs(cls, runs: Iterable[Iterable[str]]) -> Redactor:
        redactor = cls(())
        redactor.runs = {tuple(run) for run in runs}
        return redactor

    def __bool__(self) -> bool:
        return bool(self.runs)

    def __call__(self, text: str) -> str:
        if not self.runs or len(text) < MIN_CHARS:
            return text
        words, starts, ends = _tokens(text)
        spans = sorted((starts[i], ends[j - 1]) for i, j in _runs(words) if tuple(words[i:j]) in self.runs)
        if not spans:
            return text
        merged = [list(spans[0])]
        for start, end in spans[1:]:
            gap = text[merged[-1][1] : start]
            if len("".join(gap.split())) < MIN_CHARS:  # overlapping, or too little between them to keep
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out, at = [], 0
        for start, end in merged:
            out += [text[at:start], WITHHELD]
            at = end
        return "".join([*out, text[at:]])

    def value(self, value: Any) -> Any:
        """``value`` (plain JSON data: a worker's reply) with every string, keys included, redacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self(k): self.value(v) for k, v in value.items()}
        return value


def trusted_sources() -> dict[str, str]:
    """Every trusted module this grader has, by name (none in a student release)."""
    names = dict.fromkeys(name for m in MILESTONES.values() for name in m.trusted)
    return {name: source for name in names if (source := trusted_source(name)) is not None}


@functools.cache
def trusted_redactor() -> Redactor:
    """The redactor of every trusted module's code (as written, and as sent to a worker), built once per process.

    Comments and docstrings never reach a worker, so they are not looked for: a message may well share
    a phrase with them by chance. Building it parses the whole grader (half a second), so its runs are
    kept in the disk cache (``grader/cache.py``), keyed on the grader's fingerprint, which covers the
    trusted modules and the grader's texts, and on the stubs.
    """
    stubs = [p.read_text() for p in sorted(GIVEN.glob("*.py"))]
    key = hashlib.blake2b("\0".join(stubs).encode(), digest_size=16).hexdigest()

    def runs() -> list[tuple[str, ...]]:
        secret = [text for source in trusted_sources().values() for text in (code_text(source), worker_text(source))]
        return sorted(Redactor(secret, stubs + grader_texts() if secret else []).runs)

    return Redactor.of_runs(cache.stored(f"trusted redactor, stubs {key}", runs))


def grader_texts() -> list[str]:
    """Every string literal of the grader outside the trusted modules: its messages, hints and check names,
    shown in reports by design (``the feed-forward nn.Sequential(nn.Linear(d, 4 * d), ...``)."""
    package = Path(__file__).resolve().parents[1]
    texts = []
    for path in sorted(package.rglob("*.py")):
        if TRUSTED.resolve() not in path.resolve().parents:
            tree = ast.parse(path.read_text())
            texts += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return texts


def redact(text: str) -> str:
    """``text`` without any run of the trusted modules' code."""
    return trusted_redactor()(text)


def redact_reply(reply: Any) -> Any:
    """A worker's reply (JSON data) with every string redacted: what the worker says reaches no one unread."""
    return trusted_redactor().value(reply)
