"""The sandbox that runs student code, in two processes that share no memory.

What runs where:

* this folder's top level (``client.py``, ``session.py``): the *grading process*, which
  starts the fork server, sends it requests and checks every answer. It may import
  anything, the ``grader`` package included.
* ``worker/``: everything the *sandboxed worker processes* run: the fork server
  (``fork_server.py``), the request handler a worker answers with (``request_handler.py``,
  the dispatch; the requests by what they do in ``ops_calls.py``, ``ops_state.py`` and
  ``ops_probes.py``, on ``handles.py``; the probes, ``probes.py`` and ``op_counter.py``;
  whose fault an error is, ``faults.py``; ``naming.py``, ``student_imports.py``, ``trusted_code.py``),
  the isolation (``jail.py``, ``hugepages.py``), the batch's shared server
  (``shared_server.py``), the trusted stand-in model (``standin.py``) and, in ``trusted/``,
  the grader's own earlier milestones (hidden: a student release drops the folder).
* ``common/``: what both sides use: the framing (``wire.py``), the values (``protocol.py``)
  and ``agreement.py``, the one place where request names, error kinds and exit codes
  are spelled.

The rule: nothing under ``worker/`` or ``common/`` imports the ``grader`` package. The fork
server loads these files by path (``python -I -S worker/fork_server.py``) and then hides the
grader's files, so such an import would fail there. ``tests/unit/test_sandbox_boundary.py``
checks it.
"""
