"""The contest server as a small FastAPI app: ``app.create_app`` builds it over a contest folder.

``state`` holds the contest (its store, its clock and the coach's changes) on ``app.state``; ``tokens`` and
``deps`` say who is asking; ``routes`` are the pages and the API, by who uses them; ``views`` shapes what they
show, rendered from ``pages``' templates; ``limits`` and ``intake`` keep floods and slow or large uploads off
the server. The rules themselves are the pure modules' (``policy``, ``scoreboard``, ``feedback``, ``metric``):
this package only serves them. The contest folder's files are named in ``grader.contest.layout``, which
``grade contest`` reads too.

Nothing is imported here, so that loading one module of the package (``tokens``, ``pages``) does not load the
app and every route, and the routes' ``from grader.contest.web import views`` is no import cycle
(tests/unit/test_import_graph.py).
"""
