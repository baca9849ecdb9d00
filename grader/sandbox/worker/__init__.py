"""What the sandboxed worker processes run: the fork server and everything it loads.

Loaded by file path inside the sandbox (``fork_server.py`` is started as a script, and loads
its siblings and ``../common/`` as ``_gradekit_<name>``), so no file here imports the
``grader`` package: only the standard library, torch and ``../common/``. The grading process
may import these files too (``jail.py`` for cleaning up cgroups, ``standin.py`` for the
reference's copy of the stand-in model). ``tests/unit/test_sandbox_boundary.py`` enforces the rule.
"""
