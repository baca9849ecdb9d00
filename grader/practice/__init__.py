"""`grade practice`: a timed practice session on a paper for one student alone, without a server.

The student sits the paper against the clock in their terminal: Enter (or ``g``) grades their work on the
paper's parts (with the parts' rules and the student's numbers), and shows what the paper's ``feedback``
policy allows while the time runs, filtered by the contest's own filter (grader/contest/feedback.py): the
paper is a one-student contest with a personal window. At the end (the time is up, ``q``, Ctrl-C or the end of
the input) the session is handed in and the report shows full feedback for the best attempt at each part.

Every attempt is one line of a JSON-lines log, appended, flushed and synced before anything is shown: a killed
process loses nothing, and the same command run again continues the same session (its clock never stops)
unless ``--new`` starts another. A session that was handed in stays over: a rerun shows its report again.

The core, :class:`~grader.practice.session.Session`, takes a clock and a grade function, so that it is tested
without a terminal, a sandbox or a sleep; the click command is a thin loop over it. One module per concern:

* ``errors.py``: what stops the command (``PracticeError``) and work that cannot be graded (``Unreadable``);
* ``log.py``: the JSON-lines log, an attempt's record (``Attempt``), and reading a session back;
* ``session.py``: the session: its clock, its attempts, what the student sees, the final report;
* ``signals.py``: Ctrl-C during a session (``interrupts``);
* ``stdin.py``: the student's commands, a line at a time (``Commands``);
* ``loop.py``: the terminal loop (``run_session``);
* ``command.py``: the click command, ``grade practice``, which grades with a grader.grading ``Grader`` (one
  warm fork server for the session).

The practice sits above the paper (grader/paper/) and the contest (grader/contest/): a paper sat as a contest of
one.
"""
