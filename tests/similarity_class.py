"""A generated class for `grade similarity`: every student starts from the stubs (exercises/) and fills each
function with code of their own, drawn at random, and answers the quiz (mostly right, so most of the class holds
the same ``Q3 = "above"`` lines); most of them open some functions with the same line, the natural way to begin.
One pair can be a disguised copy: the second student's files are the first's with the names changed, the
definitions in the opposite order, new comments and a line that does nothing after each statement.

Used by tests/e2e/test_similarity_triage.py and benchmarks/similarity_speed.py.
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

from grader.milestones import STUDENT_MODULES

REPO = Path(__file__).resolve().parents[1]
EXERCISES = REPO / "exercises"
SOLUTIONS = REPO / "solutions"
# The line most of the class opens a function with (the one the lesson shows): shared by most, so it counts for
# no pair, and by a copy pair no more than by anyone else.
COMMON_OPENING = "scale = 1.0 / (1 + len(str(__name__))) ** 0.5"
COMMON_SHARE = 0.8  # of the students open their functions with it
UNTOUCHED = 0.1  # the chance a student leaves a file as the stub
WRONG = 0.15  # the chance a student gets a quiz answer wrong (each wrong answer their own)

_METHODS = ("sum(-1)", "mean(0)", "tanh()", "exp()", "abs()", "transpose(-2, -1)", "softmax(-1)", "relu()", "t()")
_OPS = ("+", "-", "*", "/")


def _expr(rng: random.Random, pool: list[str], depth: int = 0) -> str:
    """An expression over the names in ``pool`` (each kind at random, with constants of its own)."""
    kind = rng.randrange(6 if depth < 2 else 2)
    if kind == 0:
        return rng.choice(pool)
    if kind == 1:
        return f"{rng.choice(pool)} {rng.choice(_OPS)} {rng.randint(2, 997)}"
    if kind == 2:
        return f"({_expr(rng, pool, depth + 1)}) {rng.choice(_OPS)} ({_expr(rng, pool, depth + 1)})"
    if kind == 3:
        return f"({_expr(rng, pool, depth + 1)}).{rng.choice(_METHODS)}"
    if kind == 4:
        return f"max({_expr(rng, pool, depth + 1)}, {round(rng.uniform(0, 50), rng.randint(1, 3))})"
    return f"{rng.choice(pool)}[{rng.randint(0, 9)}:{rng.randint(10, 99)}]"


def body(rng: random.Random, params: list[str], common: bool) -> list[str]:
    """A function's body: statements that each read what came before, all of it read by the ``return`` (nothing
    the normaliser would take out as unused)."""
    pool = list(params) or [str(rng.randint(2, 99))]
    lines, unread = [], set(params)
    if common:
        lines.append(COMMON_OPENING)
        pool.append("scale")
        unread.add("scale")
    for n in range(rng.randint(3, 8)):
        name = f"v{n}"
        shape = rng.randrange(4)
        value = _expr(rng, pool)
        unread -= {p for p in pool if re.search(rf"\b{re.escape(p)}\b", value)}
        if shape == 0 and len(pool) > 1:
            a, b = rng.sample(pool, 2)
            unread -= {a, b}
            lines.append(f"if {a} < {b}:\n    {name} = {value}\nelse:\n    {name} = {_expr(rng, pool)}")
        elif shape == 1:
            lines.append(
                f"{name} = {rng.randint(0, 9)}\nfor i in range({rng.randint(2, 9)}):\n    {name} = {name} + {value}"
            )
        else:
            lines.append(f"{name} = {value}")
        pool.append(name)
        unread.add(name)
    lines.append("return " + " + ".join(sorted(unread | {pool[-1]})))
    return lines


def _filled(stub: str, rng: random.Random, common: bool) -> list[str]:
    """``stub`` with each function's body drawn at random: its top-level statements, each as text."""
    tree = ast.parse(stub)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg != "self"]
            code = "\n".join(body(rng, params, common and rng.random() < COMMON_SHARE))
            node.body = ast.parse(code).body
    return [ast.unparse(st) for st in tree.body]


def _quiz(rng: random.Random) -> list[str]:
    tree = ast.parse((SOLUTIONS / "quiz.py").read_text())
    out = []
    for st in tree.body:
        if isinstance(st, ast.Assign) and rng.random() < WRONG:  # a wrong answer of one's own
            st.value = ast.Constant(value=rng.randint(1000, 10**9))
        out.append(ast.unparse(st))
    return out


def disguise(chunks: list[str], rng: random.Random) -> str:
    """A copy of a file given as its top-level statements: names changed, definitions in the opposite order,
    comments added and a line that does nothing after each assignment."""
    defs = [c for c in chunks if c.startswith(("def ", "class ", "async def "))]
    rest = [c for c in chunks if c not in defs]
    text = "\n\n\n".join(rest + defs[::-1])
    text = re.sub(r"\bv(\d+)\b", lambda m: f"tmp_{int(m[1]) * 7 + 3}", text)
    text = text.replace("scale", "factor")
    lines = []
    for line in text.splitlines():
        lines.append(line)
        stripped = line.strip()
        if re.match(r"^[a-z_]\w* = ", stripped) and not stripped.endswith(("(", "[", ",")):
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(f"{indent}_unused = None  # my note {rng.randint(0, 99)}")
    return "\n".join(lines) + "\n"


def make_class(root: Path, n: int, seed: int = 0, copy: tuple[int, int] | None = (3, 17)) -> list[str]:
    """Write ``n`` students' folders under ``root`` (``s01``, ``s02``, ...) and return their names; ``copy``: the
    numbers of a pair (counted from 1) whose second is a disguised copy of the first, or None for an honest
    class."""
    root.mkdir(parents=True, exist_ok=True)
    names = [f"s{i:02d}" for i in range(1, n + 1)]
    written: dict[str, dict[str, list[str]]] = {}
    for i, student in enumerate(names, 1):
        rng = random.Random(f"{seed}-{student}")
        folder = root / student
        folder.mkdir()
        common = rng.random() < 0.9  # the odd student opens no function the usual way
        written[student] = {}
        for module in STUDENT_MODULES:
            if not (EXERCISES / f"{module}.py").is_file():
                continue
            stub = (EXERCISES / f"{module}.py").read_text()
            if module == "quiz":
                chunks = _quiz(rng)
            elif rng.random() < UNTOUCHED:
                chunks = [stub]
            else:
                chunks = _filled(stub, rng, common)
            written[student][module] = chunks
            if copy and i == copy[1] and copy[0] <= len(names):
                text = disguise(written[names[copy[0] - 1]][module], rng)
            else:
                text = "\n\n\n".join(chunks) + "\n"
            (folder / f"{module}.py").write_text(text)
    return names
