"""Train your own: the lesson's stretch model on real text, sampling, and in-context learning.

Every model here is the reference TinyGPT from ``solutions/``; this package only
feeds it data, trains it, samples from it and measures it.
"""
