"""The two character corpora: tiny Shakespeare (downloaded once, checksummed) and Python's own standard library.

Where tiny Shakespeare comes from, first match wins:
  1. ``data_dir`` (the ``--data-dir`` option), else the ``GPTKIT_DATA_DIR`` environment variable:
     a folder that already holds ``tinyshakespeare.txt``; nothing is downloaded.
  2. The user cache, ``$XDG_CACHE_HOME/gptkit`` (default ``~/.cache/gptkit``): downloaded there on
     first use from the URL in ``datasets/sources.json``.
Either way the file must match the SHA-256 and size in ``datasets/sources.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sysconfig
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch

from grader.files import write_atomically

SOURCES = Path(__file__).resolve().parents[1] / "datasets" / "sources.json"
ENV_VAR = "GPTKIT_DATA_DIR"
CORPORA = ("shakespeare", "python")
PYTHON_CORPUS_CHARS = 1_000_000  # about the size of tiny Shakespeare, so the two train alike


class DataError(Exception):
    """A corpus is missing or corrupt; the message says what to do."""


def source(name: str = "tinyshakespeare") -> dict:
    return json.loads(SOURCES.read_text())[name]


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gptkit"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify(path: Path, meta: dict) -> None:
    """Raise DataError unless path holds exactly the published file."""
    if not path.is_file():
        raise DataError(f"{path} does not exist")
    size, digest = path.stat().st_size, sha256(path)
    if size != meta["size"] or digest != meta["sha256"]:
        raise DataError(
            f"{path} is not the published {meta['filename']}: expected {meta['size']:,} bytes with "
            f"SHA-256 {meta['sha256']}, found {size:,} bytes with SHA-256 {digest}. "
            f"Delete it and let it download again from {meta['url']}, or point {ENV_VAR} at a good copy."
        )


def download(url: str, dest: Path) -> None:
    """Fetch url into dest atomically (a temp file in the same folder, then a rename)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        write_atomically(dest, response.read())


def shakespeare_path(data_dir: str | Path | None = None) -> Path:
    """The verified tiny Shakespeare file, downloading it into the cache only when no folder is given."""
    meta = source("tinyshakespeare")
    folder = data_dir or os.environ.get(ENV_VAR)
    if folder:
        path = Path(folder).expanduser() / meta["filename"]
        if not path.is_file():
            origin = "--data-dir" if data_dir else ENV_VAR
            raise DataError(
                f"{path} not found ({origin} is {folder}). Put {meta['filename']} there "
                f"(from {meta['url']}), or drop {origin} to download it into {cache_dir()}."
            )
    else:
        path = cache_dir() / meta["filename"]
        if not path.is_file():
            fetch(meta, path)
            return path
    verify(path, meta)
    return path


def fetch(meta: dict, path: Path) -> None:
    """Download into the cache and verify; a bad download is removed, so the next run fetches it again."""
    try:
        download(meta["url"], path)
    except OSError as err:
        raise DataError(
            f"could not download {meta['url']} ({err}). Download it by hand and pass "
            f"--data-dir or set {ENV_VAR} to its folder."
        ) from err
    try:
        verify(path, meta)
    except DataError:
        path.unlink()
        raise


def python_files() -> list[Path]:
    """The corpus's files: the top-level ``*.py`` of this interpreter's standard library, sorted by name,
    pure ASCII only (keeps the vocabulary small), taken in that order until the next would pass
    ``PYTHON_CORPUS_CHARS``."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    chosen, total = [], 0
    for path in sorted(stdlib.glob("*.py"), key=lambda p: p.name):
        text = path.read_bytes()
        if not text.isascii():
            continue
        if total + len(text) > PYTHON_CORPUS_CHARS:
            break
        chosen.append(path)
        total += len(text)
    return chosen


def python_text() -> str:
    """The selected stdlib files joined with a one-line header naming each, so the model sees file boundaries."""
    return "".join(f"# file: {p.name}\n{p.read_text(encoding='ascii')}\n" for p in python_files())


def load_text(corpus: str, data_dir: str | Path | None = None) -> str:
    if corpus == "shakespeare":
        return shakespeare_path(data_dir).read_text(encoding="utf-8")
    if corpus == "python":
        return python_text()
    raise DataError(f"unknown corpus {corpus!r}; choose one of {', '.join(CORPORA)}")


class CharTokenizer:
    """One token per distinct character of the text, ids in sorted character order."""

    def __init__(self, chars: str):
        self.chars = "".join(sorted(set(chars)))
        self.stoi = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode_tensor(self, text: str) -> torch.Tensor:
        """encode() as a tensor; for ASCII text one bytes.translate pass, ~100x faster than a list for 1 MB."""
        if not (text.isascii() and self.chars.isascii()):
            return torch.tensor(self.encode(text), dtype=torch.long)
        unknown = set(text.encode()) - set(self.chars.encode())
        if unknown:
            self.encode("".join(map(chr, unknown)))  # raises DataError naming them
        table = bytes(self.stoi.get(chr(b), 0) for b in range(256))
        return torch.frombuffer(bytearray(text.encode().translate(table)), dtype=torch.uint8).long()

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - self.stoi.keys())
        if unknown:
            raise DataError(f"characters not in the vocabulary: {''.join(unknown)!r}")
        return [self.stoi[c] for c in text]

    def decode(self, ids: list[int] | torch.Tensor) -> str:
        return "".join(self.chars[int(i)] for i in ids)


@dataclass
class Dataset:
    tokenizer: CharTokenizer
    train: torch.Tensor  # (N,) token ids, the first 90% of the text
    val: torch.Tensor  # the last 10%


def split(ids: torch.Tensor, train_fraction: float = 0.9) -> tuple[torch.Tensor, torch.Tensor]:
    n = int(train_fraction * len(ids))
    return ids[:n], ids[n:]


def load_dataset(corpus: str, data_dir: str | Path | None = None, chars: str | None = None) -> Dataset:
    """The corpus encoded as characters and split 90/10. ``chars`` reuses a saved vocabulary (on resume)."""
    text = load_text(corpus, data_dir)
    tokenizer = CharTokenizer(chars or text)
    train, val = split(tokenizer.encode_tensor(text))
    return Dataset(tokenizer, train, val)
