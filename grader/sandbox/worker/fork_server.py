"""The fork server: the program the grading process starts to run student code.

Started as ``python -I -S fork_server.py CONFIG_JSON`` with the control socket on a
file descriptor named in the config. It loads its sibling files (this folder and
``../common``: nothing here imports the ``grader`` package, which is not importable
here) as the private package ``_gradekit``: ``_gradekit.worker`` and ``_gradekit.common``,
the layout of ``grader.sandbox``, so that they import one another by the same relative
imports in both processes. It isolates itself where the machine allows it (``jail.py``:
no network, a private root without the grader, a user id and a cgroup per worker),
imports torch once, then forks one worker per ``ServerRequest.SPAWN``. Each worker answers
the grading process's requests with ``request_handler.RequestHandler``, which is imported
here with every file it imports, before the grader's files are hidden.

Nothing here decides a grade: the grading process checks every value it gets.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import signal
import socket
import sys
import time
import types
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = os.path.join(os.path.dirname(HERE), "common")
OWN_UIDS = False  # whether each worker gets a user id of its own (as root); set by start_server()
PLACES: dict | None = None  # jail.private_places's arguments but a worker's own copy; None: not possible here
# jail.py (``_gradekit.worker.jail``) and this server's cgroups, set up by main()
jail: Any = None
CGROUPS: Any = None
NAMES: dict[int, str] = {}  # worker pid -> its cgroup name
PACKAGE = "_gradekit"  # the worker side's package here: never ``grader``, which the grading process alone imports


def _package() -> None:
    """Register the package ``_gradekit``: ``../common`` as ``_gradekit.common`` and this folder as
    ``_gradekit.worker``, each run from its ``__init__.py``. Nothing else of grader/sandbox/ (the grading
    process's files) is found under it: its own path is empty."""
    if PACKAGE in sys.modules:
        return
    root = types.ModuleType(PACKAGE, "The worker side of grader/sandbox/, loaded by the fork server.")
    root.__path__ = []
    sys.modules[PACKAGE] = root
    for name, folder in (("common", COMMON), ("worker", HERE)):
        init = os.path.join(folder, "__init__.py")
        spec = importlib.util.spec_from_file_location(f"{PACKAGE}.{name}", init, submodule_search_locations=[folder])
        assert spec and spec.loader, name
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        setattr(root, name, module)


def _load(name: str) -> Any:
    """``_gradekit.<name>`` (``worker.jail``, ``common.wire``), with every file it imports."""
    _package()
    return importlib.import_module(f"{PACKAGE}.{name}")


class Loaded:
    """The files a worker uses, loaded once by the fork server before it hides the grader's files."""

    def __init__(self) -> None:
        self.agreement = _load("common.agreement")
        self.wire = _load("common.wire")
        self.protocol = _load("common.protocol")
        self.standin = _load("worker.standin")
        self.request_handler = _load("worker.request_handler")


def spawn(config: dict, sock: socket.socket, out_fd: int, files: Loaded) -> None:
    """In the forked child: a reaper that owns fresh namespaces, then the worker.

    The reaper joins the worker's cgroup and enters new mount and PID namespaces (see
    ``jail``): killing the reaper's process group, or the reaper, whose namespace's
    init then dies, takes down everything the student started.
    """
    os.setsid()
    jail.die_with_parent()
    memory = config["limits"]["memory_bytes"] + files.agreement.CGROUP_SLACK_BYTES
    CGROUPS.join(config["name"], memory, config["limits"]["processes"])
    CGROUPS.close()
    if OWN_UIDS and PLACES is None:  # the copy on disk is the worker's own; a capped one is given as it is made
        jail.give_to(config["uid"], config["submission"])
    places = None
    if PLACES is not None:  # its copy becomes a capped tmpfs of its own (see jail.private_places)
        keep = {**PLACES["keep"], config["submission"]: True}
        owner = config["uid"] if OWN_UIDS else -1
        places = {**PLACES, "keep": keep, "copy_bytes": config["limits"]["copy_bytes"], "owner": owner}
    isolated, private = jail.enter_worker_namespaces(OWN_UIDS, places)
    if places is not None and not private:
        os._exit(files.agreement.EXIT_NO_PRIVATE_PLACES)  # the protection was claimed: never run without it
    pidns = isolated or jail.libc.unshare(jail.CLONE_NEWPID) == 0
    child = os.fork()
    if child:
        _, status = os.waitpid(child, 0)
        os._exit(files.agreement.exit_code(status))
    jail.die_with_parent()
    if isolated:
        jail.mount_proc()
    if pidns:  # we are init of the namespace: fork once more so the worker is an ordinary process
        worker = os.fork()
        if worker:
            while True:
                pid, status = os.wait()
                if pid == worker:
                    os._exit(files.agreement.exit_code(status))
        jail.die_with_parent()
    run_worker(config, sock, out_fd, files)


def run_worker(config: dict, sock: socket.socket, out_fd: int, files: Loaded) -> None:
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # flooding output kills the worker, visibly
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a batch's pool starts with it blocked
    jail.set_limits(config["limits"], own_uid=OWN_UIDS)
    if OWN_UIDS and not jail.drop_privileges(config["uid"]):
        os._exit(files.agreement.EXIT_NOT_RUN_AS_ROOT)  # never run a submission as root
    os.environ["HOME"] = os.environ["TMPDIR"] = config["submission"]
    os.chdir(config["submission"])
    sys.path.insert(0, config["submission"])
    sys.argv = ["submission"]
    try:
        files.request_handler.RequestHandler(sock, tuple(config["student_modules"]), files).serve()
    finally:
        os._exit(0)


def start_server(config: dict) -> list[str]:
    """Enter the fork server's sandbox (the order matters: /sys and the real root go away last)."""
    global CGROUPS, OWN_UIDS, PLACES
    protections = jail.enter_server_namespaces()
    CGROUPS = jail.Cgroups(f"gptkit-{os.getpid()}")
    protections += CGROUPS.protections
    import torch  # before the private root: it reads /sys once, at import

    torch.set_num_threads(1)
    for module in config["preload"]:  # torch._dynamo, which optimisers load on first use: once here for all
        importlib.import_module(module)

    binds = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix, *config["binds"]]
    if protections and jail.private_root(config["scratch"], binds):
        protections.append("private-root")
    if protections and jail.hide(config["hide"]):
        protections.append("grader-files-hidden")
    OWN_UIDS = jail.can_drop_privileges([sys.executable, os.__file__, torch.__file__])
    places = _private_places(config, binds, readonly_root="private-root" in protections)
    probe = os.path.join(config["scratch"], "probe")  # stands for a worker's copy while the places are tried
    os.makedirs(probe, exist_ok=True)
    namespaces, private = jail.probe_worker_namespaces(OWN_UIDS, {**places, "keep": {**places["keep"], probe: True}})
    os.rmdir(probe)
    if namespaces:
        protections += ["own-pid-namespace", "own-proc", "own-network", "own-ipc"]
        protections += ["locked-mounts"] if not OWN_UIDS else []
    if private:
        PLACES = places
        protections += ["private-tmp", "capped-copy"]  # else the copy is on disk, each file capped (RLIMIT_FSIZE)
    if OWN_UIDS:
        protections += ["unprivileged-user", "no-new-privileges"]
    return protections


def _private_places(config: dict, binds: list[str], readonly_root: bool) -> dict:
    """What each worker gets afresh (``jail.private_places``): its own /tmp and /dev/shm, and the scratch folder
    (every worker's copy of its submission) covered; given back read-only, whatever of the system lay under
    them (a virtual environment in /tmp, the site-packages view); each worker's own copy is added by ``spawn``,
    as a capped tmpfs of its own that its files are copied into (never the copy on the machine's disk)."""
    scratch = os.path.realpath(config["scratch"])
    cover = ["/tmp", "/dev/shm"] + ([] if scratch.startswith("/tmp/") else [scratch])
    under = [os.path.realpath(p) for p in [*binds, *config["sys_path"]] if os.path.isdir(p)]
    keep = [p for p in under if any(p.startswith(c + "/") for c in cover)]
    return {"cover": cover, "keep": {p: False for p in jail.outermost(keep)}, "readonly_root": readonly_root}


def main() -> None:
    global jail
    config = json.loads(sys.argv[1])
    control = socket.socket(fileno=config["control_fd"])
    sys.path[:] = [p for p in sys.path if p] + config["sys_path"]
    # Load every file now: once the sandbox is entered, the grader's files are gone.
    files, jail = Loaded(), _load("worker.jail")
    hugepages, shared_server = _load("worker.hugepages"), _load("worker.shared_server")
    wire, ops = files.wire, files.agreement.ServerRequest
    jail.die_with_parent()
    protections = start_server(config)
    import torch

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if config["many"]:  # worth its 0.4 s only for a server that forks many workers
        gc.collect()
    gc.freeze()  # a worker's collections then skip torch's objects, whose pages it would otherwise copy
    huge = hugepages.collapse() if config["many"] else 0  # after the last big allocation: cheaper forks
    hello = {"ready": True, "protections": protections, "torch": torch.__version__, "huge_pages_mib": huge >> 20}
    if "listen_fd" in config:  # a batch's server: serve each grading process from a copy of this one
        control = shared_server.serve_each_client(
            control, socket.socket(fileno=config["listen_fd"]), config["clients"], config["listen_path"], hello, wire
        )
        jail.die_with_parent()  # in the copy (a fork does not inherit it): gone with the batch's server
    else:
        wire.send(control, hello)
    count = 0
    while True:
        try:
            request, _ = wire.recv(control)
        except EOFError:
            os._exit(0)
        if request["op"] == ops.SPAWN:
            _, fds, _, _ = socket.recv_fds(control, 1, 2)
            count += 1
            uid = jail.WORKER_UID_BASE + (os.getpid() % 1000) * 1000 + count % 1000  # a batch server's copies differ
            request.update(name=f"w{os.getpid()}-{count}", uid=uid, student_modules=config["student_modules"])
            pid = os.fork()
            if pid == 0:
                control.close()
                spawn(request, socket.socket(fileno=fds[0]), fds[1], files)
            for fd in fds:
                os.close(fd)
            NAMES[pid] = request["name"]
            wire.send(control, {"pid": pid})
        elif request["op"] == ops.REAP:
            reply = reap(request["pid"], request.get("grace", 0.0))
            counted = CGROUPS.cpu_seconds(NAMES.get(request["pid"], ""))  # the dead too, before the cgroup goes
            reply["cpu"] = max(reply["cpu"], counted or 0.0)
            reply["oom"] = CGROUPS.oom_killed(NAMES.get(request["pid"], ""))  # measured here, never the worker's word
            CGROUPS.remove(NAMES.pop(request["pid"], ""))
            wire.send(control, reply)
        elif request["op"] == ops.CPU:
            wire.send(control, {"cpu": cpu_seconds(request["pid"])})


def cpu_seconds(pid: int) -> float:
    """A live worker's CPU seconds so far, every process of its tree included, measured here (the worker is
    never asked): its cgroup's count where there is one, else the tree's counts in /proc (which miss a child
    killed before anything waited for it)."""
    if pid not in NAMES:
        return 0.0
    counted = CGROUPS.cpu_seconds(NAMES[pid])
    return counted if counted is not None else tree_cpu_seconds(pid)


def tree_cpu_seconds(root: int) -> float:
    """utime + stime of ``root`` and its descendants, with what each has waited for (cutime, cstime)."""
    parents, ticks = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
        except OSError:
            continue  # gone meanwhile
        parents[int(name)] = int(fields[1])
        ticks[int(name)] = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    tree, grew = {root}, True
    while grew:  # pids wrap around, so a child's may be lower than its parent's: grow until nothing joins
        joined = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= joined
        grew = bool(joined)
    return sum(ticks.get(pid, 0) for pid in tree) / os.sysconf("SC_CLK_TCK")


def reap(pid: int, grace: float) -> dict:
    """Wait up to `grace` seconds for a worker to end by itself, then kill its whole tree."""
    deadline = time.monotonic() + grace
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done or time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    killed = not done
    if killed:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    # The reaper's usage includes every process of its tree that was waited for: the submission's own CPU.
    return {"killed": killed, "exit": code, "cpu": usage.ru_utime + usage.ru_stime}


if __name__ == "__main__":
    main()
