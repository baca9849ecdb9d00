"""The TinyGPT kit's grader: hidden suites, a sandboxed worker, and the ``grade`` command."""

__version__ = "0.1.0"
