"""Build submissions from the reference and grade them as the command line does: in this process on the session's
warm Grader (``grade``), or through the command itself (``grade_cli``, ``cli``)."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest import mock

import pytest

from grader.milestones import MILESTONES as ALL_MILESTONES

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
# Tiny Shakespeare for the stretch's tests: CI keeps ../shared beside the clone; nothing here downloads it.
SHARED_DATA = REPO.parent / "shared" / "datasets"
SHAKESPEARE = SHARED_DATA / "tinyshakespeare.txt"
needs_shakespeare = pytest.mark.skipif(
    not SHAKESPEARE.is_file(),
    reason=f"tiny Shakespeare is not at {SHAKESPEARE} "
    "(CI keeps ../shared beside the clone); these tests never download it",
)
EXERCISES = REPO / "exercises"
# Every milestone a single bug may cost points in (the `lesson` group spans all four core files).
MILESTONES = tuple(m for m in ALL_MILESTONES if m != "lesson")
CORE = ("m1", "m2", "m3", "m4")


@dataclass
class Variant:
    """A submission made from the reference: text edits, whole files, or files removed.

    ``milestone`` is where it must lose points (None: it must score full marks);
    ``expect`` is a phrase that a failing check's message in that milestone must contain;
    ``lost``, where given, is exactly how many of that milestone's points it must lose (a bug in one
    function costs that function's points, not its neighbours'); with ``first``, the milestone's FIRST failing
    message must contain ``expect`` (the one a student reads first names the bug).
    """

    name: str
    milestone: str | None = None
    expect: str = ""
    lost: float | None = None
    edits: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    first: bool = False
    files: dict[str, str] = field(default_factory=dict)
    drop: tuple[str, ...] = ()

    @property
    def touched(self) -> set[str]:
        """The submission's modules this variant changes."""
        return {Path(f).stem for f in (*self.edits, *self.files, *self.drop)}

    def affected(self) -> list[str]:
        """The milestones that import a file this variant changes (lesson included).

        Every other milestone never reads those files: ``test_corpus`` proves it once per
        milestone by grading it with every other file broken.
        """
        return [m for m, spec in ALL_MILESTONES.items() if self.touched & set(spec.modules)]

    def build(self, folder: Path) -> Path:
        shutil.copytree(SOLUTIONS, folder, ignore=shutil.ignore_patterns("__pycache__"))
        for file, replacements in self.edits.items():
            text = (folder / file).read_text()
            for old, new in replacements:
                assert text.count(old) == 1, f"{self.name}: {old!r} must occur exactly once in {file}"
                text = text.replace(old, new)
            (folder / file).write_text(text)
        for file, text in self.files.items():
            (folder / file).write_text(text)
        for file in self.drop:
            (folder / file).unlink()
        return folder


def bug(
    name: str,
    milestone: str,
    expect: str,
    file: str,
    *edits: tuple[str, str],
    lost: float | None = None,
    first: bool = False,
) -> Variant:
    """One realistic bug: exact text edits to one reference file (``lost``: the points it must cost, if fixed;
    ``first``: the milestone's first failing message must name it)."""
    return Variant(name, milestone, expect, lost=lost, edits={file: list(edits)}, first=first)


def ok(name: str, edits: dict[str, list[tuple[str, str]]]) -> Variant:
    """A correct submission written differently from the reference."""
    return Variant(name, None, edits=edits)


@dataclass
class Graded:
    returncode: int
    seconds: float
    stderr: str
    report: dict

    def milestone(self, m: str) -> dict:
        return next(x for x in self.report["milestones"] if x["id"] == m)

    def full(self, m: str) -> bool:
        x = self.milestone(m)
        return x["score"] == x["max_score"]

    def messages(self, m: str) -> list[str]:
        return [c["message"] for c in self.milestone(m)["checks"] if not c["passed"]]


def cli(
    *args: str, cwd: Path = REPO, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -m grader ARGS`` as a user runs it, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


class SessionGrader:
    """The Grader a command makes (``Grader(limits, ...)``), when the command runs in this process: the session's
    warm one under the command's limits, left open when the command closes its own."""

    def __init__(self, limits=None, **_options) -> None:
        self.limits = limits

    def grade(self, request, limits=None):
        return shared_grader().grade(request, limits or self.limits)

    def warm_up(self, *milestones) -> None:
        shared_grader().warm_up(*milestones)

    @property
    def server_died(self) -> bool:
        return shared_grader().server_died

    @property
    def lost(self) -> bool:
        return shared_grader().lost

    def reset(self) -> None:
        shared_grader().reset()

    def close(self) -> None:
        pass

    def __enter__(self) -> SessionGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class InThisProcess(Executor):
    """``grade batch``'s executor when it runs in this process (as a cluster's is given to it): each task run as
    it is submitted, here."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - the future holds it, as a pool's would (grade_all reads it)
            future.set_exception(e)
        return future


@contextlib.contextmanager
def stand_ins(
    patches: dict[str, object], cwd: Path = REPO, env: dict[str, str] | None = None, timeout: float = 600
) -> Iterator[None]:
    """Run what a command runs in this process: each of ``patches`` (a dotted name: its stand-in, such as
    ``SessionGrader`` for the Grader the command makes) in place, in ``cwd``, with ``env``'s variables added; work
    still running after ``timeout`` fails the test."""
    here = os.getcwd()
    previous = signal.signal(signal.SIGALRM, _hang_guard)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        os.chdir(cwd)
        with contextlib.ExitStack() as stack:
            stack.enter_context(mock.patch.dict(os.environ, env or {}))
            for name, stand_in in patches.items():
                stack.enter_context(mock.patch(name, stand_in))
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)


def rendered_notebooks(folder: Path, paper: Path, secret: str, students: tuple[str, ...]) -> dict[str, Path]:
    """`grade paper render` of a copy of ``paper`` (its paper.toml, with ``secret`` as its secret) for each of
    ``students``: their notebooks, FOLDER/STUDENT.ipynb."""
    copy = folder / paper.name
    copy.mkdir()
    shutil.copy(paper / "paper.toml", copy / "paper.toml")
    (copy / "paper.secret").write_text(secret + "\n")
    made = {}
    for who in students:
        made[who] = folder / f"{who}.ipynb"
        proc = command_here("paper", "render", str(copy), "--student", who, "--out", str(made[who]), patches={})
        assert proc.returncode == 0, proc.stderr
    return made


def command_here(
    *args: str,
    patches: dict[str, object],
    cwd: Path = REPO,
    env: dict[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """``grade ARGS`` run by click in this process, with ``stand_ins(patches)``: the command's own options, work,
    output, messages and exit code, without a process, torch and a fork server of its own. ``cli`` runs the command
    itself, for what only a process shows: its start, its exit, its signals, a clock running out, a pool of
    processes, ``-j``'s grading processes side by side. An exception the command lets through is raised here, as
    the command would end with its traceback."""
    from click.testing import CliRunner

    from grader import cli as command

    with stand_ins(patches, cwd, env, timeout):
        result = CliRunner().invoke(command.main, list(args), prog_name="grade", catch_exceptions=False)
    return subprocess.CompletedProcess(["grade", *args], result.exit_code, result.stdout, result.stderr)


def check_here(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    """``grade check ARGS`` in this process on the session's warm Grader (``command_here``)."""
    return command_here("check", *args, patches={"grader.cli.Grader": SessionGrader}, cwd=cwd, timeout=timeout)


def watch_here(*args: str, cwd: Path = REPO, timeout: float = 600) -> subprocess.CompletedProcess:
    """``grade watch ARGS`` (``--once``: a save, a signal and a process's end need the command itself) in this
    process on the session's warm Grader."""
    return command_here("watch", *args, patches={"grader.watch.Grader": SessionGrader}, cwd=cwd, timeout=timeout)


def practice_here(*args: str, stdin: str = "", cwd: Path = REPO, timeout: float = 900) -> subprocess.CompletedProcess:
    """``grade practice ARGS`` in this process on the session's warm Grader, the commands typed (``stdin``) read
    from a real pipe as the command reads a terminal's (select, then unbuffered reads, each echoed), the input
    ending after them as a closed terminal's. The clock running out with nothing typed needs the command itself."""
    read, write = os.pipe()
    os.write(write, stdin.encode())  # a few commands: well within a pipe's buffer
    os.close(write)
    patches = {"grader.practice.command.Grader": SessionGrader, "grader.practice.command._stdin_fd": lambda: read}
    try:
        return command_here("practice", *args, patches=patches, cwd=cwd, timeout=timeout)
    finally:
        os.close(read)


def batch_here(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """``grade batch ARGS`` in this process, each submission graded as it comes on the session's warm Grader: the
    command's own discovery, gradebook, resume, grade_one and summary, without its pool and fork servers (4 CPU-s
    and more each time). ``env``: more environment variables for the run (GPTKIT_GRADER_ROOT)."""
    import grader.batch.run as run

    real = run.grade_all

    def graded_here(*positional, **options):
        return real(*positional, **{**options, "executor": InThisProcess()})

    patches = {
        "grader.batch.run.grade_all": graded_here,
        # grade_one's Grader, a pool process's own there: here the session's, which grade_one gives the batch's limits
        "grader.batch.run.process_grader": lambda limits, shared=None: shared_grader(),
    }
    return command_here("batch", *args, patches=patches, env=env, timeout=timeout)


# What `grade check` options ``grade`` takes in this process; any other (-j, --paper, -v, --format) is the command's.
IN_PROCESS_OPTIONS = {
    "-m": "milestones",
    "--milestone": "milestones",
    "--timeout": "timeout",
    "--memory-mb": "memory_mb",
}
_warm_grader = None  # the session's Grader (shared_grader): one warm fork server for every in-process grading


def shared_grader():
    """The test session's warm Grader (grader/grading.py), started on first use and closed when pytest ends
    (conftest.py): the one `grade check` uses, minus the start-up of a process, torch and a fork server."""
    global _warm_grader
    if _warm_grader is None:
        from grader.grading import Grader

        _warm_grader = Grader()
    return _warm_grader


def close_shared_grader() -> None:
    global _warm_grader
    if _warm_grader is not None:
        _warm_grader.close()
        _warm_grader = None


def grade(submission: Path, *args: str, timeout: float = 600) -> Graded:
    """``grade check SUBMISSION --format json ARGS``: what the command gives, graded in this process on the session's
    warm Grader (the command's own Grader, runner, suites and sandbox; `grade_cli` runs the command itself). The
    options are the command's: -m/--milestone, --timeout, --memory-mb and --public are read here, any other
    makes it run the command. ``timeout``: the grading is stopped after it, and the test fails."""
    options: dict[str, list[str]] = {"milestones": []}
    public, rest = False, list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--public":
            public = True
        elif arg in IN_PROCESS_OPTIONS and rest:
            options.setdefault(IN_PROCESS_OPTIONS[arg], []).append(rest.pop(0))
        else:
            return grade_cli(submission, *args, timeout=timeout)
    return _grade_here(submission, options, public, timeout)


def _grade_here(submission: Path, options: dict[str, list[str]], public: bool, timeout: float) -> Graded:
    from grader.grading import Request, grader_failed, internal_errors_line
    from grader.milestones import MILESTONES
    from grader.options import limits
    from grader.submission import SubmissionError

    def number(name: str) -> float | None:
        return float(options[name][-1]) if options.get(name) else None

    memory = number("memory_mb")
    chosen = limits(number("timeout"), int(memory) if memory is not None else None, None)
    request = Request(submission, tuple(options["milestones"] or MILESTONES), public=public, name=str(submission))
    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _hang_guard)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        report = shared_grader().grade(request, chosen)
    except SubmissionError as e:  # the command's usage error (exit 2)
        return Graded(2, time.monotonic() - started, f"Error: {e}", {})
    except subprocess.TimeoutExpired:
        raise
    except Exception as e:  # noqa: BLE001 - the grader's own failure: the command says it and exits 1
        return Graded(1, time.monotonic() - started, grader_failed(e), {})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    line = internal_errors_line(report)
    return Graded(1 if line else 0, time.monotonic() - started, line or "", report.to_json())


def _hang_guard(signum, frame):
    raise subprocess.TimeoutExpired("grade check (in this process)", 0)


def grade_cli(submission: Path, *args: str, timeout: float = 600) -> Graded:
    """``grade check SUBMISSION --format json`` in a fresh process, as a user would run it."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        started = time.monotonic()
        proc = cli("check", str(submission), "--format", "json", "-o", str(out), *args, timeout=timeout)
        seconds = time.monotonic() - started
        report = json.loads(out.read_text()) if out.exists() else {}
    return Graded(proc.returncode, seconds, proc.stderr, report)


def autograder_here(root: Path) -> dict:
    """What ``run_autograder`` of the Gradescope zip unpacked in ``root/source`` writes (``root/results``), its one
    step (``python -m grader.bundles.gradescope``, with the options and files the script gives it) run in this
    process on the session's warm Grader: for the tests of how an upload is found and read and how late it is,
    which that module decides. The tests of the script itself (what it grades, shows and hides) run it."""
    from grader.bundles import gradescope

    script = (root / "source" / "run_autograder").read_text()
    options = dict(re.findall(r"^(VISIBILITY|TESTS)=(\S+)$", script, re.M))
    results = root / "results" / "results.json"
    results.parent.mkdir(exist_ok=True)
    args = [str(root / "submission"), str(results), "--visibility", options["VISIBILITY"], "--tests", options["TESTS"]]
    args += ["--late-policy", str(root / "source" / "late-policy.toml")]
    args += ["--metadata", str(root / "submission_metadata.json"), "--roster", str(root / "source" / "roster.csv")]
    with stand_ins({"grader.bundles.gradescope.Grader": SessionGrader}, cwd=root / "source"):
        gradescope.main(args)
    return json.loads(results.read_text())


def checks_in_one_process(
    root: Path, *checks: list[str], env: dict[str, str] | None = None, timeout: float = 900
) -> list[subprocess.CompletedProcess]:
    """``grade check`` with each of ``checks`` (argument lists) by the kit at ``root``, a copy of this one: in one
    process of its own, on one warm Grader (tests/checks_in_one_process.py), for one start-up of torch and of a fork
    server instead of one each per command. Each run's exit code, stdout and stderr, as the command gives them."""
    script = (Path(__file__).with_name("checks_in_one_process.py")).read_text()
    proc = subprocess.run(
        [sys.executable, "-c", script, json.dumps(checks)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = json.loads(proc.stdout.splitlines()[-1])
    assert all(r["file"] == str(root / "grader" / "cli.py") for r in runs), f"not the copy's grader: {runs[0]['file']}"
    return [
        subprocess.CompletedProcess(["grade", "check", *c], r["returncode"], r["stdout"], r["stderr"])
        for c, r in zip(checks, runs, strict=True)
    ]


def grade_many(
    jobs: list[tuple[Path, list[str]]], workdir: Path, timeout: float = 1800, new_process: bool = False
) -> list[Graded]:
    """Grade several submissions one after another: one Graded each, in order. In this process on the session's
    Grader; with ``new_process``, in one grader process of their own (tests/grade_many.py), for a test of what a
    process remembers between gradings (a submission whose report is missing there gets the stderr).
    """
    if not new_process:
        return [grade(s, *(a for m in ms for a in ("-m", m)), timeout=timeout) for s, ms in jobs]
    specs = [
        {"submission": str(s), "milestones": ms, "out": str(workdir / f"report{i}.json")}
        for i, (s, ms) in enumerate(jobs)
    ]
    (workdir / "jobs.json").write_text(json.dumps(specs))
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("grade_many.py")), str(workdir / "jobs.json")],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    seconds = (time.monotonic() - started) / max(len(jobs), 1)
    return [
        Graded(
            proc.returncode,
            seconds,
            proc.stderr,
            json.loads(Path(s["out"]).read_text()) if Path(s["out"]).exists() else {},
        )
        for s in specs
    ]


def normalized(text: str) -> str:
    """Lines stripped, blank lines dropped: indentation and spacing cannot hide a copy."""
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


def squashed(text: str) -> str:
    """Letters, digits and underscores only (string prefixes dropped): a message split over literals still matches."""
    return re.sub(r"\W+", "", re.sub(r"\b[rfbuRFBU]{1,2}(?=[\"'])", "", text))


def function_bodies(path: Path) -> list[tuple[str, str]]:
    """(name, body without its docstring) of every function and method in a reference file."""
    lines = path.read_text().splitlines()
    bodies = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if body:  # whole lines, comments between statements included
                text = "\n".join(lines[body[0].lineno - 1 : body[-1].end_lineno])
                bodies.append((f"{path.name}:{node.name}", normalized(text)))
    return bodies


def explain(graded: Graded) -> str:
    """A compact summary for assertion messages: each milestone's score and first failure."""
    lines = [f"exit {graded.returncode}; stderr: {graded.stderr[-500:]}"]
    for m in graded.report.get("milestones", []):
        first = next((c["message"] for c in m["checks"] if not c["passed"]), "")
        lines.append(f"{m['id']}: {m['score']}/{m['max_score']} {first[:300]}")
    return "\n".join(lines)


# ---------------------------------------------------------------- processes


def proc_fields(pid: int | str) -> list[str]:
    """The fields of Linux's /proc/PID/stat after the command name (state, parent, process group, ...): the
    name is cut at its last ")", since it may hold spaces and parentheses. OSError once the process is gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 1 :].split()


# ---------------------------------------------------------------- the contest server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_contest(
    folder: Path,
    port: int,
    workers: int = 1,
    wait: float = 60,
    scheduler: str | None = None,
    options: tuple[str, ...] = (),
) -> subprocess.Popen:
    """`grade contest serve FOLDER` on loopback, as a coach starts it, once it answers (its own process group);
    with ``scheduler``, grading on that Dask cluster (``--scheduler``); ``options``: more of serve's options.

    Its output goes to FOLDER/serve-PORT.log: uvicorn logs every request, and a pipe nobody reads
    would fill and stall the server."""
    log_path = folder / f"serve-{port}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader", "contest", "serve", str(folder), "--port", str(port)]
            + ["--workers", str(workers)]
            + (["--scheduler", scheduler] if scheduler else [])
            + list(options),
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(f"the server exited: {log_path.read_text()}") from None
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError(f"the server did not answer within {wait:g} s")


def stop_server(proc: subprocess.Popen) -> None:
    """Stop a server from ``serve_contest`` as Ctrl-C does (its lifespan ends the grading pools), then for good
    if it hangs."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def tokens(folder: Path) -> dict[str, str]:
    lines = (folder / "tokens.csv").read_text().splitlines()[1:]
    found = dict(line.split(",", 1) for line in lines)
    found["coach"] = (folder / "admin.token").read_text().strip()
    return found


def auth(folder: Path, who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tokens(folder)[who]}"}


def upload(client, folder: Path, who: str, task: str, files: list[tuple[str, bytes]]):
    parts = [("files", (name, data, "application/octet-stream")) for name, data in files]
    return client.post(f"/submit/{task}", files=parts, headers=auth(folder, who))


# --- Papers -------------------------------------------------------------------------------------------------------


def reference_answers(module: str) -> dict[str, object]:
    tree = ast.parse((SOLUTIONS / f"{module}.py").read_text())
    return {
        n.targets[0].id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and n.targets[0].id.startswith("Q")
    }


def fill_paper_notebook(notebook: Path, seed: int, out: Path) -> None:
    """The notebook with the reference's code and the reference's answers for the student of ``seed``: each part's
    code cell the reference's code, the quiz's answers from quiz.py, the banks' (kvmemory's, concepts') from
    their questions as that student was asked them."""
    data = json.loads(notebook.read_text())
    from grader.suites.hidden import concept_questions, kv_questions
    from grader.variants import Variant

    quiz = reference_answers("quiz")
    variant = Variant(seed)
    banks = {"kvmemory": ("m11_kvmemory", kv_questions), "concepts": ("m12_concepts", concept_questions)}
    for cell in data["cells"]:
        for part, milestone in ALL_MILESTONES.items():  # a part of one file with no bank: the whole reference
            if cell["id"] == f"{part}-answer" and len(milestone.modules) == 1 and part not in banks:
                cell["source"] = (SOLUTIONS / f"{milestone.modules[0]}.py").read_text().split("\nif __name__")[0]
        for part, (module, bank) in banks.items():
            if cell["id"] == f"{part}-answer":
                cell["source"] = (SOLUTIONS / f"{module}.py").read_text().split("# Check yourself")[0]
            for name in bank.IDS:
                if cell["id"] == f"{part}-{name}-answer":
                    answer = bank.question(name, variant).answer  # type: ignore[attr-defined]
                    cell["source"] = cell["source"].replace(f"{name} = None", f"{name} = {answer!r}")
        for name, value in quiz.items():
            if cell["id"] == f"quiz-{name}-answer":
                cell["source"] = cell["source"].replace(f"{name} = None", f"{name} = {value!r}")
    out.write_text(json.dumps(data))


def copy_answers(source: Path, notebook: Path, out: Path) -> None:
    """``notebook`` (another student's paper) with the code cells of ``source`` put in where their ids match, into
    ``out``: a copy, as a student who took a classmate's answers makes it."""
    data = json.loads(notebook.read_text())
    copied = {c["id"]: c for c in json.loads(source.read_text())["cells"]}
    data["cells"] = [copied.get(c["id"], c) if c["cell_type"] == "code" else c for c in data["cells"]]
    out.write_text(json.dumps(data))


def check_notebook(notebook: Path, *args: str) -> dict:
    """`grade check NOTEBOOK --format json ARGS` as a student runs it (in this process: ``check_here``): its report,
    with every check in ``all``."""
    out = notebook.with_suffix(".json")
    proc = check_here(str(notebook), "--format", "json", "-o", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    report["all"] = [c for m in report["milestones"] for c in m["checks"]]
    return report


# ---------------------------------------------------------------- contests on a clock the test sets

CONTEST_START = datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc)  # the contest files' [window] start


class ContestClock:
    """The contest server's clock (``create_app(folder, clock)``): ``minutes`` into the window; set ``now``."""

    def __init__(self, minutes: float = 10):
        self.now = CONTEST_START + timedelta(minutes=minutes)

    def __call__(self) -> datetime:
        return self.now


def opened_a_minute_ago() -> datetime:
    """A window's start for a contest on the real clock (`grade contest serve`, ``serve_contest``): open now."""
    return (datetime.now(timezone.utc) - timedelta(minutes=1)).replace(microsecond=0)


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(timezone.utc):%Y-%m-%dT%H:%M:%SZ}"


def open_contest(
    title: str = "Contest",
    tasks: str = "[tasks.m1]\npoints = 30\n",
    *,
    start: datetime = CONTEST_START,
    personal: bool = False,
    duration: float = 60,
    hard_end: datetime | None = None,
    feedback: str = "full",
    scoreboard: str | None = "public",
    freeze_minutes: float | None = None,
    paper: str | None = None,
    more: str = "",
) -> str:
    """A contest.toml, the tests' one way to write one: a window of ``duration`` minutes from ``start`` (by default
    CONTEST_START, the hour ContestClock counts from), or with ``personal`` each student's own from their first
    visit, until ``hard_end`` if given; ``feedback`` during the window; the ``scoreboard`` mode (None: no
    [scoreboard] table, the file's default, public), frozen ``freeze_minutes`` before the end; on the ``paper``
    folder of that name if given; ``more`` tables (``[extra_time]``, ``[defaults]``); then ``tasks``."""
    window = "personal = true\n" if personal else f"start = {_utc(start)}\n"
    window += f"duration = {duration:g}\n" + (f"hard_end = {_utc(hard_end)}\n" if hard_end else "")
    board = ""
    if scoreboard is not None:
        board = f'[scoreboard]\nmode = "{scoreboard}"\n'
        board += f"freeze_minutes = {freeze_minutes:g}\n" if freeze_minutes is not None else ""
    return (
        f'title = "{title}"\n'
        + (f'paper = "{paper}"\n' if paper else "")
        + f'[window]\n{window}[feedback]\nduring = "{feedback}"\n{board}{more}{tasks}'
    )


STUDENTS = ("ada", "alan", "grace")
PAPER = "paper1"  # the folder of a contest's paper, as contest_folder writes it


def contest_folder(
    folder: Path, contest_toml: str, students: tuple[str, ...] = STUDENTS, paper: str | None = None
) -> Path:
    """A contest folder: its contest.toml, a roster of ``students`` and their tokens (`grade contest tokens`);
    ``paper``: the text of the paper.toml it names (``open_contest(paper=PAPER)``), written to FOLDER/paper1/."""
    from click.testing import CliRunner

    from grader.contest.commands import contest as contest_group

    folder.mkdir(parents=True, exist_ok=True)
    if paper is not None:
        (folder / PAPER).mkdir()
        (folder / PAPER / "paper.toml").write_text(paper)
    (folder / "contest.toml").write_text(contest_toml)
    (folder / "roster.csv").write_text("student\n" + "".join(f"{s}\n" for s in students))
    result = CliRunner().invoke(contest_group, ["tokens", str(folder)])
    assert result.exit_code == 0, result.output
    return folder


def make_contest(
    parent: Path,
    tasks: str = "[tasks.m1]\npoints = 30\n",
    *,
    name: str = "contest",
    title: str = "Contest",
    students: tuple[str, ...] = STUDENTS,
    paper: str | None = None,
    **options,
) -> Path:
    """What the ``contest`` and ``module_contest`` fixtures call (the tests' conftest.py files): the contest
    folder PARENT/``name``, a new one, of ``tasks`` (none but the paper's: ""), on a ``paper`` (a paper.toml's
    text) if given, with open_contest's ``options`` (start, personal, duration, hard_end, feedback, scoreboard,
    freeze_minutes, more)."""
    folder = parent / name
    assert not folder.exists(), f"{folder} is made already: give each contest of a test its own name"
    text = open_contest(title, tasks, paper=PAPER if paper is not None else None, **options)
    return contest_folder(folder, text, students, paper=paper)


def forget_counts(app) -> None:
    """A shared app's in-memory counts of uploads, refusals and messages per token and address made new, as a
    fresh app's (grader/contest/web/limits.py: a restart forgets them): one test's refusals never count against
    the next test's."""
    from grader.contest.web.limits import Limiter

    state = app.state.contest
    for name in ("failures", "uploads", "messages"):
        old = getattr(state, name)
        setattr(state, name, Limiter(old.most, old.span))


class ServedInThread:
    """An app on loopback, uvicorn in a thread of this process (no lifespan: no grading), on a free port, for as
    long as the ``with`` block: where a real socket is needed (`grade submit`, a body that stalls)."""

    def __init__(self, app):
        import uvicorn

        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, lifespan="off", log_level="warning")
        self.server = uvicorn.Server(config)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServedInThread:
        import threading

        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.server.started, "the test server did not start"
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def m4_report(score: float) -> dict:
    """A report of m4 alone, worth 9 points, ``score`` of them won (what Gradebook.record stores)."""
    checks = [
        {"name": name, "score": score / 2, "max_score": 4.5, "passed": score == 9, "message": "", "seconds": 0.1}
        for name in ("each new token is the argmax", "stops at max_new_tokens")
    ]
    return {
        "score": score,
        "max_score": 9,
        "seconds": 1.0,
        "protections": [],
        "milestones": [{"id": "m4", "checks": checks}],
    }


def needs_a_browser() -> None:
    """Skip the test where Debian's headless Chromium and its driver are not installed (CI installs both)."""
    if not ((shutil.which("chromium") or shutil.which("chromium-browser")) and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")


def benchmark(name: str):
    """The script benchmarks/NAME.py loaded as a module (benchmarks/ is no package): the tests drive its code."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
