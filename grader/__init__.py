"""The TinyGPT kit's grader: hidden suites, a sandboxed worker, and the ``grade`` command."""

__version__ = "0.2.0"  # the only place it is set: pyproject.toml reads it; see CHANGELOG.md
