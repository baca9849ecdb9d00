"""The part-by-part readings of grader/suites/wiring.py, on modules in this process: the lesson's layers read
right, and each wiring mistake is read as what it is, in the words the checks print.

The modules are the reference's with one thing changed; ``InProcess`` gives them the worker's handle methods
(load, describe, state_dict, call), so the probes run as they do on a student's code, without a sandbox. That the
same readings reach a student, first, through the release's public checks is tests/e2e/test_public_checks.py's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from grader.reference import load_reference
from grader.suites import wiring

REFERENCE = load_reference()  # as the grading process loads it: the layers each mistake is made in
m1_attention, m2_model = REFERENCE.m1_attention, REFERENCE.m2_model


class InProcess:
    """A module with the worker handle's methods that the probes use."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self, *args: Any, grad: bool = True, seed: int | None = None) -> Any:
        with torch.set_grad_enabled(grad):
            out = self.module(*args)
        return out.detach() if isinstance(out, torch.Tensor) else out

    def load(self, state: dict[str, torch.Tensor]) -> None:
        with torch.no_grad():
            for name, value in state.items():
                self.module.get_parameter(name).copy_(value)

    def describe(self) -> dict:
        return {
            "parameters": {k: list(p.shape) for k, p in self.module.named_parameters()},
            "all_parameters": [k for k, _ in self.module.named_parameters(remove_duplicate=False)],
            "buffers": {k: list(b.shape) for k, b in self.module.named_buffers()},
        }

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.module.state_dict().items()}

    def call(self, method: str, *args: Any, keep: bool = False, **kwargs: Any) -> Any:
        result = getattr(self.module, method)(*args, **kwargs)
        return InProcess(result) if isinstance(result, nn.Module) else result


# ---------------------------------------------------------------- the heads' layout


class Heads(m1_attention.CausalSelfAttention):
    """The reference's layer with its heads split and merged as named: "transpose" (right), "plain", "interleaved"."""

    def __init__(self, d: int, n_heads: int, split: str = "transpose", merge: str = "transpose") -> None:
        super().__init__(d, n_heads)
        self.split_how, self.merge_how = split, merge

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        H, dh = self.n_heads, d // self.n_heads
        split = {
            "transpose": lambda t: t.reshape(B, T, H, dh).transpose(1, 2),
            "plain": lambda t: t.reshape(B, H, T, dh),
        }[self.split_how]
        q, k, v = (split(t) for t in self.qkv(x).split(d, dim=-1))
        out, _ = m1_attention.causal_attention(q, k, v)
        merged = out.transpose(1, 2).reshape(B, T, d) if self.merge_how == "transpose" else out.reshape(B, T, d)
        return self.proj(merged)


def layer(**how: str) -> InProcess:
    return InProcess(Heads(wiring.LAYOUT_D, wiring.LAYOUT_HEADS, **how))


def test_the_lessons_heads_read_right():
    assert wiring.head_layout_fault(layer()) is None
    assert wiring.head_layout_fault(InProcess(m1_attention.CausalSelfAttention(12, 3))) is None


@pytest.mark.parametrize(
    "split,merge,words",
    [
        ("plain", "transpose", "split with a plain view or reshape"),
        ("transpose", "plain", "merged without transposing back"),
        ("plain", "plain", "split with a plain view or reshape to (B, n_heads, T, d_head), which mixes"),
    ],
)
def test_heads_split_or_merged_without_a_transpose_are_named(split, merge, words):
    fault = wiring.head_layout_fault(layer(split=split, merge=merge))
    assert fault and words in fault, fault
    if split == merge == "plain":
        assert "merged without transposing back" in fault, "both mistakes are named"


def test_a_layer_without_its_projection_is_named():
    class NoProjection(Heads):
        def forward(self, x):
            return super().forward(x) - self.proj.bias  # proj's weight 0 leaves nothing: its bias is all there is

    assert wiring.projection_fault(InProcess(Heads(12, 3)), 12) is None
    fault = wiring.projection_fault(InProcess(NoProjection(12, 3)), 12)
    assert fault and "apply self.proj last" in fault


# ---------------------------------------------------------------- a LayerNorm, from its output


def rows() -> torch.Tensor:
    return wiring._scaled_rows(5, 12, 16).double()


def affine() -> tuple[torch.Tensor, torch.Tensor]:
    return wiring._norm_weights(3, 16)


def by_hand(x: torch.Tensor, eps: float, unbiased: bool = False, outside: bool = False) -> torch.Tensor:
    centred = x - x.mean(-1, keepdim=True)
    var = centred.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - unbiased)
    return centred / (var.sqrt() + eps if outside else (var + eps).sqrt())


def test_a_layernorm_reads_right_in_float32():
    x = rows()
    w, b = affine()
    out = F.layer_norm(x.float(), (16,), w, b)
    assert wiring.norm_fault(x, out, w, b, "ln") is None


@pytest.mark.parametrize(
    "normed,words",
    [
        (lambda x: by_hand(x, 1e-6), "its eps is 1e-6"),
        (lambda x: by_hand(x, 0.1), "its eps is 0.1"),
        (lambda x: by_hand(x, 0.0), "its eps is 0 (no eps at all)"),
        (lambda x: by_hand(x, 1e-5, unbiased=True), "its variance is the unbiased one"),
        (lambda x: by_hand(x, 1e-5, outside=True), "adds eps outside the square root"),
        (lambda x: by_hand(x, 1e-5, unbiased=True, outside=True), "the unbiased one"),
        (lambda x: x / (x.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt(), "does not subtract each row's mean"),
    ],
    ids=["eps-1e-6", "eps-0.1", "no-eps", "unbiased", "eps-outside", "unbiased-and-outside", "no-mean"],
)
def test_a_layernorm_mistake_is_read_from_its_output(normed: Callable, words: str):
    x = rows()
    w, b = affine()
    out = (normed(x.float()) * w + b).float()
    fault = wiring.norm_fault(x, out, w, b, "ln")
    assert fault and words in fault, fault


def test_weights_and_biases_left_out_or_borrowed_are_named():
    x = rows()
    w, b = affine()
    other = wiring._norm_weights(4, 16)
    normed = F.layer_norm(x.float(), (16,))
    cases = {
        "no weight and no bias": normed,
        "ln's weight but no bias": normed * w,
        "other's weight and bias": normed * other[0] + other[1],
        "is its input unchanged": x.float(),
    }
    for words, out in cases.items():
        fault = wiring.norm_fault(x, out, w, b, "ln", {"other": other})
        assert fault and words in fault, (words, fault)


# ---------------------------------------------------------------- the nonlinearity


def test_gelu_reads_right_and_other_nonlinearities_are_named():
    z = wiring.GELU_POINTS
    assert wiring.activation_fault(F.gelu(z).float()) is None
    for words, f in [("ReLU", F.relu), ("tanh approximation", lambda v: F.gelu(v, approximate="tanh"))]:
        fault = wiring.activation_fault(f(z).float())
        assert fault and words in fault, fault
    unknown = wiring.activation_fault(torch.sin(z))
    assert unknown and "that is" not in unknown and "nn.GELU()" in unknown, "an unnamed function is described"


# ---------------------------------------------------------------- GPTBlock and TinyGPT


class Block(m2_model.GPTBlock):
    def __init__(self, d: int, n_heads: int, forward: Callable | None = None) -> None:
        super().__init__(d, n_heads)
        self.wired = forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wired(self, x) if self.wired else super().forward(x)


BLOCKS: dict[str, tuple[Callable | None, str]] = {
    "no-attention-residual": (lambda m, x: (h := m.attn(m.ln1(x))) + m.ffn(m.ln2(h)), "residual around the attention"),
    "no-ffn-residual": (lambda m, x: m.ffn(m.ln2(x + m.attn(m.ln1(x)))), "residual around the feed-forward"),
    "post-norm": (lambda m, x: m.ln2((h := m.ln1(x + m.attn(x))) + m.ffn(h)), "post-norm"),
    "second-residual-from-input": (lambda m, x: x + m.ffn(m.ln2(x + m.attn(m.ln1(x)))), "carried into"),
    "ffn-without-ln2": (lambda m, x: (h := x + m.attn(m.ln1(x))) + m.ffn(h), "ln2 is not applied"),
    "ffn-with-ln1": (lambda m, x: (h := x + m.attn(m.ln1(x))) + m.ffn(m.ln1(h)), "applies ln1's weight and bias"),
    "attention-without-ln1": (lambda m, x: (h := x + m.attn(x)) + m.ffn(m.ln2(h)), "ln1 is not applied"),
}


def block_fault(forward: Callable | None = None, change: Callable[[nn.Module], None] = lambda m: None) -> str | None:
    torch.manual_seed(0)
    block = Block(wiring.BLOCK_D, wiring.BLOCK_HEADS, forward)
    change(block)
    return wiring.BlockProbe(lambda: InProcess(block)).fault()


def test_the_lessons_block_reads_right():
    assert block_fault() is None


@pytest.mark.parametrize("name", list(BLOCKS))
def test_a_wiring_mistake_in_the_block_is_named(name):
    forward, words = BLOCKS[name]
    fault = block_fault(forward)
    assert fault and words in fault, fault


def test_a_block_with_dropout_is_named_before_anything_is_read():
    fault = block_fault(change=lambda m: m.ffn.append(nn.Dropout(0.1)))
    assert fault and "dropout" in fault
    assert block_fault(change=lambda m: m.ffn.append(nn.Dropout(0.0))) is None, "dropout of 0 changes nothing"


def test_the_readings_after_a_fault_are_not_taken():
    torch.manual_seed(0)
    probe = wiring.BlockProbe(lambda: InProcess(Block(wiring.BLOCK_D, wiring.BLOCK_HEADS, BLOCKS["post-norm"][0])))
    assert probe.fault() and "post-norm" in str(probe.fault())
    assert set(probe._readings) == {"parameters", "random", "sublayers", "residuals"}


class Model(m2_model.TinyGPT):
    def __init__(self, *config: int, positions: Callable[[int, int], torch.Tensor] | None = None, ln: bool = True):
        super().__init__(*config)
        self.positions, self.use_ln = positions, ln

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        where = self.positions(t, self.T) if self.positions else torch.arange(t)
        x = self.tok(idx) + self.pos(where)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x) if self.use_ln else x)


@pytest.mark.parametrize(
    "options,words",
    [
        ({}, None),
        ({"ln": False}, "never applies its final LayerNorm"),
        ({"positions": lambda t, T: torch.arange(1, t + 1)}, "counted from 1"),
        ({"positions": lambda t, T: torch.arange(T - t, T)}, "aligned to the end of the table"),
        ({"positions": lambda t, T: torch.arange(t).flip(0)}, "run backwards"),
    ],
    ids=["right", "no-final-norm", "from-1", "right-aligned", "backwards"],
)
def test_the_model_reads_its_final_norm_and_positions(options, words):
    torch.manual_seed(0)
    model = Model(*wiring.MODEL, **options)
    fault = wiring.ModelProbe(lambda: InProcess(model)).fault()
    assert (fault is None) if words is None else (fault is not None and words in fault), fault


def test_initial_weights_are_those_of_the_stubs_order():
    config = (50, 64, 4, 2, 8)
    torch.manual_seed(42)
    assert wiring.initial_weights_fault(InProcess(m2_model.TinyGPT(*config)), config, 42, "TinyGPT") is None

    class HeadFirst(m2_model.TinyGPT):
        def __init__(self, *config):
            nn.Module.__init__(self)
            vocab, d, heads, layers, max_T = config
            self.head = nn.Linear(d, vocab, bias=False)  # drawn first: every later draw moves
            self.T, self.tok, self.pos = max_T, nn.Embedding(vocab, d), nn.Embedding(max_T, d)
            self.blocks = nn.ModuleList(m2_model.GPTBlock(d, heads) for _ in range(layers))
            self.ln = nn.LayerNorm(d)

    torch.manual_seed(42)
    fault = wiring.initial_weights_fault(InProcess(HeadFirst(*config)), config, 42, "TinyGPT")
    assert fault and "initial tok.weight" in fault


def test_eps_is_written_as_a_student_writes_it():
    assert wiring._eps_text(1e-6) == "1e-6" and wiring._eps_text(0.1) == "0.1" and math.isclose(1e-5, wiring.EPS)
