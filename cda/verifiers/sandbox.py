"""The kernel sandbox a user's function check runs in: Linux namespaces, a seccomp filter,
resource limits, failing closed. Nothing of the host's is the check's but CPU time.

A check is started as a fresh interpreter (``python -s -S -P``: standard library only, stdin and
stderr ``/dev/null``, stdout a pipe CDA reads, environment ``PYTHONHASHSEED=0`` and nothing else,
every file descriptor closed but the channels below). Its input (source and claim) arrives on a
descriptor the boot reads and closes before anything else: no file on the host's disk holds it.
What happens next depends on the *isolation*:

``namespaces`` (the default, required unless the caller accepts less)
    The interpreter (the *boot*) calls ``unshare(2)`` through the C library for new **user,
    mount, network, PID, IPC and UTS** namespaces, maps its own user to uid 1000 of the new
    user namespace, makes every mount private, covers every unix socket of CDA's network
    namespace with ``/dev/null`` and hides ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm``
    under empty file systems (a network namespace stops neither ``connect`` to a socket by path
    nor a write to a FIFO). The check's own directory, :data:`CHECK_DIR`, is a tmpfs of
    :data:`SCRATCH_BYTES` mounted inside the namespace's own (hidden) ``/tmp``: nothing of it
    is on the host's disk, and it ends with the namespace, whoever is killed. The boot then turns
    the whole tree **read-only, nosuid, nodev** with one recursive ``mount_setattr(2)`` (Linux
    5.12 or later) except that tmpfs (left writable but ``noexec``) and ``/dev/null``, ``zero``,
    ``random`` and ``urandom`` (the only device nodes that open: as root the check's effective
    uid owns every disk). It then forks the namespace's *init* (PID 1), which mounts a fresh,
    read-only ``/proc`` (this PID namespace only: no parent, no parent's environment or
    descriptors; read-only because the check's effective uid would pass the sysctls' own
    permission test) and ``/sys`` (this network namespace only), loads the seccomp filter
    below, and forks the process that runs the check. That process drops every capability
    (``capset``, ``no_new_privs``), so it can neither undo a mount nor bring the loopback up: the
    network namespace has only ``lo``, down. ``RLIMIT_NPROC`` is counted per user namespace
    (Linux 5.14+), so it bounds the processes the check can start (:data:`MAX_PROCESSES`)
    whatever the uid outside (as root, the boot's real uid becomes ``nobody`` first: root is
    exempt from that limit in every namespace; the effective uid stays, so an interpreter under
    ``/root`` still loads). When the check's process ends, init ends, and the kernel kills
    everything left in the PID namespace, ``setsid`` or not. On a timeout the parent asks the
    boot (``SIGTERM``) to kill init and wait for the teardown, and the boot does the same by
    itself when its parent (CDA) dies.

``process`` (only when the caller names it, and only where the kernel refuses namespaces)
    The check runs in a plain child process with the same resource limits and the same seccomp
    filter, no child processes (``RLIMIT_NPROC`` 0, not enforced for root), in a directory under
    :func:`process_scratch_root` that the next run sweeps if CDA was killed. It can write and
    signal whatever CDA's user may: **best effort**.

**The seccomp filter** (:func:`seccomp_program`: a BPF program written through ``prctl``, see
:data:`REFUSED_SYSCALLS` for each refused call and why) returns ``EPERM`` for the system calls
through which a check would hold memory that ``RLIMIT_AS`` does not count (``memfd_create``,
SysV IPC, keys, sockets, ``vmsplice``/``splice``/``tee``/``sendfile``, AIO and inotify
contexts, Landlock rules, growing a pipe, byte-range locks), would run operations the filter
cannot see (io_uring), would make namespaces of its own (where it could mount an unbounded
tmpfs), or would reach other processes (``ptrace``, ``process_vm_*``, ``pidfd_getfd``).
``clone3`` gets ``ENOSYS`` (its flags are in memory the filter cannot read; the C library falls
back to ``clone``, whose flags it can). Any other architecture's system call is fatal.

**Memory.** Without a memory cgroup, what a check holds is bounded by the sum of what the kernel
lets each part hold: at most :data:`MAX_PROCESSES` processes (threads included), each with
``memory_mb`` of address space (which counts its anonymous memory, mappings and thread stacks)
and at most :data:`MAX_DESCRIPTORS` descriptors, none of which can hold more than one pipe's
:data:`PIPE_BYTES`; plus the :data:`SCRATCH_BYTES` tmpfs; plus :data:`MAX_PENDING_SIGNALS`
queued signals or POSIX timers. :func:`memory_bound` states the total (docs/actions.md).

Three channels leave the sandbox, all pipes read with a size bound: the *control* channel,
which only the boot and init write (closed before any user code runs), says which isolation was
set up or which step the kernel refused; the *result* channel carries the check's JSON answer;
*stdout*, of which CDA keeps the first bytes and closes its end past the output limit (the
check's next write then fails with ``EPIPE``). The parent trusts nothing else (not the exit
status for success, not files the check wrote).

When the kernel refuses a step, the boot reports the step and ``errno`` on the control channel
and exits before reading the user's source. Setting ``CDA_SANDBOX_REFUSE=1`` in CDA's
environment makes the boot act as if ``unshare`` were refused (to try the fail-closed path; it
can only make CDA stricter).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cda.files import key_dir

__all__ = [
    "CHECK_DIR",
    "ISOLATIONS",
    "MAX_DESCRIPTORS",
    "MAX_PENDING_SIGNALS",
    "MAX_PROCESSES",
    "PIPE_BYTES",
    "REFUSED_SYSCALLS",
    "REFUSE_ENV",
    "RESULT_LIMIT",
    "SCRATCH_BYTES",
    "Isolation",
    "SandboxRun",
    "memory_bound",
    "process_scratch_root",
    "run_sandboxed",
    "seccomp_program",
]

Isolation = Literal["namespaces", "process"]
ISOLATIONS: tuple[Isolation, ...] = ("namespaces", "process")
#: processes (threads included) a check may run at once in the namespace sandbox, itself included
MAX_PROCESSES = 32
#: descriptors each process of a check may hold (``RLIMIT_NOFILE``)
MAX_DESCRIPTORS = 64
#: signals queued and POSIX timers a check may hold (``RLIMIT_SIGPENDING``, one count per user namespace)
MAX_PENDING_SIGNALS = 64
#: the most one descriptor can hold: a pipe at the kernel's default capacity (16 pages), which the
#: filter keeps it from growing (``F_SETPIPE_SZ``)
PIPE_BYTES = 16 * os.sysconf("SC_PAGE_SIZE")
#: size of the check's own (tmpfs) directory in the namespace sandbox
SCRATCH_BYTES = 64 << 20
#: the check's working directory in the namespace sandbox: inside the namespace's own /tmp
CHECK_DIR = "/tmp/cda-check"
#: bytes read from the result channel; anything beyond is dropped unread
RESULT_LIMIT = 1 << 16
_CONTROL_LIMIT = 1 << 12
_STOP_GRACE = 2.0  # seconds the boot has to tear the namespace down after a timeout
#: CDA's environment variable that makes the boot act as if the kernel refused namespaces
REFUSE_ENV = "CDA_SANDBOX_REFUSE"
#: processes of the sandbox itself counted in the user namespace (the boot, init) besides the check
_OWN_PROCESSES = 2
#: kernel memory that records one process's mappings and page tables, as a fraction of its
#: address space: a mapping record (``vm_area_struct`` with its tree node, about 300 bytes) per
#: 4 KiB page at the most, and a page-table page per 2 MiB mapped
_BOOKKEEPING = 1 / 8


def memory_bound(memory_bytes: int) -> int:
    """The most memory a check run with ``memory_bytes`` of address space per process can hold
    in the namespace sandbox without a memory cgroup (docs/actions.md, "Memory").

    >>> memory_bound(256 << 20) >> 20  # MiB, at the default memory_mb
    9408
    """
    per_process = memory_bytes + int(memory_bytes * _BOOKKEEPING) + MAX_DESCRIPTORS * PIPE_BYTES
    return MAX_PROCESSES * per_process + SCRATCH_BYTES + MAX_PENDING_SIGNALS * 4096


# ---- the seccomp filter ----------------------------------------------------------------------
#: audit architecture and column of the tables below, per ``os.uname().machine``
_ARCHES: dict[str, tuple[int, int]] = {"x86_64": (0xC000003E, 0), "aarch64": (0xC00000B7, 1)}
#: system calls the filter refuses with EPERM: (x86_64 number, aarch64 number), grouped by why
REFUSED_SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    # memory that RLIMIT_AS does not count: held by a file, a segment, a queue or a key, not a mapping
    "memfd_create": (319, 279), "memfd_secret": (447, 447),
    "shmget": (29, 194), "shmat": (30, 196), "shmdt": (67, 197), "shmctl": (31, 195),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    "semget": (64, 190), "semop": (65, 193), "semtimedop": (220, 192), "semctl": (66, 191),
    "mq_open": (240, 180),
    "add_key": (248, 217), "keyctl": (250, 219), "request_key": (249, 218),
    "socket": (41, 198), "socketpair": (53, 199),  # socket buffers; the network namespace has no network
    "inotify_init": (253, None), "inotify_init1": (294, 26), "fanotify_init": (300, 262),
    "io_setup": (206, 0),  # AIO contexts: also a host-wide count (aio-max-nr)
    "landlock_create_ruleset": (444, 444), "landlock_add_rule": (445, 445),
    "landlock_restrict_self": (446, 446),
    # pages pinned in a pipe after their mapping is gone, or page-cache folios held by a pipe
    "vmsplice": (278, 75), "splice": (275, 76), "tee": (276, 77), "sendfile": (40, 71),
    # operations the filter cannot see (a ring runs splice, socket, ... without a system call)
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    # kernel surface no check needs
    "userfaultfd": (323, 282), "perf_event_open": (298, 241), "bpf": (321, 280),
    # other processes (a sibling check under process isolation)
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    # namespaces of its own: a new mount namespace can mount a tmpfs of any size
    "unshare": (272, 97),
}
_CLONE, _CLONE3, _FCNTL = (56, 220), (435, 435), (72, 25)
#: clone flags that make a namespace (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET)
_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
#: fcntl commands refused: F_SETPIPE_SZ (a pipe grows to 1 MiB), F_SETLK, F_SETLKW, F_OFD_SETLK,
#: F_OFD_SETLKW (each byte-range lock is ~200 bytes of kernel memory, with no limit on their number)
_REFUSED_FCNTL = (1031, 6, 7, 37, 38)
_X32_BIT = 0x40000000  # x86_64: the x32 ABI's system calls
_RET_ALLOW, _RET_KILL, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38


def seccomp_program(machine: str) -> bytes | None:
    """The seccomp BPF program (``struct sock_filter`` array, native byte order) for ``machine``
    (``os.uname().machine``), or None where CDA has no system-call table for it.

    >>> len(seccomp_program("x86_64")) % 8, seccomp_program("mips") is None
    (0, True)
    """
    if machine not in _ARCHES:
        return None
    audit, column = _ARCHES[machine]
    refused = sorted({number for numbers in REFUSED_SYSCALLS.values() if (number := numbers[column]) is not None})
    # (opcode, k, jump-if-true label, jump-if-false label); a label None falls through
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    code: list[tuple[str | None, int, int, str | None, str | None]] = [
        (None, ld, 4, None, None),  # seccomp_data.arch
        (None, jeq, audit, None, "kill"),
        (None, ld, 0, None, None),  # seccomp_data.nr
    ]
    if machine == "x86_64":
        code.append((None, jge, _X32_BIT, "deny", None))
    code += [(None, jeq, _CLONE[column], "clone", None), (None, jeq, _CLONE3[column], "enosys", None),
             (None, jeq, _FCNTL[column], "fcntl", None)]
    code += [(None, jeq, number, "deny", None) for number in refused]
    code += [(None, ret, _RET_ALLOW, None, None),
             ("clone", ld, 16, None, None),  # args[0], low half: the flags
             (None, jset, _NAMESPACE_FLAGS, "deny", None),
             (None, ret, _RET_ALLOW, None, None),
             ("fcntl", ld, 24, None, None)]  # args[1], low half: the command
    code += [(None, jeq, command, "deny", None) for command in _REFUSED_FCNTL]
    code += [(None, ret, _RET_ALLOW, None, None),
             ("enosys", ret, _RET_ERRNO | _ENOSYS, None, None),
             ("deny", ret, _RET_ERRNO | _EPERM, None, None),
             ("kill", ret, _RET_KILL, None, None)]
    where = {label: i for i, (label, *_rest) in enumerate(code) if label is not None}
    out = bytearray()
    for i, (_label, op, k, true, false) in enumerate(code):
        jt = where[true] - i - 1 if true else 0
        jf = where[false] - i - 1 if false else 0
        assert 0 <= jt < 256 and 0 <= jf < 256
        out += struct.pack("=HBBI", op, jt, jf, k)
    return bytes(out)


_BOOT = r"""
import sys
import time


NOBODY = 65534
KEYCTL = {"x86_64": 250, "aarch64": 219}


class Refused(Exception):
    pass


def libc_handle():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


def read_input(fd):
    import json
    import os

    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return json.loads(b"".join(chunks).decode("utf-8"))


def load_filter(cfg, libc):
    # no_new_privs, then the seccomp filter (docs/actions.md): inherited by every process forked after
    import ctypes

    if not cfg["seccomp"]:
        raise Refused("seccomp: no system-call table for this machine", 38)
    code = bytes.fromhex(cfg["seccomp"])
    buffer = ctypes.create_string_buffer(code, len(code))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = Program(len(code) // 8, ctypes.addressof(buffer))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise Refused("prctl: no_new_privs", ctypes.get_errno())
    if libc.prctl(22, 2, ctypes.addressof(program), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise Refused("seccomp: load the filter", ctypes.get_errno())


def run_check(cfg, data, fd):
    import resource

    cpu = int(cfg["timeout_s"]) + 2
    for which, value in ((resource.RLIMIT_AS, cfg["memory"]), (resource.RLIMIT_CPU, cpu),
                         (resource.RLIMIT_FSIZE, cfg["output"]), (resource.RLIMIT_NPROC, cfg["nproc"]),
                         (resource.RLIMIT_CORE, 0), (resource.RLIMIT_RTPRIO, 0), (resource.RLIMIT_NICE, 0), (resource.RLIMIT_NOFILE, cfg["files"]),
                         (resource.RLIMIT_SIGPENDING, cfg["signals"])):
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        hard_value = value + 1 if which == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            hard_value = min(hard_value, hard)
        resource.setrlimit(which, (value, hard_value))

    import errno
    import json
    import os

    def report(**fields):
        os.write(fd, json.dumps(fields, ensure_ascii=True).encode("ascii"))
        os.close(fd)

    def message(exc):
        try:
            text = str(exc)
        except BaseException:
            text = "<unprintable>"
        return text[:200]

    phase = "loading"
    try:
        namespace = {"__name__": "cda_check", "__builtins__": __builtins__}
        exec(compile(data["source"], "<check>", "exec"), namespace)
        check = namespace.get("check")
        if not callable(check):
            report(kind="no_check")
            return
        phase = "calling"
        value = check(data["claim"])
        if type(value) is bool:
            report(kind="value", value=value)
        else:
            report(kind="non_bool", type=type(value).__name__[:100])
    except MemoryError:
        report(kind="memory", phase=phase)
    except SystemExit as exc:
        report(kind="exit", code=repr(exc.code)[:100], phase=phase)
    except BaseException as exc:
        # EFBIG: a file past RLIMIT_FSIZE; EPIPE: stdout past the output limit (CDA closed its end)
        if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.EPIPE):
            report(kind="output", phase=phase)
        else:
            report(kind="raised", type=type(exc).__name__[:100], message=message(exc), phase=phase)


def tell(fd, **fields):
    import json
    import os

    os.write(fd, json.dumps(fields).encode("ascii") + b"\n")


def namespaces(cfg, data):
    import ctypes
    import errno
    import os
    import select
    import signal

    control, result = cfg["control_fd"], cfg["result_fd"]
    libc = libc_handle()
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 4096, 16384, 1 << 18
    ATTR_RDONLY, ATTR_NOSUID, ATTR_NODEV, ATTR_NOEXEC = 1, 2, 4, 8

    def ok(value, step):
        if value != 0:
            raise Refused(step, ctypes.get_errno())

    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    def mount_setattr(path, recursive, set_, clear, step):
        attr = MountAttr(set_, clear, 0, 0)
        # 442: mount_setattr on every architecture with the common syscall table (Linux 5.12+)
        ok(libc.syscall(442, -100, path, 0x8000 if recursive else 0, ctypes.byref(attr), ctypes.sizeof(attr)), step)

    tmp = cfg["tmp"].encode()
    marks = cfg["marks"]  # time.monotonic() after each setup step (read by the benchmark only)
    try:
        if cfg["refuse"]:
            raise Refused("unshare", errno.EPERM)
        if os.getuid() == 0:
            # a real uid of root is exempt from RLIMIT_NPROC in every namespace: the real uid
            # (which the kernel counts processes by) becomes nobody, the effective uid (which
            # files are opened as: the interpreter may live under /root) stays
            try:
                os.setresuid(NOBODY, 0, 0)
            except OSError as exc:  # without it, no process limit would hold: refuse
                raise Refused("real uid nobody", exc.errno or 0) from None
        sockets = unix_socket_paths()  # read in the host's network namespace, before leaving it
        # CDA's session keyring (its keys readable by any process that possesses it) is replaced
        # by a fresh, empty one: keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)
        keyctl = KEYCTL.get(os.uname().machine)
        if keyctl is None or libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(1), None) < 0:
            raise Refused("keyctl: a new session keyring", ctypes.get_errno() if keyctl else errno.ENOSYS)
        uid, gid = os.geteuid(), os.getegid()
        flags = 0x10000000 | 0x00020000 | 0x40000000 | 0x20000000 | 0x08000000 | 0x04000000
        ok(libc.unshare(flags), "unshare")  # user, mount, network, PID, IPC, UTS
        marks["unshare"] = time.monotonic()
        try:
            for name, text in (("setgroups", "deny"), ("uid_map", "1000 %d 1" % uid), ("gid_map", "1000 %d 1" % gid)):
                with open("/proc/self/" + name, "w") as fh:
                    fh.write(text)
        except OSError as exc:
            raise Refused("uid_map", exc.errno or 0) from None
        marks["uid map"] = time.monotonic()
        ok(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount: make / private")
        for path in sockets:  # a socket file is reached by path, not through the network namespace
            if libc.mount(b"/dev/null", path, None, MS_BIND, None) != 0 and ctypes.get_errno() not in (
                    errno.ENOENT, errno.ENOTDIR):
                raise Refused("mount: cover the unix socket " + path.decode("utf-8", "replace")[:100],
                              ctypes.get_errno())
        for path in cfg["cover"]:  # the run's own stores (receipts, approval secret): read as empty
            if libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None) != 0 and ctypes.get_errno() not in (
                    errno.ENOENT, errno.ENOTDIR):
                raise Refused("mount: cover the store " + path[:100], ctypes.get_errno())
        for secret in cfg["secrets"]:  # hidden under an empty, unreadable file system
            folder = secret.encode()
            if os.path.isdir(folder) and not os.path.islink(folder):
                ok(libc.mount(b"tmpfs", folder, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=000"),
                   "mount: hide the signing key's folder")
        # where sockets and FIFOs of other programs live (and appear while the check runs): hidden
        # under empty file systems of the namespace's own
        hid = []
        for hidden in (b"/tmp", b"/var/tmp", b"/run", b"/dev/shm"):
            if os.path.isdir(hidden) and not os.path.islink(hidden):
                # Python's own installation (a virtual environment made under /tmp, as CI does) is
                # put back read-only at its path: a check may start sys.executable
                kept = [(k, os.open(k, os.O_PATH | os.O_DIRECTORY)) for k in (x.encode() for x in cfg["keep"])
                        if k.startswith(hidden + b"/") and os.path.isdir(k)]
                ok(libc.mount(b"tmpfs", hidden, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=1m,mode=755"),
                   "mount: hide " + hidden.decode())
                hid.append(hidden)
                for path, fd in kept:
                    os.makedirs(path, exist_ok=True)
                    ok(libc.mount(b"/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC, None),
                       "mount: keep Python's installation")
                    os.close(fd)
        # the check's own directory: a tmpfs of bounded size inside the namespace's own /tmp (so
        # its mount point is not on the host's disk either): it ends with the namespace
        if os.path.dirname(tmp) not in hid:
            raise Refused("mount: the check's directory (%s is not a directory of its own)"
                          % os.path.dirname(tmp).decode(), errno.ENOTDIR)
        os.makedirs(tmp)
        ok(libc.mount(b"tmpfs", tmp, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      b"size=%d,nr_inodes=4096,mode=700" % cfg["scratch"]), "mount: the check's directory")
        devices = [d for d in (b"/dev/null", b"/dev/zero", b"/dev/random", b"/dev/urandom") if os.path.exists(d)]
        for device in devices:
            ok(libc.mount(device, device, None, MS_BIND, None), "mount: bind " + device.decode())
        mount_setattr(b"/", True, ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV, 0, "mount_setattr: read-only /")
        for device in devices:  # every other device node stays unopenable (nodev): disks, /dev/mem
            mount_setattr(device, False, 0, ATTR_NODEV, "mount_setattr: open " + device.decode())
        mount_setattr(tmp, False, ATTR_NOEXEC, ATTR_RDONLY, "mount_setattr: writable check directory")
        os.chdir(tmp)  # the working directory through the writable mount, not the read-only one beneath
        marks["mounts"] = time.monotonic()
    except Refused as exc:
        tell(control, refused=exc.args[0], errno=exc.args[1])
        return 0
    status_r, status_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(status_r)
        os._exit(namespace_init(cfg, data, libc, ok, status_w))
    os.close(status_w)

    def stop(signum, frame):
        # the parent's timeout: kill init (the namespace dies with it) and wait until it is gone,
        # so that nothing of the check is left when the parent reaps this process
        try:
            os.kill(init, signal.SIGKILL)
            os.waitpid(init, 0)
        except OSError:
            pass
        os._exit(128 + signal.SIGKILL)

    signal.signal(signal.SIGTERM, stop)
    os.close(control)
    os.close(result)
    status = b""
    while True:
        if not select.select([status_r], [], [], 0.25)[0]:
            if os.getppid() != cfg["parent"]:  # CDA died: the check dies with it
                stop(signal.SIGTERM, None)
            continue
        chunk = os.read(status_r, 64)
        if not chunk:
            break
        status += chunk[:64]
    _, init_status = os.waitpid(init, 0)
    code = int(status) if status.strip().isdigit() else init_status
    if os.WIFSIGNALED(code):
        number = os.WTERMSIG(code)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    return os.WEXITSTATUS(code) if os.WIFEXITED(code) else 1


def unix_socket_paths():
    # the filesystem unix sockets bound in this network namespace (their paths, as bytes)
    paths = set()
    try:
        with open("/proc/net/unix", "rb") as fh:
            next(fh, None)
            for line in fh:
                fields = line.rstrip(b"\n").split(b" ", 7)
                if len(fields) == 8 and fields[7].startswith(b"/"):
                    paths.add(fields[7])
    except OSError as exc:
        raise Refused("read /proc/net/unix", exc.errno or 0) from None
    return sorted(paths)


def namespace_init(cfg, data, libc, ok, status_w):
    import os
    import signal

    control, result = cfg["control_fd"], cfg["result_fd"]
    try:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the boot
        ok(libc.mount(b"proc", b"/proc", b"proc", 1 | 2 | 4 | 8, None), "mount: /proc of the PID namespace")  # read-only: sysctls
        if libc.mount(b"sysfs", b"/sys", b"sysfs", 1 | 2 | 4 | 8, None) != 0:
            ok(libc.mount(b"tmpfs", b"/sys", b"tmpfs", 1 | 2 | 4 | 8, None), "mount: hide /sys")
        libc.sethostname(b"cda-check", 9)
        load_filter(cfg, libc)  # init's last mount is done: from here on, for init and the check
    except Refused as exc:
        tell(control, refused=exc.args[0], errno=exc.args[1])
        return 0
    cfg["marks"]["/proc, /sys, seccomp filter, fork of init"] = time.monotonic()
    tell(control, isolation="namespaces", marks=cfg["marks"])
    os.close(control)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as PID 1, signals from inside are then ignored
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: the check cannot read or trace init
    child = os.fork()
    if child == 0:
        os.close(status_w)
        code = 0
        try:
            drop_capabilities(libc)
            os.closerange(3, result)
            os.closerange(result + 1, 1 << 16)
            run_check(cfg, data, result)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 70
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except BaseException:
                    pass
            os._exit(code)
    os.close(result)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    os.write(status_w, b"%d" % status)
    return 0  # init's exit ends the PID namespace: the kernel kills what the check left behind


def drop_capabilities(libc):
    import ctypes

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    data = (ctypes.c_uint32 * 6)()
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.capset(ctypes.byref(Header(0x20080522, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "could not drop capabilities")
    libc.prctl(4, 1, 0, 0, 0)  # dumpable again: the check's own /proc entries belong to it


def main():
    import json

    cfg = json.loads(sys.argv[1])
    cfg["marks"] = {"boot": time.monotonic()}
    data = read_input(cfg["input_fd"])
    if cfg["isolation"] == "namespaces":
        return namespaces(cfg, data)
    try:
        load_filter(cfg, libc_handle())
    except Refused as exc:
        tell(cfg["control_fd"], refused=exc.args[0], errno=exc.args[1])
        return 0
    tell(cfg["control_fd"], isolation="process")
    import os

    os.close(cfg["control_fd"])
    run_check(cfg, data, cfg["result_fd"])
    return 0


sys.exit(main())
"""


@dataclass(frozen=True)
class SandboxRun:
    """What the parent learnt: the control message, the result bytes, the first bytes of stdout
    and how the child ended."""

    control: dict[str, Any] | None
    raw: bytes
    eof: bool
    returncode: int
    stdout: bytes = b""

    @property
    def isolation(self) -> str | None:
        """The isolation the boot reported set up, or None (refused, or it never said)."""
        value = (self.control or {}).get("isolation")
        return value if value in ISOLATIONS else None

    @property
    def refused(self) -> str | None:
        """The step the kernel refused, with its error, or None."""
        if self.control is None or not isinstance(self.control.get("refused"), str):
            return None
        number = self.control.get("errno")
        reason = os.strerror(number) if isinstance(number, int) and 0 < number < 4096 else "refused"
        return f"{self.control['refused'][:100]}: {reason}"


@dataclass
class _Pipe:
    """The read end of one channel out of the sandbox: the first ``keep`` bytes are kept, the rest
    is read and dropped; past ``cap`` bytes the read end is closed (the writer then gets EPIPE)."""

    fd: int
    keep: int
    cap: int | None = None
    data: bytearray = field(default_factory=bytearray)
    size: int = 0
    done: bool = False  # end of file, or closed at the cap

    def read(self) -> None:
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.done = True
            return
        if len(self.data) < self.keep:
            self.data += chunk[: self.keep - len(self.data)]
        self.size += len(chunk)
        if self.cap is not None and self.size > self.cap:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.done = True


def _pump(pipes: Sequence[_Pipe], until: _Pipe, deadline: float) -> bool:
    """Read ``pipes`` until ``until`` is done or the deadline passes; True if it is done."""
    while not until.done:
        remaining = deadline - time.monotonic()
        live = [p for p in pipes if not p.done]
        if remaining <= 0:
            return False
        ready, _, _ = select.select([p.fd for p in live], [], [], remaining)
        if not ready:
            return False
        for pipe in live:
            if pipe.fd in ready:
                pipe.read()
    return True


def _first_json(raw: bytes) -> dict[str, Any] | None:
    try:
        value, _end = json.JSONDecoder().raw_decode(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _stop(proc: subprocess.Popen[bytes], isolation: Isolation) -> None:
    """End the boot and everything it started, and reap it.

    With namespaces, the boot is asked (``SIGTERM``) to kill init and wait for it: the kernel has
    then killed every process of the PID namespace. Whatever answers too slowly, and every
    process of a ``process`` run, is killed with its process group, while the boot is unreaped
    (so the group id is still ours).
    """
    if isolation == "namespaces":
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        end = time.monotonic() + _STOP_GRACE
        while time.monotonic() < end:
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break
            time.sleep(0.005)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


# ---- the process isolation's directory: swept when its owner is gone -------------------------
def _run_owner(name: str) -> tuple[int, int] | None:
    """(pid, start time) of the CDA process that made the folder ``name`` (``run-<pid>-<start
    time>-<mkdtemp's letters>``), or None for a name CDA does not make."""
    parts = name.split("-", 3)
    if len(parts) == 4 and parts[0] == "run" and parts[1].isdigit() and parts[2].isdigit() \
            and parts[3] and parts[3].replace("_", "").isalnum() and parts[3].isascii():
        return int(parts[1]), int(parts[2])
    return None


def process_scratch_root() -> Path:
    """The folder (``cda-fn-<uid>`` in the system's temporary folder, 0700, ours) that holds the
    working directories of ``process`` checks: one ``run-<pid>-<start time>-…`` each."""
    return Path(tempfile.gettempdir()) / f"cda-fn-{os.getuid()}"


def _start_time(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(stat.rsplit(b")", 1)[1].split()[19])


@contextmanager
def _process_scratch() -> Iterator[Path]:
    """A working directory for a ``process`` check, removed afterwards; first, the directories
    of runs whose CDA process is gone (killed: it could not remove its own) are removed."""
    root = process_scratch_root()
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(root)
    if not os.path.isdir(root) or os.path.islink(root) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{root} is not a private folder of this user: refusing to run a check there")
    own = _start_time(os.getpid())
    if own is None:  # without start times a live run's folder could not be told from a dead one's
        raise OSError("cannot read /proc/self/stat: refusing to sweep or make a check's folder")
    for entry in os.listdir(root):
        owner = _run_owner(entry)
        if owner is not None and _start_time(owner[0]) != owner[1]:
            shutil.rmtree(root / entry, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-{own}-", dir=root))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_sandboxed(
    payload: bytes, isolation: Isolation, *, timeout_s: float, memory_bytes: int, output_bytes: int,
    deadline: float, cover: Sequence[Path] = (), stdout_kept: int = 1024,
) -> SandboxRun:
    """Run the check whose input is ``payload`` (JSON: ``source``, ``claim``) under ``isolation``
    until ``deadline`` (``time.monotonic``); the whole process tree is gone when this returns, and
    so is every file of the check. The files ``cover`` (the run's own SQLite stores and their
    ``-wal``/``-shm``) read as empty inside the sandbox. The first ``stdout_kept`` bytes of its
    stdout are kept; past ``output_bytes`` of it, CDA closes the pipe."""
    if not sys.platform.startswith("linux"):  # no namespaces, no seccomp: refused under either isolation
        return SandboxRun(control={"refused": f"Linux namespaces and seccomp (this is {sys.platform[:40]})",
                                   "errno": 38}, raw=b"", eof=True, returncode=0)
    if isolation == "process":
        with _process_scratch() as work:
            return _run(payload, isolation, work, timeout_s, memory_bytes, output_bytes, deadline, cover, stdout_kept)
    return _run(payload, isolation, None, timeout_s, memory_bytes, output_bytes, deadline, cover, stdout_kept)


def _run(payload: bytes, isolation: Isolation, work: Path | None, timeout_s: float, memory_bytes: int,
         output_bytes: int, deadline: float, cover: Sequence[Path], stdout_kept: int) -> SandboxRun:
    program = seccomp_program(os.uname().machine)
    cfg = {
        "isolation": isolation, "tmp": CHECK_DIR if work is None else str(work), "timeout_s": timeout_s,
        "memory": memory_bytes, "output": output_bytes,
        "nproc": MAX_PROCESSES + _OWN_PROCESSES if isolation == "namespaces" else 0,
        "files": MAX_DESCRIPTORS, "signals": MAX_PENDING_SIGNALS,
        "seccomp": program.hex() if program else "",
        "refuse": os.environ.get(REFUSE_ENV, "") not in ("", "0"), "parent": os.getpid(),
        "scratch": SCRATCH_BYTES,
        # CDA's signing key: a check that read it could sign a forged log's head
        "secrets": [os.path.realpath(key_dir())],
        # the run's stores: other actions' data and the approval secret (reflection_meta)
        "cover": sorted({os.path.realpath(str(p) + suffix) for p in cover for suffix in ("", "-wal", "-shm")}),
        # where the interpreter lives, kept visible when it lies under a hidden folder
        "keep": sorted({os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix)}
                       | {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix)}),
    }
    # the input: a memory file the boot reads and closes first (never a file on the host's disk)
    source = os.memfd_create("cda-check-input", os.MFD_CLOEXEC)
    control_r, control_w = os.pipe()
    result_r, result_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    pipes = [_Pipe(control_r, _CONTROL_LIMIT), _Pipe(result_r, RESULT_LIMIT), _Pipe(stdout_r, stdout_kept, output_bytes)]
    control, result, stdout = pipes
    try:
        os.write(source, payload)
        os.lseek(source, 0, os.SEEK_SET)
        cfg.update(control_fd=control_w, result_fd=result_w, input_fd=source)
        args: Sequence[str] = [sys.executable, "-s", "-S", "-P", "-c", _BOOT, json.dumps(cfg)]
        try:
            proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=stdout_w, stderr=subprocess.DEVNULL, cwd=work or "/",
                env={"PYTHONHASHSEED": "0"}, pass_fds=(control_w, result_w, source), start_new_session=True,
            )
        finally:
            for fd in (control_w, result_w, stdout_w, source):
                os.close(fd)
        try:
            _pump([control, stdout], control, deadline)
            # the result; then stdout to its end, which comes when the boot, the last holder, is gone
            timed_out = not (_pump([result, stdout], result, deadline) and _pump([stdout], stdout, deadline))
            if not timed_out:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            if proc.returncode is None:
                _stop(proc, isolation)
    finally:
        for pipe in pipes:
            pipe.close()
    return SandboxRun(control=_first_json(bytes(control.data)), raw=bytes(result.data), eof=not timed_out,
                      returncode=proc.returncode, stdout=bytes(stdout.data))
