"""A timed practice contest: the contest file, the rules it sets and the commands that prepare one.

Everything here is pure (a clock is passed in, nothing is read or written but by the commands) so that the
contest server, which is not built yet, can sit on top of it and the tests can set the time with no sleeps.
"""
