"""Linux isolation for the fork server and its workers, every step best-effort.

Loaded by path into the fork server (imports nothing from ``grader``). Each
function returns or records the protections that took, so a machine that
refuses one (no root, no user namespaces, macOS) still grades, and the report
says what was missing.

The fork server:
  * gets private mount and network namespaces (no network);
  * pivots into a *private root*: a tmpfs holding read-only binds of the system
    (``/usr``, ``/etc``, the Python installation and its site-packages) and its
    own scratch folder, nothing else: the project, the reference, the suites,
    other submissions and the gradebook do not exist in it;
  * covers whatever of the grader is still inside a bound folder with empty mounts.
Each worker:
  * gets its own PID namespace (its whole process tree dies with it) and /proc;
  * when the server runs as root, runs as a user id of its own, without
    capabilities or a way to regain them (``no_new_privs``); elsewhere, it is
    root only inside a user namespace of its own, whose mounts it cannot undo;
  * sits in its own cgroup (memory and process count) where the machine lets us
    make one, on top of its rlimits.
"""

from __future__ import annotations

import ctypes
import os
import platform
import resource
import signal

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x20000, 0x10000000, 0x20000000, 0x40000000
CLONE_NEWIPC = 0x8000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 0x4000, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_PARENTS = tuple(CGROUP_ROOT + p for p in ("", "/memory", "/pids", "/cpuacct"))  # v2, then v1's controllers
CPU_CONTROLLER = {"cpuacct": "cpu"}  # v1's controller that counts CPU, by the protection's name
WORKER_UID_BASE = 2_000_000  # far above any real account; one id per worker, so RLIMIT_NPROC is per worker


class _Libc:
    """libc's Linux-only calls; elsewhere (macOS) each one simply reports failure."""

    def __init__(self) -> None:
        self._lib = ctypes.CDLL(None, use_errno=True)

    def __getattr__(self, name: str):
        return getattr(self._lib, name, lambda *_args: -1)


libc = _Libc()


def die_with_parent() -> None:
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> bool:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()

    return libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) == 0


# ------------------------------------------------------------------ the fork server


def enter_server_namespaces() -> list[str]:
    """Private mount and network namespaces (and a user namespace when not root)."""
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWNS | CLONE_NEWNET | (0 if uid == 0 else CLONE_NEWUSER)) != 0:
        return []
    if uid != 0:
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"0 {uid} 1")
            _write("/proc/self/gid_map", f"0 {gid} 1")
        except OSError:  # a user namespace we may not map (some AppArmor policies): no mounts, but no network
            return ["no-network"]
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    return ["no-network"]


def private_root(scratch: str, binds: list[str]) -> bool:
    """Pivot into a tmpfs that holds only the system, ``binds`` (read-only) and ``scratch`` (writable)."""
    if SYS_PIVOT_ROOT is None:
        return False
    new = os.path.join(scratch, "root")
    os.makedirs(new, exist_ok=True)
    if not _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m"):
        return False
    try:
        os.mkdir(new + "/tmp")  # first: binds may lie under /tmp (a clone's .venv, the scratch folder)
        os.chmod(new + "/tmp", 0o1777)
        for path in _minimal(list(SYSTEM) + binds):
            _bind(path, new + path, readonly=True)
        _dev(new)
        _bind(scratch, new + scratch, readonly=False, recursive=False)  # not the new root inside it
        _bind("/proc", new + "/proc", readonly=False)
        os.mkdir(new + "/.old")
    except OSError:
        libc.umount2(new.encode(), MNT_DETACH)
        return False
    os.chdir(new)
    if libc.syscall(SYS_PIVOT_ROOT, b".", b".old") != 0:
        os.chdir("/")
        libc.umount2(new.encode(), MNT_DETACH)
        return False
    os.chdir("/")
    libc.umount2(b"/.old", MNT_DETACH)
    os.rmdir("/.old")
    return True


def outermost(paths: list[str]) -> list[str]:
    """``paths`` without those inside another of them."""
    return [p for p in sorted(set(paths)) if not any(p.startswith(q.rstrip("/") + "/") for q in paths if q != p)]


def _minimal(paths: list[str]) -> list[str]:
    """Existing paths, resolved, without those already inside another one; top-level links kept as links."""
    out: list[str] = []
    for path in sorted(
        {
            p if os.path.islink(p) and os.path.dirname(p) == "/" else os.path.realpath(p)
            for p in paths
            if os.path.lexists(p)
        }
    ):
        if not any(path.startswith(kept.rstrip("/") + "/") for kept in out):
            out.append(path)
    return out


def _bind(source: str, target: str, readonly: bool, recursive: bool = True) -> None:
    if os.path.islink(source):  # /bin -> usr/bin on merged-/usr systems
        os.symlink(os.readlink(source), target)
        return
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    if not _mount(source, target, None, MS_BIND | (MS_REC if recursive else 0)):
        raise OSError(f"cannot bind {source}")
    if readonly:  # may fail inside a user namespace (locked flags): the files stay protected by their modes
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)


def _dev(new: str) -> None:
    os.makedirs(new + "/dev")
    for name in DEVICES:
        _bind("/dev/" + name, new + "/dev/" + name, readonly=False)
    os.symlink("/proc/self/fd", new + "/dev/fd")
    os.makedirs(new + "/dev/shm", mode=0o1777)
    os.chmod(new + "/dev/shm", 0o1777)


def hide(paths: list[str]) -> bool:
    """Cover each existing path with an empty, unreadable tmpfs; True if all of them are covered."""
    present = [p for p in paths if os.path.isdir(p)]
    return all(_mount("tmpfs", p, "tmpfs", 0, "size=4k,mode=000") for p in present)


# ------------------------------------------------------------------ cgroups


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


# ------------------------------------------------------------------ one worker


def enter_worker_namespaces(as_root: bool, places: dict | None = None) -> tuple[bool, bool]:
    """New mount, PID, network and IPC namespaces; as a non-root user, inside a new user namespace too. With
    ``places``, ``private_places(**places)`` in the new mount namespace. (namespaces, private places).

    Its own network and IPC namespaces: no abstract Unix socket, System V segment or message queue that one
    worker makes is seen by another (they all share the fork server's otherwise). As a non-root user the worker
    is root in its user namespace: its private places are mounted before that namespace exists, so that they
    reach it locked, like every other mount (it could unmount them, and find the shared folders below, else).
    """
    own = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
    if as_root:
        if libc.unshare(own) != 0:
            return False, False
        return True, places is not None and private_places(**places)
    private = places is not None and libc.unshare(CLONE_NEWNS) == 0 and private_places(**places)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | own) != 0:
        return False, False
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
    except OSError:
        pass  # unmapped ids: the worker runs as the overflow user, which is stricter still
    return True, private


def probe_worker_namespaces(as_root: bool, places: dict | None = None) -> tuple[bool, bool]:
    """Can a worker get its own namespaces here, and then ``private_places(**places)``? Tried once in a
    throwaway child: (namespaces, private places)."""
    pid = os.fork()
    if pid == 0:
        isolated, private = enter_worker_namespaces(as_root, places)
        os._exit(0 if private else 2 if isolated else 1)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return code in (0, 2), code == 0


PRIVATE_TMPFS = "size=256m"  # each worker's own /tmp and /dev/shm: its memory cgroup pays for what it writes
COPY_INODES = 65536  # files and folders a worker's copy may hold (each costs kernel memory, not tmpfs bytes)


def private_places(
    cover: list[str], keep: dict[str, bool], readonly_root: bool, copy_bytes: int = 256 << 20, owner: int = -1
) -> bool:
    """In a worker's own mount namespace: a new, empty tmpfs over each folder of ``cover`` (/tmp, /dev/shm, the
    fork server's scratch folder, which holds every worker's copy), then each folder of ``keep`` given back where
    it was: read-only ones (False: the site-packages view) bound, and a writable one (True: the worker's own copy
    of the submission) as a fresh tmpfs of ``copy_bytes``, the copy's files copied in (handed to ``owner``, a user
    id, unless -1). With ``readonly_root``, the private root itself made read-only. What a worker writes anywhere
    is then capped, paid from its memory cgroup and gone with its namespace, never on the machine's disk, and no
    worker sees another's files. False if a step failed (then nothing is claimed)."""
    # reachable once covered; a copy's folder is read, so it is opened for reading
    flags = {path: os.O_RDONLY if writable else os.O_PATH for path, writable in keep.items()}
    fds = {path: os.open(path, flags[path] | os.O_DIRECTORY | os.O_NOFOLLOW) for path in keep}
    try:
        for path in cover:
            if os.path.isdir(path) and not _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, PRIVATE_TMPFS):
                return False
            os.chmod(path, 0o1777 if path in ("/tmp", "/dev/shm") else 0o711)
        for path, writable in keep.items():
            os.makedirs(path, exist_ok=True)
            if writable:
                size = f"size={copy_bytes},nr_inodes={COPY_INODES},mode=700"
                if not _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, size):
                    return False
                copy_tree(fds[path], path, owner)
                continue
            # recursive: the empty mounts that hide the grader's files inside a bound folder come along
            if not _mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC):
                return False
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID)
    except OSError:
        return False
    finally:
        for fd in fds.values():
            os.close(fd)
    return not readonly_root or _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def copy_tree(src_fd: int, dst: str, owner: int = -1) -> None:
    """Copy the folder open as ``src_fd`` (a worker's copy of a submission: plain files and folders, made by the
    grading process) into the existing folder ``dst``; links and anything else not plain are left out. Iterative:
    a folder's depth costs no recursion."""
    if owner >= 0:
        os.chown(dst, owner, owner)
    folders = [""]  # relative to both
    while folders:
        rel = folders.pop()
        fd = os.open(rel or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=src_fd)
        try:
            with os.scandir(fd) as entries:
                listed = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in entries]
        finally:
            os.close(fd)
        for name, is_dir, is_file in listed:
            here, there = os.path.join(rel, name), os.path.join(dst, rel, name)
            if is_dir:
                os.mkdir(there, 0o700)
                folders.append(here)
            elif is_file:
                _copy_file(src_fd, here, there)
            else:
                continue
            if owner >= 0:
                os.chown(there, owner, owner)


def _copy_file(src_fd: int, rel: str, there: str) -> None:
    source = os.open(rel, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=src_fd)
    try:
        target = os.open(there, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            while chunk := os.read(source, 1 << 20):
                os.write(target, chunk)
        finally:
            os.close(target)
    finally:
        os.close(source)


def mount_proc() -> None:
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def give_to(uid: int, folder: str) -> None:
    """Hand a worker's private copy of its submission to its user id, readable by nobody else."""
    for root, dirs, files in os.walk(folder):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.lchown(name, uid, uid)
    os.chmod(folder, 0o700)


def can_drop_privileges(needed: list[str]) -> bool:
    """Can workers get user ids of their own, and still read ``needed`` (the interpreter's and torch's files)?

    Root on the host can switch ids; root inside a user namespace may not. And without the private root,
    the interpreter may live where other users cannot go (a 0700 /root): then ids stay as they are.
    """
    if os.geteuid() != 0:
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(0 if drop_privileges(WORKER_UID_BASE) and all(os.access(p, os.R_OK) for p in needed) else 1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def drop_privileges(uid: int) -> bool:
    """Become ``uid`` with no supplementary groups, no capabilities, and no way back (setuid files included)."""
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError:
        return False
    return libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0


def set_limits(limits: dict, own_uid: bool) -> None:
    """rlimits for the worker; RLIMIT_NPROC only when the worker has a user id of its own (it counts per user)."""
    wanted = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, limits["output_bytes"]),
        (resource.RLIMIT_DATA, limits["memory_bytes"]),
        (resource.RLIMIT_NOFILE, limits.get("open_files", 256)),
    ]
    if own_uid:
        wanted.append((resource.RLIMIT_NPROC, limits.get("processes", 64)))
    for kind, value in wanted:
        try:
            resource.setrlimit(kind, (value, value))
        except (ValueError, OSError):  # a platform that refuses a limit still grades, without it
            pass
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 5))
    except (ValueError, OSError):
        pass
