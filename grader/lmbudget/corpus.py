"""The lmbudget task's text, on the grading process's side: corpora, splits and the vocabulary.

The held-out splits must be text students do not have, and that the worker cannot read while it runs. A model
may carry any text its student has (a submission is code and data): with the held-out text inside it, a causal
n-gram lookup scores full marks (10/10 on the default corpus). So ``public_reason`` names the corpora
students have, and the worker's view (``grader/sandbox/visibility.py``, decided from the sandbox's real view)
those it can read; ``grade contest check`` and ``grade contest serve`` refuse a contest whose metric task's
text is either, as ``grade batch`` refuses a class's (unless told to grade anyway, every report then saying the
scores prove nothing) and the Gradescope zip and nbgrader course would (``held_out_refusal`` in task.py, the one
rule); ``grade check`` warns. The corpora (``corpus`` in the task file):

* ``grader`` (the default, for practice and the kit's own tests): a frozen snapshot of this grader package's
  own Python sources (``grader/**/*.py`` sorted by their path, pure-ASCII files only, up to 1,000,000
  characters, each after a ``# file: PATH`` line), shipped gzipped inside the package (``FROZEN``, made by
  ``freeze()`` once, in ``grader/lmbudget/heldout/``). The sandbox hides the file from the worker
  (``private-root``, ``grader-files-hidden``) and the student release leaves it out (``heldout/`` is a
  never-ships folder: it holds a ``NEVER_SHIPS`` marker, see grader/bundles/release.py), but the sources it was
  made from ship in the release (its ``grader/``): students have this text, so it is public (``public_reason``).
  It is on every machine that grades, so tests and CI download nothing, and it does not change when the kit's
  code does, so the calibration holds (``python -m grader.lmbudget.corpus --freeze`` makes a new one: then recalibrate).
* ``file:PATH``: a text file of the coach's own (UTF-8; a relative PATH is the task file's folder's). The
  one choice for a contest: a text students have not seen, kept outside the kit's folder (a file inside it,
  as the release or a clone of the kit holds it, is public) and outside what the sandbox shows a worker.
* ``shakespeare``: tiny Shakespeare, downloaded once and checksummed (``datasets/sources.json``): public.
* ``python``: this interpreter's standard library (stretch/data.py), which the worker needs to run and so
  can read: public, for the stretch's practice only.

What students have, and so ``public_reason`` refuses for a contest: the three named corpora, and any file under
the kit's folder (``PROJECT_DIR``: the student release is built from it, and ships its ``grader/`` and
``exercises/``; the kit itself may be public) or under the grader package, wherever it is installed. A text of
the coach's own outside it cannot be told from a copy of public text: the docs say to use one students have not
seen.

Splits: the text is cut into blocks of ``block`` characters; block ``i`` goes to split A when
``i % 10 == 8``, to B when ``i % 10 == 9``, to train otherwise (80/10/10). Interleaved blocks make
the three splits cover the same files and styles. The vocabulary is the train split's sorted
characters, then ``UNK`` (a held-out character never seen in training maps to it).
"""

from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.errors import UserError

UNK = "\ufffd"  # the vocabulary's last entry: any character the train split lacks
CYCLE, A_SLOT, B_SLOT = 10, 8, 9
GRADER_DIR = Path(__file__).resolve().parents[1]  # the grader package: hidden from every worker
PROJECT_DIR = GRADER_DIR.parent  # the kit's folder, which the student release is built from
# The ``grader`` corpus, frozen (``freeze``), in a never-ships folder (its NEVER_SHIPS marker: not in the release).
FROZEN = Path(__file__).with_name("heldout") / "grader-corpus.txt.gz"
CORPUS_CHARS = 1_000_000  # about the size of tiny Shakespeare, so the corpora train alike
FILE_PREFIX = "file:"
CORPORA = ("grader", "shakespeare", "python", f"{FILE_PREFIX}PATH")


class CorpusError(UserError, ValueError):  # ValueError: what callers caught before
    """A corpus that cannot be read: the message says which and why."""


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


def freeze() -> None:
    """Write ``FROZEN`` from the grader's sources as they are now (then recalibrate: the text changed)."""
    text = "".join(
        f"# file: {p.relative_to(GRADER_DIR.parent).as_posix()}\n{p.read_text(encoding='ascii')}\n"
        for p in grader_files()
    )
    FROZEN.write_bytes(gzip.compress(text.encode("ascii"), mtime=0))


def grader_files() -> list[Path]:
    """The files ``freeze`` takes: see the module's docstring."""
    chosen, total = [], 0
    for path in sorted(GRADER_DIR.rglob("*.py"), key=lambda p: p.relative_to(GRADER_DIR).as_posix()):
        size = len(data := path.read_bytes())
        if not data.isascii():
            continue
        if total + size > CORPUS_CHARS:
            break
        chosen.append(path)
        total += size
    return chosen


def file_path(corpus: str, base: Path | None = None) -> Path:
    """The file a ``file:PATH`` corpus names (relative to ``base``, the task file's folder)."""
    path = Path(corpus.removeprefix(FILE_PREFIX)).expanduser()
    return path if path.is_absolute() or base is None else base / path


# The named corpora students have, and why (one clause each, for the messages of `grade check` and a contest's).
PUBLIC = {
    "grader": "a snapshot of the grader's own sources, which the student release ships",
    "python": "this Python's standard library, which every student has",
    "shakespeare": "tiny Shakespeare, a public text anyone can download",
}


def public_reason(corpus: str, base: Path | None = None) -> str | None:
    """Why students may have ``corpus``'s text (a clause), or None for a ``file:PATH`` outside the kit's folder
    and the grader package. A model that carries the held-out text scores full marks with a lookup, so a contest
    refuses such a corpus and `grade check` warns (see the module's docstring)."""
    if corpus in PUBLIC:
        return f"the {corpus!r} corpus is {PUBLIC[corpus]}"
    if corpus.startswith(FILE_PREFIX):
        path = file_path(corpus, base).resolve()  # through any link: a link in /tmp to the kit is the kit
        for root, what in ((GRADER_DIR, "the grader package"), (PROJECT_DIR, "the kit's folder")):
            if path.is_relative_to(root):
                return f"{path} lies in {what} ({root}), which students have (the release is made from it)"
    return None


def corpus_files(corpus: str, base: Path | None = None) -> list[Path]:
    """The files the corpus's text is read from: what the worker must not be able to read."""
    if corpus == "grader":
        return [FROZEN]
    if corpus.startswith(FILE_PREFIX):
        return [file_path(corpus, base)]
    if corpus == "python":
        from stretch.data import python_files  # stretch/ (torch) only for its corpora: the release has none

        return python_files()
    if corpus == "shakespeare":
        from stretch.data import shakespeare_path

        return [shakespeare_path()]
    raise CorpusError(f"unknown corpus {corpus!r}; choose one of {', '.join(CORPORA)}")


def load_text(corpus: str, data_dir: str | Path | None = None, base: Path | None = None) -> str:
    if corpus == "grader":
        return gzip.decompress(FROZEN.read_bytes()).decode("ascii")
    if corpus.startswith(FILE_PREFIX):
        path = file_path(corpus, base)
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CorpusError(f"corpus {corpus!r}: cannot read {path} as UTF-8 text: {e}") from None
    from stretch.data import load_text as stretch_text  # the stretch's loaders: one corpus, one checksum

    return stretch_text(corpus, data_dir)


@functools.lru_cache(maxsize=4)
def load_splits(corpus: str, block: int, data_dir: str | None = None, base: str | None = None) -> Splits:
    train, a, b = split_text(load_text(corpus, data_dir, Path(base) if base else None), block)
    if not a or not b:
        raise CorpusError(f"corpus {corpus!r} is too short for two held-out splits of {block}-character blocks")
    return Splits(train, a, b, tuple(sorted(set(train))) + (UNK,))


def windows(ids: torch.Tensor, count: int, length: int, offset: float = 0.0) -> torch.Tensor:
    """``count`` windows of ``length`` tokens at evenly spaced, fixed starts: a (count, length) tensor. ``offset``
    shifts every start by that share of the spacing (0.5: halfway between the starts of offset 0, so the two
    sets of windows share little text)."""
    if len(ids) < length:
        raise ValueError(f"a split of {len(ids)} tokens is shorter than one window of {length}")
    count = min(count, len(ids) // length)
    stride = (len(ids) - length) / max(1, count - 1)
    chosen = (torch.linspace(0, len(ids) - length, count) + offset * stride).clamp(max=len(ids) - length).long()
    return torch.stack([ids[s : s + length] for s in chosen.tolist()])


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--freeze"]:
        sys.exit("usage: python -m grader.lmbudget.corpus --freeze")
    freeze()
    print(f"wrote {FROZEN} ({FROZEN.stat().st_size:,} bytes)")
