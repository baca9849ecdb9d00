"""The lmbudget task's text, on the grading process's side: corpora, splits and the vocabulary.

Corpora (both loaded by stretch/data.py, so the stretch and the task read the same text):

* ``python``: this interpreter's standard library, the top-level ``*.py`` files under
  ``sysconfig.get_paths()["stdlib"]`` sorted by name, pure-ASCII files only, taken in that order up to
  1,000,000 characters, each after a ``# file: NAME`` line. On every machine, so tests and CI download
  nothing; it depends on the Python version (the task file records the one it was calibrated with).
  Caveat: the worker needs the standard library to run, so a submission *can* read these sources;
  the corpus is for practice, tests and CI, not for a contest with stakes (use ``shakespeare``).
* ``shakespeare``: tiny Shakespeare, downloaded once and checksummed (``datasets/sources.json``).

Splits: the text is cut into blocks of ``block`` characters; block ``i`` goes to split A when
``i % 10 == 8``, to B when ``i % 10 == 9``, to train otherwise (80/10/10). Interleaved blocks make
the three splits cover the same files and styles. The vocabulary is the train split's sorted
characters, then ``UNK`` (a held-out character never seen in training maps to it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch

UNK = "\ufffd"  # the vocabulary's last entry: any character the train split lacks
CYCLE, A_SLOT, B_SLOT = 10, 8, 9


@dataclass(frozen=True)
class Splits:
    train: str
    a: str
    b: str
    vocab: tuple[str, ...]  # one character each; the last is UNK

    def encode(self, text: str) -> torch.Tensor:
        """Token ids (int64) of ``text``; characters outside the vocabulary become UNK's id."""
        stoi = {c: i for i, c in enumerate(self.vocab)}
        unk = len(self.vocab) - 1
        return torch.tensor([stoi.get(c, unk) for c in text], dtype=torch.long)


def split_text(text: str, block: int) -> tuple[str, str, str]:
    """(train, A, B): interleaved blocks, see the module's docstring."""
    parts: tuple[list[str], list[str], list[str]] = ([], [], [])
    for n, start in enumerate(range(0, len(text), block)):
        slot = n % CYCLE
        parts[1 if slot == A_SLOT else 2 if slot == B_SLOT else 0].append(text[start : start + block])
    return "".join(parts[0]), "".join(parts[1]), "".join(parts[2])


def load_text(corpus: str, data_dir: str | Path | None = None) -> str:
    from stretch.data import load_text as stretch_text  # the stretch's loaders: one corpus, one checksum

    return stretch_text(corpus, data_dir)


@functools.lru_cache(maxsize=4)
def load_splits(corpus: str, block: int, data_dir: str | None = None) -> Splits:
    train, a, b = split_text(load_text(corpus, data_dir), block)
    return Splits(train, a, b, tuple(sorted(set(train))) + (UNK,))


def windows(ids: torch.Tensor, count: int, length: int) -> torch.Tensor:
    """``count`` windows of ``length`` tokens at evenly spaced, fixed starts: a (count, length) tensor."""
    if len(ids) < length:
        raise ValueError(f"a split of {len(ids)} tokens is shorter than one window of {length}")
    count = min(count, len(ids) // length)
    starts = torch.linspace(0, len(ids) - length, count).long()
    return torch.stack([ids[s : s + length] for s in starts.tolist()])
