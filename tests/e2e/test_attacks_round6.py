"""The red team's sixth round: a hostile student with the source open, on the paths no attack had tried yet and on
what this round built. Each test is one attack, run as the user-facing path runs it; what held stays tested, and
what did not is either fixed (the test failed before) or marked ``xfail(strict=True)`` with why it is left.

* a contest's test run (``POST /test-run/TASK``): what its script can read or reach, what it leaves behind;
* the Dask lane: a submission graded on the cluster, in the same sandbox, and the cluster's own door;
* the jury's accounts: a removed coach's token and rotated students' tokens, refused at once;
* files swapped while a batch grades;
* a notebook cell that forks, in a submission and in the in-kernel check;
* a reply listing millions of tensors;
* a batch folder where a student's own folder is named ``submitted``;
* similarity: a copy wrapped in calls that give back their argument, and files built to make normalising slow;
* lmbudget: a model that knows which rows are probes.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from fastapi.testclient import TestClient

from grader.contest.store import Store
from grader.contest.web.app import create_app
from grader.sandbox.client import Limits
from helpers import SOLUTIONS, ContestClock, auth, forget_counts, tokens

M1 = ("m1_attention.py", (SOLUTIONS / "m1_attention.py").read_bytes())
SECRET = "round6-" + "s3cr3t" * 4  # planted wherever the server keeps what a student must never read


class Listener:
    """A TCP port on this machine's loopback, standing in for the contest server and the Dask scheduler: what a
    sandboxed script reaches is counted here."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reached: list[object] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.sock.accept()
            except OSError:
                return
            self.reached.append(peer)
            conn.close()

    def close(self) -> None:
        self.sock.close()


def worker_processes() -> list[str]:
    from test_sandbox import worker_processes as left

    deadline = time.monotonic() + 5
    while (found := left()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


# ---------------------------------------------------------------- 1. a contest's test run

RUN_SECONDS = 8.0


@pytest.fixture(scope="module")
def room(module_contest, tmp_path_factory):
    """(client, folder): a contest whose folder holds every secret a server keeps, a coach's account, another
    student's upload and a held-out text outside the kit; test runs in a process of the app's own."""
    folder = module_contest("[tasks.m1]\npoints = 10\ntest_runs = 10\n", title="Round 6")
    result = CliRunner().invoke(_contest_group(), ["coach", str(folder), "jane"])
    assert result.exit_code == 0, result.output
    corpus = tmp_path_factory.mktemp("heldout") / "corpus.txt"
    corpus.write_text(f"{SECRET} held out\n")
    clock = ContestClock()
    app = create_app(folder, clock, limits=Limits(call_seconds=RUN_SECONDS, test_seconds=RUN_SECONDS))
    client = TestClient(app)
    theirs = [("m1_attention.py", f"# grace's own work {SECRET}\n".encode() + M1[1])]
    sent = client.post(
        "/submit/m1", files=[("files", (n, d, "text/x-python")) for n, d in theirs], headers=auth(folder, "grace")
    )
    assert sent.status_code == 202, sent.text
    yield client, folder, corpus
    app.state.contest.stop_grading()


def _contest_group():
    from grader.contest.commands import contest

    return contest


def test_run(client, folder, who: str, script: str) -> dict:
    sent = client.post(
        "/test-run/m1",
        files=[("files", (M1[0], M1[1], "text/x-python"))],
        data={"script": script},
        headers=auth(folder, who),
    )
    assert sent.status_code == 202, sent.text
    deadline = time.monotonic() + 120  # the first starts the test runs' process and its fork server
    while time.monotonic() < deadline:
        run = client.get(sent.json()["url"], headers=auth(folder, who)).json()
        if run["status"] == "done":
            return run
        time.sleep(0.3)
    raise AssertionError("the test run did not run within 120 s")


test_run.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.mark.slow
def test_attack_a_test_run_reads_nothing_the_server_keeps_and_reaches_no_port(room, monkeypatch):
    """The script reads the contest's tokens, the coach's and the jury's, the store, another student's upload, the
    held-out text, every process's environment, and dials this machine's loopback: all refused, nothing reached."""
    client, folder, corpus = room
    secrets = [folder / name for name in ("tokens.csv", "admin.token", "coaches.csv", "contest.sqlite")]
    secrets += [p for p in (folder / "uploads").rglob("*") if p.is_file()] + [corpus]
    assert len(secrets) >= 6, secrets
    port = Listener()
    monkeypatch.setenv("GPTKIT_ROUND6_SECRET", SECRET)  # the server's environment: never the worker's
    script = f"""
import os, socket
for path in {[str(p) for p in secrets]!r}:
    try:
        print(open(path, "rb").read())
    except OSError as e:
        print("refused", type(e).__name__)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            print(open(f"/proc/{{pid}}/environ", "rb").read())
        except OSError:
            pass
print(dict(os.environ))
for where in [("127.0.0.1", {port.port}), ("localhost", {port.port})]:
    try:
        socket.create_connection(where, timeout=2).close()
        print("reached", where)
    except OSError as e:
        print("unreachable", type(e).__name__)
"""
    try:
        run = test_run(client, folder, "ada", script)
    finally:
        port.close()
    assert run["verdict"] == "ok", run
    out = run["output"]
    assert out.count("refused") == len(secrets) and out.count("unreachable") == 2, out
    assert SECRET not in out and "reached" not in out.replace("unreachable", ""), out
    for token in tokens(folder).values():
        assert token not in out
    assert port.reached == [], "the script reached a port of the server's machine"


@pytest.mark.slow
def test_attack_a_test_run_leaves_no_process_no_file_and_nothing_for_the_next(room):
    """ada's script starts a daemon (double fork, setsid) that keeps writing into /tmp, /dev/shm and its home, a
    child that sleeps, and fills its folder until refused; alan's next test run finds none of it, no process of
    hers is left on the machine, her run ends in its own time, and the server's folder keeps no file of it."""
    client, folder, _ = room
    before = {p for p in folder.rglob("*") if "uploads" not in p.parts}
    script = """
import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            for path in ("/tmp/left-by-ada", "/dev/shm/left-by-ada", os.path.expanduser("~/left-by-ada")):
                try:
                    open(path, "w").write("x")
                except OSError:
                    pass
            time.sleep(0.05)
    os._exit(0)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
written = 0
try:
    for i in range(1024):
        with open(f"fill{i}", "wb") as f:
            f.write(bytes(4 << 20))
        written += 4
except OSError as e:
    print("refused after", written, "MB:", type(e).__name__)
print("the folder holds", os.statvfs(".").f_blocks * os.statvfs(".").f_frsize >> 20, "MB")
time.sleep(0.5)
"""
    mine = test_run(client, folder, "ada", script)
    assert mine["verdict"] == "ok" and mine["seconds"] < RUN_SECONDS, mine
    assert "refused after" in mine["output"] and "the folder holds 256 MB" in mine["output"], mine["output"]
    assert worker_processes() == [], "a process of ada's test run outlived it"
    look = """
import os
for path in ("/tmp/left-by-ada", "/dev/shm/left-by-ada", os.path.expanduser("~/left-by-ada"), "fill0"):
    print(path, os.path.exists(path))
print(sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")), sorted(os.listdir(".")))
print([p for p in os.listdir("/proc") if p.isdigit()])
"""
    theirs = test_run(client, folder, "alan", look)
    assert theirs["verdict"] == "ok", theirs
    assert "True" not in theirs["output"] and "left-by-ada" not in theirs["output"].split("\n", 4)[-1], theirs
    assert "['2']" in theirs["output"] or "['1', '2']" in theirs["output"], "its own process tree alone"
    after = {p for p in folder.rglob("*") if "uploads" not in p.parts}
    assert not {p for p in after - before if "test-runs" in p.parts and p.is_file()}, after - before
    forget_counts(client.app)


# ---------------------------------------------------------------- 3. the jury's accounts


def coach_command(*args: str) -> None:
    """`grade contest ARGS`, as the coach runs it beside the running server."""
    result = CliRunner().invoke(_contest_group(), [*args])
    assert result.exit_code == 0, result.output


def test_attack_a_removed_coachs_token_is_refused_at_once_and_a_new_one_let_in(contest):
    """A jury member's token leaked (or their account was taken away) during the round: before, it kept every coach
    route until the server restarted; now `grade contest coach --remove` closes it for the running server."""
    folder = contest("[tasks.m1]\npoints = 10\n", title="Jury")
    client = TestClient(create_app(folder, ContestClock()))
    coach_command("coach", str(folder), "jane")
    jane = {"Authorization": f"Bearer {_coaches(folder)['jane']}"}
    assert client.get("/api/coach", headers=jane).status_code == 200, "a new coach is let in without a restart"
    coach_command("coach", str(folder), "jane", "--remove")
    for route in ("/api/coach", "/coach", "/coach/results.csv"):
        assert client.get(route, headers=jane).status_code == 401, route
    assert client.post("/coach/freeze", headers=jane).status_code == 401
    admin = auth(folder, "coach")
    assert client.get("/api/coach", headers=admin).json()["audit"] == [], "nothing done in jane's name"


def test_attack_rotated_student_tokens_stop_at_once(contest):
    """`grade contest tokens --rotate` says "the old ones no longer work": now true for the running server too."""
    folder = contest("[tasks.m1]\npoints = 10\n", title="Rotation")
    client = TestClient(create_app(folder, ContestClock()))
    old = tokens(folder)
    assert client.get("/api/me", headers={"Authorization": f"Bearer {old['ada']}"}).status_code == 200
    coach_command("tokens", str(folder), "--rotate")
    new = tokens(folder)
    assert client.get("/api/me", headers={"Authorization": f"Bearer {old['ada']}"}).status_code == 401
    assert client.get("/api/coach", headers={"Authorization": f"Bearer {old['coach']}"}).status_code == 401
    assert client.get("/api/me", headers={"Authorization": f"Bearer {new['ada']}"}).status_code == 200


def test_a_coachs_token_is_on_no_page_and_their_actions_carry_their_name(contest):
    """No page, API answer or audit line shows a jury member's token; what they do is recorded under their name."""
    folder = contest("[tasks.m1]\npoints = 10\n", title="Audit")
    coach_command("coach", str(folder), "jane")
    client = TestClient(create_app(folder, ContestClock()))
    token = _coaches(folder)["jane"]
    jane = {"Authorization": f"Bearer {token}"}
    assert client.post("/coach/announce", data={"text": "Read task m1 again."}, headers=jane).status_code == 201
    seen = "".join(
        client.get(route, headers={**jane, "Accept": accept}).text
        for route in ("/coach", "/api/coach", "/scoreboard", "/api/messages")
        for accept in ("text/html", "application/json")
    )
    seen += "".join(client.get(r, headers=auth(folder, "ada")).text for r in ("/me", "/api/me", "/api/messages"))
    assert token not in seen and all(t not in seen for t in tokens(folder).values())
    audit = client.get("/api/coach", headers=jane).json()["audit"]
    assert any("jane" in json.dumps(entry) for entry in audit), audit


def _coaches(folder: Path) -> dict[str, str]:
    from grader.contest.layout import read_coaches

    return {name: token for token, name in read_coaches(folder).items()}


# ---------------------------------------------------------------- 6. a reply that lists millions of tensors


def test_attack_a_header_listing_millions_of_tensors_is_refused_before_one_is_read():
    """A worker's 2.6 MB header listing 1.4 million one-byte tensors: it took the grading process 2 CPU seconds and
    80 MB to read, once per check (the check then refused it for its item count). Now refused unread."""
    from grader.sandbox.common import wire

    ours, theirs = socket.socketpair()
    count = 1_390_000
    header = json.dumps({"value": None, "blobs": [1] * count}, separators=(",", ":")).encode()
    assert len(header) < wire.MAX_HEADER_BYTES

    def send() -> None:
        try:
            theirs.sendall(struct.pack("!I", len(header)) + header + bytes(count))
        except OSError:
            pass  # refused: the reading side hung up

    threading.Thread(target=send, daemon=True).start()
    started = time.process_time()
    with pytest.raises(wire.TooLarge, match="tensors in one reply") as refused:
        wire.recv_measured(ours, time.monotonic() + 30, 64 << 20)
    assert refused.value.size == 0, "this check's failure alone, as a header past its bound"
    assert time.process_time() - started < 1.0
    ours.close()
    theirs.close()


# ---------------------------------------------------------------- 2. the Dask lane

DASK_ATTACK = """
import os
import socket


def _try():
    found = []
    for where in _PLACES:
        try:
            socket.create_connection(where, timeout=2).close()
            found.append(where)
        except OSError:
            pass
    for path in _SECRETS:
        try:
            found.append(open(path).read())
        except OSError:
            pass
    try:
        with open(_MARKER, "w") as f:
            f.write(repr(found))
    except OSError:
        pass


_try()
"""


@pytest.fixture(scope="module")
def cluster():
    """A local Dask cluster of one single-threaded worker process, as `dask scheduler` and `dask worker` make one."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as made,
        distributed.Client(made) as client,
    ):
        yield made, client


@pytest.mark.slow
def test_attack_a_submission_graded_on_the_cluster_is_in_the_same_sandbox(cluster, contest, tmp_path):
    """An m1 upload graded on the Dask lane (`--scheduler`) that, at import, dials the scheduler and a port of this
    machine, reads the contest's tokens, and writes what it found to a file of this machine: none of it happens,
    and it is graded (full marks) in the worker's jail, as on the server's own processes."""
    from grader.contest.grading import LANES, Remote

    made, client = cluster
    host, port = made.scheduler_address.removeprefix("tcp://").rsplit(":", 1)
    listener = Listener()
    folder = contest("[tasks.m1]\npoints = 10\n", title="Dask lane")
    marker = tmp_path / "found-on-the-cluster.txt"
    places = [(host, int(port)), ("127.0.0.1", listener.port)]
    secrets = [str(folder / "tokens.csv"), str(folder / "admin.token")]
    attack = DASK_ATTACK.replace("_PLACES", repr(places)).replace("_SECRETS", repr(secrets))
    attack = attack.replace("_MARKER", repr(str(marker)))
    source = M1[1].decode().replace("import math\n", "import math\n" + attack, 1)
    clock = ContestClock()
    remote = Remote(frozenset(LANES), f"the Dask cluster at {made.scheduler_address}")
    executor = client.get_executor(pure=False)  # as `grade contest serve --scheduler` hands it over
    app = create_app(folder, clock, executor=executor, slots=1, remote=remote, limits=Limits(call_seconds=20))
    clients_before = client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.clients))
    try:
        with TestClient(app) as web:
            files = [("files", ("m1_attention.py", source.encode(), "text/x-python"))]
            sent = web.post("/submit/m1", files=files, headers=auth(folder, "ada"))
            assert sent.status_code == 202, sent.text
            url, deadline = f"/api/submissions/{sent.json()['id']}", time.monotonic() + 240
            while (row := web.get(url, headers=auth(folder, "ada")).json())["status"] == "queued":
                assert time.monotonic() < deadline, "not graded on the cluster within 240 s"
                time.sleep(0.5)
    finally:
        listener.close()
    graded = Store(folder).get(sent.json()["id"])
    assert graded is not None and graded.status == "graded", (row, graded)
    assert graded.score == graded.max_score and graded.report is not None, graded
    assert not marker.exists(), marker.read_text()
    assert listener.reached == []
    assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.clients)) == clients_before
    graded_there = client.run_on_scheduler(lambda dask_scheduler: sorted(dask_scheduler.task_prefixes))
    assert "grade_one" in graded_there, graded_there
    exec(compile(attack, "outside", "exec"), {})  # the same code outside the sandbox reaches, reads and writes
    assert marker.exists() and repr(places[0]) in marker.read_text() and "student,token" in marker.read_text()
    protections = set(graded.report.get("protections", ()))
    assert {"no-network", "private-root", "own-pid-namespace"} <= protections, protections


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="Dask's tcp:// scheduler runs whatever any client that reaches it sends, on the workers that grade the "
    "training runs (and can read the held-out text): docs/contest/README.md's setup binds it to 0.0.0.0, so a "
    "student on the club's network can. Only Dask's TLS with client certificates (tls://, the scheduler's and "
    "workers' --tls-* options, the server's through Dask's config) keeps a stranger out; `grade contest serve` "
    "now warns of a tcp:// scheduler that is not on loopback",
)
def test_attack_a_stranger_who_reaches_the_scheduler_cannot_run_code_on_the_cluster(cluster):
    distributed = pytest.importorskip("distributed")
    made, _ = cluster
    with distributed.Client(made.scheduler_address, timeout=10) as stranger:
        ran = stranger.run(lambda: os.environ.get("PATH", ""))
    assert not ran, "a client from anywhere ran code on every worker"


@pytest.mark.parametrize(
    "address,open_",
    [
        ("tcp://10.0.0.2:8786", True),
        ("10.0.0.2:8786", True),
        ("tcp://head:8786", True),
        ("tcp://127.0.0.1:8786", False),
        ("tcp://localhost:8786", False),
        ("tcp://[::1]:8786", False),
        ("tls://10.0.0.2:8786", False),
    ],
)
def test_the_server_warns_of_a_scheduler_any_client_on_the_network_can_use(address, open_, monkeypatch, capsys):
    """`--scheduler` on plain tcp:// off loopback: a warning that says what it lets in and what to use instead."""
    from grader import options

    monkeypatch.setattr(options, "_reachable", lambda address: None)
    monkeypatch.setattr("distributed.Client", lambda address, timeout: "a client")
    assert options.dask_client(address) == "a client"
    said = capsys.readouterr().err
    assert ("runs code on the workers" in said and "tls://" in said) == open_, said


def certificates(folder: Path, ca: str, *names: str) -> None:
    """A CA ``ca`` and a certificate it signed for each of ``names`` (for 127.0.0.1), with openssl, as a club
    would make them (docs/contest/README.md)."""
    import subprocess

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "2",
            "-subj", f"/CN={ca}")  # fmt: skip
    (folder / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in names:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                f"/CN={name}")  # fmt: skip
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", "-extfile", "ext.cnf")  # fmt: skip


@pytest.mark.slow
def test_with_the_documented_tls_the_server_connects_and_a_stranger_is_refused(tmp_path, monkeypatch):
    """The README's setup on one machine: a scheduler and a worker with the club's certificates, the server's
    client given its own through Dask's configuration (environment variables): `dask_client` connects, and a
    stranger's client is refused, whether it brings a certificate of its own CA or none."""
    import shutil

    distributed = pytest.importorskip("distributed")
    import dask

    from grader.options import dask_client

    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test's certificates")
    certificates(tmp_path, "club", "scheduler", "worker", "server")
    certificates(tmp_path, "strangers", "stranger")
    pem = lambda name: str(tmp_path / name)  # noqa: E731
    security = distributed.security.Security(
        tls_ca_file=pem("club.pem"),
        tls_scheduler_cert=pem("scheduler.pem"),
        tls_scheduler_key=pem("scheduler.key"),
        tls_worker_cert=pem("worker.pem"),
        tls_worker_key=pem("worker.key"),
        tls_client_cert=pem("server.pem"),
        tls_client_key=pem("server.key"),
        require_encryption=True,
    )
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, security=security,
        protocol="tls://", host="127.0.0.1",
    ) as made:  # fmt: skip
        address = made.scheduler_address
        for key, value in {
            "REQUIRE_ENCRYPTION": "true",
            "TLS__CA_FILE": pem("club.pem"),
            "TLS__CLIENT__CERT": pem("server.pem"),
            "TLS__CLIENT__KEY": pem("server.key"),
        }.items():
            monkeypatch.setenv(f"DASK_DISTRIBUTED__COMM__{key}", value)
        dask.config.refresh()
        try:
            server = dask_client(address)
            assert list(server.run(lambda: 1).values()) == [1]
            server.close()
        finally:
            monkeypatch.undo()
            dask.config.refresh()
        strangers = [
            distributed.security.Security(
                tls_ca_file=pem("club.pem"), tls_client_cert=pem("stranger.pem"), tls_client_key=pem("stranger.key")
            ),
            None,
        ]
        for own in strangers:
            target = address if own is not None else address.replace("tls://", "tcp://")
            with pytest.raises((OSError, TimeoutError)):
                distributed.Client(target, security=own, timeout=5)


# ---------------------------------------------------------------- 5. a notebook cell that forks

SPAWNS = """
import multiprocessing, os, subprocess, sys, time


def _spin(_):
    while True:
        pass


_pool = multiprocessing.Pool(2)
_pool.map_async(_spin, range(2))
subprocess.Popen([sys.executable, "-c", "import time\\nwhile True:\\n    time.sleep(1)"])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(0.1)
    os._exit(0)
"""

# A child that keeps writing forged replies onto every socket its worker holds: the grading side's reply stream.
FORGES = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fds = [int(f) for f in os.listdir("/proc/self/fd") if os.readlink(f"/proc/self/fd/{f}").startswith("socket:")]
        while True:
            for fd in fds:
                try:
                    os.write(fd, b'\\x00\\x00\\x00\\x20{"value": {"t": "none"}, "blobs": []}')
                except OSError:
                    pass
            time.sleep(0.001)
    os._exit(0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("cell", [SPAWNS, FORGES], ids=["pool-subprocess-daemon", "forged-replies"])
def test_attack_a_notebook_cell_that_forks_leaves_nothing_and_earns_nothing(tmp_path, cell):
    """A cell after a correct m1 starts a pool spinning two cores, a subprocess and a setsid daemon (all within the
    worker's limits, and gone with it), or a daemon that writes forged replies onto the worker's sockets: the
    first costs nothing, the second only the notebook's own checks (the stream it garbles is its own), never more
    than its m1 is worth; the grading ends in its time, and no process of it is left."""
    from test_notebooks import write

    from helpers import grade

    started = time.monotonic()
    graded = grade(write(tmp_path / "forks.ipynb", [M1[1].decode(), cell]), "-m", "m1")
    m1 = graded.milestone("m1")
    assert time.monotonic() - started < 120
    assert worker_processes() == [], "a process started by the cell outlived the grading"
    if cell is SPAWNS:
        assert m1["score"] == m1["max_score"], [c["message"] for c in m1["checks"] if c["score"] < c["max_score"]]
    else:
        assert m1["score"] < m1["max_score"], "a forged stream earned no more than the notebook's own code"


@pytest.mark.slow
def test_attack_the_in_kernel_check_of_a_forking_kernel_ends_and_leaves_nothing():
    """The same cells as a kernel's history, graded by ``grader.check`` (``grade check`` in a process of its own):
    it ends, full marks, and no process of the cells outlives it."""
    from grader.in_kernel import grade_history

    started = time.monotonic()
    printed = grade_history(["", M1[1].decode(), SPAWNS], ("m1",))
    assert time.monotonic() - started < 180
    assert "27 / 27" in printed, printed
    assert worker_processes() == [], "a process started by the cell outlived the check"


# ---------------------------------------------------------------- 4. files swapped while a batch grades


@pytest.mark.slow
def test_attack_files_swapped_after_a_batch_found_them_are_recorded_as_graded(tmp_path):
    """mallory's folder holds the stub when the batch finds it; the moment grading starts she puts the reference in
    its place, and puts the stub back once it is graded. Before, the gradebook recorded the stub's digest with the
    reference's 27 points: the next batch kept them (the stub, unchanged, was "current"), and `grade similarity`
    and a regrade read the stub. Now each grading takes its own copy once and records that copy's digest: the
    points are the reference's files', recorded as such, and the next batch grades the stub again."""
    import grader.batch.run as run
    from grader.batch.discover import FoundSubmission
    from helpers import REPO, InThisProcess, command_here, shared_grader

    root = tmp_path / "klass"
    (root / "mallory").mkdir(parents=True)
    stub = (REPO / "exercises" / "m1_attention.py").read_bytes()
    (root / "mallory" / "m1_attention.py").write_bytes(stub)
    found_digest = FoundSubmission("mallory", root / "mallory").digest()
    real = run.grade_all
    swaps: list[int] = []

    def graded_here(*positional, **options):
        said = options.get("planned", lambda todo, skipped: None)

        def swap(todo: int, skipped: int) -> None:  # after the digests, before any grading
            if todo and not swaps:
                (root / "mallory" / "m1_attention.py").write_bytes(M1[1])
                swaps.append(todo)
            said(todo, skipped)

        return real(*positional, **{**options, "executor": InThisProcess(), "planned": swap})

    db = tmp_path / "grades.sqlite"
    patches = {
        "grader.batch.run.grade_all": graded_here,
        "grader.batch.run.process_grader": lambda limits, shared=None: shared_grader(),
    }
    batch = ("batch", str(root), "-m", "m1", "--workers", "1", "--db", str(db))
    proc = command_here(*batch, patches=patches)
    assert proc.returncode == 0, proc.stderr
    graded_digest = FoundSubmission("mallory", root / "mallory").digest()  # the reference's files, as graded
    (root / "mallory" / "m1_attention.py").write_bytes(stub)  # put back
    assert _recorded(db, "mallory") == (graded_digest, 27.0) and graded_digest != found_digest
    again = command_here(*batch, patches=patches)
    assert again.returncode == 0, again.stderr
    assert _recorded(db, "mallory") == (found_digest, 0.0), "the stub, graded as what it is"


def _recorded(db: Path, student: str) -> tuple[str, float]:
    """The gradebook's digest and score of ``student``'s submission."""
    import sqlite3

    with sqlite3.connect(db) as con:
        digest, score = con.execute("SELECT hash, score FROM submissions WHERE student = ?", (student,)).fetchone()
    return digest, float(score)


def test_a_snapshots_digest_is_the_digest_of_the_files_found(tmp_path):
    """A batch records the digest of the copy it graded: for files that did not change, the digest a later batch
    computes on them, so that an unchanged class is not graded again (nested folders, a link, a regrade request,
    hidden and cache folders, a notebook, a zip)."""
    from grader.batch.discover import FoundSubmission, snapshot

    folder = tmp_path / "ada"
    (folder / "deeper" / "empty").mkdir(parents=True)
    (folder / "m1_attention.py").write_bytes(M1[1])
    (folder / "deeper" / "notes.md").write_text("mine\n")
    (folder / "regrade.txt").write_text("please\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (folder / "m2_model.py").symlink_to(SOLUTIONS / "m2_model.py")
    notebook = tmp_path / "bob.ipynb"
    notebook.write_text(json.dumps({"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}))
    archive = tmp_path / "cat.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("m1_attention.py", M1[1])
    for path in (folder, notebook, archive, SOLUTIONS):
        with snapshot(path) as (copy, digest):
            assert copy != path and digest == FoundSubmission(path.name, path).digest(), path
            if path == folder:
                assert os.path.islink(copy / "m2_model.py") and not (copy / "regrade.txt").exists()


# ---------------------------------------------------------------- 4. a hard link to what is not the student's


def test_attack_a_hard_link_to_a_file_the_student_cannot_write_is_refused_by_the_system(tmp_path):
    """A hard link is no symbolic link: the grader reads it as the student's file (O_NOFOLLOW does not see it). What
    keeps a student from linking the kit's solutions or another student's work into their folder is the system's
    ``fs.protected_hardlinks`` (Linux's default, 1): only a file they own or may write can be linked. Tried as an
    unprivileged student on a class folder they share with the kit."""
    if os.geteuid() != 0 or not Path("/proc/sys/fs/protected_hardlinks").is_file():
        pytest.skip("needs root (to act as another user) and Linux")
    if Path("/proc/sys/fs/protected_hardlinks").read_text().strip() != "1":
        pytest.skip("this machine lets anyone link any file (fs.protected_hardlinks = 0): see the report")
    kit = tmp_path / "kit"
    kit.mkdir()
    solution = kit / "m1_attention.py"
    solution.write_bytes(M1[1])
    other = tmp_path / "alan.py"
    other.write_text("alan's own work\n")
    theirs = tmp_path / "mallory"
    theirs.mkdir()
    tmp_path.chmod(0o755)
    os.chown(theirs, 65534, 65534)  # nobody: the student
    for target in (solution, other):
        target.chmod(0o644)
        pid = os.fork()
        if pid == 0:  # the student's own process
            try:
                os.setgid(65534)
                os.setuid(65534)
                os.link(target, theirs / target.name)
                os._exit(0)
            except PermissionError:
                os._exit(13)
            except BaseException:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 13, f"the student linked {target}"


# ---------------------------------------------------------------- 7. a student's folder named "submitted"


def test_attack_a_students_folder_named_submitted_does_not_take_the_class_over(tmp_path):
    """In a plain batch folder, a student whose own folder is named ``submitted`` (imitating nbgrader's layout
    inside it, with a timestamp.txt of their own) made the batch read nbgrader's layout: every other student
    vanished from the batch, and their stamp was read as nbgrader's. Now the batch refuses the mixed folder."""
    from grader.batch.discover import MixedLayout, discover

    root = tmp_path / "klass"
    for student in ("alice", "bob"):
        (root / student).mkdir(parents=True)
        (root / student / "m1_attention.py").write_bytes(M1[1])
    inner = root / "submitted" / "mallory" / "hw1"
    inner.mkdir(parents=True)
    (inner / "m1_attention.py").write_bytes(M1[1])
    (inner / "timestamp.txt").write_text("2026-11-20 09:00:00.000000 UTC\n")
    with pytest.raises(MixedLayout, match=r"submitted/ \(nbgrader's layout\) beside .*alice, bob"):
        discover(root, empty=True)
    course = tmp_path / "course"  # nbgrader's own course folder: its folders beside submitted/ are no students
    for name in ("source/hw1", "release/hw1", "autograded/ann/hw1", "feedback/ann/hw1", "submitted/ann/hw1"):
        (course / name).mkdir(parents=True)
    (course / "submitted" / "ann" / "hw1" / "m1_attention.py").write_bytes(M1[1])
    (course / "source" / "hw1" / "tinygpt.ipynb").write_text("{}")
    (course / "gradebook.db").write_bytes(b"")
    assert [f.student for f in discover(course, empty=True)] == ["ann"]


def test_attack_a_batch_of_a_folder_with_a_student_named_submitted_stops_and_says_why(tmp_path):
    """`grade batch` on such a folder: a usage error naming the students beside submitted/, nothing graded."""
    from helpers import batch_here

    root = tmp_path / "klass"
    (root / "alice").mkdir(parents=True)
    (root / "alice" / "m1_attention.py").write_bytes(M1[1])
    (root / "submitted" / "mallory" / "hw1").mkdir(parents=True)
    (root / "submitted" / "mallory" / "hw1" / "m1_attention.py").write_bytes(M1[1])
    proc = batch_here(str(root), "-m", "m1", "--db", str(tmp_path / "grades.sqlite"))
    assert proc.returncode == 2 and "beside what a batch folder holds of students (alice)" in proc.stderr, proc.stderr
    assert not (tmp_path / "grades.sqlite").exists(), "nothing graded, nothing recorded"


# ---------------------------------------------------------------- 8. similarity

WRAPPERS = {
    "a function": "def _i(x):\n    return x\n\n\n",
    "a documented one": 'def _i(x):\n    """Keeps the lesson\'s names."""\n    return x\n\n\n',
    "a lambda": "_i = lambda x: x  # noqa: E731\n\n\n",
    "nn.Identity": "import torch.nn as nn\n\n_i = nn.Identity()\n\n\n",
}


def wrapped(code: str, helper: str) -> str:
    """``code`` with every name it reads wrapped in a call of ``_i``, which gives it back as it is: the program
    computes what it did, and no 25-character stretch of it is left as it was."""
    import ast

    keep = {"_i", "self", "super", "range", "len", "print", "float", "int", "isinstance"}

    class Wrap(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if isinstance(node.ctx, ast.Load) and node.id not in keep:
                return ast.Call(ast.Name("_i", ast.Load()), [node], [])
            return node

        def visit_Call(self, node: ast.Call) -> ast.AST:
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            if not isinstance(node.func, ast.Name):
                node.func = self.visit(node.func)
            return node

    return helper + ast.unparse(ast.fix_missing_locations(Wrap().visit(ast.parse(code))))


def contiguous(code: str) -> str:
    """``code`` with ``.contiguous()`` after every call: the same values, and again no stretch of it left."""
    import ast

    class Append(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            return ast.Call(ast.Attribute(node, "contiguous", ast.Load()), [], [])

    return ast.unparse(ast.fix_missing_locations(Append().visit(ast.parse(code))))


@pytest.mark.parametrize("disguise", [*WRAPPERS, ".contiguous()"])
def test_attack_a_copy_wrapped_in_calls_that_change_nothing_is_flagged(disguise):
    """Every file of the reference, each read wrapped in ``_i(...)`` (a function, a lambda or ``nn.Identity()``
    giving its argument back) or each call followed by ``.contiguous()``: before, the copy scored 0.0 to 0.36
    against the reference (the threshold is 0.6); now it scores as the copy it is."""
    from grader.similarity import THRESHOLD, file_fingerprints, read_stubs

    stubs = read_stubs(Path(__file__).resolve().parents[2] / "exercises")
    for name in ("m1_attention.py", "m2_model.py", "m3_train.py", "m4_generate.py", "m8_sampling.py"):
        code = (SOLUTIONS / name).read_text()
        copy = contiguous(code) if disguise == ".contiguous()" else wrapped(code, WRAPPERS[disguise])
        mine, theirs = file_fingerprints(code, stubs[name]), file_fingerprints(copy, stubs[name])
        score = len(mine & theirs) / min(len(mine), len(theirs))
        assert score >= THRESHOLD, f"{name}: {score:.2f}"


def test_attack_an_identity_rebound_or_decorated_is_not_taken_for_one():
    """What only looks like an identity keeps its calls: a name bound again elsewhere, a decorated function, a
    method called on something else than self."""
    from grader.similarity import normalise

    rebound = "def _i(x):\n    return x\n\n\ndef f(a):\n    global _i\n    _i = g\n    return h(_i(a))\n"
    assert "g(a)" in normalise(rebound, ("f",)), "the call of what _i is bound to stays"
    decorated = "@cache\ndef _i(x):\n    return x\n\n\ndef f(a):\n    return h(_i(a))\n"
    assert "_i(a)" in normalise(decorated, ("f",))
    other = "class C:\n    def i(self, x):\n        return x\n\n    def f(self, a):\n        return h(a.i(a))\n"
    assert "a.i(a)" in normalise(other, ("C", "f"))


@pytest.mark.slow  # 5 s: the files are large on purpose
def test_attack_a_file_built_to_make_normalising_slow_takes_seconds():
    """A chain of 100 temporaries each one step longer than the last, the last read 10,000 times (62 KB): each
    read got a copy of the whole path, 43 CPU seconds and 550 MB (120 KB: 186 s and 2 GB; the 1 MB a file may
    be, hours). A notebook's code is held to a file's 1 MB too (20 MB of it took 2 minutes and 5 GB)."""
    from grader.similarity import file_fingerprints, read_stubs

    depth, reads = 100, 10_000
    code = "def causal_attention(q, k, v):\n    t0 = q.a\n"
    code += "".join(f"    t{i + 1} = t{i}.a\n" for i in range(depth))
    code += "    return [" + ", ".join([f"t{depth}"] * reads) + "]\n"
    stubs = read_stubs(Path(__file__).resolve().parents[2] / "exercises")
    started = time.process_time()
    file_fingerprints(code, stubs["m1_attention.py"])
    assert time.process_time() - started < 5
    temporaries = "def causal_attention(q, k, v):\n    t0 = q\n"
    temporaries += "".join(f"    t{i + 1} = t{i}.f(k)\n" for i in range(20_000)) + "    return t20000\n"
    started = time.process_time()
    file_fingerprints(temporaries, stubs["m1_attention.py"])
    assert time.process_time() - started < 15, "each temporary taken out of a block of 20,000 one at a time"


def test_a_notebook_with_more_code_than_a_file_may_hold_is_left_out(tmp_path):
    from grader.similarity import MAX_FILE_BYTES, student_files

    line = "x = 1  # " + "y" * 60 + "\n"
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": line * 2000}]
    cells *= MAX_FILE_BYTES // (len(line) * 2000) + 1
    path = tmp_path / "big.ipynb"
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    assert student_files(path) == {}
    small = tmp_path / "small.ipynb"
    small.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells[:1]}))
    assert "x = 1" in student_files(small)["notebook"]


# ---------------------------------------------------------------- 10. lmbudget: a model that knows the probes


def test_attack_a_model_that_tells_every_probe_from_a_scored_row_is_still_not_causal():
    """The strongest model a student could hope for: an oracle that knows exactly which rows are probes (and their
    cuts), looks ahead everywhere on the scored rows, and answers every probe causally. A probe is compared with
    its own window, whose lookahead it cannot reproduce without that window's later inputs: not causal, on every
    seed."""
    from grader.lmbudget.corpus import load_splits
    from grader.lmbudget.evaluate import NotCausal, deal, evaluate, plan
    from grader.lmbudget.task import TASK_FILE, load_task

    task = load_task(TASK_FILE)
    splits = load_splits(task.corpus, task.block_chars)
    vocab = len(splits.vocab)
    table = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(0))
    for seed in range(3):
        rows = plan(splits, task.eval_windows, task.probe_windows, task.context, seed)
        probes = {tuple(row.tokens[:-1].tolist()) for row in rows if row.probe_of >= 0}

        def oracle(idx: torch.Tensor, probes: set = probes) -> torch.Tensor:
            logits = table[idx].clone()
            for j, row in enumerate(idx):
                if tuple(row.tolist()) not in probes:  # a scored row: the answer at every position it can see
                    logits[j, :-1] += 30.0 * torch.nn.functional.one_hot(row[1:], vocab).float()
            return logits

        with pytest.raises(NotCausal), torch.no_grad():
            evaluate([oracle] * task.eval_copies, rows, vocab, deal(rows, task.eval_copies, seed))
