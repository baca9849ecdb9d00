"""The passes that normalise a student's file on its syntax tree (grader/similarity/normalise.py runs them).

They keep what a program computes (a few drop what it prints or checks); the code is not run, only compared, so
"keeps the program" is read loosely where that costs nothing: an attribute read or a subscript is taken to have
no effect, and a temporary is put back where it is read even if code in between could change what it would
compute. Each pass makes two copies that differ by it the same text, and two independent files no closer than the
code they really share.

* ``syntax.py``: helpers on syntax trees the passes share;
* ``calls.py``: calls that do nothing, and calls that give back their argument (which are that argument);
* ``tidy.py``: a block without its statements that do nothing, nor what follows a ``return``;
* ``rewrites.py``: the local rewrites, one spelling for each statement and expression;
* ``spelling.py``: one spelling for the library's names and torch's functions;
* ``liveness.py``: the names a program can read, and the others' definitions taken out;
* ``inline.py``: constants and temporaries put back where they are read.
"""
