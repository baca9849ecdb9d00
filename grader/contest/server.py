"""The contest server, kept at its old address: the app is built by ``grader.contest.web`` (see its modules)."""

from grader.contest.web.app import create_app
from grader.contest.web.tokens import read_tokens

__all__ = ["create_app", "read_tokens"]
