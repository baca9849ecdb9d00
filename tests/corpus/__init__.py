"""The corpus: realistic single-bug submissions, and correct ones written differently, one module per exercise."""

from . import attnvar, core, kvcache, kvmemory, padding, quiz, sampling, scaling, tying

EXERCISES = (core, scaling, tying, kvcache, sampling, padding, quiz, kvmemory, attnvar)
BUGGY = [v for module in EXERCISES for v in module.BUGGY]
CORRECT = [v for module in EXERCISES for v in module.CORRECT]
