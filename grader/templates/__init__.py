"""The files the bundles write, kept as files: Gradescope's scripts, the student release's README and
pyproject.toml, the nbgrader course's config, introduction and checks cell.

A blank in a template is ``@name`` (string.Template with ``@`` as the delimiter, so that a shell template
stays a valid script for shellcheck and ``$`` and ``{}`` need no escaping); ``@@`` is a literal ``@``.
"""

from __future__ import annotations

from importlib.resources import files
from string import Template


class _Blanks(Template):
    delimiter = "@"


def text(name: str) -> str:
    """The template ``name`` as it is (one with no blank)."""
    return files(__name__).joinpath(name).read_text(encoding="utf-8")


def render(name: str, **blanks: object) -> str:
    """The template ``name`` with each ``@blank`` filled; a blank left unfilled raises KeyError."""
    return _Blanks(text(name)).substitute({key: str(value) for key, value in blanks.items()})
