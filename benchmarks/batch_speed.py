"""Batch grading throughput, three ways on the same submissions, side by side in one run.

    python benchmarks/batch_speed.py [--n 50] [--workers 2] [--skip-nbgrader]

The submissions cycle through the reference, the stubs and buggy variants from the
corpus. Timed: `grade batch --workers N` on the folder; a sequential loop of
`grade check -j 1` on each folder (one grading process each, as in the batch); and
`nbgrader autograde` on the same submissions as nbgrader notebooks (the course from
`grade nbgrader`). Each line gives submissions
per minute and CPU seconds per submission (every process the command starts, counted by a
cgroup of its own: see ``CpuMeter``), and,
where the grader measured it, how much of that CPU was the grader's own: everything but
the submissions' code in their workers (which the reports record as worker_cpu_seconds),
plus the sandbox's set-up inside those workers (forks, namespaces, limits), measured here
on empty workers and charged to the grader too, once for every worker the reports say
was started (one per group of milestones that trust the same files, more after a crash).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.milestones import MILESTONES

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


class CpuMeter:
    """The CPU seconds of everything a command starts.

    The process tree's own count (``RUSAGE_CHILDREN``) misses every process its parent never waits for: a
    fork server's workers are reaped inside it, and a shared fork server outlives the pool process that made
    it, so their CPU never reaches this process (it came out 30% short on 4 submissions, which made the
    grader's share negative). A cgroup counts them all: each command runs in a cpuacct cgroup of its own
    (cgroup v1, where the sandbox's per-worker cgroups take only the memory and pids controllers, so its
    workers stay in ours). Where that cannot be made (cgroup v2, no permission), the tree's count is used
    and said to be a lower bound.
    """

    ROOT = Path("/sys/fs/cgroup/cpuacct")

    def __init__(self) -> None:
        self.group: Path | None = self.ROOT / f"gptkit-bench-{os.getpid()}"
        try:
            self.group.mkdir()
        except OSError:
            self.group = None
        self.how = "cgroup (cpuacct)" if self.group else "the reaped process tree only (a lower bound)"

    def _usage(self) -> float:
        if self.group is None:
            use = resource.getrusage(resource.RUSAGE_CHILDREN)
            return use.ru_utime + use.ru_stime
        return int((self.group / "cpuacct.usage").read_text()) / 1e9

    def _join(self) -> None:  # in the child, before exec: it and all it starts are counted
        if self.group is not None:
            (self.group / "cgroup.procs").write_text("0")

    def timed(self, command: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float]:
        """(wall seconds, CPU seconds of everything it ran) for one command."""
        before, started = self._usage(), time.perf_counter()
        subprocess.run(
            command,
            cwd=cwd,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=self._join,
        )
        wall = time.perf_counter() - started
        self._settle()
        return wall, self._usage() - before

    def _settle(self, seconds: float = 10) -> None:
        """Wait for what the command left running (a fork server shutting down) to end, so it is counted."""
        deadline = time.monotonic() + seconds
        while self.group is not None and (self.group / "cgroup.procs").read_text().split():
            if time.monotonic() > deadline:
                raise SystemExit(f"processes of the last command still run after {seconds:g} s: {self.group}")
            time.sleep(0.1)

    def close(self) -> None:
        if self.group is not None:
            self.group.rmdir()


def submissions(n: int, folder: Path) -> list[Path]:
    from corpus import BUGGY

    variants = [None, "stubs", *BUGGY[:: max(1, len(BUGGY) // 16)]]
    out = []
    for i in range(n):
        v = variants[i % len(variants)]
        target = folder / f"s{i:03d}"
        if v is None:
            shutil.copytree(ROOT / "solutions", target, ignore=shutil.ignore_patterns("__pycache__"))
        elif v == "stubs":
            shutil.copytree(ROOT / "exercises", target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            v.build(target)
        out.append(target)
    return out


def nbgrader_course(subs: list[Path], tmp: Path) -> Path:
    """The same submissions as notebooks of the generated course, in submitted/STUDENT/lesson/."""
    course = tmp / "course"
    subprocess.run([sys.executable, "-m", "grader", "nbgrader", str(course)], cwd=ROOT, check=True, capture_output=True)
    notebook = json.loads((course / "source/lesson/tinygpt.ipynb").read_text())
    for sub in subs:
        cells = []
        for cell in notebook["cells"]:
            grade_id = cell["metadata"]["nbgrader"]["grade_id"]
            if cell["metadata"]["nbgrader"].get("solution") and (sub / _module(grade_id)).is_file():
                cell = dict(cell, source=(sub / _module(grade_id)).read_text())
            cells.append(cell)
        target = course / "submitted" / sub.name / "lesson"
        target.mkdir(parents=True)
        (target / "tinygpt.ipynb").write_text(json.dumps(dict(notebook, cells=cells)))
    subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_assignment", "lesson"],
        cwd=course,
        check=True,
        capture_output=True,
        env=nbgrader_env(),
    )
    return course


def nbgrader_env() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}


def _module(grade_id: str) -> str:
    return f"{MILESTONES[grade_id.removesuffix('-answer')].modules[0]}.py"


def sandbox_setup_seconds(n: int = 40) -> float:
    """The CPU seconds of one empty worker's process tree: the sandbox's own cost, whatever the submission."""
    from grader.sandbox.client import ForkServer, Limits
    from grader.sandbox.common.agreement import Request

    with ForkServer(Limits()) as server, tempfile.TemporaryDirectory() as empty:
        for i in range(n + 1):
            if i == 1:  # the first worker pays one-off costs that a batch spreads over all
                before = server.worker_cpu
            worker = server.spawn(Path(empty))
            worker.request({"op": Request.IMPORT, "modules": []})
            worker.close()
        return (server.worker_cpu - before) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="submissions (default 50)")
    parser.add_argument("--workers", type=int, default=2, help="grade batch --workers (default 2)")
    parser.add_argument("--skip-nbgrader", action="store_true", help="leave out nbgrader autograde")
    args = parser.parse_args()
    meter = CpuMeter()
    try:
        run(args, meter)
    finally:
        meter.close()


def run(args: argparse.Namespace, meter: CpuMeter) -> None:
    import torch

    print(
        f"{os.cpu_count()} CPUs, CPU capability {torch.backends.cpu.get_cpu_capability()}, load average "
        f"{os.getloadavg()[0]:.1f} at start; CPU counted by {meter.how}"
    )
    timed = meter.timed
    with tempfile.TemporaryDirectory() as scratch:
        tmp = Path(scratch)
        subs = submissions(args.n, tmp / "class")
        results = {
            "grade batch": timed(
                [sys.executable, "-m", "grader", "batch", str(tmp / "class"), "--workers", str(args.workers)], ROOT
            )
        }
        with sqlite3.connect(tmp / "class" / "grades.sqlite") as db:
            own = {"grade batch": db.execute("SELECT SUM(worker_cpu) FROM submissions").fetchone()[0]}
        wall = cpu = own["grade check loop"] = workers = 0.0
        for sub in subs:
            out = tmp / f"{sub.name}.json"
            # -j 1: one grading process, as in the batch, so both start the same workers for a submission
            check = [sys.executable, "-m", "grader", "check", str(sub), "-j", "1", "--format", "json", "-o", str(out)]
            w, c = timed(check, ROOT)
            wall, cpu = wall + w, cpu + c
            report = json.loads(out.read_text())
            own["grade check loop"] += report["worker_cpu_seconds"]
            workers += report["workers"] / args.n  # the same submissions start as many in the batch
        results["grade check loop"] = (wall, cpu)
        if not args.skip_nbgrader:
            course = nbgrader_course(subs, tmp)
            results["nbgrader autograde"] = timed(
                [sys.executable, "-m", "nbgrader", "autograde", "lesson"], course, nbgrader_env()
            )
    sandbox = sandbox_setup_seconds() * workers
    for name, (wall, cpu) in results.items():
        share = (cpu - own[name]) / args.n + sandbox if name in own else None
        # The submissions' own CPU is part of what the meter counts: less than that means CPU went uncounted.
        if share is not None and share < 0 and meter.group is not None:
            raise SystemExit(f"{name}: the grader's share came out negative ({share:.2f} s): CPU escaped the meter")
        # The identity the figures must satisfy: all CPU = the submissions' own code + the grader's.
        grader = (
            f" = the submissions' {cpu / args.n - share:5.2f} + the grader's {share:5.2f}"
            if share is not None and share >= 0
            else ""
        )
        print(
            f"{name:<20} {60 * args.n / wall:7.1f} submissions/min   {cpu / args.n:6.2f} CPU s/submission{grader}"
            f"   ({wall:.0f} s wall for {args.n})"
        )
    print(
        f"(the grader's: everything but the submissions' own code; of it, {sandbox:.2f} s is the sandbox's "
        f"set-up, {1000 * sandbox / workers:.0f} ms for each of {workers:.2f} workers per submission)"
    )
    base = results["grade batch"][0]
    for name, (wall, _) in results.items():
        if name != "grade batch":
            print(f"grade batch vs {name}: {wall / base:.1f}x the throughput")
    if "nbgrader autograde" in results:
        ceilings(args, results, sandbox, (results["grade batch"][1] - own["grade batch"]) / args.n + sandbox)


def ceilings(args: argparse.Namespace, results: dict, sandbox: float, share: float) -> None:
    """The most any batch could do on these submissions, next to nbgrader: their own code kept every core busy.

    Upper bounds: the submissions' CPU (what the suites make their code run) over the cores, with the
    grader's share at nothing, or at only the sandbox's set-up (which isolation cannot do without).
    """
    cores = min(args.workers, len(os.sched_getaffinity(0)))
    own = results["grade batch"][1] / args.n - share  # the submissions' CPU s per submission
    nbgrader = 60 * args.n / results["nbgrader autograde"][0]
    for what, cpu in (("nothing", own), ("only the sandbox's set-up", own + sandbox)):
        most = 60 * cores / cpu
        print(
            f"ceiling, the grader's share at {what}: {most:.0f} submissions/min on {cores} cores, "
            f"{most / nbgrader:.1f}x nbgrader's"
        )


if __name__ == "__main__":
    main()
