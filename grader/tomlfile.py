"""Checked TOML files (contest.toml, paper.toml): ``Reader`` reads and checks their values, and a mistake names
its key and its line.

``tomllib`` gives values but no line numbers, and an error that names the line is one a coach can fix without
hunting: ``line_of`` reads the text the simple way a person writes it (table headers and ``key = value`` lines,
dotted and quoted keys included). It is only used to point at a line: a key it cannot place falls back to its
table's line, or to no line at all, never to an error.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import date, datetime, time
from enum import Enum
from typing import Any

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


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def show_key(path: tuple[str, ...]) -> str:
    return ".".join(p if _BARE_KEY.fullmatch(p) else json.dumps(p) for p in path)


def _show_value(value: object) -> str:
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, dict):
        return "a table"
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


def _choices(kind: type[Enum]) -> str:
    return ", ".join(f'"{m.value}"' for m in kind)


class Reader:
    """Reads values out of a parsed TOML file (contest.toml, paper.toml); a failed check raises with its line."""

    @classmethod
    def of(cls, text: str, name: str, error: type[Exception]) -> tuple[Reader, dict]:
        """A reader of the file's ``text`` and its tables; a file that is not TOML raises ``error``."""
        # Imported here, not at the top: `grade` loads this module for its `contest` group, and the student
        # release (which ships the grader but not tomli, needed before Python 3.11) must not need it to start.
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise error(f"{name}: not valid TOML: {e}") from None
        return cls(text, name, error), data

    def title(self, top: dict) -> str:
        title = top.get("title")
        if not isinstance(title, str) or not title.strip():
            raise self.fail(("title",), "title is required: a non-empty string")
        return title.strip()

    def __init__(self, text: str, name: str, error: type[Exception]):
        self.text = text
        self.name = name
        self.error = error  # the exception a mistake raises: the contest file's, or the paper file's

    def fail(self, path: tuple[str, ...], message: str) -> Exception:
        line = line_of(self.text, path) if path else None
        where = f"{self.name}, line {line}" if line else self.name
        return self.error(f"{where}: {message}")

    def bad(self, path: tuple[str, ...], value: object, wanted: str) -> Exception:
        return self.fail(path, f"{show_key(path)} must be {wanted}, not {_show_value(value)}")

    def table(self, data: dict, path: tuple[str, ...], known: set[str] | None) -> dict:
        value = data.get(path[-1], {}) if path else data
        if not isinstance(value, dict):
            raise self.bad(path, value, "a table")
        for key in value:
            if known is not None and key not in known:
                where = f"in [{show_key(path)}]" if path else "at the top of the file"
                raise self.fail(
                    path + (key,), f"unknown key {show_key((key,))} {where}; the keys are {', '.join(sorted(known))}"
                )
        return value

    def number(self, table: dict, path: tuple[str, ...], *, positive: bool, integer: bool = False) -> float | None:
        value = table.get(path[-1])
        if value is None:
            return None
        kind = int if integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, kind) or value < 0 or (positive and value == 0):
            wanted = ("a positive " if positive else "a non-negative ") + ("whole number" if integer else "number")
            raise self.bad(path, value, wanted)
        return value

    def choice(self, table: dict, path: tuple[str, ...], kind: type[Enum], default: Enum | None) -> Any:
        value = table.get(path[-1])
        if value is None:
            if default is None:
                raise self.fail(path, f"{show_key(path)} is required: one of {_choices(kind)}")
            return default
        try:
            return kind(value)
        except ValueError:
            raise self.bad(path, value, f"one of {_choices(kind)}") from None

    def moment(self, table: dict, path: tuple[str, ...]) -> datetime | None:
        value = table.get(path[-1])
        if value is None:
            return None
        if not isinstance(value, datetime) or value.utcoffset() is None:
            raise self.bad(path, value, "a date and time with its UTC offset, like 2026-03-14T09:00:00-05:00")
        return value
