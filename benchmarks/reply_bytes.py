"""What the grading process receives from its workers while it grades: every reply's size, by request.

Runs `grade check SUBMISSION` in this process (its side-by-side grading processes are forked from it) with the
client's reading of replies wrapped: each reply's plain data (its JSON header) and tensor data (its blobs) is
written down, by request and grading process. Then it prints the largest reply, the total a submission
received, and the grading processes' peak resident memory. The limits on what a worker may send back
(grader/sandbox/client.py: ``MAX_REPLY_BYTES``, ``MAX_SUBMISSION_REPLY_BYTES``) were set from its figures on the
reference. From the repository root:

    python benchmarks/reply_bytes.py                  # every milestone, the reference
    python benchmarks/reply_bytes.py -m lmbudget      # the metric task (trains for its CPU budget)
    python benchmarks/reply_bytes.py FOLDER -m m1 -j 1  # a submission of your own; grade check's options
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    args = sys.argv[1:]
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return
    submission = args.pop(0) if args and not args[0].startswith("-") else str(ROOT / "solutions")

    from grader.sandbox import client
    from grader.sandbox.common import wire

    records = Path(tempfile.mkdtemp(prefix="reply-bytes-"))
    received = wire.recv_measured

    def recv(sock, deadline=None, limit=wire.MAX_MESSAGE_BYTES):  # type: ignore[no-untyped-def]
        header, blobs, size = received(sock, deadline, limit)
        if limit == wire.MAX_MESSAGE_BYTES:  # wire.recv's: the fork server's control messages, not a reply
            return header, blobs, size
        plain = size - sum(map(len, blobs))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux: this grading process's
        record = {"plain": plain, "tensor": size - plain, "op": _op(), "rss": rss}
        with open(records / f"{os.getpid()}.jsonl", "a") as out:
            out.write(json.dumps(record) + "\n")
        return header, blobs, size

    wire.recv_measured = recv  # the client reads every worker's reply through this module's attribute
    assert client.wire is wire

    data = DataSize()
    from grader.cli import main as grade

    argv = ["check", submission, "--format", "json", "-o", str(records / "report.json"), *args]
    try:
        with data:
            grade(argv, prog_name="grade", standalone_mode=False)
    except SystemExit:
        pass
    report = json.loads((records / "report.json").read_text())
    replies = [json.loads(line) for path in records.glob("*.jsonl") for line in path.read_text().splitlines()]
    processes = len(list(records.glob("*.jsonl")))
    shutil.rmtree(records)
    by_op: Counter[str] = Counter()
    for r in replies:
        by_op[r["op"]] += r["plain"] + r["tensor"]
    largest = max(replies, key=lambda r: r["plain"] + r["tensor"])
    rss = max([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss] + [r["rss"] for r in replies])
    passed = sum(c["passed"] for m in report["milestones"] for c in m["checks"])
    checks = sum(len(m["checks"]) for m in report["milestones"])
    print(f"graded: {passed}/{checks} checks, {report['score']:g}/{report['max_score']:g} points")
    print(f"replies: {len(replies):,} in {processes} grading process(es)")
    print(f"largest reply: {_mib(largest['plain'] + largest['tensor'])} ({largest['op']})")
    print(f"largest plain data: {_mib(max(r['plain'] for r in replies))}")
    print(f"total received: {_mib(sum(r['plain'] + r['tensor'] for r in replies))}")
    print("by request: " + ", ".join(f"{op} {_mib(n)}" for op, n in by_op.most_common(6)))
    print(f"peak RSS of a grading process: {rss / 1024:.0f} MiB")
    if data.start is not None:  # polled in this process: with -j 1, the only grading process
        print(f"this process's data size (VmData, what RLIMIT_DATA counts): {_mib(data.start)} when the grading")
        print(f"began (torch loaded), at most {_mib(data.peak)} while it graded: {_mib(data.peak - data.start)} more")


class DataSize:
    """This process's VmData (/proc/self/status) when the block begins, and its peak, polled every 5 ms."""

    def __init__(self) -> None:
        self.start: int | None = None
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> DataSize:
        import torch  # noqa: F401 - loaded first, as a grading process has it when it grades

        import grader.runner  # noqa: F401

        self.start = _vm_data()
        if self.start is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _vm_data() or 0)


def _vm_data() -> int | None:
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) << 10 for line in status if line.startswith("VmData:"))
    except (OSError, StopIteration):
        return None


def _op() -> str:
    """The request being answered, read from WorkerConnection.request's frame (its ``header``)."""
    frame = sys._getframe(3)
    header = frame.f_locals.get("header")
    if not isinstance(header, dict):
        return "?"
    return str(header.get("op")) + (f" {header['name']}" if header.get("name") else "")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB" if n >= 1 << 20 else f"{n / 1024:.1f} KiB"


if __name__ == "__main__":
    main()
