"""No report shows the grader's trusted modules: an m2 that steals m1's code gets none of it back.

While M2 is graded the worker runs the grader's own ``m1_attention`` (see grader/sandbox/secrecy.py).
Each submission here is the reference with one hostile change to ``m2_model.py`` that looks for that
code every way it can and shows it through an exception, printed output, a returned value or a file.
Graded through the CLI (``--format json`` as a command, ``-v`` run by click here): no line of the trusted
code appears in the JSON, the text, the grader's output or any file left behind. The control grades the same
theft with the redactor switched off, and the code comes back: the redactor is what keeps it out.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.sandbox import secrecy
from grader.sandbox.secrecy import WITHHELD, code_text, trusted_source, worker_text
from helpers import EXERCISES, REPO, Variant, check_here

pytestmark = [
    pytest.mark.slow,  # every test here grades a submission
    pytest.mark.skipif(trusted_source("m1_attention") is None, reason="no trusted modules (a student release)"),
]

M1 = trusted_source("m1_attention") or ""
PLANTED = worker_text(M1)  # the code exactly as the worker gets it: what a thief finds, however they find it
ANCHOR = "from m1_attention import CausalSelfAttention\n"
COUNT_BODY = "    return sum(p.numel() for p in model.parameters())\n"

STEAL = r'''
def _every_way():
    """Every place m1's code could be read from, as text."""
    import ctypes, dis, gc, inspect, io, linecache, sys
    m = sys.modules["m1_attention"]
    found = []

    def attempt(how):
        try:
            found.append(str(how()))
        except Exception as e:
            found.append(repr(e))

    for obj in (m, m.CausalSelfAttention, m.causal_attention, m.CausalSelfAttention.forward):
        attempt(lambda: inspect.getsource(obj))
    attempt(lambda: open(m.__file__).read())
    attempt(lambda: m.__loader__.get_source(m.__name__))
    attempt(lambda: m.__spec__.loader.get_source(m.__name__))
    attempt(lambda: "".join(linecache.getlines(m.causal_attention.__code__.co_filename)))
    attempt(lambda: m.__doc__)
    # the request that brought the code: through the garbage collector, and up the stack
    for d in gc.get_objects():
        if isinstance(d, dict) and isinstance(d.get("trusted"), dict):
            found += [str(v) for v in d["trusted"].values()]
    frame = sys._getframe()
    while frame:
        found += [v for v in list(frame.f_locals.values()) if isinstance(v, str) and "causal" in v]
        frame = frame.f_back
    # the code objects: their constants, and the disassembly

    def consts(code):
        for c in code.co_consts:
            yield from consts(c) if hasattr(c, "co_consts") else [repr(c)]

    for v in vars(m).values():
        for fn in [v, *vars(v).values()] if isinstance(v, type) else [v]:
            if hasattr(fn, "__code__"):
                found += list(consts(fn.__code__))
                out = io.StringIO()
                dis.dis(fn, file=out)
                found.append(out.getvalue())
    # the process's own memory: the freed bytes of the request may still hold the text
    with open("/proc/self/maps") as maps:
        for line in maps:
            addr, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if perms.startswith("rw") and not line.split()[-1].startswith("[v") and hi - lo < 256 << 20:
                chunk = ctypes.string_at(lo, hi - lo)
                start = chunk.find(b"dtype=torch.bool, device=q.device")
                if start >= 0:
                    found.append(chunk[max(0, start - 400) : start + 900].decode("utf-8", "replace"))
    return found


def _best():
    """What holds the most of m1's code, cut to what an exception message keeps (2,000 characters)."""
    text = max(_every_way(), key=lambda s: s.count("torch."))
    return text[text.find("def causal") :][:1900] if "def causal" in text else text[:1900]
'''


def steal(then: str) -> Variant:
    """The reference, with m2_model.py hunting m1's code at import, then doing ``then`` with ``_best()``."""
    return Variant(f"steal-{then[:20]}", "m2", edits={"m2_model.py": [(ANCHOR, ANCHOR + STEAL + then + "\n")]})


ATTACKS = {
    "raised": steal("raise ValueError(_best())"),
    "raised-each-way": steal("raise ValueError(' | '.join(s[:150] for s in _every_way()))"),
    "printed": steal("import sys\nprint(*_every_way())\nprint(*_every_way(), file=sys.stderr)"),
    "written": steal(
        "import os\n"
        "for _folder in (os.getcwd(), os.path.dirname(os.path.abspath(__file__)), '/tmp'):\n"
        "    with open(os.path.join(_folder, 'stolen.txt'), 'w') as _f:\n"
        "        _f.write('\\n'.join(_every_way()))"
    ),
    # As if the code had been found some other way: through the exception, the type, and a returned value.
    "planted-raised": Variant(
        "planted", "m2", edits={"m2_model.py": [(ANCHOR, ANCHOR + f"raise ValueError({PLANTED!r})\n")]}
    ),
    "planted-type": Variant(
        "planted-type",
        "m2",
        edits={"m2_model.py": [(ANCHOR, ANCHOR + f"raise type({PLANTED[-300:]!r}, (Exception,), {{}})('x')\n")]},
    ),
    "planted-value": Variant(
        "planted-value",
        "m2",
        edits={"m2_model.py": [(COUNT_BODY, f"    return {PLANTED[PLANTED.find('future') :]!r}\n")]},
    ),
}


def squash(text: str) -> str:
    """No spaces, one kind of quote, line-break escapes read as spaces: how a copy is recognised."""
    return re.sub(r"\s+", "", re.sub(r"\\[nrt]", " ", text)).replace("'", '"')


GIVEN = squash("\n".join(p.read_text() for p in sorted(EXERCISES.glob("*.py"))))
SECRET = sorted(
    {
        line
        for text in (code_text(M1), worker_text(M1))
        for line in map(squash, text.splitlines())
        if len(line) >= 20 and line not in GIVEN
    }
)


def leaked(text: str) -> list[str]:
    flat = squash(text)
    return [line for line in SECRET if line in flat]


def strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *strings(v)]]
    return []


def grade_both(
    submission: Path, workdir: Path, command: tuple[str, ...] = (sys.executable, "-m", "grader")
) -> tuple[dict, str]:
    """``grade check --format json -o`` on m2 as a command (so what its grading process prints counts too), and
    ``grade check -v`` run by click in this process (the command's text of the same grading, on the session's
    warm Grader): the report and everything shown."""
    out = workdir / "report.json"
    json_run = subprocess.run(
        [*command, "check", str(submission), "-m", "m2", "--format", "json", "-o", str(out)],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    text_run = check_here(str(submission), "-m", "m2", "-v", cwd=workdir)
    assert json_run.returncode == 0, json_run.stderr[-2000:]
    assert text_run.returncode == 0, text_run.stderr[-2000:]
    raw = out.read_text()
    shown = "\n".join(
        [raw, *strings(json.loads(raw)), json_run.stdout, json_run.stderr, text_run.stdout, text_run.stderr]
    )
    return json.loads(raw), shown


def test_the_secret_lines_are_worth_keeping():
    assert len(SECRET) >= 5, SECRET
    assert len(leaked(PLANTED)) >= len(SECRET) // 2, leaked(PLANTED)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_stolen_trusted_code_never_reaches_a_report(tmp_path, attack):
    submission = ATTACKS[attack].build(tmp_path / "submission")
    before = {p: p.read_bytes() for p in submission.rglob("*") if p.is_file()}
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    report, shown = grade_both(submission, workdir)
    assert not leaked(shown), f"{attack}: the trusted code reached what the grader shows: {leaked(shown)}"
    left = [
        p for p in tmp_path.rglob("*") if p.is_file() and before.get(p) != p.read_bytes() and p.name != "report.json"
    ]
    assert not left, f"{attack}: the grader left files behind: {left}"
    assert not leaked((workdir / "report.json").read_text())
    stray = Path("/tmp/stolen.txt")  # where the worker wrote to its /tmp: private to it, where it can be
    assert not (stray.is_file() and leaked(stray.read_text(errors="replace"))), f"{attack}: {stray} holds the code"
    m2 = next(m for m in report["milestones"] if m["id"] == "m2")
    messages = [c["message"] for c in m2["checks"] if not c["passed"]]
    if attack.startswith(("raised", "planted")):
        assert m2["score"] < m2["max_score"] and messages, f"{attack}: the attack did not run"
    if attack.startswith("planted"):
        assert any(WITHHELD in msg for msg in messages), f"{attack}: nothing was withheld: {messages[:2]}"
    if attack in ("printed", "written"):
        assert m2["score"] == m2["max_score"], messages[:3]


NO_REDACTOR = """
import runpy, sys
import grader.sandbox.secrecy as secrecy
secrecy.trusted_redactor = lambda: secrecy.Redactor(())
sys.argv = ["grade", *sys.argv[1:]]
runpy.run_module("grader", run_name="__main__", alter_sys=True)
"""


def test_without_the_redactor_the_planted_code_comes_back(tmp_path, monkeypatch):
    """The control: the same grading with the redactor switched off shows the trusted code (in the command, by
    its script; in this process, by monkeypatch)."""
    monkeypatch.setattr(secrecy, "trusted_redactor", lambda: secrecy.Redactor(()))
    submission = ATTACKS["planted-raised"].build(tmp_path / "submission")
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    (workdir / "no_redactor.py").write_text(NO_REDACTOR)
    _, shown = grade_both(submission, workdir, (sys.executable, str(workdir / "no_redactor.py")))
    assert len(leaked(shown)) >= len(SECRET) // 2, "without the redactor the code should have come back"
    assert str(REPO)  # the script runs the grader of this checkout (installed editable)
