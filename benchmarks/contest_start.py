"""How long `grade contest serve` takes to come back: from the command to the first 200 answer on ``/``, and to
the first verdict of an upload sent the moment the server answers, idle and with two busy loops beside it.

    python benchmarks/contest_start.py [--runs 3] [--students 200] [--workers 1] [--no-load]

A temp contest (window open now, m1, ``--students`` students with their tokens) is served by `grade contest
serve` on a free loopback port, ``--runs`` times idle and ``--runs`` times under load (two processes spinning
``while True: pass``, as a shared machine's other work), each a fresh start on the same folder, as a restart
is: the store keeps the earlier runs' submissions. Printed per run: the seconds to the first answer, to the
upload's acceptance and to its verdict, and the server's own timestamps of its start ("start: ..." lines:
imports, app built, answering, grading lanes warm); then each condition's median, and the machine (CPU model
and capability, load average), since a start's seconds on 2 busy cores say little about 16 idle ones.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from contest_load import FILE, TASK, call, cpu_line, make_contest  # noqa: E402 - benchmarks/ is on the path above

from grader.contest.submit import multipart  # noqa: E402
from helpers import free_port  # noqa: E402

PHASE = re.compile(r"start: (.+?) after ([0-9.]+) s")  # the server's own timestamps (grader/contest/commands.py)


@dataclass
class Start:
    answered: float = float("nan")  # seconds from the command to the first 200 on /
    accepted: float = float("nan")  # to the 202 of an upload sent as soon as it answered
    verdict: float = float("nan")  # to that upload's verdict
    phases: dict[str, float] = field(default_factory=dict)


def one_start(folder: Path, token: str, workers: int, timeout: float, poll: float) -> Start:
    """One `grade contest serve` from its command to its first verdict, then stopped as Ctrl-C does."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = folder / f"start-{port}.log"
    body, kind = multipart([ROOT / "solutions" / FILE])
    start = Start()
    began = time.perf_counter()
    with open(log, "w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "grader", "contest", "serve", str(folder), "--port", str(port)]
            + ["--workers", str(workers)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = began + timeout
        while time.perf_counter() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"{base}/", timeout=2) as answer:
                    if answer.status == 200:
                        start.answered = time.perf_counter() - began
                        break
            except (OSError, urllib.error.URLError):
                time.sleep(0.05)
        if start.answered != start.answered:  # nan: it never answered
            raise SystemExit(f"the server did not answer within {timeout:g} s: {log.read_text()[-2000:]}")
        status, answer = call(f"{base}/submit/{TASK}", token, body, kind)
        if status != 202:
            raise SystemExit(f"the upload was refused ({status}): {answer}")
        start.accepted = time.perf_counter() - began
        sid = answer["id"]
        while time.perf_counter() < deadline:
            _, row = call(f"{base}/api/submissions/{sid}", token)
            if row.get("status") not in (None, "queued"):
                start.verdict = time.perf_counter() - began
                break
            time.sleep(poll)  # a poll every 50 ms would itself slow a start on 2 cores
    finally:
        server.send_signal(2)  # Ctrl-C: the lifespan ends the grading pools
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    start.phases = {name: float(seconds) for name, seconds in PHASE.findall(log.read_text())}
    return start


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def report(label: str, starts: list[Start]) -> None:
    for i, s in enumerate(starts, 1):
        phases = ", ".join(f"{name} {seconds:.2f}" for name, seconds in s.phases.items())
        print(
            f"  {label} run {i}: answered {s.answered:.2f} s, upload accepted {s.accepted:.2f} s, "
            f"verdict {s.verdict:.2f} s  [server: {phases}]"
        )
    med = {k: statistics.median(getattr(s, k) for s in starts) for k in ("answered", "accepted", "verdict")}
    print(
        f"{label}: median first answer {med['answered']:.2f} s, upload accepted {med['accepted']:.2f} s, "
        f"first verdict {med['verdict']:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="starts per condition")
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, help="grade contest serve --workers")
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the loaded runs")
    parser.add_argument("--no-load", action="store_true", help="idle runs only")
    parser.add_argument("--timeout", type=float, default=180, help="seconds a start may take before giving up")
    parser.add_argument("--poll", type=float, default=0.5, help="seconds between two polls for the verdict")
    args = parser.parse_args()
    print(cpu_line())
    with tempfile.TemporaryDirectory(prefix="contest-start-") as tmp:
        folder = Path(tmp) / "contest"
        tokens = make_contest(folder, [f"student{s:03d}" for s in range(args.students)])
        token = next(iter(tokens.values()))
        conditions = [("idle", 0)] + ([] if args.no_load else [(f"{args.busy} busy loops", args.busy)])
        for label, busy in conditions:
            loops = busy_loops(busy)
            try:
                time.sleep(1 if loops else 0)  # the loops running before the start, as a loaded machine's are
                starts = [one_start(folder, token, args.workers, args.timeout, args.poll) for _ in range(args.runs)]
            finally:
                for loop in loops:
                    loop.kill()
                    loop.wait()
            report(label, starts)


if __name__ == "__main__":
    main()
