"""Fingerprints of Python code, as copydetect (https://github.com/blingenf/copydetect) makes them: its filtered
text (every name ``V``, ``F`` or ``O``, strings ``S``, comments and spacing gone), hashed in k-grams of ``K``
characters and winnowed (Schleimer, Wilkerson and Aiken's winnowing, copydetect's), each fingerprint with the
lines of code it covers. The k-grams are hashed with BLAKE2, so the same class gives the same scores every time.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from typing import Any

from grader.errors import BadUsage

K = 25  # characters of normalised code per k-gram (copydetect's default)
WINDOW = 4  # winnowing window (copydetect's default)


class MissingLibrary(BadUsage):
    """copydetect is not installed: `pip install 'gptkit[similarity]'`."""


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
    return set(_located(code)) - set(boilerplate)


def _located(code: str) -> dict[int, frozenset[str]]:
    """``code``'s winnowed fingerprints, each with the lines of ``code`` (stripped) that its k-grams cover."""
    utils = _utils()
    filtered, starts, ends = _filtered_spans(code)
    hashes = _hashes(filtered)
    if not len(hashes):
        return {}
    selected, at = utils.winnow(hashes, WINDOW, remove_duplicates=False)
    newlines = [m.start() for m in re.finditer("\n", code)]
    lines = [line.strip() for line in code.split("\n")]
    covers: dict[int, set[str]] = {}
    for h, i in zip(selected.tolist(), at.tolist()):
        first, last = bisect.bisect_left(newlines, starts[i]), bisect.bisect_left(newlines, ends[i + K - 1] - 1)
        covers.setdefault(h, set()).update(lines[first : last + 1])
    return {h: frozenset(c) for h, c in covers.items()}


def _hashes(filtered: str) -> Any:
    """The hash of each k-gram of copydetect's ``filtered`` text, in order (a numpy array)."""
    import numpy as np  # copydetect's own dependency

    grams = (filtered[i : i + K].encode() for i in range(len(filtered) - K + 1))
    return np.array([int.from_bytes(hashlib.blake2b(g, digest_size=7).digest(), "big") for g in grams], dtype=np.int64)


def _filtered_spans(code: str) -> tuple[str, list[int], list[int]]:
    """copydetect's filtered text of ``code`` (as its ``filter_code`` makes it: every name ``V``, ``F`` or ``O``,
    strings ``S``, comments and spacing gone) and where in ``code`` each of its characters starts and ends: the
    same walk over the same tokens, keeping their places."""
    from pygments import lexers, token  # type: ignore[import-untyped]  # copydetect's own dependency, untyped

    lexer = lexers.get_lexer_by_name("python", stripnl=False, ensurenl=False)  # places in `code` as it is
    variable = {token.Name, token.Name.Variable, token.Name.Attribute}
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for at, kind, text in lexer.get_tokens_unprocessed(code):
        letter = None
        if kind in variable:
            letter = "V"
        elif kind in token.Name.Function:
            letter = "F"
        elif kind in token.Name.Class:
            letter = "O"
        elif kind in (token.Comment.Preproc, token.Comment.Hashbang):
            letter = "P"
        elif kind in token.Text or kind in token.Comment:
            continue
        elif kind in token.Literal.String:
            letter = '"' if text in ("'", '"') else "S"
        if letter is not None:
            out.append(letter)
            starts.append(at)
            ends.append(at + len(text))
        else:
            out.extend(text)
            starts.extend(range(at, at + len(text)))
            ends.extend(range(at + 1, at + len(text) + 1))
    return "".join(out), starts, ends
