"""The metric-scored task ``lmbudget``: train the best character-level model within a CPU budget.

The student's ``lmbudget.py`` defines ``train_within_budget(text, vocab, budget_seconds, context)``, which the grader
runs in a sandboxed worker on the training split alone; the returned model is then evaluated, from
the grading process, on two held-out splits, A and B, that never leave this process. Points are
normalised as at IOAI between a shipped baseline and the kit's reference recipe:
``clip((baseline - loss) / (baseline - best), 0, 1) * points``. See docs/exercises.md and
docs/contract.md; the task's numbers live in ``task.toml`` beside this file.

* ``corpus.py``: the corpora, the three splits and the vocabulary;
* ``task.py``: the task file, the score, the evaluation and the verdicts;
* ``baseline.py``: the shipped baseline submission (a counted bigram);
* ``calibrate.py``: ``python -m grader.lmbudget.calibrate`` recomputes the baseline and the best.
"""
