"""The checks the grader runs, by what ships to students.

* this folder: helpers the public checks use too (``checks.py``, ``fixtures.py``,
  ``causality.py``) and the suites' ``pytest.ini``; they hold no answer;
* ``public/``: the public checks, all a student release runs;
* ``hidden/``: the hidden suites and the helpers that embed answers; a student release
  drops the folder.
"""
