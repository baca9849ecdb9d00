"""What both the grading process and the worker use: the framing (``wire``), the values
(``protocol``) and what both must agree on (``agreement``).

The worker loads these files by path, so none imports the ``grader`` package (see
``grader/sandbox/__init__.py``; ``tests/unit/test_sandbox_boundary.py`` enforces it).
"""
