"""The stubs every student starts from (``exercises/``): their names and fingerprints, and those of the code their
docstrings spell out, count for no one; :func:`file_fingerprints` gives a student's file's own.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from grader.milestones import STUDENT_MODULES
from grader.similarity.files import NOTEBOOK, _parses
from grader.similarity.fingerprints import fingerprints
from grader.similarity.normalise import defined_names, normalise

STUBS = Path(__file__).resolve().parents[2] / "exercises"  # grader/similarity/stubs.py: the kit's exercises/

_LITERAL = re.compile(r"``(.+?)``")  # an inline literal in a stub's docstring (reStructuredText)
_BULLET = re.compile(r"^\s*(?:[-*]|\d+\.)\s+")  # a list item's "- " or "2. "


@dataclass(frozen=True)
class Stub:
    """What every student starts from in one file: the names it defines (never taken out as unused, and put
    first, in its order) and its fingerprints, normalised as a student's are (they count for no one)."""

    names: tuple[str, ...] = ()
    prints: frozenset[int] = frozenset()


def file_fingerprints(code: str, stub: Stub = Stub()) -> set[int]:
    """A student's file's own fingerprints: normalised with its stub's names kept, less the stub's. With no stub
    for the file, its own top-level names are kept (nothing says which of them the grader calls)."""
    return fingerprints(normalise(code, stub.names or defined_names(code)), stub.prints)


def read_stubs(stubs: Path) -> dict[str, Stub]:
    """Each stub file's names and fingerprints (and, for a notebook, all of them together): those of its text and
    those of the code its docstrings spell out (:func:`dictated`), both normalised as a student's file is."""
    out = {}
    for m in STUDENT_MODULES:
        if (stubs / f"{m}.py").is_file():
            code = (stubs / f"{m}.py").read_text()
            names = defined_names(code)
            prints = fingerprints(normalise(code, names))
            spelled = dictated(code)
            if spelled is not None:  # its assignments kept: they are what a student is told to write
                prints |= fingerprints(normalise(spelled, names + _assigned(spelled)))
            out[f"{m}.py"] = Stub(names, frozenset(prints))
    out[NOTEBOOK] = Stub(
        tuple(dict.fromkeys(n for stub in out.values() for n in stub.names)),
        frozenset().union(*(stub.prints for stub in out.values())),
    )
    return out


def dictated(code: str) -> str | None:
    """The stub ``code`` with each function's body replaced by the code its docstring spells out, line by line
    (``self.qkv = nn.Linear(d, 3 * d)``, ``x = x + attn(ln1(x))``): what every student is told to write is no
    more theirs than the stub's signatures are. None if ``code`` does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                node.body = [st for snippet in _snippets(doc) for st in ast.parse(snippet).body] or [ast.Pass()]
    return ast.unparse(tree)


def _snippets(doc: str) -> list[str]:
    """The code in a docstring: each line that parses as Python (less a list's bullet or a sentence's period),
    else the ````literals```` in it that do."""
    out = []
    for line in doc.splitlines():
        text = _BULLET.sub("", line).strip()
        whole = next((t for t in (text, text.rstrip(".")) if _parses(t)), None)
        out.extend([whole] if whole else [s for s in _LITERAL.findall(line) if _parses(s)])
    return out


def _assigned(code: str) -> tuple[str, ...]:
    """Every name and attribute ``code`` assigns."""
    tree = ast.parse(code)
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    names += [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]
    return tuple(dict.fromkeys(names))
