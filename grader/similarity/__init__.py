"""`grade similarity FOLDER`: pairs of students whose exercise files hold the same code, up to renamed
identifiers, reordered functions, changed comments and code that does nothing.

Each student's exercise file (a folder's ``mN_name.py``; a notebook's code cells, as one file) is first normalised
on its syntax tree: what does not change the program goes, temporaries are put back where they are used, and a
few spellings of the same thing become one. The result is fingerprinted as copydetect does it. The stub's own
fingerprints (``exercises/``: what every student starts from, normalised the same way) are taken out first, so
that only what a student wrote counts, and so is what more than half of the students who wrote a file wrote the
same way (the quiz's answers). A pair's score on a file is the share of the smaller side's fingerprints that the
other also has; across files, their fingerprints in common over the smaller sides', summed.

The modules, in the order the work goes:

* ``files.py``: a submission's exercise files, as read for comparing;
* ``normalise.py``: a file normalised on its syntax tree, by the passes in ``passes/``;
* ``fingerprints.py``: copydetect's filtered text, hashed and winnowed into fingerprints;
* ``stubs.py``: the stubs' names and fingerprints, which count for no one;
* ``common.py``: the class read, and the code most of it wrote the same way taken out;
* ``pairs.py``: each pair's score, file by file and across files;
* ``render.py``: the flagged pairs as text or JSON, one pair's scores as text;
* ``view.py``: one pair's files side by side, as a page (grader/templates/similarity/pair.html).
"""

from grader.similarity.common import MIN_FINGERPRINTS, Class, Written, _discounted, read_class
from grader.similarity.files import MAX_FILE_BYTES, NOTEBOOK, student_files
from grader.similarity.fingerprints import MissingLibrary, _filtered_spans, _located, fingerprints
from grader.similarity.normalise import defined_names, normalise
from grader.similarity.pairs import THRESHOLD, Pair, PairScore, compare, file_pairs, pair_scores
from grader.similarity.render import render, render_pair
from grader.similarity.stubs import STUBS, Stub, dictated, file_fingerprints, read_stubs
from grader.similarity.view import pair_view

__all__ = [
    "MAX_FILE_BYTES",
    "MIN_FINGERPRINTS",
    "NOTEBOOK",
    "STUBS",
    "THRESHOLD",
    "Class",
    "MissingLibrary",
    "Pair",
    "PairScore",
    "Stub",
    "Written",
    "compare",
    "defined_names",
    "dictated",
    "file_fingerprints",
    "file_pairs",
    "fingerprints",
    "normalise",
    "pair_scores",
    "pair_view",
    "read_class",
    "read_stubs",
    "render",
    "render_pair",
    "student_files",
    # The pieces the tests check on their own (tests/unit/test_similarity_marks.py): the marks' filtered text,
    # the fingerprints' lines, the class's common code.
    "_discounted",
    "_filtered_spans",
    "_located",
]
