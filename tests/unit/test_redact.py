"""The redactor that keeps the grader's trusted modules out of every report (grader/sandbox/secrecy.py).

It must withhold the trusted code however it is laid out (exact lines, reflowed, re-indented, a few
lines at a time, as ``repr`` or JSON writes it) and leave everything else alone: the stubs students
are given, the grader's own messages, ordinary error messages.
"""

from __future__ import annotations

import ast
import inspect
import json
import linecache
import re
import socket
import sys
import types

import pytest

from grader.sandbox import secrecy
from grader.sandbox.client import Limits, StudentError, WorkerConnection
from grader.sandbox.common import wire
from grader.sandbox.common.agreement import Reply
from grader.sandbox.secrecy import WITHHELD, Redactor, code_text, trusted_source, trusted_sources, worker_text
from grader.sandbox.worker import trusted_code
from helpers import EXERCISES, REPO

NAMES = list(trusted_sources())
M1 = trusted_source("m1_attention") or ""
pytestmark = pytest.mark.skipif(not M1, reason="no trusted modules (a student release)")


def squash(text: str) -> str:
    """No spaces, one kind of quote, line-break escapes read as spaces: how a copy is recognised."""
    return re.sub(r"\s+", "", re.sub(r"\\[nrt]", " ", text)).replace("'", '"')


GIVEN = squash("\n".join(p.read_text() for p in sorted(EXERCISES.glob("*.py"))))


def secret_lines(source: str) -> list[str]:
    """The lines of a trusted module's code (as written and as a worker gets it) of at least 20 non-space
    characters that no stub contains."""
    lines = {squash(line) for text in (code_text(source), worker_text(source)) for line in text.splitlines()}
    return sorted(line for line in lines if len(line) >= 20 and line not in GIVEN)


def leaked(text: str, source: str = M1) -> list[str]:
    """The secret lines found in ``text``, whatever its spacing."""
    flat = squash(text)
    return [line for line in secret_lines(source) if line in flat]


@pytest.fixture(scope="module")
def redact() -> Redactor:
    return secrecy.trusted_redactor()


def test_there_is_something_to_keep_secret():
    assert NAMES == ["m1_attention", "m2_model", "m3_train"]
    for name in NAMES:
        assert len(secret_lines(trusted_source(name) or "")) >= 5, name


@pytest.mark.parametrize("name", NAMES)
def test_the_whole_source_is_withheld(redact, name):
    source = trusted_source(name) or ""
    assert leaked(source, source), "the check below would prove nothing"
    for text in (source, worker_text(source), code_text(source)):
        out = redact(text)
        assert WITHHELD in out
        assert not leaked(out, source), out


def test_each_line_alone_is_withheld(redact):
    for line in worker_text(M1).splitlines():
        if squash(line) in secret_lines(M1):
            assert not leaked(redact(f"your code raised ValueError: {line.strip()}")), line


@pytest.mark.parametrize(
    "reflow",
    [
        lambda s: " ".join(s.split()),  # one line
        lambda s: "\n".join("\t\t" + line.strip() for line in s.splitlines()),  # re-indented
        lambda s: re.sub(r"\s*([(),=])\s*", r"\1", s),  # spaces around punctuation dropped
        lambda s: re.sub(r"([(,])", r"\1\n    ", s),  # arguments one per line
        repr,  # as repr() writes it: \n escapes, quotes escaped
        json.dumps,  # as JSON writes it
        lambda s: s.replace('"', "'"),  # the other quotes
    ],
    ids=["one-line", "reindented", "no-spaces", "wrapped", "repr", "json", "quotes"],
)
def test_reflowed_source_is_withheld(redact, reflow):
    for text in (M1, worker_text(M1)):
        changed = reflow(text)
        assert leaked(changed), "the reflowed text should still hold the source"
        assert not leaked(redact(changed)), redact(changed)


def test_a_fragment_of_a_few_lines_inside_a_message_is_withheld(redact):
    lines = worker_text(M1).splitlines()
    start = next(i for i, line in enumerate(lines) if "future" in line)
    fragment = "\n".join(lines[start : start + 3])
    message = f"shapes differ; by the way:\n{fragment}\nthat is all"
    out = redact(message)
    assert leaked(message) and not leaked(out)
    assert out.startswith("shapes differ; by the way:") and out.endswith("that is all"), out


def test_a_tail_shorter_than_the_window_is_withheld_with_its_line(redact):
    line = next(line for line in worker_text(M1).splitlines() if "masked_fill" in line).strip()
    out = redact(f"{line}\nmy own words here")
    assert "masked_fill" not in out and "-inf" not in out and out.endswith("my own words here"), out


def test_stubs_given_to_students_are_left_alone(redact):
    for path in sorted(EXERCISES.glob("*.py")):
        text = path.read_text()
        assert redact(text) == text, path.name


ORDINARY = [
    "your code raised ValueError: expected a tensor of shape (2, 5, 16), got (2, 16, 5)",
    "the submission's files could not be imported: your code raised ModuleNotFoundError: No module named 'numpy'",
    "the attention weights differ from the reference at batch 0, position 3, channel 5: got 0.25, expected 0.5",
    "TinyGPT has no parameter blocks.0.attn.qkv.weight (the fused projection qkv = nn.Linear(d, 3 * d))",
    "not implemented yet: your code raised NotImplementedError (at m2_model.py:12 in forward)",
    "your code raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (10x16 and 32x48)",
    "x" * 5000,
]


@pytest.mark.parametrize("message", ORDINARY)
def test_ordinary_messages_are_left_alone(redact, message):
    assert redact(message) == message


def test_the_graders_own_message_texts_are_left_alone(redact):
    """Every string literal in the grader (its messages, hints, f-string parts) outside the trusted modules."""
    changed = []
    for path in sorted((REPO / "grader").rglob("*.py")):
        if "trusted" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and redact(node.value) != node.value:
                changed.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value[:80]!r}")
    assert not changed, "\n".join(changed)


def withheld_parts(original: str, redacted: str) -> list[str]:
    """What the redactor took out of ``original`` (``redacted`` is ``original`` with those parts replaced)."""
    kept = redacted.split(WITHHELD)
    pattern = "(.*?)".join(re.escape(k) for k in kept)
    found = re.fullmatch(pattern, original, re.DOTALL)
    assert found, "the redactor changed more than the parts it withheld"
    return list(found.groups())


TRUSTED_CODE = squash(
    " ".join(text for n in NAMES for s in [trusted_source(n) or ""] for text in (code_text(s), worker_text(s)))
)


@pytest.mark.parametrize("name", ["m1_attention", "m4_generate", "m5_scaling", "m7_kvcache", "m8_sampling", "quiz"])
def test_a_students_own_code_loses_only_what_the_trusted_code_holds(redact, name):
    """A student's own files (the reference's, here) shown in a message: what is withheld, if anything, is
    a run of the trusted code (an idiom both share, ``torch.ones(T, T, device=device)``); the rest stays."""
    own = (REPO / "solutions" / f"{name}.py").read_text()
    out = redact(own)
    for part in withheld_parts(own, out):
        assert len(squash(part)) >= 20 and squash(part) in TRUSTED_CODE, part
    assert len(out) > 0.8 * len(own), out


def test_values_are_redacted_keys_included(redact):
    line = next(line for line in worker_text(M1).splitlines() if "masked_fill" in line)
    value = {"answer": [line, 3, None, {line: "fine"}], "ok": "short"}
    out = redact.value(value)
    assert out["answer"][0].strip() == WITHHELD and out["answer"][1:3] == [3, None]
    assert [k.strip() for k in out["answer"][3]] == [WITHHELD] and out["ok"] == "short"


def test_without_trusted_sources_nothing_changes():
    assert Redactor(()).__call__(M1) == M1


# ---------------------------------------------------------------- the worker's side


def test_the_worker_gets_code_without_docstrings_or_comments():
    for name in NAMES:
        source = trusted_source(name) or ""
        text = worker_text(source)
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                assert ast.get_docstring(node) is None, (name, getattr(node, "name", "module"))
        assert "#" not in text, name
        defined = {n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        assert defined == {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}


def test_a_trusted_module_leaves_nothing_to_read_its_source_from(monkeypatch):
    req = {"op": "import", "modules": [], "trusted": {"m1_attention": worker_text(M1)}}
    monkeypatch.delitem(sys.modules, "m1_attention", raising=False)
    trusted = trusted_code.take_trusted(req)
    assert "trusted" not in req, "the request still holds the code once the trusted modules are taken"
    module = trusted_code.load_trusted("m1_attention", trusted.pop("m1_attention"))
    assert isinstance(module, types.ModuleType) and sys.modules["m1_attention"] is module
    assert not hasattr(module, "__file__") and module.__loader__ is None and module.__spec__ is None
    assert module.__doc__ is None
    for obj in (module, module.CausalSelfAttention, module.causal_attention):
        with pytest.raises((OSError, TypeError)):
            inspect.getsource(obj)
    assert linecache.getlines(module.causal_attention.__code__.co_filename) == []


# ---------------------------------------------------------------- the grading process's side


class _Server:
    limits = Limits()

    def reap(self, pid: int, grace: float) -> dict:
        return {}


def _reply_through_a_worker_connection(reply: dict):
    ours, theirs = socket.socketpair()
    worker = WorkerConnection(_Server(), ours, 0, REPO / "unused")  # type: ignore[arg-type]
    wire.send(theirs, reply)
    try:
        return worker.request({"op": "call"})
    finally:
        ours.close()
        theirs.close()


def test_a_workers_error_reply_is_redacted_as_it_arrives():
    source = worker_text(M1)
    error = {"type": source[:300], "message": source, "where": [source[-200:]]}
    with pytest.raises(StudentError) as caught:
        _reply_through_a_worker_connection({Reply.ERROR: error})
    assert WITHHELD in caught.value.message
    assert not leaked(str(caught.value)) and not leaked(caught.value.type) and not leaked(" ".join(caught.value.where))


def test_a_workers_value_reply_is_redacted_as_it_arrives():
    source = worker_text(M1)
    value = {"t": "list", "items": [{"t": "py", "v": source}, {"t": "handle", "id": 1, "type": source}]}
    got = _reply_through_a_worker_connection({Reply.VALUE: value})
    assert not leaked(got[0]) and WITHHELD in got[0]
    assert not leaked(got[1].type)


def test_without_the_redactor_the_reply_would_hold_the_source(monkeypatch):
    """The control: the same reply, with the redactor switched off, brings the source back."""
    monkeypatch.setattr(secrecy, "trusted_redactor", lambda: Redactor(()))
    with pytest.raises(StudentError) as caught:
        _reply_through_a_worker_connection({Reply.ERROR: {"type": "ValueError", "message": M1}})
    assert leaked(caught.value.message)
