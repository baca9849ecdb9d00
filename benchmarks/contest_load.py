"""The contest server under load: many students uploading at once, next to `grade batch` on the same files.

    python benchmarks/contest_load.py [--students 50] [--per-student 3] [--workers 2]
    python benchmarks/contest_load.py --burst [--students 30] [--burst-seconds 10]
    python benchmarks/contest_load.py --burst --metric-runs 2 [--students 30] [--workers 2]
    python benchmarks/contest_load.py --burst --task m4 --students 200 [--metric-runs 2] [--poll 2]
    python benchmarks/contest_load.py --machines --task m4 --students 200 --burst-seconds 2 --poll 2   (root)

A temp contest (window open now, full feedback, public scoreboard, task m1, no caps or intervals) is served by
`grade contest serve --workers W` on a free loopback port. Each simulated student (a thread) uploads
`--per-student` times, one after the other as a student would (upload, wait for the verdict, upload again), a
mix of the reference, the stub and a one-line bug (`torch.tril` made `torch.triu`), over HTTP with their
token, and polls `GET /api/submissions/{id}` until it is graded. Meanwhile one more thread polls
`GET /api/scoreboard` every 50 ms, as the page of a student watching the board would, and times each answer.
Then the same files, as many, are graded by `grade batch --workers W -m m1`.

Printed: upload -> verdict p50/p95; scoreboard p95 while grading (target < 200 ms); submissions graded per
second by the server (first upload to last verdict) and by the batch, and their ratio (target >= 0.9x); and,
from DIR/contest.sqlite, the accepted uploads lost (missing, still queued) or duplicated, and the wrong scores
(reference < full marks, stub > 0, bug = full marks, or no score). Exit status 1 if any was lost or duplicated.

``--burst``: the end of a round instead, every student uploading once within ``--burst-seconds`` (each at a
random moment of it, seeded), served three ways in turn: with one grading worker, with two, and on a local Dask
scheduler with two workers of one thread each (``grade contest serve --scheduler``). Printed for each: the
median and p95 time from upload to verdict, the last verdict after the burst began, and the audit above.

``--burst --metric-runs N``: the same burst with N lmbudget uploads (the reference recipe, solutions/lmbudget.py:
a training run of its whole CPU budget) from N more students at its very start, where they take the workers
first; ``--workers`` grading workers (default 2), served twice: lanes off (``--metric-workers 0``: the training
runs share the workers, as before lanes) and lanes on (the metric lane of its own, its default size). Printed
side by side: the quick (m1) uploads' median, p95 and max time from upload to verdict (target: p95 within 10 s
with lanes on), the training runs' own, the last verdict, the audit, and the load average before and after each
run (a shared machine's figures say so). The task runs on the frozen grader corpus written to a file (a
``file:`` corpus, as a contest with stakes uses), with the shipped calibration.

``--task m4``: the burst uploads m4 (greedy generation) instead of m1, its bug taking the next token from the first
position. Every upload is a file of its own (the student's name in a last comment line). Before serving, the grading
cost is measured in one warm grading process of the contest's kind (its start, its first grading, then the median
CPU-seconds of a grading over 12 distinct files), and the drain limit printed: uploads x CPU-s a grading / cores.
Each way then prints the p95 from arrival to verdict from the server's own records (``received_at``,
``graded_at``: no upload time, no poll interval) against it (target: within 1.5x and at most 30 s). With
``--metric-runs N`` the burst is served alone first, then with the runs at the metric lane's weight (``--metric-nice``,
by default the server's), at an equal weight, with lanes off, and last with no run in the server but the reference
recipe training beside it at SCHED_IDLE (the floor that no CPU weight can lower); each row's p95 is given as a ratio
to the burst's alone (target: at most 1.10x with the runs at the default weight).

``--machines``: the burst graded by a Dask cluster whose workers are simulated machines, one core each: a network
namespace of its own joined to the host by a veth pair, its worker pinned to its core (``taskset``), the scheduler,
the server and the students on the host. Served with one machine, then two; printed: each one's drain (first
arrival to last verdict, from the server's records) and the ratio (target: two at least 1.6x as fast as one). Needs
root and iproute2. ``--keep DIR`` keeps every contest's folder (its server's log, its records) in DIR.

``--dask-lane [--metric-runs 4] [--students 20] [--workers 2]``: a mixed load, the metric runs (the reference
recipe on a tiny task file: a training budget of ``--metric-cpu`` CPU seconds, 16 evaluation windows, as the
tests' task) at the burst's start and the m1 burst after them, served twice on the same machine: (a) all local
(the metric lane of its default size, ``--workers`` for the quick lane) and (b) the metric lane on a local Dask
cluster standing in for another machine (``--scheduler ADDR --scheduler-lanes metric``, as many single-threaded
workers as (a)'s metric lane has processes). Printed side by side: the quick uploads' median and worst time from
upload to verdict, the training runs' throughput (runs graded per minute, from the burst's start to the last
run's verdict), the audit and the load average. A stand-in on the same cores adds no CPU: it measures what the
Dask path costs, not what a second machine gives (docs/contest/README.md, "The Dask lane").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from grader.contest.submit import multipart

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers import free_port, serve_contest, stop_server  # noqa: E402 - tests/ is put on the path just above

# The quick task a burst uploads (``--task``): its file, and the one line whose change makes the bug variant.
QUICK_TASKS = {
    "m1": ("m1_attention.py", "torch.tril", "torch.triu"),  # the mask kept above the diagonal, not below
    "m4": ("m4_generate.py", "logits[:, -1, :]", "logits[:, 0, :]"),  # the next token from the first position
}
TASK = "m1"  # set once by main from --task
FILE = QUICK_TASKS[TASK][0]
METRIC_KIND = "lmbudget"  # the variant (and task, and file lmbudget.py) of a metric upload in --metric-runs
SCOREBOARD_EVERY = 0.05  # seconds between two scoreboard requests
RATE_LIMITED_WAIT = 6.0  # the server allows 10 uploads a minute per student: wait this long after a 429


@dataclass
class Upload:
    """One submission as a student made it: what it was, what the server answered, and when."""

    student: str
    variant: str
    status: int = 0  # the upload's HTTP status (0: no answer)
    sid: int | None = None
    uploaded_at: float = 0.0  # perf_counter when the upload started
    verdict_at: float | None = None  # perf_counter when a poll first saw it no longer queued
    verdict: str = ""
    retries: int = 0  # 429s waited out


@dataclass
class Board:
    """The scoreboard poller's latencies (seconds) and failed requests."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0


def cpu_line() -> str:
    """The machine the numbers come from (as benchmarks/train_speed.py prints it, with the CPU's model): a ratio
    on 2 busy cores says little about 16 idle ones."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, {capability()}, load average {os.getloadavg()[0]:.1f} at start"


def capability() -> str:
    """The CPU's vector capability as torch uses it, and the flags behind it (a training run's speed)."""
    try:
        flags = next(
            set(line.split(":", 1)[1].split())
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("flags")
        )
    except (OSError, StopIteration):
        flags = set()
    named = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_bf16": "AVX512-BF16", "amx_tile": "AMX"}
    try:
        import torch

        torch_says = f"torch CPU capability {torch.backends.cpu.get_cpu_capability()}"
    except ImportError:
        torch_says = "no torch"
    return (
        f"{torch_says} (flags: {', '.join(v for k, v in named.items() if k in flags) or 'none of AVX2, AVX-512, AMX'})"
    )


def variants() -> dict[str, bytes]:
    """The three kinds of file of the task: full marks, zero, and a one-line bug that must lose points."""
    _, right, wrong = QUICK_TASKS[TASK]
    reference = (ROOT / "solutions" / FILE).read_text()
    assert reference.count(right) == 1, f"the bug replaces the one {right} of the reference"
    return {
        "reference": reference.encode(),
        "stub": (ROOT / "exercises" / FILE).read_bytes(),
        "buggy": reference.replace(right, wrong).encode(),
    }


def own_copy(folder: Path, name: str, kind: str, file: str) -> Path:
    """The student's copy of a variant's file, with their name in a last comment line: every upload of a round
    is a file of its own, as in a class, so that nothing the grader might remember of one file serves another."""
    mine = folder / "own" / name / kind / file
    if not mine.exists():
        mine.parent.mkdir(parents=True, exist_ok=True)
        mine.write_bytes((folder / kind / file).read_bytes() + f"\n# {name}\n".encode())
    return mine


def plan(students: int, per_student: int) -> dict[str, list[str]]:
    """Each student's variants in order, cycling so that every kind is graded by every worker and at every
    moment of the run (not all references first)."""
    kinds = list(variants())
    return {f"student{s:03d}": [kinds[(s + k) % len(kinds)] for k in range(per_student)] for s in range(students)}


def make_contest(folder: Path, students: list[str], metric: bool = False) -> dict[str, str]:
    """A contest open now for a day: full feedback, a public board, m1 without caps or intervals, so that the
    policy refuses nothing and every upload is graded. Returns each student's token (from `grade contest
    tokens`, as a coach makes them)."""
    start = datetime.now(timezone.utc) - timedelta(minutes=1)
    folder.mkdir(parents=True)
    (folder / "contest.toml").write_text(
        f'title = "Load benchmark"\n[window]\nstart = {start.strftime("%Y-%m-%dT%H:%M:%SZ")}\nduration = 1440\n'
        '[feedback]\nduring = "full"\n[scoreboard]\nmode = "public"\n'
        f"[tasks.{TASK}]\npoints = 30\nmin_interval = 0\n"
        + (f"[tasks.{METRIC_KIND}]\npoints = 10\nmin_interval = 0\n" if metric else "")
    )
    (folder / "roster.csv").write_text("student\n" + "".join(f"{s}\n" for s in students))
    subprocess.run(
        [sys.executable, "-m", "grader", "contest", "tokens", str(folder)], cwd=ROOT, check=True, capture_output=True
    )
    lines = (folder / "tokens.csv").read_text().splitlines()[1:]
    return dict(line.split(",", 1) for line in lines)


def call(url: str, token: str, data: bytes | None = None, kind: str | None = None) -> tuple[int, dict]:
    """(HTTP status, JSON body) of one request with the student's Bearer token; an HTTP error is an answer too."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if kind:
        headers["Content-Type"] = kind
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, {}


def student(
    base: str, token: str, name: str, kinds: list[str], folder: Path, out: list[Upload], wait: float, poll: float
):
    """One student: upload each file in turn and wait for its verdict before the next, as `grade submit` does
    (it polls every 2 s; here every ``poll`` s, so that the poll adds little to the measured time)."""
    for kind in kinds:
        task, file = (METRIC_KIND, f"{METRIC_KIND}.py") if kind == METRIC_KIND else (TASK, FILE)
        body, content_type = multipart([own_copy(folder, name, kind, file)])
        upload = Upload(name, kind, uploaded_at=time.perf_counter())
        out.append(upload)
        while True:
            upload.status, answer = call(f"{base}/submit/{task}", token, body, content_type)
            if upload.status != 429 or upload.retries >= 20:
                break
            upload.retries += 1
            time.sleep(RATE_LIMITED_WAIT)
        if not 200 <= upload.status < 300:
            continue
        upload.sid = answer["id"]
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            status, entry = call(f"{base}/api/submissions/{upload.sid}", token)
            if status == 200 and entry["status"] != "queued":
                upload.verdict_at, upload.verdict = time.perf_counter(), entry["status"]
                break
            time.sleep(poll)


def watch_board(base: str, token: str, board: Board, done: threading.Event) -> None:
    """Poll the scoreboard while grading goes on: it reads every submission on each request, so it is the page
    that slows down as the contest fills up, and the one a whole class keeps open."""
    while not done.is_set():
        started = time.perf_counter()
        status, _ = call(f"{base}/api/scoreboard", token)
        if status == 200:
            board.latencies.append(time.perf_counter() - started)
        else:
            board.errors += 1
        done.wait(SCOREBOARD_EVERY)


def run_contest(args, tmp: Path, files: Path) -> tuple[list[Upload], Board, Path]:
    """Serve a fresh contest, let every student submit at once, and stop the server once all have their
    verdicts. Returns the uploads, the scoreboard's latencies and the contest folder."""
    schedule = plan(args.students, args.per_student)
    folder = tmp / "contest"
    tokens = make_contest(folder, list(schedule))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = serve_contest(folder, port, args.workers, wait=120)
    uploads: list[Upload] = []
    board = Board()
    done = threading.Event()
    try:
        threads = [
            threading.Thread(
                target=student, args=(base, tokens[name], name, kinds, files, uploads, args.wait, args.poll)
            )
            for name, kinds in schedule.items()
        ]
        watcher = threading.Thread(target=watch_board, args=(base, next(iter(tokens.values())), board, done))
        watcher.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done.set()
        watcher.join()
    finally:
        done.set()
        stop_server(proc)
    return uploads, board, folder


def dask_cluster(workers: int) -> tuple[str, list[subprocess.Popen]]:
    """A local Dask scheduler and ``workers`` single-threaded workers (``dask`` from the dask extra), on loopback;
    the workers run this checkout's grader, as the contest's own pool does. Returns the address and the
    processes, each in a process group of its own (``stop_server`` ends them)."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"

    def start(module: str, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", f"distributed.cli.{module}", *args, "--no-dashboard"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    scheduler = start("dask_scheduler", "--host", "127.0.0.1", "--port", str(port))
    worker = start("dask_worker", address, "--nworkers", str(workers), "--nthreads", "1")
    from distributed import Client

    deadline = time.monotonic() + 120
    while True:  # the workers register before the server sends them anything
        try:
            with Client(address, timeout=5) as client:
                if len(client.scheduler_info()["workers"]) >= workers:
                    return address, [worker, scheduler]
        except OSError:
            pass
        if time.monotonic() > deadline:
            for proc in (worker, scheduler):
                stop_server(proc)
            raise SystemExit("the local Dask cluster did not start within 120 s")
        time.sleep(1)


def served_burst(
    args, files: Path, tokens: dict[str, str], proc: subprocess.Popen, port: int, plan: list[tuple[str, str, float]]
) -> tuple[list[Upload], float]:
    """The uploads of ``plan`` (student, kind, seconds after the burst begins) to the server ``proc`` serves on
    ``port``, each student waiting for their verdict; the server stopped after. Returns the uploads and the
    burst's start."""
    base = f"http://127.0.0.1:{port}"
    uploads: list[Upload] = []

    def one(name: str, kind: str, delay: float) -> None:
        time.sleep(delay)
        student(base, tokens[name], name, [kind], files, uploads, args.wait, args.poll)

    try:
        # The pool's workers start their fork servers as the server starts: a round's end finds them warm.
        time.sleep(10)
        began = time.perf_counter()
        busy_before = machine_cpu_seconds()
        threads = [threading.Thread(target=one, args=step) for step in plan]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        LAST_BURST_CPU[0] = machine_cpu_seconds() - busy_before
    finally:
        stop_server(proc)
    return uploads, began


# The CPU-seconds the whole machine spent during the last served burst (every process: the server, its grading,
# a Dask cluster's workers, and these simulated students), read by ``burst`` for its drain limit.
LAST_BURST_CPU = [float("nan")]


def machine_cpu_seconds() -> float:
    """CPU-seconds every core has spent busy since boot (user, nice, system, irq, softirq: /proc/stat's first
    line), so that a difference is the work done in between, whichever process did it."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:8]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


@dataclass
class Cost:
    """What grading costs on this machine, measured in one warm grading process of the contest's kind."""

    start: float  # CPU-seconds of a grading process's start: its pool process, its sandbox's fork server, ready
    first: float  # CPU-seconds of its first grading (what a process loads once: pytest, the suite, cached values)
    grading: float  # CPU-seconds of each later grading: the median over distinct files of the three kinds
    gradings: int


def grading_cost(files: Path, n: int = 12) -> Cost:
    """Grade ``n`` distinct files of the burst's three kinds, one after another, in one grading process started as
    the contest starts its own (``pool_context``, ``warm_up``), and count the machine's CPU-seconds of each step
    (every process's, the sandboxes' included: the machine is otherwise quiet, as the figures say)."""
    from concurrent.futures import ProcessPoolExecutor

    from grader.batch.run import grade_one, pool_context, stop_forkserver, warm_up
    from grader.options import limits

    chosen = limits()
    kinds = list(variants())
    folders = [own_copy(files, f"cost{i:02d}", kinds[i % len(kinds)], FILE).parent for i in range(n + 1)]
    before = machine_cpu_seconds()
    pool = ProcessPoolExecutor(1, mp_context=pool_context())
    try:
        pool.submit(warm_up, chosen, True).result()
        started = machine_cpu_seconds()
        each = []
        for folder in folders:
            at = machine_cpu_seconds()
            result = pool.submit(grade_one, str(folder), [TASK], chosen).result()
            if result.get("error"):
                raise SystemExit(f"the grading cost's gradings failed: {result['error']}")
            each.append(machine_cpu_seconds() - at)
    finally:
        pool.shutdown()
        stop_forkserver()
    return Cost(started - before, each[0], sorted(each[1:])[len(each[1:]) // 2], n)


def drain_line(cost: Cost, uploads: int) -> tuple[float, str]:
    """The burst's drain limit on this machine's cores (every grading at ``cost.grading``, no core idle, nothing
    else to do) and the line that says so."""
    cores = os.cpu_count() or 1
    limit = uploads * cost.grading / cores
    return limit, (
        f"grading cost ({TASK}, one warm grading process, {cost.gradings} distinct files): {cost.grading:.2f} CPU-s "
        f"a grading; a grading process's start {cost.start:.1f} CPU-s and its first grading {cost.first:.1f}; "
        f"drain limit of {uploads} uploads on {cores} cores: {uploads} x {cost.grading:.2f} / {cores} = {limit:.1f} s"
    )


def quick_plan(args, start: float = 0.0) -> list[tuple[str, str, float]]:
    """Every student uploads m1 once (reference, stub or a bug in turn), at a random moment (seeded) between
    ``start`` and ``--burst-seconds``, as at a round's end."""
    import random

    chance = random.Random(7)
    kinds = list(variants())
    return [
        (f"student{s:03d}", kinds[s % len(kinds)], chance.uniform(start, args.burst_seconds))
        for s in range(args.students)
    ]


def run_burst(args, tmp: Path, files: Path, workers: int, scheduler: str | None) -> tuple[list[Upload], Path, float]:
    """The quick burst (``quick_plan``) on a fresh contest. Returns the uploads, the contest folder and the
    burst's start."""
    plan = quick_plan(args)
    folder = tmp / f"burst-{workers}-{'dask' if scheduler else 'pool'}"
    tokens = make_contest(folder, [name for name, _, _ in plan])
    port = free_port()
    proc = serve_contest(folder, port, workers, wait=120, scheduler=scheduler)
    uploads, began = served_burst(args, files, tokens, proc, port, plan)
    return uploads, folder, began


def graded_times(folder: Path, task: str | None = None) -> list[tuple[datetime, datetime]]:
    """Each graded submission's (arrival, verdict), of ``task`` or of every task, from the contest's own records:
    the server's clock, without a student's upload time or poll interval."""
    with sqlite3.connect(f"file:{folder / 'contest.sqlite'}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT received_at, graded_at FROM submissions WHERE status = 'graded' AND task = coalesce(?, task)",
            (task,),
        ).fetchall()
    return [(datetime.fromisoformat(r), datetime.fromisoformat(g)) for r, g in rows]


def server_waits(folder: Path) -> list[float]:
    """Each graded quick submission's seconds from its arrival to its verdict (``graded_times``)."""
    return [(graded - arrived).total_seconds() for arrived, graded in graded_times(folder, TASK)]


def quick_waits(uploads: list[Upload]) -> list[float]:
    """Each quick upload's seconds from upload to verdict (the metric runs' left out)."""
    return [u.verdict_at - u.uploaded_at for u in uploads if u.verdict_at is not None and u.variant != METRIC_KIND]


def target_line(p95: float, limit: float) -> str:
    """p95 to a verdict against the targets: within 1.5x the drain limit, and at most 30 s."""
    met = p95 <= 1.5 * limit and p95 <= 30
    return f"p95 {p95:.1f} s = {p95 / limit:.2f}x the drain limit (target: within 1.5x and at most 30 s)" + (
        "" if met else "  MISSED"
    )


def burst(args, tmp: Path, files: Path) -> None:
    """The three ways of serving the same burst, one after the other, each on a fresh contest."""
    cost = grading_cost(files)
    limit, line = drain_line(cost, args.students)
    print(f"burst: {args.students} students, each uploading {TASK} once within {args.burst_seconds:g} s", flush=True)
    print(f"  {line}", flush=True)
    for label, workers, dask in (("1 worker", 1, False), ("2 workers", 2, False), ("Dask, 2 workers", 2, True)):
        cluster: list[subprocess.Popen] = []
        try:
            scheduler = None
            if dask:
                scheduler, cluster = dask_cluster(workers)
            uploads, folder, began = run_burst(args, tmp, files, workers, scheduler)
        finally:
            for proc in cluster:
                stop_server(proc)
        waits = quick_waits(uploads)
        last = max((u.verdict_at for u in uploads if u.verdict_at is not None), default=began) - began
        counts = audit(folder, uploads)
        print(
            f"  {label:<16} upload -> verdict: median {percentile(waits, 50):.1f} s, p95 {percentile(waits, 95):.1f} s"
            f", max {max(waits, default=float('nan')):.1f} s; last verdict {last:.0f} s after the burst began; "
            + ", ".join(f"{name} {n}" for name, n in counts.items()),
            flush=True,
        )
        # The burst's whole work: every process's CPU-seconds, the server's, its HTTP and these students' own
        # included, so what serving a grading costs beyond the grading itself shows beside it.
        cpu = LAST_BURST_CPU[0]
        served = server_waits(folder)
        print(
            f"  {'':<16} the server's records, arrival -> verdict: median {percentile(served, 50):.1f} s, "
            f"{target_line(percentile(served, 95), limit)}; the machine spent {cpu:.0f} CPU-s in all, "
            f"{cpu / max(len(uploads), 1):.2f} CPU-s an upload (the server and these students included)",
            flush=True,
        )


def run_metric_burst(
    args,
    tmp: Path,
    files: Path,
    lanes: bool,
    scheduler: str | None = None,
    runs: int | None = None,
    nice: int | None = None,
    name: str = "",
) -> tuple[list[Upload], Path, float]:
    """The burst of ``--students`` quick uploads, with ``runs`` (default ``--metric-runs``) lmbudget uploads from
    more students at its start; ``--workers`` workers, the metric lane on (its default size, at ``nice``: None
    the server's default) or off (``--metric-workers 0``); with ``scheduler``, the metric lane on that Dask
    cluster (``--scheduler-lanes metric``). ``name``: the contest folder's, where two rows would share one."""
    runs = args.metric_runs if runs is None else runs
    trainers = [(f"trainer{s:02d}", METRIC_KIND, 0.1 * s) for s in range(runs)]
    plan = trainers + quick_plan(args, start=0.5)
    name = name or ("dask" if scheduler else f"lanes-{nice}" if lanes else "shared")
    folder = tmp / f"metric-burst-{name}-{runs}"
    tokens = make_contest(folder, [name for name, _, _ in plan], metric=True)
    port = free_port()
    options: tuple[str, ...] = () if lanes else ("--metric-workers", "0")
    if lanes and nice is not None:
        options += ("--metric-nice", str(nice))
    if scheduler:
        options = ("--scheduler-lanes", "metric")
    proc = serve_contest(folder, port, args.workers, wait=120, scheduler=scheduler, options=options)
    uploads, began = served_burst(args, files, tokens, proc, port, plan)
    return uploads, folder, began


IDLE_TRAINING = """
import gzip, os, sys
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
sys.path.insert(0, sys.argv[1])
import torch
from lmbudget import train_within_budget
torch.set_num_threads(1)
text = open(sys.argv[2]).read()
vocab = sorted(set(text))
while True:
    train_within_budget(text, vocab, 30.0)
"""


def idle_training(tmp: Path) -> subprocess.Popen:
    """The reference recipe training over and over, outside any server, at the lowest CPU weight Linux has
    (SCHED_IDLE: a normal process that wakes takes its core at once): what a training run costs a burst's
    gradings when no scheduling is left to blame, only the cores' caches and memory they share."""
    return subprocess.Popen(
        [sys.executable, "-c", IDLE_TRAINING, str(ROOT / "solutions"), str(tmp / "corpus.txt")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def metric_task_file(tmp: Path) -> Path:
    """The shipped task file (its budget, its calibration) on the frozen grader corpus written to a file: a
    ``file:`` corpus, which a contest accepts where the worker cannot read it (this scratch folder)."""
    import dataclasses
    import gzip

    from grader.lmbudget.corpus import FROZEN
    from grader.lmbudget.task import TASK_FILE, load_task, write_task

    (tmp / "corpus.txt").write_bytes(gzip.decompress(FROZEN.read_bytes()))
    write_task(dataclasses.replace(load_task(TASK_FILE), corpus="file:corpus.txt"), tmp / "task.toml")
    return tmp / "task.toml"


def tiny_task_file(tmp: Path, cpu_seconds: float) -> Path:
    """The tests' kind of task file (tests/e2e/test_contest_lanes.py): the frozen grader corpus as a ``file:``
    corpus, a training budget of ``cpu_seconds``, 16 evaluation windows; a run of the reference recipe takes a
    few seconds, so that a mixed load runs in minutes."""
    import dataclasses

    from grader.lmbudget.task import load_task, write_task

    path = metric_task_file(tmp)
    task = dataclasses.replace(
        load_task(path), budget_cpu_seconds=cpu_seconds, wall_factor=4.0, eval_windows=16, probe_windows=8
    )
    write_task(task, path)
    return path


def dask_lane(args, tmp: Path, files: Path) -> None:
    """The mixed load served all local, then with the metric lane on a local Dask cluster stand-in."""
    from grader.contest.grading import default_metric_workers
    from grader.lmbudget.task import ENV_VAR

    os.environ[ENV_VAR] = str(tiny_task_file(tmp, args.metric_cpu))  # the servers' and the Dask workers' grading
    (files / METRIC_KIND).mkdir()
    shutil.copy(ROOT / "solutions" / f"{METRIC_KIND}.py", files / METRIC_KIND / f"{METRIC_KIND}.py")
    threads = default_metric_workers(args.workers)  # as many as the local metric lane's processes: a fair pair
    print(
        f"mixed load: {args.metric_runs} lmbudget runs (reference recipe, {args.metric_cpu:g} CPU s budget) at the "
        f"start, then {args.students} m1 uploads within {args.burst_seconds:g} s; --workers {args.workers}",
        flush=True,
    )
    served = (
        (f"(a) all local: quick lane {args.workers} processes, metric lane {threads}", False),
        (f"(b) metric lane on a local Dask cluster of {threads} thread(s), quick lane {args.workers} processes", True),
    )
    for label, dask in served:
        cluster: list[subprocess.Popen] = []
        load = os.getloadavg()[0]
        try:
            scheduler = None
            if dask:
                scheduler, cluster = dask_cluster(threads)
            uploads, folder, began = run_metric_burst(args, tmp, files, True, scheduler)
        finally:
            for proc in cluster:
                stop_server(proc)
        quick = [u.verdict_at - u.uploaded_at for u in uploads if u.verdict_at and u.variant != METRIC_KIND]
        ran = [u.verdict_at - began for u in uploads if u.verdict_at and u.variant == METRIC_KIND]
        span = max(ran, default=float("nan"))
        print(
            f"  {label}:\n    quick (m1) upload -> verdict: median {percentile(quick, 50):.1f} s, worst "
            f"{max(quick, default=float('nan')):.1f} s ({len(quick)} verdicts)\n    metric: {len(ran)} runs graded "
            f"in {span:.0f} s from the burst's start, {60 * len(ran) / span:.1f} runs/min\n    "
            + ", ".join(f"{name} {n}" for name, n in audit(folder, uploads).items())
            + f"; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after",
            flush=True,
        )


def metric_burst(args, tmp: Path, files: Path) -> None:
    """The burst alone, then with training runs at its start (lanes on, the metric lane at its default weight,
    then at the quick lane's), then with lanes off: each on a fresh contest."""
    from grader.contest.grading import METRIC_NICE, default_metric_workers
    from grader.lmbudget.task import ENV_VAR

    os.environ[ENV_VAR] = str(metric_task_file(tmp))  # the servers' grading reads it
    (files / METRIC_KIND).mkdir()
    shutil.copy(ROOT / "solutions" / f"{METRIC_KIND}.py", files / METRIC_KIND / f"{METRIC_KIND}.py")
    cost = grading_cost(files)
    limit, line = drain_line(cost, args.students)
    print(
        f"burst with training runs: {args.students} students each uploading {TASK} once within "
        f"{args.burst_seconds:g} s (reference, stub, bug), and {args.metric_runs} lmbudget uploads "
        f"(solutions/lmbudget.py, a training run of the task's CPU budget) at its start; --workers {args.workers}\n"
        f"  {line}",
        flush=True,
    )
    metric = default_metric_workers(args.workers)
    nice = METRIC_NICE if args.metric_nice is None else args.metric_nice
    chosen = " (the default)" if nice == METRIC_NICE else ""
    # (label, lanes on, training runs in the server, the metric lane's --metric-nice, a training run beside it)
    served: list[tuple[str, bool, int, int | None, bool]] = [
        ("no training runs", True, 0, None, False),
        (f"lanes on, metric lane of {metric} at nice +{nice}{chosen}", True, args.metric_runs, nice, False),
        (f"lanes on, metric lane of {metric} at nice +0 (an equal process)", True, args.metric_runs, 0, False),
        ("lanes off (--metric-workers 0)", False, args.metric_runs, None, False),
        ("no training runs in the server, the reference recipe training beside it at SCHED_IDLE", True, 0, None, True),
    ]
    quick_p95 = []
    for label, lanes, runs, weight, beside_it in served:
        load = os.getloadavg()[0]
        beside = idle_training(tmp) if beside_it else None
        try:
            uploads, folder, began = run_metric_burst(
                args, tmp, files, lanes, runs=runs, nice=weight, name="beside" if beside_it else ""
            )
        finally:
            if beside is not None:
                stop_server(beside)
        quick = quick_waits(uploads)
        records = server_waits(folder)
        trained = [u.verdict_at - u.uploaded_at for u in uploads if u.verdict_at and u.variant == METRIC_KIND]
        last = max((u.verdict_at for u in uploads if u.verdict_at is not None), default=began) - began
        counts = audit(folder, uploads)
        p95 = percentile(records, 95)
        quick_p95.append(p95)
        print(
            f"  {label}:\n    quick ({TASK}) upload -> verdict seen by the students: median "
            f"{percentile(quick, 50):.1f} s, p95 {percentile(quick, 95):.1f} s, "
            f"max {max(quick, default=float('nan')):.1f} s ({len(quick)} verdicts)\n"
            f"    the server's records, arrival -> verdict: median "
            f"{percentile(records, 50):.1f} s, {target_line(p95, limit)}"
            + (f"; {p95 / quick_p95[0]:.2f}x the p95 with no training runs" if runs or beside_it else "")
            + f"\n    training runs upload -> verdict: {', '.join(f'{r:.0f} s' for r in sorted(trained)) or 'none'}; "
            f"last verdict {last:.0f} s after the burst began\n    "
            + ", ".join(f"{name} {n}" for name, n in counts.items())
            + f"; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after",
            flush=True,
        )
    ratio = quick_p95[1] / quick_p95[0]
    print(
        f"quick tasks' p95 from arrival to verdict: {quick_p95[0]:.1f} s alone, {quick_p95[1]:.1f} s with the "
        f"training runs queued at nice +{nice} ({ratio:.2f}x; target: at most 1.10x)"
        + ("" if ratio <= 1.10 else "  MISSED"),
        flush=True,
    )


NETNS = "gptkit-bench-m"  # a simulated machine's network namespace: this and its number
SUBNET = "10.231"  # machine i: the host's end 10.231.i.1, the machine's 10.231.i.2


@contextlib.contextmanager
def simulated_machines(count: int) -> Iterator[list[tuple[str, str, str]]]:
    """``count`` simulated machines, each a network namespace of its own joined to this one by a veth pair (as a
    LAN joins machines): yields each one's (namespace, the host's address on its link, its own address); removed
    after, whatever happened. Needs root and iproute2."""
    made: list[str] = []

    def ip(*words: str) -> None:
        subprocess.run(["ip", *words], check=True, capture_output=True)

    try:
        machines = []
        for i in range(1, count + 1):
            name, host, own = f"{NETNS}{i}", f"{SUBNET}.{i}.1", f"{SUBNET}.{i}.2"
            subprocess.run(["ip", "netns", "del", name], capture_output=True)  # a run killed before its cleanup
            subprocess.run(["ip", "link", "del", f"gkbench{i}"], capture_output=True)
            ip("netns", "add", name)
            made.append(name)
            ip("link", "add", f"gkbench{i}", "type", "veth", "peer", "name", "eth0", "netns", name)
            ip("addr", "add", f"{host}/24", "dev", f"gkbench{i}")
            ip("link", "set", f"gkbench{i}", "up")
            for words in (
                ("addr", "add", f"{own}/24", "dev", "eth0"),
                ("link", "set", "eth0", "up"),
                ("link", "set", "lo", "up"),
            ):
                ip("netns", "exec", name, "ip", *words)
            machines.append((name, host, own))
        yield machines
    finally:
        for i, name in enumerate(made, 1):
            subprocess.run(["ip", "link", "del", f"gkbench{i}"], capture_output=True)
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def machine_cluster(machines: list[tuple[str, str, str]], cores: list[int]) -> tuple[str, list[subprocess.Popen]]:
    """A Dask scheduler here (every address) and on each simulated machine a worker of one thread, pinned to its
    core (``taskset``: the worker, its nanny, its grading's sandboxes all inherit it). Returns the scheduler's
    loopback address (the contest server's) and the processes, each in a process group of its own."""
    port = free_port()

    def quiet(command: list[str]) -> subprocess.Popen:
        return subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

    scheduler = quiet(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "0.0.0.0", "--port", str(port)]
        + ["--no-dashboard"]
    )
    procs = [scheduler]
    for (name, host, own), core in zip(machines, cores):
        procs.append(
            quiet(
                ["ip", "netns", "exec", name, "taskset", "-c", str(core), sys.executable, "-m"]
                + ["distributed.cli.dask_worker", f"tcp://{host}:{port}", "--nworkers", "1", "--nthreads", "1"]
                + ["--host", own, "--no-dashboard"]
            )
        )
    address = f"tcp://127.0.0.1:{port}"
    from distributed import Client

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with Client(address, timeout=5) as client:
                if len(client.scheduler_info()["workers"]) >= len(machines):
                    return address, procs[::-1]
        except OSError:
            pass
        time.sleep(1)
    for proc in procs:
        stop_server(proc)
    raise SystemExit("the simulated machines' Dask workers did not register within 120 s")


def drain(folder: Path) -> tuple[int, float]:
    """(submissions graded, seconds from the first one's arrival to the last one's verdict), from the contest's
    own records: the server's clock, not a student's poll."""
    times = graded_times(folder)
    if not times:
        return 0, float("nan")
    return len(times), (max(g for _, g in times) - min(r for r, _ in times)).total_seconds()


def machines(args, tmp: Path, files: Path) -> None:
    """The same burst graded by one simulated machine, then by two, each on a fresh contest and cluster."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("taskset") is None:
        raise SystemExit("--machines needs root, iproute2 and taskset: each simulated machine is a network namespace")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise SystemExit("--machines needs two cores: one for each simulated machine")
    cost = grading_cost(files)
    print(
        f"simulated machines: {args.students} students, each uploading {TASK} once within {args.burst_seconds:g} s, "
        f"graded on a Dask cluster whose workers are machines of one core each (a network namespace of its own, "
        f"joined by a veth pair; pinned to its core); the server, the scheduler and these students on the host\n"
        f"  grading cost ({TASK}, one warm grading process): {cost.grading:.2f} CPU-s a grading",
        flush=True,
    )
    rates = {}
    for count in (1, 2):
        with simulated_machines(count) as made:
            cluster: list[subprocess.Popen] = []
            try:
                scheduler, cluster = machine_cluster(made, cores[:count])
                uploads, folder, began = run_burst(args, tmp / f"machines-{count}", files, 1, scheduler)
            finally:
                for proc in cluster:
                    stop_server(proc)
        graded, seconds = drain(folder)
        rates[count] = graded / seconds
        waits = quick_waits(uploads)
        print(
            f"  {count} machine{'s' if count > 1 else ' '} ({', '.join(f'core {c}' for c in cores[:count])}): "
            f"{graded} graded in {seconds:.1f} s from the first arrival to the last verdict, "
            f"{rates[count]:.1f} a second ({rates[count] * cost.grading / count:.2f} of each "
            f"machine's core at the measured cost); upload -> verdict median {percentile(waits, 50):.1f} s, p95 "
            f"{percentile(waits, 95):.1f} s; " + ", ".join(f"{name} {n}" for name, n in audit(folder, uploads).items()),
            flush=True,
        )
    ratio = rates[2] / rates[1]
    print(f"two machines drain {ratio:.2f}x as fast as one (target: at least 1.6x){'' if ratio >= 1.6 else '  MISSED'}")


def run_batch(args, tmp: Path, uploads: list[Upload], files: Path) -> tuple[float, Path]:
    """`grade batch` on the same files, one folder per submission, m1 only as the contest grades it: the
    throughput a coach would get by collecting the uploads and grading them afterwards. Returns the wall
    seconds (the command's own start-up included, as a coach would wait for it) and the gradebook."""
    class_dir = tmp / "class"
    for i, upload in enumerate(uploads):
        target = class_dir / f"s{i:04d}-{upload.variant}"
        target.mkdir(parents=True)
        shutil.copy(files / upload.variant / FILE, target / FILE)
    db = tmp / "grades.sqlite"
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "grader", "batch", str(class_dir), "-m", TASK, "--workers", str(args.workers)]
        + ["--db", str(db)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - started, db


def wrong(variant: str, score: float | None, max_score: float | None) -> bool:
    """Whether a score is not what the variant deserves: the reference full marks, the stub 0, the bug less."""
    if score is None or not max_score:
        return True
    if variant == METRIC_KIND:  # a training run's loss varies with the machine: scored at all is what counts
        return False
    if variant == "reference":
        return score != max_score
    if variant == "stub":
        return score != 0
    return score >= max_score


def audit(folder: Path, uploads: list[Upload]) -> dict[str, int]:
    """Count, from the contest's own database, what went wrong: an accepted upload with no row or still queued
    (lost); a row no accepted upload accounts for, or one id handed out twice (duplicated); a grader failure;
    and a wrong score."""
    with sqlite3.connect(f"file:{folder / 'contest.sqlite'}?mode=ro", uri=True) as db:
        rows = {
            sid: (status, score, max_score)
            for sid, status, score, max_score in db.execute("SELECT id, status, score, max_score FROM submissions")
        }
    accepted = [u for u in uploads if u.sid is not None]
    ids = [u.sid for u in accepted]
    counts = {"accepted": len(accepted), "refused": len(uploads) - len(accepted)}
    counts["lost"] = sum(1 for sid in ids if sid not in rows or rows[sid][0] == "queued")
    counts["duplicated"] = (len(ids) - len(set(ids))) + len(rows.keys() - set(ids))
    counts["failed"] = sum(1 for sid in ids if rows.get(sid, ("",))[0] == "failed")
    counts["wrong"] = sum(
        1 for u in accepted if u.sid in rows and rows[u.sid][0] == "graded" and wrong(u.variant, *rows[u.sid][1:])
    )
    counts["no verdict seen"] = sum(1 for u in accepted if u.verdict_at is None)
    return counts


def batch_wrong(db: Path) -> int:
    """Wrong scores in the batch's gradebook: the same rule, so that both sides graded the same thing."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT student, status, score, max_score FROM submissions").fetchall()
    return sum(1 for student, status, score, top in rows if wrong(student.split("-", 1)[1], score, top))


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank: with a few dozen samples, no interpolation to pretend more."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


@contextlib.contextmanager
def scratch_folder(keep: Path | None) -> Iterator[str]:
    """Where the run's contests live: a temporary folder, removed after; or ``--keep``'s (made empty first), left
    for a look at each server's log and records."""
    if keep is None:
        with tempfile.TemporaryDirectory() as scratch:
            yield scratch
        return
    shutil.rmtree(keep, ignore_errors=True)
    keep.mkdir(parents=True)
    yield str(keep)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=50, help="simulated students (default 50)")
    parser.add_argument("--per-student", type=int, default=3, help="uploads per student (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="grading workers, server and batch (default 2)")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between a student's polls (default 0.5)")
    parser.add_argument("--wait", type=float, default=1800, help="seconds a student waits for a verdict")
    parser.add_argument("--burst", action="store_true", help="a round's end: one upload each, three servers")
    parser.add_argument("--burst-seconds", type=float, default=10, help="the burst's length (default 10)")
    parser.add_argument(
        "--metric-runs", type=int, default=0, help="with --burst: this many lmbudget uploads at its start, lanes off/on"
    )
    parser.add_argument(
        "--dask-lane", action="store_true", help="a mixed load: all local, then the metric lane on Dask"
    )
    parser.add_argument("--metric-cpu", type=float, default=3.0, help="--dask-lane: a run's CPU budget (default 3)")
    parser.add_argument(
        "--machines", action="store_true", help="the burst on one simulated machine, then two (root: namespaces)"
    )
    parser.add_argument(
        "--metric-nice", type=int, default=None, help="with --metric-runs: the server's --metric-nice (its default)"
    )
    parser.add_argument("--keep", type=Path, default=None, help="keep the contests' folders here (logs, records)")
    parser.add_argument("--task", choices=sorted(QUICK_TASKS), default="m1", help="the quick task (default m1)")
    args = parser.parse_args()
    global TASK, FILE
    TASK, FILE = args.task, QUICK_TASKS[args.task][0]
    print(cpu_line(), flush=True)
    if args.dask_lane or args.burst or args.machines:
        args.metric_runs = args.metric_runs or (4 if args.dask_lane else 0)
        run = (
            machines if args.machines else dask_lane if args.dask_lane else metric_burst if args.metric_runs else burst
        )
        with scratch_folder(args.keep) as scratch:
            files = Path(scratch) / "files"
            for kind, data in variants().items():
                (files / kind).mkdir(parents=True)
                (files / kind / FILE).write_bytes(data)
            run(args, Path(scratch), files)
        return
    print(f"{args.students} students x {args.per_student} uploads, {args.workers} workers", flush=True)
    with scratch_folder(args.keep) as scratch:
        tmp = Path(scratch)
        files = tmp / "files"
        for kind, data in variants().items():
            (files / kind).mkdir(parents=True)
            (files / kind / FILE).write_bytes(data)
        uploads, board, folder = run_contest(args, tmp, files)
        counts = audit(folder, uploads)
        batch_seconds, db = run_batch(args, tmp, uploads, files)
        counts["wrong (batch)"] = batch_wrong(db)
    graded = [(u, u.verdict_at) for u in uploads if u.verdict_at is not None]
    waits = [at - u.uploaded_at for u, at in graded]
    span = max((at for _, at in graded), default=0) - min((u.uploaded_at for u in uploads), default=0)
    first = min((at for _, at in graded), default=float("nan")) - min((u.uploaded_at for u in uploads), default=0)
    contest_rate = len(graded) / span if span > 0 else 0.0
    batch_rate = len(uploads) / batch_seconds
    board_p95 = 1000 * percentile(board.latencies, 95)
    ratio = contest_rate / batch_rate if batch_rate else float("nan")
    print(
        f"upload -> verdict: p50 {percentile(waits, 50):.1f} s, p95 {percentile(waits, 95):.1f} s, "
        f"max {max(waits, default=float('nan')):.1f} s ({len(graded)} verdicts, each up to {args.poll:g} s late "
        f"from polling); the first verdict came {first:.1f} s after the first upload (the workers' start-up)"
    )
    print(
        f"scoreboard during grading: p50 {1000 * percentile(board.latencies, 50):.0f} ms, p95 {board_p95:.0f} ms "
        f"over {len(board.latencies)} requests, {board.errors} errors (target p95 < 200 ms)"
        + ("" if board_p95 < 200 else "  MISSED")
    )
    print(
        f"throughput: contest {60 * contest_rate:.1f} submissions/min ({span:.0f} s, first upload to last verdict), "
        f"grade batch {60 * batch_rate:.1f} submissions/min ({batch_seconds:.0f} s, its start-up included)"
    )
    print(
        f"contest vs grade batch: {ratio:.2f}x the throughput (target >= 0.9x)" + ("" if ratio >= 0.9 else "  MISSED")
    )
    print(
        ", ".join(f"{name} {n}" for name, n in counts.items()) + f"; 429s waited out {sum(u.retries for u in uploads)}"
    )
    if counts["lost"] or counts["duplicated"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
