"""The server's routes, one router per kind of visitor: ``student`` (logging in, uploading, their own page),
``scoreboard`` (anyone logged in), ``coach`` (the coach's page and changes), ``exports`` (the coach's results)."""
