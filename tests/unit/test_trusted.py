"""The grader's trusted earlier milestones implement the whole contract of the stubs they replace.

While a later milestone is graded, ``from m1_attention import ...`` (or m2_model, m3_train) gets
the grader's own module. A name, a signature or an attribute that the stub documents and the
trusted module lacks would fail a correct student who uses it, with the grader's fault reported
as theirs. So every trusted module is compared with its stub here: names and signatures from the
stub's source, instance attributes and submodules from the reference.
"""

from __future__ import annotations

import ast
import inspect
import sys
import types

import pytest

from grader.milestones import MILESTONES
from grader.sandbox.session import trusted_source
from helpers import EXERCISES, SOLUTIONS

TRUSTED = sorted({name for m in MILESTONES.values() for name in m.trusted})
# Small constructor arguments for each class the earlier milestones define.
SMALL_ARGS = {"CausalSelfAttention": (8, 2), "GPTBlock": (8, 2), "TinyGPT": (11, 8, 2, 2, 5)}

OLD_TRUSTED_M1 = """
import torch, torch.nn as nn
def causal_mask(T, device=None):
    return torch.ones(T, T, device=device).tril()
class CausalSelfAttention(nn.Module):
    def __init__(self, d, n_heads):
        super().__init__()
        self.heads = n_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
"""


def stub_api(name: str) -> dict[str, list[tuple[str, str | None]] | None]:
    """Every public function, class and class method of a stub, with its parameters (name, default source);
    None for a class (its methods are listed on their own)."""

    def params(fn: ast.FunctionDef) -> list[tuple[str, str | None]]:
        positional = fn.args.posonlyargs + fn.args.args
        defaults = [None] * (len(positional) - len(fn.args.defaults)) + [ast.unparse(d) for d in fn.args.defaults]
        return [(a.arg, d) for a, d in zip(positional, defaults)] + [
            (a.arg, None if d is None else ast.unparse(d)) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)
        ]

    api: dict[str, list[tuple[str, str | None]] | None] = {}
    for node in ast.parse((EXERCISES / f"{name}.py").read_text()).body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            api[node.name] = params(node)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            api[node.name] = None
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and (item.name == "__init__" or not item.name.startswith("_")):
                    api[f"{node.name}.{item.name}"] = params(item)
    return api


def load(name: str, source: str) -> types.ModuleType:
    """Execute a trusted module's source as the worker does (earlier trusted modules already in sys.modules)."""
    module = types.ModuleType(name)
    exec(compile(source, f"<grader's {name}>", "exec"), module.__dict__)
    return module


def signature(obj) -> list[tuple[str, str | None]]:
    return [
        (p.name, None if p.default is inspect.Parameter.empty else repr(p.default))
        for p in inspect.signature(obj).parameters.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def public_attributes(obj) -> set[str]:
    """The instance attributes and submodules a module object carries (nn.Module's own bookkeeping left out)."""
    names = {k for k in vars(obj) if not k.startswith("_") and k != "training"}
    return names | {k for k, _ in obj.named_children()}


def contract_gaps(name: str, module: types.ModuleType, reference: types.ModuleType) -> list[str]:
    """What ``module`` lacks of the stub's names and signatures and of the reference's attributes."""
    gaps = []
    for qualname, params in stub_api(name).items():
        obj = module
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
        if obj is None:
            gaps.append(f"{qualname} is missing")
        elif params is not None and signature(obj) != params:
            gaps.append(f"{qualname}{signature(obj)} differs from the stub's {params}")
    for cls, args in SMALL_ARGS.items():
        if hasattr(reference, cls) and hasattr(module, cls) and cls in stub_api(name):
            missing = public_attributes(getattr(reference, cls)(*args)) - public_attributes(getattr(module, cls)(*args))
            gaps += [f"{cls}(...).{attr} is missing" for attr in sorted(missing)]
    return gaps


@pytest.fixture
def trusted_modules(monkeypatch) -> dict[str, types.ModuleType]:
    """The trusted modules, loaded in lesson order, as a later milestone's worker holds them."""
    modules = {}
    for name in TRUSTED:
        modules[name] = load(name, trusted_source(name))
        monkeypatch.setitem(sys.modules, name, modules[name])
    return modules


@pytest.fixture
def references(monkeypatch) -> dict[str, types.ModuleType]:
    monkeypatch.syspath_prepend(str(SOLUTIONS))
    for name in TRUSTED:
        monkeypatch.delitem(sys.modules, name, raising=False)
    return {name: __import__(name) for name in TRUSTED}


def test_every_later_milestone_trusts_m1_to_m3():
    assert TRUSTED == ["m1_attention", "m2_model", "m3_train"]


@pytest.mark.parametrize("name", TRUSTED)
def test_trusted_module_implements_the_stubs_contract(name, trusted_modules, references):
    gaps = contract_gaps(name, trusted_modules[name], references[name])
    assert not gaps, f"the grader's trusted {name} does not implement the stub's contract: {gaps}"


def test_the_comparison_finds_a_missing_name_and_attribute(trusted_modules, references):
    """The other direction: the trusted M1 of grader 0.1.0 (no causal_attention; n_heads kept as `heads`) fails."""
    gaps = contract_gaps("m1_attention", load("m1_attention", OLD_TRUSTED_M1), references["m1_attention"])
    assert "causal_attention is missing" in gaps
    assert "CausalSelfAttention(...).n_heads is missing" in gaps
    assert any(g.startswith("CausalSelfAttention.forward") for g in gaps)
