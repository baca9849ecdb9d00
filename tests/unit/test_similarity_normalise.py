"""grader.similarity's normalising: what does not change the program is taken out before two files are compared,
so that a copy padded with dead code or respelled scores as the copy it is, while code written independently
stays apart."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest

from grader import similarity
from grader.similarity import defined_names, dictated, normalise
from helpers import EXERCISES, SOLUTIONS

# Each pair: a function f (the stub's name, kept) written two ways that compute the same; normalised, the same text.
SAME = {
    "dead assignments": (
        "def f(x):\n    y = g(x)\n    return y * 2\n",
        "def f(x):\n    _unused = None\n    y = g(x)\n    _unused = None\n    return y * 2\n    _unused = None\n",
    ),
    "a name that only feeds itself": (
        "def f(x):\n    return g(x)\n",
        "def f(x):\n    n = 0\n    n += 1\n    n = n * 2\n    return g(x)\n",
    ),
    "docstrings, pass, bare constants and names": (
        'def f(x):\n    """Doc."""\n    pass\n    42\n    x\n    ...\n    x.shape\n    return g(x)\n',
        "def f(x):\n    return g(x)\n",
    ),
    "code after return": ("def f(x):\n    return g(x)\n    x = h(x)\n    h(x)\n", "def f(x):\n    return g(x)\n"),
    "if False, while 0, if 1 > 2": (
        "def f(x):\n    if False:\n        x = h(x)\n    while 0:\n        h(x)\n"
        "    if 1 > 2:\n        h(x)\n    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "try that only re-raises": (
        "def f(x):\n    try:\n        y = g(x)\n    except Exception:\n        raise\n    return h(y)\n",
        "def f(x):\n    return h(g(x))\n",
    ),
    "del of a fresh name": ("def f(x):\n    t = 0\n    del t\n    return g(x)\n", "def f(x):\n    return g(x)\n"),
    "dead functions calling each other": (
        "def _a(n):\n    return _b(n - 1)\n\n\ndef _b(n):\n    return _a(n)\n\n\ndef _c(n):\n    return _c(n)\n\n\n"
        "def f(x):\n    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "imports, used or not, spelled any way": (
        "import os\nimport torch.nn as nn\n\n\ndef f(x):\n    return nn.Linear(x, x)\n",
        "from torch import nn\nimport sys\nimport torch\n\n\ndef f(x):\n    return torch.nn.Linear(x, x)\n",
    ),
    "definitions reordered": (
        "def f(x):\n    return _h(x) + _k(x)\n\n\ndef _h(x):\n    return x * 2\n\n\ndef _k(x):\n    return g(x, 1)\n",
        "def _k(x):\n    return g(x, 1)\n\n\ndef _h(x):\n    return x * 2\n\n\ndef f(x):\n    return _h(x) + _k(x)\n",
    ),
    "x += y": ("def f(x, y):\n    x += y\n    return h(x)\n", "def f(x, y):\n    x = x + y\n    return h(x)\n"),
    "temporaries split out": (
        "def f(x):\n    a = g(x)\n    b = a * 2\n    n = x.shape[-1]\n    return h(b, n, n)\n",
        "def f(x):\n    return h(g(x) * 2, x.shape[-1], x.shape[-1])\n",
    ),
    "one name reassigned step by step": (
        "def f(x):\n    x = g(x)\n    x = h(x)\n    return x\n",
        "def f(x):\n    return h(g(x))\n",
    ),
    "comparisons and operands in another order": (
        "def f(a, b):\n    return (a > b, 2 * a, not a == b, a + 0, b * 1)\n",
        "def f(a, b):\n    return (b < a, a * 2, a != b, a, b)\n",
    ),
    "self called something else": (
        "class C:\n    def f(me, x):\n        return me.g(x)\n",
        "class C:\n    def f(self, x):\n        return self.g(x)\n",
    ),
    "torch and math spellings": (
        "import math\nimport torch\nimport torch.nn.functional as F\n\n\n"
        "def f(q, k):\n    return F.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1)), dim=-1)\n",
        "import torch\n\n\ndef f(q, k):\n    return (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1)\n",
    ),
    "prints": ('def f(x):\n    print("x is", x.tolist())\n    return g(x)\n', "def f(x):\n    return g(x)\n"),
    "a constant flag": (
        "DEBUG = False\n\n\ndef f(x):\n    if DEBUG:\n        print(x)\n    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "calls of a function that does nothing": (
        "def _trace(*args):\n    pass\n\n\ndef f(x):\n    _trace(x)\n    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "calls whose result is thrown away": (
        "def f(x):\n    torch.zeros(1)\n    len(x)\n    x.clone().sum()\n    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "the script's main block": (
        'def f(x):\n    return g(x)\n\n\nif __name__ == "__main__":\n    f(2)\n',
        "def f(x):\n    return g(x)\n",
    ),
    "annotations": ("def f(x: int) -> int:\n    y: int = g(x)\n    return y\n", "def f(x):\n    return g(x)\n"),
    "an attribute nothing reads": (
        "class C:\n    def f(self, x):\n        self._scratch = None\n        return g(x)\n",
        "class C:\n    def f(self, x):\n        return g(x)\n",
    ),
    "else after return, negated tests": (
        "def f(x):\n    if not x:\n        return h(x)\n    else:\n        return g(x)\n",
        "def f(x):\n    if x:\n        return g(x)\n    return h(x)\n",
    ),
    "checks that only raise": (
        'def f(x):\n    assert x.dim() == 3, "3-d"\n    if x.shape[0] == 0:\n        raise ValueError("empty")\n'
        "    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "getattr with a constant name": (
        'class C:\n    def f(self, x):\n        return getattr(self, "g")(x)\n',
        "class C:\n    def f(self, x):\n        return self.g(x)\n",
    ),
    "transpose's two axes either way": (
        "def f(x):\n    return g(x.transpose(-1, -2))\n",
        "def f(x):\n    return g(x.transpose(-2, -1))\n",
    ),
    "blocks that run once": (
        "import contextlib\n\n\ndef f(x):\n    while True:\n        x = g(x)\n        break\n"
        "    for _ in range(1):\n        x = h(x)\n    with contextlib.nullcontext():\n        return k(x)\n",
        "def f(x):\n    return k(h(g(x)))\n",
    ),
    "trailing whole slices": ("def f(x):\n    return g(x[:, -1, :])\n", "def f(x):\n    return g(x[:, -1])\n"),
}

# Each pair differs in what the program does: normalising keeps them apart.
DIFFERENT = {
    "a call with an effect": ("def f(opt):\n    opt.step()\n    return 1\n", "def f(opt):\n    return 1\n"),
    "an in-place method": ("def f(x):\n    x.add_(1)\n    return g(x)\n", "def f(x):\n    return g(x)\n"),
    "a call that draws random numbers": (
        "def f(x):\n    torch.randn(3)\n    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "a test that is not constant": (
        "def f(x):\n    if x:\n        h(x)\n    return g(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
    "a loop that may run more than once": (
        "def f(x):\n    while True:\n        x = g(x)\n        if x:\n            break\n    return x\n",
        "def f(x):\n    return g(x)\n",
    ),
    "a handler that does something": (
        "def f(x):\n    try:\n        return g(x)\n    except ValueError:\n        return h(x)\n",
        "def f(x):\n    return g(x)\n",
    ),
}


@pytest.mark.parametrize("original, copy", SAME.values(), ids=SAME.keys())
def test_what_does_not_change_the_program_is_normalised_away(original, copy):
    assert normalise(original, ("C", "f")) == normalise(copy, ("C", "f"))


@pytest.mark.parametrize("one, other", DIFFERENT.values(), ids=DIFFERENT.keys())
def test_what_changes_the_program_is_kept(one, other):
    assert normalise(one, ("f",)) != normalise(other, ("f",))


def test_the_stubs_names_are_kept_and_come_first_in_the_stubs_order():
    """A function the stub defines is kept though nothing in the file calls it (the grader does), and the stub's
    definitions come first, in its order, whatever order the file has them in."""
    code = (
        "def _helper(x):\n    return g(x)\n\n\ndef second(x):\n    return _helper(x)\n\n\ndef first(x):\n    return x\n"
    )
    out = normalise(code, ("first", "second"))
    assert [n.name for n in ast.parse(out).body] == ["first", "second", "_helper"], out
    assert normalise(code, ("first",)) == "def first(x):\n    return x", "second and its helper: never called"


def test_a_method_the_framework_calls_is_kept():
    """nn.Module's __call__ calls forward: a class of the student's own keeps it though nothing names it."""
    code = (
        "class Norm(nn.Module):\n    def forward(self, x):\n        return g(x)\n\n\ndef f(x):\n    return Norm()(x)\n"
    )
    assert "def forward(self, x):" in normalise(code, ("f",))


def test_what_only_some_spellings_allow_is_left_as_it_is():
    """getattr(x, "and") is not x.and, and a pattern's complex number is written real part first."""
    out = normalise('def f(x):\n    return getattr(x, "and")(1)\n', ("f",))
    assert "getattr" in out and ast.parse(out)
    out = normalise("def f(x):\n    match x:\n        case -1 + 2j:\n            return g(x)\n", ("f",))
    assert "-1 + 2j" in out and ast.parse(out)


def test_a_file_that_does_not_parse_is_compared_as_it_is():
    for code in ("def f(:\n    return 1\n", "x = 1\x00\n", "x = " + " + ".join(["y"] * 3000) + "\n"):
        assert normalise(code, ("f",)) == code  # the last parses, but nests deeper than the rewrites walk


@pytest.mark.parametrize("folder", [SOLUTIONS, EXERCISES], ids=["solutions", "exercises"])
def test_the_kits_files_normalise_to_python_and_stay_put(folder):
    """Every reference and stub file is normalised (none falls back), to Python, and normalising it again changes
    nothing: the order and the spellings chosen are one fixed point, not a walk."""
    for path in sorted(folder.glob("*.py")):
        keep = defined_names((EXERCISES / path.name).read_text())
        out = normalise(path.read_text(), keep)
        assert out != path.read_text(), path.name
        ast.parse(out)
        assert normalise(out, keep) == out, path.name


def test_the_code_a_stubs_docstrings_spell_out_is_read():
    """What the stub tells every student to write is the stub's text too: m2's docstrings spell out its layers."""
    spelled = dictated((EXERCISES / "m2_model.py").read_text())
    assert spelled is not None
    for line in ("self.ln1 = nn.LayerNorm(d)", "self.attn = CausalSelfAttention(d, n_heads)", "x = x + attn(ln1(x))"):
        assert line in spelled, spelled
    assert dictated("def f(:") is None


# Implementations of m1 and m2 written independently of the reference (and of each other), each in its own style;
# each computes what the reference computes (the same outputs from the same seed).
M1_EINSUM = """\
import math

import torch
import torch.nn as nn


def causal_mask(T, device=None):
    # start from all ones and zero everything above the diagonal
    m = torch.ones((T, T), device=device)
    return m.tril()


def causal_attention(q, k, v):
    dk = q.shape[-1]
    att = torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(dk)
    n = att.shape[-1]
    keep = causal_mask(n, device=q.device)
    att = att.masked_fill(keep == 0, -float("inf"))
    att = att.softmax(dim=-1)
    y = torch.einsum("...ij,...jd->...id", att, v)
    return y, att


class CausalSelfAttention(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        if d % n_heads != 0:
            raise ValueError(f"{d} is not divisible by {n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.size()
        h = self.n_heads
        qkv = self.qkv(x).reshape(b, t, 3, h, c // h)
        qkv = qkv.permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        y, _ = causal_attention(q, k, v)
        y = y.permute(0, 2, 1, 3).reshape(b, t, c)
        return self.proj(y)
"""

M1_LOOP_OVER_HEADS = '''\
"""Attention, written with an explicit loop over heads."""
from math import sqrt

import torch
from torch import nn
from torch.nn import functional as F


def causal_mask(T: int, device=None) -> torch.Tensor:
    idx = torch.arange(T, device=device)
    return (idx[:, None] >= idx[None, :]).to(torch.float32)


def causal_attention(q, k, v):
    """Scaled dot product with a -inf bias on the future."""
    size = q.shape[-1]
    T = q.shape[-2]
    bias = torch.zeros(T, T, device=q.device)
    bias[causal_mask(T, q.device) == 0] = float("-inf")
    raw = q.matmul(k.transpose(-1, -2))
    w = F.softmax(raw / sqrt(size) + bias, dim=-1)
    return w.matmul(v), w


class CausalSelfAttention(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super(CausalSelfAttention, self).__init__()
        assert d % n_heads == 0
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.n_heads = n_heads
        self.d = d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hs = self.d // self.n_heads
        q_all, k_all, v_all = torch.split(self.qkv(x), self.d, dim=2)
        outputs = []
        for h in range(self.n_heads):
            lo, hi = h * hs, (h + 1) * hs
            o, _ = causal_attention(q_all[..., lo:hi], k_all[..., lo:hi], v_all[..., lo:hi])
            outputs.append(o)
        joined = torch.cat(outputs, dim=-1)
        return self.proj(joined)
'''

M1_UNFLATTEN = """\
import math
import torch
from torch import nn


def causal_mask(T, device=None):
    blocked = torch.triu(torch.ones(T, T, dtype=torch.bool, device=device), diagonal=1)
    return (~blocked).float()


def causal_attention(q, k, v):
    scale = 1 / math.sqrt(k.size(-1))
    similarity = (q * scale) @ k.mT
    length = similarity.size(-1)
    future = causal_mask(length, device=similarity.device) < 0.5
    similarity.masked_fill_(future, float("-inf"))
    probabilities = torch.nn.functional.softmax(similarity, -1)
    return probabilities @ v, probabilities


class CausalSelfAttention(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        if d % n_heads:
            raise ValueError("bad head count")
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def heads(self, t):
        return t.unflatten(-1, (self.n_heads, -1)).transpose(-3, -2)

    def forward(self, x):
        q, k, v = map(self.heads, self.qkv(x).chunk(3, -1))
        mixed = causal_attention(q, k, v)[0]
        return self.proj(mixed.transpose(-3, -2).flatten(-2))
"""

M2_TEMPORARIES = """\
import torch
import torch.nn as nn

from m1_attention import CausalSelfAttention


class GPTBlock(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_heads)
        self.ln2 = nn.LayerNorm(d)
        hidden = 4 * d
        self.ffn = nn.Sequential(
            nn.Linear(d, hidden),
            nn.GELU(),
            nn.Linear(hidden, d),
        )

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h)
        h = self.ln2(x)
        return x + self.ffn(h)


class TinyGPT(nn.Module):
    def __init__(self, vocab_size, d, n_heads, n_layers, max_T):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_T, d)
        layers = []
        for _ in range(n_layers):
            layers.append(GPTBlock(d, n_heads))
        self.blocks = nn.ModuleList(layers)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)
        self.T = max_T

    def forward(self, idx):
        B, t = idx.shape
        if t > self.T:
            raise ValueError("sequence too long")
        positions = torch.arange(0, t, dtype=torch.long, device=idx.device)
        h = self.tok(idx) + self.pos(positions)[None, :, :]
        for blk in self.blocks:
            h = blk(h)
        h = self.ln(h)
        logits = self.head(h)
        return logits


def count_parameters(model):
    seen = set()
    total = 0
    for p in model.parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if p.requires_grad:
            total += p.numel()
    return total
"""

M2_TERSE = '''\
"""My GPT."""
import torch
from torch import nn
from m1_attention import CausalSelfAttention


class GPTBlock(nn.Module):
    """pre-norm block"""

    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d), CausalSelfAttention(d, n_heads)
        self.ln2 = nn.LayerNorm(d)
        self.ffn = nn.Sequential(*[nn.Linear(d, d * 4), nn.GELU(), nn.Linear(d * 4, d)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attended = x + self.attn(self.ln1(x))
        return attended + self.ffn(self.ln2(attended))


class TinyGPT(nn.Module):
    def __init__(self, vocab_size: int, d: int, n_heads: int, n_layers: int, max_T: int):
        super().__init__()
        self.T = max_T
        self.tok, self.pos = nn.Embedding(vocab_size, d), nn.Embedding(max_T, d)
        self.blocks = nn.ModuleList([GPTBlock(d, n_heads) for i in range(n_layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(in_features=d, out_features=vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        n = idx.size(1)
        assert n <= self.T, "too long"
        where = torch.arange(n, device=idx.device).unsqueeze(0)
        state = self.tok(idx) + self.pos(where)
        state = nn.Sequential(*self.blocks)(state)
        return self.head(self.ln(state))


def count_parameters(model: nn.Module) -> int:
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    return sum(map(lambda p: p.numel(), unique.values()))
'''

M2_HELPERS = """\
import torch
from torch import nn
from m1_attention import CausalSelfAttention


def _feed_forward(width):
    return nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))


class GPTBlock(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_heads)
        self.ln2 = nn.LayerNorm(d)
        self.ffn = _feed_forward(d)

    def _residual(self, x, norm, layer):
        return x + layer(norm(x))

    def forward(self, x):
        x = self._residual(x, self.ln1, self.attn)
        x = self._residual(x, self.ln2, self.ffn)
        return x


class TinyGPT(nn.Module):
    def __init__(self, vocab_size, d, n_heads, n_layers, max_T):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(max_T, d)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            self.blocks.append(GPTBlock(d, n_heads))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab_size, bias=False)
        self.T = max_T

    def embed(self, idx):
        steps = torch.arange(idx.shape[-1], device=idx.device)
        return self.tok(idx) + self.pos(steps)

    def forward(self, idx):
        out = self.embed(idx)
        for layer in self.blocks:
            out = layer(out)
        out = self.ln(out)
        return self.head(out)


def count_parameters(model):
    return sum(p.numel() for p in set(model.parameters()))
"""


@pytest.fixture
def independent_class(tmp_path) -> Path:
    """The reference and three students whose m1 and m2 were written independently; their other files the stubs."""
    pytest.importorskip("copydetect")
    root = tmp_path / "class"
    shutil.copytree(SOLUTIONS, root / "reference", ignore=shutil.ignore_patterns("__pycache__"))
    mine = {
        "einsum": (M1_EINSUM, M2_TEMPORARIES),
        "loop": (M1_LOOP_OVER_HEADS, M2_TERSE),
        "unflatten": (M1_UNFLATTEN, M2_HELPERS),
    }
    for student, (m1, m2) in mine.items():
        shutil.copytree(EXERCISES, root / student, ignore=shutil.ignore_patterns("__pycache__"))
        (root / student / "m1_attention.py").write_text(m1)
        (root / student / "m2_model.py").write_text(m2)
    return root


def test_independent_implementations_stay_well_under_the_threshold(independent_class):
    """Every pair of the four independent m1s and m2s scores under 0.4 (the threshold is 0.6): m2's stub dictates
    most of its layers, and what it dictates counts for no one."""
    pairs, students = similarity.compare(independent_class, threshold=0.0)
    assert students == 4
    scores = {(p.file, p.a, p.b): p.score for p in pairs}
    for file in ("m1_attention.py", "m2_model.py"):
        mine = {key: score for key, score in scores.items() if key[0] == file}
        assert len(mine) == 6, scores  # every pair compared
        assert max(mine.values()) < 0.4, mine


def test_a_file_that_does_not_parse_gets_todays_fingerprints():
    pytest.importorskip("copydetect")
    stub = similarity.read_stubs(EXERCISES)["m1_attention.py"]
    broken = (SOLUTIONS / "m1_attention.py").read_text().replace("def causal_mask(", "def causal_mask((")
    assert similarity.file_fingerprints(broken, stub) == similarity.fingerprints(broken, stub.prints)


def test_every_pair_of_the_catalogue_scores_as_a_copy():
    """Each equivalent pair above, as whole files (the reference's m1 with the pair's code added), scores 1."""
    pytest.importorskip("copydetect")
    stub = similarity.read_stubs(EXERCISES)["m1_attention.py"]
    reference = (SOLUTIONS / "m1_attention.py").read_text()
    for name, (original, copy) in SAME.items():
        one = similarity.file_fingerprints(reference + "\n\n" + original, stub)
        other = similarity.file_fingerprints(reference + "\n\n" + copy, stub)
        assert len(one & other) / min(len(one), len(other)) == 1, name


def test_a_notebook_cell_that_does_not_parse_is_left_out(tmp_path):
    """The grader runs a notebook cell by cell and skips one that does not parse: a junk cell must not keep the
    rest from being normalised, or a copy could add one to undo all of the above."""
    pytest.importorskip("copydetect")
    reference = (SOLUTIONS / "m1_attention.py").read_text().split("\nif __name__")[0]
    padded = "\n".join(
        line + ("\n_unused = None" if line.startswith("    return") else "") for line in reference.split("\n")
    )

    def notebook(name: str, *sources: str) -> Path:
        cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "source": s} for s in sources]
        path = tmp_path / f"{name}.ipynb"
        path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        return path

    mine = similarity.student_files(notebook("alice", reference))[similarity.NOTEBOOK]
    theirs = similarity.student_files(notebook("bob", padded, "def broken(:\n"))[similarity.NOTEBOOK]
    assert "broken" not in theirs
    stub = similarity.read_stubs(EXERCISES)[similarity.NOTEBOOK]
    one, other = similarity.file_fingerprints(mine, stub), similarity.file_fingerprints(theirs, stub)
    assert one == other
