"""Batch grading: find every submission under a folder, grade them in parallel, keep every result in SQLite."""
