"""The contest server as a small FastAPI app: :func:`create_app` (``app``) builds it over a contest folder.

``state`` holds the contest (its store, its clock and the coach's changes) on ``app.state``; ``tokens`` and
``deps`` say who is asking; ``routes`` are the pages and the API, by who uses them; ``views`` shapes what they
show; ``limits`` and ``intake`` keep floods and slow or large uploads off the server. The rules themselves are
the pure modules' (``policy``, ``scoreboard``, ``feedback``, ``metric``): this package only serves them.
"""

from grader.contest.web.app import create_app

__all__ = ["create_app"]
