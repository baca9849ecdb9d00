"""A worker's reply past any bound is refused, saying which, before anything reads it: its plain data
(``check_reply_size``), its bytes (one reply's limit, its submission's budget: ``wire.recv_measured``,
``ReplyBudget``), and what the grading process may hold meanwhile (``grading_memory_limit``). A refused reply ends
its submission's grading: every later request is answered "not run" without a word to the worker. And the
scratch folders of fork servers whose owner is gone are swept (``sweep_scratch``)."""

from __future__ import annotations

import json
import os
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from grader.results import Verdict
from grader.runner import failure
from grader.sandbox import client
from grader.sandbox.client import (
    MAX_REPLY_BYTES,
    MAX_REPLY_DEPTH,
    MAX_REPLY_ITEMS,
    MAX_SAVED_REPLY_BYTES,
    MAX_STRING_CHARS,
    Remote,
    ReplyBudget,
    ReplyTooLarge,
    WorkerConnection,
    check_reply_size,
    sweep_scratch,
)
from grader.sandbox.common import wire

MiB = 1 << 20


def nested(depth: int) -> dict:
    value: dict = {"t": "py", "v": 0}
    for _ in range(depth):
        value = {"t": "list", "items": [value]}
    return value


@pytest.mark.parametrize(
    "reply, phrase",
    [
        ({"value": {"t": "py", "v": "x" * (MAX_STRING_CHARS + 1)}}, "string; the grader reads at most 64 KB"),
        ({"k" * (MAX_STRING_CHARS + 1): 1}, "string; the grader reads at most 64 KB"),
        ({"value": ["y" * (MAX_STRING_CHARS // 2)] * 10}, "of text in one reply; the grader reads at most 256 KB"),
        ({"value": [0] * (MAX_REPLY_ITEMS + 1)}, "more than 100,000 values in one reply"),
        ({"value": nested(MAX_REPLY_DEPTH)}, "nested more than 64 levels deep"),
    ],
    ids=["string", "key", "text", "items", "depth"],
)
def test_each_bound_is_refused_saying_which(reply, phrase):
    with pytest.raises(ReplyTooLarge, match=phrase):
        check_reply_size(reply)


def test_an_honest_reply_passes():
    """The largest honest reply measured (a full `grade check` of the reference): 12 KB of text, 2,666 values,
    8 levels, its longest string 84 characters."""
    honest = {"value": {"t": "dict", "items": {f"blocks.{i}.attn.qkv.weight": [64, 192] for i in range(500)}}}
    check_reply_size(honest)


def test_the_check_costs_little_whatever_the_reply():
    # CPU time, not the clock: a busy machine (tests side by side) stretches the clock, not the work
    started = time.process_time()
    for reply in ({"v": "a( " * 1_300_000}, {"v": [{"t": "py", "v": 0}] * 200_000}):
        with pytest.raises(ReplyTooLarge):
            check_reply_size(reply)
    assert time.process_time() - started < 2


# ---------------------------------------------------------------- bytes: one reply, one submission


def claimed(blob_bytes: list[int], value: dict | None = None) -> bytes:
    """A reply's frame whose header claims blobs of these sizes (none of their bytes follows)."""
    header = json.dumps({"value": value or {"t": "py", "v": None}, "blobs": blob_bytes}).encode()
    return struct.pack("!I", len(header)) + header


class FakeWorker:
    """The worker's end of a socket pair: answers each request with the next of ``replies`` (bytes, then as many
    zero bytes as the reply's blobs claim, where ``whole``), and counts the requests it got."""

    def __init__(self, replies: list[tuple[bytes, int]]):
        self.ours, self.theirs = socket.socketpair()
        self.replies, self.requests = list(replies), 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.theirs.settimeout(10)
        try:
            while self.replies:
                wire.recv(self.theirs)
                self.requests += 1
                frame, data = self.replies.pop(0)
                self.theirs.sendall(frame)
                for _ in range(data // MiB):
                    self.theirs.sendall(bytes(MiB))
                self.theirs.sendall(bytes(data % MiB))
        except (OSError, EOFError):  # the grading side closed its end: it reads no more
            pass

    def connection(self, replies: ReplyBudget | None) -> WorkerConnection:
        server = types.SimpleNamespace(limits=client.Limits(call_seconds=10.0), reap=lambda pid, grace: {})
        return WorkerConnection(server, self.ours, 12345, Path("unused"), replies=replies)  # type: ignore[arg-type]

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()
        self.thread.join(10)


def tensor_reply(n: int) -> tuple[bytes, int]:
    """A whole reply of one uint8 tensor of ``n`` bytes."""
    return claimed([n], {"t": "tensor", "dtype": "uint8", "shape": [n], "blob": 0}), n


def test_a_message_past_its_limit_is_refused_before_its_blobs_are_read():
    """A header claiming 600 MB of blobs (none sent): refused at once with its size, nothing read or allocated."""
    ours, theirs = socket.socketpair()
    try:
        theirs.sendall(claimed([600 * MiB]))
        started = time.monotonic()
        with pytest.raises(wire.TooLarge) as refused:
            wire.recv_measured(ours, time.monotonic() + 5, limit=64 * MiB)
        assert time.monotonic() - started < 1
        assert refused.value.size > 600 * MiB and refused.value.limit == 64 * MiB
    finally:
        ours.close()
        theirs.close()


def test_a_message_within_its_limit_says_how_many_bytes_it_held():
    ours, theirs = socket.socketpair()
    try:
        frame = claimed([10, 20])
        theirs.sendall(frame + bytes(30))
        _, blobs, size = wire.recv_measured(ours, time.monotonic() + 5, limit=64 * MiB)
        assert [len(b) for b in blobs] == [10, 20] and size == len(frame) - 4 + 30
    finally:
        ours.close()
        theirs.close()


def test_a_reply_past_one_replys_limit_ends_the_grading_and_nothing_more_is_asked():
    """508 MB claimed: refused unread, the check's message says what and what to return instead, and the grading
    has ended: the next request is "not run" without reaching the worker, and no worker is spawned for it."""
    worker = FakeWorker([(claimed([508 * MiB]), 0), tensor_reply(10)])
    budget = ReplyBudget()
    try:
        connection = worker.connection(budget)
        with pytest.raises(ReplyTooLarge) as refused:
            connection.request({"op": "call"})
        message = str(refused.value)
        assert "508 MB in one reply, more than the 64 MB the grader reads in one" in message, message
        assert "return tensors of the shapes each check asks for" in message
        assert "its later checks are not run" in message
        assert not connection.alive and budget.ended is not None
        again = worker.connection(budget)  # a fresh worker for the next check: never asked
        with pytest.raises(ReplyTooLarge, match="^not run: an earlier check's reply was too large to read"):
            again.request({"op": "call"})
        assert worker.requests == 1
        server = client.ForkServer.__new__(client.ForkServer)
        server.replies = budget
        with pytest.raises(ReplyTooLarge, match="^not run"):
            server.spawn(Path("unused"))  # refused before the fork server is even asked
    finally:
        worker.close()


def test_the_submissions_budget_counts_every_reply():
    """Replies of 400 KB each against a budget of 1 MB: two are read, the third refused, saying the total."""
    worker = FakeWorker([tensor_reply(400 << 10)] * 3)
    budget = ReplyBudget(total=1 * MiB)
    try:
        connection = worker.connection(budget)
        for _ in range(2):
            assert connection.request({"op": "call"}).numel() == 400 << 10
        assert budget.left < 1 * MiB - (800 << 10)
        with pytest.raises(ReplyTooLarge, match="came to more than the 1 MB the grader reads from one submission"):
            connection.request({"op": "call"})
        assert budget.ended is not None
    finally:
        worker.close()


def test_a_saved_model_may_be_as_large_as_lmbudget_allows():
    """Request.SAVE's reply may hold up to lmbudget's 256 MB (its suite's own limit, and message); any other
    request's, 64 MB. 65 MB: a saved model is read, a call's reply refused."""
    assert MAX_SAVED_REPLY_BYTES > 256 * MiB > MAX_REPLY_BYTES
    worker = FakeWorker([tensor_reply(65 * MiB), (claimed([65 * MiB]), 0)])
    budget = ReplyBudget()
    try:
        connection = worker.connection(budget)
        saved = Remote(connection, 1, "Model").save()
        assert saved.numel() == 65 * MiB
        del saved
        with pytest.raises(ReplyTooLarge, match="65 MB in one reply"):
            connection.request({"op": "call"})
    finally:
        worker.close()


def test_one_budget_is_shared_by_the_grading_processes_of_a_submission():
    """Made before they are forked, each process counts in its own slot: what one takes, and a refusal in one,
    the others see."""
    budget = ReplyBudget(total=100 * MiB, processes=2)
    pid = os.fork()
    if pid == 0:
        child = budget.slot(1)
        child.take(30 * MiB)
        child.end("the child's reason")
        os._exit(0)
    os.waitpid(pid, 0)
    mine = budget.slot(0)
    mine.take(10 * MiB)
    assert mine.left == 60 * MiB
    assert mine.ended == "the child's reason"


# ---------------------------------------------------------------- the grading process's memory

UNDER_LIMIT = """
import json, resource, subprocess, sys
from grader.sandbox.client import _memory_uncapped, grading_memory_limit
report = {}
with grading_memory_limit(256 << 20) as took:
    report["took"] = took
    try:
        hoard = bytearray(512 << 20)
        report["512 MB"] = "allocated"
    except MemoryError:
        report["512 MB"] = "MemoryError"
    hoard = bytearray(64 << 20)  # within the allowance
    with _memory_uncapped():
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    report["child's soft limit"] = resource.prlimit(child.pid, resource.RLIMIT_DATA)[0]
    child.kill()
    child.wait()
report["after"] = len(bytearray(512 << 20))
report["soft limit after"] = resource.getrlimit(resource.RLIMIT_DATA)[0]
print(json.dumps(report))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="the limit is set from /proc's VmData")
def test_the_grading_process_may_grow_by_its_allowance_and_no_more():
    """In a process of its own: 512 MB past an allowance of 256 MB is a MemoryError, 64 MB is not; a process it
    starts (its fork server) does not inherit the limit; it is lifted once the grading ends."""
    proc = subprocess.run([sys.executable, "-c", UNDER_LIMIT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["took"] is True
    assert report["512 MB"] == "MemoryError"
    assert report["child's soft limit"] == report["soft limit after"] == resource.getrlimit(resource.RLIMIT_DATA)[0]
    assert report["after"] == 512 << 20


def test_running_out_of_memory_in_the_grading_process_is_a_claim_settled_on_the_reference():
    """A MemoryError (or torch's allocator's) in the grading process is neither the grader's crash nor blamed on
    the student at once: a check not counted, which runner.settle_claims runs again on the reference."""
    for error in (MemoryError(), RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8")):
        with pytest.raises(type(error)) as excinfo:
            raise error
        found = failure(excinfo)
        assert not found.counted and not found.internal and found.verdict == Verdict.NOT_COUNTED
        assert "the grading process ran out of memory" in found.message and "your code sent back" in found.message


# ---------------------------------------------------------------- scratch folders left behind


def owner_record(pid: int, started: str, **machine: str) -> str:
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    here = {"boot": boot, "pids": os.readlink("/proc/self/ns/pid")}
    return json.dumps({"pid": pid, "started": started, **here, **machine})


def started(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


@pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="a process's liveness is read in /proc")
def test_only_this_users_scratch_folders_whose_owner_is_gone_are_swept(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    records = {
        "gptkit-dead": owner_record(dead, "1"),
        "gptkit-reused": owner_record(os.getpid(), "1"),  # its pid now names another process: the owner is gone
        "gptkit-earlier-boot": owner_record(os.getpid(), started(os.getpid()), boot="another boot"),
        "gptkit-alive": owner_record(os.getpid(), started(os.getpid())),
        "gptkit-other-namespace": owner_record(dead, "1", pids="pid:[1]"),  # its pids are not ours to judge
        "gptkit-garbled": "{not json",
        "gptkit-norecord": None,
        "other-dead": owner_record(dead, "1"),  # not a fork server's name
    }
    for name, record in records.items():
        (tmp_path / name / "sub1" / "deep").mkdir(parents=True)
        (tmp_path / name / "sub1" / "deep" / "file").write_text("x")
        if record is not None:
            (tmp_path / name / "owner.json").write_text(record)
    (tmp_path / "gptkit-link").symlink_to(tmp_path / "gptkit-dead")  # a link by the name: never followed
    if os.getuid() == 0:
        (tmp_path / "gptkit-theirs").mkdir()
        (tmp_path / "gptkit-theirs" / "owner.json").write_text(owner_record(dead, "1"))
        os.chown(tmp_path / "gptkit-theirs", 4242, 4242)
    assert sweep_scratch(str(tmp_path)) == 3
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(
        ["gptkit-alive", "gptkit-other-namespace", "gptkit-garbled", "gptkit-norecord", "other-dead", "gptkit-link"]
        + (["gptkit-theirs"] if os.getuid() == 0 else [])
    )
