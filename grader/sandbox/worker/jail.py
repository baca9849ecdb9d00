"""Linux isolation for the fork server and its workers, every step best-effort: one protection per file,
composed here under the names the fork server (and the grading process) use, ``jail.<name>``.

Loaded into the fork server as part of ``_gradekit.worker`` (imports nothing from ``grader``). Each
function returns or records the protections that took, so a machine that
refuses one (no root, no user namespaces, macOS) still grades, and the report
says what was missing.

The fork server, in this order (``fork_server.start_server``):
  * gets private mount and network namespaces (no network): ``jail_namespaces``;
  * makes a cgroup of its own for its workers: ``jail_cgroup``;
  * pivots into a *private root*: a tmpfs holding read-only binds of the system
    (``/usr``, ``/etc``, the Python installation and its site-packages) and its
    own scratch folder, nothing else: the project, the reference, the suites,
    other submissions and the gradebook do not exist in it: ``jail_root``;
  * covers whatever of the grader is still inside a bound folder with empty mounts: ``jail_root``.
Each worker, in this order (``fork_server.spawn`` and ``run_worker``):
  * sits in its own cgroup (memory and process count) where the machine lets us
    make one, on top of its rlimits: ``jail_cgroup``;
  * gets its own PID namespace (its whole process tree dies with it) and /proc, its own network and IPC
    namespaces: ``jail_namespaces``; and in its mount namespace its own /tmp, /dev/shm and a capped copy of
    the submission: ``jail_places``;
  * gets its rlimits: ``jail_limits``;
  * when the server runs as root, runs as a user id of its own, without
    capabilities or a way to regain them (``no_new_privs``): ``jail_users``; elsewhere, it is
    root only inside a user namespace of its own, whose mounts it cannot undo: ``jail_namespaces``.
The kernel calls they all make, and their flags, are ``jail_kernel``'s.
"""

from __future__ import annotations

from .jail_cgroup import CGROUP_PARENTS, CGROUP_ROOT, CPU_CONTROLLER, Cgroups, sweep
from .jail_kernel import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    libc,
)
from .jail_limits import set_limits
from .jail_namespaces import (
    die_with_parent,
    enter_server_namespaces,
    enter_worker_namespaces,
    mount_proc,
    probe_worker_namespaces,
)
from .jail_places import COPY_INODES, PRIVATE_TMPFS, copy_tree, private_places
from .jail_root import DEVICES, SYS_PIVOT_ROOT, SYSTEM, hide, outermost, private_root
from .jail_users import WORKER_UID_BASE, can_drop_privileges, drop_privileges, give_to

__all__ = [
    # the kernel's calls and flags
    "CLONE_NEWIPC",
    "CLONE_NEWNET",
    "CLONE_NEWNS",
    "CLONE_NEWPID",
    "CLONE_NEWUSER",
    "MNT_DETACH",
    "MS_BIND",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "PR_SET_NO_NEW_PRIVS",
    "PR_SET_PDEATHSIG",
    "libc",
    # namespaces
    "die_with_parent",
    "enter_server_namespaces",
    "enter_worker_namespaces",
    "mount_proc",
    "probe_worker_namespaces",
    # cgroups
    "CGROUP_PARENTS",
    "CGROUP_ROOT",
    "CPU_CONTROLLER",
    "Cgroups",
    "sweep",
    # the private root
    "DEVICES",
    "SYS_PIVOT_ROOT",
    "SYSTEM",
    "hide",
    "outermost",
    "private_root",
    # each worker's private places
    "COPY_INODES",
    "PRIVATE_TMPFS",
    "copy_tree",
    "private_places",
    # rlimits
    "set_limits",
    # a user id per worker
    "WORKER_UID_BASE",
    "can_drop_privileges",
    "drop_privileges",
    "give_to",
]
