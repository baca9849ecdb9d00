"""The metric-scored task ``lmbudget``: train the best character-level model within a CPU budget.

The student's ``lmbudget.py`` defines ``train_within_budget(text, vocab, budget_seconds, context)``, which the grader
runs in a fresh sandboxed worker on the training split alone, its CPU counted by the sandbox; the returned
model is then evaluated, from the grading process, on two held-out splits, A and B, that never leave this
process, shuffled together with causality probes (``evaluate.py``). A failed run is a counted 0. Points are
normalised as at IOAI between a shipped baseline and the kit's reference recipe:
``clip((baseline - loss) / (baseline - best), 0, 1) * points``. See docs/exercises.md and
docs/contract.md; the task's numbers live in ``task.toml`` beside this file.

* ``corpus.py``: the corpora, the three splits and the vocabulary;
* ``task.py``: the task file, the score and a failed run's verdict (``RunFailed``);
* ``evaluate.py``: the evaluation: A's, B's and the probes' windows in the same calls, the loss, the probes;
* ``baseline.py``: the shipped baseline submission (a counted bigram);
* grader/calibrate.py (above the runner, which it runs): ``python -m grader.calibrate`` recomputes the baseline
  and the best.
"""
