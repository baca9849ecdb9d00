"""Cgroups: each worker's memory and process count capped by the kernel, on top of its rlimits, and its CPU
time and out-of-memory kills counted by the kernel (never taken from the worker's word), in cgroup v2 or v1,
where the machine lets the fork server make them. The grading process sweeps those of fork servers that died
before they could clean up (``sweep``).
"""

from __future__ import annotations

import os

CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_PARENTS = tuple(CGROUP_ROOT + p for p in ("", "/memory", "/pids", "/cpuacct"))  # v2, then v1's controllers
CPU_CONTROLLER = {"cpuacct": "cpu"}  # v1's controller that counts CPU, by the protection's name


class Cgroups:
    """Per-worker memory and process-count limits, in cgroup v2 or v1, when the machine lets us write them.

    Directory descriptors are opened before the server leaves the real root, so
    nothing under /sys needs to be visible inside it.
    """

    def __init__(self, name: str):
        self.dirs: dict[str, int] = {}  # "v2" or a v1 controller -> fd of our parent folder
        if os.path.exists(CGROUP_ROOT + "/cgroup.controllers"):
            fd = self._make(CGROUP_ROOT, name)
            if fd is not None and self._enable_v2(fd):
                self.dirs["v2"] = fd
        else:
            for controller in ("memory", "pids", "cpuacct"):
                fd = self._make(f"{CGROUP_ROOT}/{controller}", name)
                if fd is not None:
                    self.dirs[controller] = fd
        if self.dirs and not self._probe():  # claim no cgroup protection that a worker would not get
            self.close()

    def _probe(self) -> bool:
        """Can a process join a worker cgroup with limits set? Tried once in a throwaway child."""
        pid = os.fork()
        if pid == 0:
            os._exit(0 if self.join("probe", 1 << 30, 64) else 1)
        joined = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        self.remove("probe")
        return joined

    @staticmethod
    def _make(parent: str, name: str) -> int | None:
        sweep(parent)
        try:
            os.mkdir(os.path.join(parent, name))
            return os.open(os.path.join(parent, name), os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return None

    @staticmethod
    def _enable_v2(fd: int) -> bool:
        try:
            _write_at(fd, "cgroup.subtree_control", "+memory +pids")
            return True
        except OSError:
            return False

    @property
    def protections(self) -> list[str]:
        # v2's cpu.stat is there whatever the controllers; v1 counts CPU in a controller of its own, cpuacct
        kinds = {"memory", "pids", "cpu"} if "v2" in self.dirs else {CPU_CONTROLLER.get(k, k) for k in self.dirs}
        return [f"cgroup-{k}" for k in sorted(kinds)]

    def cpu_seconds(self, worker: str) -> float | None:
        """The CPU time of every process that was ever in ``worker``'s cgroup, killed or orphaned ones included,
        as the kernel counts it; None where no cgroup counts it."""
        try:
            if "v2" in self.dirs:
                stat = _read_at(self.dirs["v2"], f"{worker}/cpu.stat")
                usec = next(int(line.split()[1]) for line in stat.splitlines() if line.startswith("usage_usec "))
                return usec / 1e6
            if "cpuacct" in self.dirs:
                return int(_read_at(self.dirs["cpuacct"], f"{worker}/cpuacct.usage")) / 1e9
        except (OSError, ValueError, StopIteration, IndexError):
            pass
        return None

    def oom_killed(self, worker: str) -> bool | None:
        """Did the kernel kill a process of ``worker``'s cgroup for passing its memory cap? None where no cgroup
        counts it: a SIGKILL is then "memory" only if this says so, never by guess (a submission may kill itself).
        """
        try:
            if "v2" in self.dirs:
                events = _read_at(self.dirs["v2"], f"{worker}/memory.events")
            elif "memory" in self.dirs:
                events = _read_at(self.dirs["memory"], f"{worker}/memory.oom_control")  # its oom_kill: kernel 4.13+
            else:
                return None
            counts = dict(line.split()[:2] for line in events.splitlines() if len(line.split()) >= 2)
            return int(counts["oom_kill"]) > 0 if "oom_kill" in counts else None
        except (OSError, ValueError):
            return None

    def join(self, worker: str, memory_bytes: int, pids: int) -> bool:
        """Make ``worker``'s cgroup(s) with these limits and move the calling process in; False if any step failed."""
        files = {
            "v2": [("memory.max", memory_bytes), ("pids.max", pids)],
            "memory": [("memory.limit_in_bytes", memory_bytes)],
            "pids": [("pids.max", pids)],
            "cpuacct": [],  # no limit: it counts
        }
        joined = True
        for key, fd in self.dirs.items():
            try:
                os.mkdir(worker, dir_fd=fd)
                for file, value in files[key]:
                    _write_at(fd, f"{worker}/{file}", str(value))
                if key == "v2":  # no swapping past the cap, where the kernel has swap accounting
                    _write_at(fd, f"{worker}/memory.swap.max", "0", missing_ok=True)
                _write_at(fd, f"{worker}/cgroup.procs", "0")
            except OSError:
                joined = False
        return joined

    def close(self) -> None:
        """In a worker: let go of the folders (their files are root's, but hold nothing needlessly)."""
        for fd in self.dirs.values():
            os.close(fd)
        self.dirs = {}

    def remove(self, worker: str) -> None:
        for fd in self.dirs.values():
            try:
                os.rmdir(worker, dir_fd=fd)
            except OSError:
                pass


def sweep(parent: str) -> None:
    """Remove the empty cgroups of fork servers that are gone (killed before their grader could clean up)."""
    try:
        names = [n for n in os.listdir(parent) if n.startswith("gptkit-")]
    except OSError:
        return
    for name in names:
        pid = name.removeprefix("gptkit-")
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            folder = os.path.join(parent, name)
            for worker in (w for w in os.listdir(folder) if w.startswith("w")):
                try:
                    os.rmdir(os.path.join(folder, worker))
                except OSError:  # still holds a process, or not ours to remove
                    pass
            try:
                os.rmdir(folder)
            except OSError:
                pass


def _read_at(dir_fd: int, path: str) -> str:
    fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)


def _write_at(dir_fd: int, path: str, text: str, missing_ok: bool = False) -> None:
    try:
        fd = os.open(path, os.O_WRONLY, dir_fd=dir_fd)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
