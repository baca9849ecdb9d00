"""The TinyGPT kit's grader: hidden suites, a sandboxed worker, and the ``grade`` command.

In a notebook, ``grader.check("m1")`` grades the cells the kernel has run (``grader.in_kernel``).
"""

from typing import Any

__version__ = "0.2.0"  # the only place it is set: pyproject.toml reads it; see CHANGELOG.md


def __getattr__(name: str) -> Any:
    # Lazy: importing grader (every worker, every command) must not load the notebook machinery.
    if name == "check":
        from grader.in_kernel import check

        return check
    raise AttributeError(f"module 'grader' has no attribute {name!r}")
