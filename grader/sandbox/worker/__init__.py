"""What the sandboxed worker processes run: the fork server and everything it loads.

Loaded inside the sandbox from this folder (``fork_server.py`` is started as a script, and
loads its siblings as the private package ``_gradekit.worker`` and ``../common/`` as
``_gradekit.common``), so no file here imports the ``grader`` package: only the standard
library, torch, its siblings and ``../common/``, by relative imports that read the same in
both processes (``from .faults import blame``). The grading process may import these files
too (``jail.py`` for cleaning up cgroups, ``standin.py`` for the reference's copy of the
stand-in model). ``tests/unit/test_sandbox_boundary.py`` enforces the rule.
"""
