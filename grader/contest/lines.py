"""Where a key is in a TOML file: ``tomllib`` gives values but no line numbers, and an error that names the
line is one a coach can fix without hunting.

This reads the text the simple way a person writes it (table headers and ``key = value`` lines, dotted and
quoted keys included). It is only used to point at a line: a key it cannot place falls back to its table's
line, or to no line at all, never to an error.
"""

from __future__ import annotations

import re

_BARE = re.compile(r"[A-Za-z0-9_-]+")

KeyPath = tuple[str, ...]  # a key and the tables above it, outermost first


def _keys(text: str) -> tuple[KeyPath, str] | None:
    """The dotted key at the start of ``text`` and what follows it, or None if it does not start with a key."""
    parts: list[str] = []
    rest = text.lstrip()
    while True:
        if rest[:1] in ('"', "'"):
            end = rest.find(rest[0], 1)
            if end < 0:
                return None
            parts.append(rest[1:end])
            rest = rest[end + 1 :].lstrip()
        else:
            match = _BARE.match(rest)
            if not match:
                return None
            parts.append(match.group())
            rest = rest[match.end() :].lstrip()
        if not rest.startswith("."):
            return tuple(parts), rest
        rest = rest[1:].lstrip()


def _index(text: str) -> dict[KeyPath, int]:
    """Each table header's and each key's full path -> its line number (1-based), first occurrence kept."""
    where: dict[KeyPath, int] = {}
    table: KeyPath = ()
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            header = _keys(stripped.strip("[").lstrip())
            if header and header[1].startswith("]"):
                table = header[0]
                where.setdefault(table, number)
            continue
        found = _keys(stripped)
        if found and found[1].startswith("="):
            where.setdefault(table + found[0], number)
    return where


def line_of(text: str, path: KeyPath) -> int | None:
    """The line of the key (or table) ``path`` in the TOML ``text``; else the line of its nearest table or
    key above it that is written out (a key inside an inline table gives that table's line); else None."""
    where = _index(text)
    for end in range(len(path), 0, -1):
        if path[:end] in where:
            return where[path[:end]]
    return None
