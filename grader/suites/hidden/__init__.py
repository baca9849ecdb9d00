"""The hidden suites (``test_*.py``) and the helpers that embed answers (known bugs recomputed, the
sampling maths). A student release drops this whole folder (``grader/bundles/release.py``)."""
