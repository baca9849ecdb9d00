"""A timed practice contest: the contest file, the rules it sets and the commands that prepare one.

The rules (``policy``, ``feedback``, ``scoreboard``, ``metric``) are pure: a clock is passed in, nothing is read
or written, so the tests set the time with no sleeps. The records are ``store``'s; the server that serves them
is ``web`` (a FastAPI app, ``create_app``), a thin layer over both.
"""
