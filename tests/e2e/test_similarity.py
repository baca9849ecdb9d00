"""`grade similarity FOLDER`: a copy disguised by renamed identifiers, reordered functions and changed comments
is flagged, and so is one padded with dead lines or rewritten in equivalent spellings; code written independently
is not, and neither is the stub's own text."""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import pytest

from helpers import EXERCISES, SOLUTIONS, cli

pytest.importorskip("copydetect")

# m1 written independently of the reference: other names, other operations, a helper method of its own.
INDEPENDENT_M1 = '''\
"""My attention."""
import math

import torch
from torch import nn


def causal_mask(T: int, device=None) -> torch.Tensor:
    rows = torch.arange(T, device=device).unsqueeze(1)
    cols = torch.arange(T, device=device).unsqueeze(0)
    return (cols <= rows).float()


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    length = q.size(-2)
    logits = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    allowed = causal_mask(length, device=q.device).bool()
    logits = torch.where(allowed, logits, torch.full_like(logits, float("-inf")))
    attn = torch.softmax(logits, dim=-1)
    return torch.matmul(attn, v), attn


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super().__init__()
        if d % n_heads:
            raise ValueError("d must be a multiple of n_heads")
        self.n_heads = n_heads
        self.head_size = d // n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def split(self, t: torch.Tensor) -> torch.Tensor:
        batch, length, _ = t.shape
        return t.reshape(batch, length, self.n_heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        fused = self.qkv(x)
        queries, keys, values = fused.chunk(3, dim=-1)
        mixed, _ = causal_attention(self.split(queries), self.split(keys), self.split(values))
        merged = mixed.permute(0, 2, 1, 3).reshape(batch, length, width)
        return self.proj(merged)
'''


RENAMES = [("scores", "att"), ("weights", "probs"), ("d_k", "width"), ("n_heads", "heads"), ("qkv", "fused")]
# Only names the grader never reads: a copy that still grades full.
LOCAL_RENAMES = [("scores", "att"), ("weights", "probs"), ("d_k", "width"), ("out", "res")]


def disguised(text: str, renames: list[tuple[str, str]] = RENAMES) -> str:
    """``text`` with its names renamed, its first two functions swapped and its comments reworded."""
    for old, new in renames:
        text = re.sub(rf"\b{old}\b", new, text)
    text = text.replace("# ", "# my note: ")
    first = re.search(r"def causal_mask.*?\n\n\n", text, re.S)
    assert first is not None
    text = text.replace(first[0], "")
    at = text.index("class CausalSelfAttention")
    return text[:at] + first[0] + text[at:]


def with_dead_lines(text: str) -> str:
    """``text`` with ``_unused = None`` after each simple statement: a line that does nothing, which breaks every
    25-character window of the copy's text."""
    compound = (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try)
    ends = {
        st.end_lineno: st.col_offset
        for node in ast.walk(ast.parse(text))
        for st in getattr(node, "body", [])
        if isinstance(st, ast.stmt) and not isinstance(st, compound) and st.end_lineno is not None
    }
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        lines.append(line)
        if number in ends:
            lines.append(" " * ends[number] + "_unused = None")
    return "\n".join(lines) + "\n"


def rewritten(text: str) -> str:
    """``text`` rewritten in equivalent spellings a copier reaches for (temporaries split out, ``/=``, another
    import of the functional module, ``self`` renamed, no annotations), disguised (local names only: it still
    grades full), then a dead line after each statement."""
    for old, new in [
        (
            "scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)",
            "kt = k.transpose(-2, -1)\n    scores = q @ kt\n    scores /= math.sqrt(d_k)",
        ),
        (
            "out = out.transpose(1, 2).contiguous().view(B, T, d)",
            "out = out.transpose(1, 2)\n        out = out.contiguous()\n        out = out.view(B, T, d)",
        ),
        ("return self.proj(out)", "result = self.proj(out)\n        return result"),
        ("import torch.nn.functional as F", "from torch.nn import functional as fn"),
        ("F.softmax(", "fn.softmax("),
        ("T: int, device=None) -> torch.Tensor:", "T, device=None):"),
        ("self", "me"),
    ]:
        assert old in text, old
        text = text.replace(old, new)
    return with_dead_lines(disguised(text, LOCAL_RENAMES))


@pytest.fixture
def a_class(tmp_path) -> Path:
    """alice: the reference; bob: alice's m1 disguised (his other files his own: the stubs); carol: m1 written
    independently; dave and erin: untouched stubs (the same text, but only the stub's)."""
    root = tmp_path / "class"
    shutil.copytree(SOLUTIONS, root / "alice", ignore=shutil.ignore_patterns("__pycache__"))
    for student in ("bob", "carol", "dave", "erin"):
        shutil.copytree(EXERCISES, root / student, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "bob" / "m1_attention.py").write_text(disguised((SOLUTIONS / "m1_attention.py").read_text()))
    (root / "carol" / "m1_attention.py").write_text(INDEPENDENT_M1)
    return root


def test_a_disguised_copy_is_flagged_and_independent_work_is_not(a_class):
    proc = cli("similarity", str(a_class), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["students"] == 5
    pairs = {(p["a"], p["b"]): p for p in found["pairs"]}
    assert set(pairs) == {("alice", "bob")}, pairs  # not carol, not the stubs' twins
    assert [f["file"] for f in pairs["alice", "bob"]["files"]] == ["m1_attention.py"]
    assert pairs["alice", "bob"]["files"][0]["score"] >= 0.8


def test_independent_work_scores_low_and_the_table_names_the_pair(a_class):
    """Every pair's score shown (threshold 0): carol's independent m1 shares little with alice's or bob's."""
    found = json.loads(cli("similarity", str(a_class), "--format", "json", "--threshold", "0", "--by-file").stdout)
    scores = {(p["a"], p["b"]): p["score"] for p in found["pairs"] if p["file"] == "m1_attention.py"}
    assert scores[("alice", "carol")] < 0.3 and scores[("bob", "carol")] < 0.3, scores
    assert not any("dave" in (p["a"], p["b"]) for p in found["pairs"])  # a stub has no text of its own
    table = cli("similarity", str(a_class))
    assert table.returncode == 0 and "alice / bob  m1_attention.py 100%" in table.stdout, table.stdout
    assert "1 pair of the 5 students at or above 60%" in table.stdout


@pytest.mark.parametrize("copy", [with_dead_lines, rewritten], ids=["dead-lines", "rewritten"])
def test_a_copy_padded_with_dead_lines_or_rewritten_is_flagged(a_class, copy):
    """bob's m1 is alice's with a line that does nothing after each statement (alone, or on top of renames,
    reordering and equivalent rewrites): the program is the same, and so is its normalised text."""
    (a_class / "bob" / "m1_attention.py").write_text(copy((SOLUTIONS / "m1_attention.py").read_text()))
    proc = cli("similarity", str(a_class), "--format", "json", "--threshold", "0", "--by-file")
    assert proc.returncode == 0, proc.stderr
    scores = {(p["a"], p["b"]): p["score"] for p in json.loads(proc.stdout)["pairs"] if p["file"] == "m1_attention.py"}
    assert scores[("alice", "bob")] >= 0.9, scores
    assert scores[("alice", "carol")] < 0.3 and scores[("bob", "carol")] < 0.3, scores


def test_a_linked_or_huge_exercise_file_is_not_read(tmp_path):
    """A submission's files are read without following links and bounded: a link to another student's file (or
    anything on the instructor's machine) and a file of gigabytes are left out."""
    from grader.similarity import MAX_FILE_BYTES, student_files

    other = tmp_path / "other.py"
    other.write_text("secret = 1\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "m1_attention.py").symlink_to(other)
    with open(mine / "m2_model.py", "wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: big to read, nothing on disk
    (mine / "m3_train.py").write_text("def train():\n    pass\n")
    assert set(student_files(mine)) == {"m3_train.py"}
