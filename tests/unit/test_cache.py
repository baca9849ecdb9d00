"""The disk cache (grader/cache.py) returns what it was given, and a damaged entry is only a miss."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader import cache


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(cache.VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


class Counting:
    """A compute function that says how often it ran."""

    def __init__(self, value):
        self.value, self.calls = value, 0

    def __call__(self):
        self.calls += 1
        return self.value


VALUE = ([1.5, 2.25], {"weight": torch.arange(6.0).reshape(2, 3)}, "tokens", 7)


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def entries(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.pt"))


def test_a_value_is_computed_once_then_read_back_equal(folder):
    compute = Counting(VALUE)
    first = cache.stored("seed 3, 20 steps", compute)
    second = cache.stored("seed 3, 20 steps", compute)
    assert compute.calls == 1
    assert same(first, VALUE) and same(second, VALUE)
    assert len(entries(folder)) == 1


def test_another_key_is_another_entry(folder):
    compute = Counting(VALUE)
    cache.stored("seed 3", compute)
    cache.stored("seed 4", compute)
    assert compute.calls == 2 and len(entries(folder)) == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: data[:-40] + bytes(b ^ 0xFF for b in data[-40:-39]) + data[-39:],  # one byte flipped
        lambda data: b"",  # emptied
        lambda data: b"not a cache entry at all",
    ],
    ids=["truncated", "flipped", "empty", "garbage"],
)
def test_a_damaged_entry_is_recomputed_and_rewritten(folder, damage):
    compute = Counting(VALUE)
    cache.stored("key", compute)
    (path,) = entries(folder)
    path.write_bytes(damage(path.read_bytes()))
    assert same(cache.stored("key", compute), VALUE)
    assert compute.calls == 2
    assert same(cache.stored("key", compute), VALUE) and compute.calls == 2, "the entry was not rewritten"


def test_an_entry_moved_under_another_key_is_not_believed(folder):
    """The digest covers the key: a file copied over another entry's name reads as damaged."""
    cache.stored("a", Counting([1.0]))
    cache.stored("b", Counting([2.0]))
    path_a, path_b = (cache.entry_path(k) for k in ("a", "b"))
    path_b.write_bytes(path_a.read_bytes())
    assert cache.stored("b", Counting([2.0])) == [2.0]


def test_the_grader_fingerprint_and_torch_version_are_in_the_name(folder, monkeypatch):
    before = cache.entry_path("key")
    monkeypatch.setattr(cache, "_machine", lambda: "another grader, torch 9.9")
    assert cache.entry_path("key") != before


def test_a_value_that_is_not_plain_data_is_not_written(folder):
    """A file is read with weights_only: what could not be read back that way stays in memory only."""

    class Config:
        pass

    value = Config()
    assert cache.stored("object", Counting(value)) is value
    assert entries(folder) == []


def test_off_means_no_folder_and_no_files(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.VARIABLE, "off")
    compute = Counting(VALUE)
    cache.stored("key", compute)
    cache.stored("key", compute)
    assert compute.calls == 2 and cache.folder() is None


def test_with_the_cache_off_a_library_gets_one_temporary_folder_removed_at_exit(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.VARIABLE, "off")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    script = (
        "from grader import cache; a = cache.subfolder('hypothesis'); b = cache.subfolder('hypothesis'); "
        "assert a == b and a.is_dir(), (a, b); print(a)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert Path(out.strip()).parent == tmp_path
    assert list(tmp_path.iterdir()) == [], "the temporary folder outlived the process that made it"


def test_an_unwritable_folder_costs_only_the_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setenv(cache.VARIABLE, str(blocker))
    compute = Counting(VALUE)
    assert same(cache.stored("key", compute), VALUE)
    assert same(cache.stored("key", compute), VALUE) and compute.calls == 2
