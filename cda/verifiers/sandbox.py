"""The kernel sandbox a user's function check runs in: Linux namespaces, failing closed.

A check is started as a fresh interpreter (``python -s -S -P``: standard library only, stdin
closed, environment ``PYTHONHASHSEED=0`` and nothing else, every file descriptor closed but the
two channels below and the output files). What happens next depends on the *isolation*:

``namespaces`` (the default, required unless the caller accepts less)
    The interpreter (the *boot*) calls ``unshare(2)`` through the C library for new **user,
    mount, network, PID, IPC and UTS** namespaces, maps its own user to uid 1000 of the new
    user namespace, makes every mount private, covers every unix socket of CDA's network
    namespace with ``/dev/null`` and hides ``/tmp``, ``/var/tmp``, ``/run`` and ``/dev/shm``
    under empty file systems (a network namespace stops neither ``connect`` to a socket by path
    nor a write to a FIFO), mounts a tmpfs of :data:`SCRATCH_BYTES` at the check's temporary
    directory (with its input copied in), and turns the whole tree **read-only, nosuid, nodev**
    with one recursive ``mount_setattr(2)`` (Linux 5.12 or later) except that tmpfs (left
    writable but ``noexec``) and ``/dev/null``, ``zero``, ``random`` and ``urandom`` (the only
    device nodes that open: as root the check's effective uid owns every disk). It then forks
    the namespace's *init* (PID 1), which mounts a fresh, read-only ``/proc`` (this PID namespace
    only: no parent, no parent's environment or descriptors; read-only because the check's
    effective uid would pass the sysctls' own permission test) and ``/sys`` (this network
    namespace only), and forks the process that runs the check. That process
    drops every capability (``capset``, ``no_new_privs``), so it can neither undo a mount nor
    bring the loopback up: the network namespace has only ``lo``, down. ``RLIMIT_NPROC`` is
    counted per user namespace (Linux 5.14+), so it bounds the processes the check can start
    (:data:`MAX_PROCESSES`) whatever the uid outside (as root, the boot's real uid becomes
    ``nobody`` first: root is exempt from that limit in every namespace; the effective uid stays,
    so an interpreter under ``/root`` still loads). When the check's process ends, init ends, and
    the kernel kills everything left in the PID namespace, ``setsid`` or not. On a timeout the
    parent asks the boot (``SIGTERM``) to kill init and wait for the teardown, and the boot does
    the same by itself when its parent (CDA) dies.

``process`` (only when the caller names it, and only where the kernel refuses namespaces)
    The check runs in a plain child process with the same resource limits, no child processes
    (``RLIMIT_NPROC`` 0, not enforced for root) and a Python-level ``socket`` replacement that
    is **best effort**: it stops honest mistakes, not an attacker.

Two channels leave the sandbox, both pipes read with a size bound: the *control* channel, which
only the boot and init write (closed before any user code runs), says which isolation was set up
or which step the kernel refused; the *result* channel carries the check's JSON answer. The
parent trusts nothing else (not the exit status for success, not files the check wrote).

When the kernel refuses a step, the boot reports the step and ``errno`` on the control channel
and exits before reading the user's source. Setting ``CDA_SANDBOX_REFUSE=1`` in CDA's
environment makes the boot act as if ``unshare`` were refused (to try the fail-closed path; it
can only make CDA stricter).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cda.files import key_dir

__all__ = [
    "ISOLATIONS",
    "MAX_PROCESSES",
    "REFUSE_ENV",
    "RESULT_LIMIT",
    "SCRATCH_BYTES",
    "Isolation",
    "SandboxRun",
    "run_sandboxed",
]

Isolation = Literal["namespaces", "process"]
ISOLATIONS: tuple[Isolation, ...] = ("namespaces", "process")
#: processes a check may run at once in the namespace sandbox, itself included
MAX_PROCESSES = 32
#: size of the check's own (tmpfs) directory in the namespace sandbox
SCRATCH_BYTES = 64 << 20
#: bytes read from the result channel; anything beyond is dropped unread
RESULT_LIMIT = 1 << 16
_CONTROL_LIMIT = 1 << 12
_STOP_GRACE = 2.0  # seconds the boot has to tear the namespace down after a timeout
#: CDA's environment variable that makes the boot act as if the kernel refused namespaces
REFUSE_ENV = "CDA_SANDBOX_REFUSE"
#: processes of the sandbox itself counted in the user namespace (the boot, init) besides the check
_OWN_PROCESSES = 2

_BOOT = r"""
import sys
import time


NOBODY = 65534
KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 280, "s390x": 280, "armv7l": 311, "i686": 288}


class Refused(Exception):
    pass


def run_check(cfg, fd, patch_network):
    import resource

    cpu = int(cfg["timeout_s"]) + 2
    for which, value in ((resource.RLIMIT_AS, cfg["memory"]), (resource.RLIMIT_CPU, cpu),
                         (resource.RLIMIT_FSIZE, cfg["output"]), (resource.RLIMIT_NPROC, cfg["nproc"]),
                         (resource.RLIMIT_CORE, 0)):
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

    if patch_network:  # best effort, process isolation only
        import _socket
        import socket

        def deny(*args, **kwargs):
            raise PermissionError("network access is disabled in the CDA function sandbox")

        class NoSocket(socket.socket):
            def __init__(self, *args, **kwargs):
                deny()

        socket.socket = socket.SocketType = NoSocket
        _socket.socket = _socket.SocketType = NoSocket
        for name in ("create_connection", "create_server", "socketpair", "fromfd", "getaddrinfo",
                     "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
            if hasattr(socket, name):
                setattr(socket, name, deny)
            if hasattr(_socket, name):
                setattr(_socket, name, deny)

    with open("input.json", "rb") as fh:
        data = json.loads(fh.read().decode("utf-8"))
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
        if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
            report(kind="output", phase=phase)
        else:
            report(kind="raised", type=type(exc).__name__[:100], message=message(exc), phase=phase)


def tell(fd, **fields):
    import json
    import os

    os.write(fd, json.dumps(fields).encode("ascii") + b"\n")


def namespaces(cfg):
    import ctypes
    import errno
    import os
    import select
    import signal

    control, result = cfg["control_fd"], cfg["result_fd"]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 4096, 16384, 1 << 18
    ATTR_RDONLY, ATTR_NOSUID, ATTR_NODEV, ATTR_NOEXEC = 1, 2, 4, 8
    PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38

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
        # where sockets and FIFOs of other programs live (and appear while the check runs): hidden
        # under empty file systems
        with open(os.path.join(tmp, b"input.json"), "rb") as fh:
            staged = fh.read()
        for secret in cfg["secrets"]:  # hidden under an empty, unreadable file system
            folder = secret.encode()
            if os.path.isdir(folder) and not os.path.islink(folder):
                ok(libc.mount(b"tmpfs", folder, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=4k,mode=000"),
                   "mount: hide the signing key's folder")
        for hidden in (b"/tmp", b"/var/tmp", b"/run", b"/dev/shm"):
            if os.path.isdir(hidden) and not os.path.islink(hidden):
                # Python's own installation (a virtual environment made under /tmp, as CI does) is
                # put back read-only at its path: a check may start sys.executable
                kept = [(k, os.open(k, os.O_PATH | os.O_DIRECTORY)) for k in (x.encode() for x in cfg["keep"])
                        if k.startswith(hidden + b"/") and os.path.isdir(k)]
                ok(libc.mount(b"tmpfs", hidden, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"size=1m,mode=755"),
                   "mount: hide " + hidden.decode())
                for path, fd in kept:
                    os.makedirs(path, exist_ok=True)
                    ok(libc.mount(b"/proc/self/fd/%d" % fd, path, None, MS_BIND | MS_REC, None),
                       "mount: keep Python's installation")
                    os.close(fd)
        # the check's own directory, at the same path: a tmpfs of bounded size (the host's disk is
        # not its to fill), holding its input; its stdout and stderr are the files CDA opened
        os.makedirs(tmp, exist_ok=True)
        ok(libc.mount(b"tmpfs", tmp, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      b"size=%d,nr_inodes=4096,mode=700" % cfg["scratch"]), "mount: the temporary directory")
        with open(os.path.join(tmp, b"input.json"), "wb") as fh:
            fh.write(staged)
        devices = [d for d in (b"/dev/null", b"/dev/zero", b"/dev/random", b"/dev/urandom") if os.path.exists(d)]
        for device in devices:
            ok(libc.mount(device, device, None, MS_BIND, None), "mount: bind " + device.decode())
        mount_setattr(b"/", True, ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV, 0, "mount_setattr: read-only /")
        for device in devices:  # every other device node stays unopenable (nodev): disks, /dev/mem
            mount_setattr(device, False, 0, ATTR_NODEV, "mount_setattr: open " + device.decode())
        mount_setattr(tmp, False, ATTR_NOEXEC, ATTR_RDONLY, "mount_setattr: writable temporary directory")
        os.chdir(tmp)  # the working directory through the writable bind, not the read-only mount beneath
        marks["mounts"] = time.monotonic()
    except Refused as exc:
        tell(control, refused=exc.args[0], errno=exc.args[1])
        return 0
    status_r, status_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(status_r)
        os._exit(namespace_init(cfg, libc, ok, status_w))
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


def namespace_init(cfg, libc, ok, status_w):
    import os
    import signal

    control, result = cfg["control_fd"], cfg["result_fd"]
    try:
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the boot
        ok(libc.mount(b"proc", b"/proc", b"proc", 1 | 2 | 4 | 8, None), "mount: /proc of the PID namespace")  # read-only: sysctls
        if libc.mount(b"sysfs", b"/sys", b"sysfs", 1 | 2 | 4 | 8, None) != 0:
            ok(libc.mount(b"tmpfs", b"/sys", b"tmpfs", 1 | 2 | 4 | 8, None), "mount: hide /sys")
        libc.sethostname(b"cda-check", 9)
    except Refused as exc:
        tell(control, refused=exc.args[0], errno=exc.args[1])
        return 0
    cfg["marks"]["/proc, /sys, fork of init"] = time.monotonic()
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
            run_check(cfg, result, patch_network=False)
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
    if cfg["isolation"] == "namespaces":
        return namespaces(cfg)
    tell(cfg["control_fd"], isolation="process")
    import os

    os.close(cfg["control_fd"])
    run_check(cfg, cfg["result_fd"], patch_network=True)
    return 0


sys.exit(main())
"""


@dataclass(frozen=True)
class SandboxRun:
    """What the parent learnt: the control message, the result bytes and how the child ended."""

    control: dict[str, Any] | None
    raw: bytes
    eof: bool
    returncode: int

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


def _read(fd: int, deadline: float, limit: int) -> tuple[bytes, bool]:
    """Read ``fd`` until end of file or the deadline, keeping at most ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"".join(chunks), False
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return b"".join(chunks), False
        chunk = os.read(fd, 4096)
        if not chunk:
            return b"".join(chunks), True
        if size < limit:
            chunks.append(chunk[: limit - size])
            size += len(chunk)


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


def run_sandboxed(
    work: Path, isolation: Isolation, *, timeout_s: float, memory_bytes: int, output_bytes: int,
    deadline: float, stdout: Path, stderr: Path, cover: Sequence[Path] = (),
) -> SandboxRun:
    """Run the check staged in ``work`` (``input.json``) under ``isolation`` until ``deadline``
    (``time.monotonic``); the whole process tree is gone when this returns. The files ``cover``
    (the run's own SQLite stores and their ``-wal``/``-shm``) read as empty inside the sandbox."""
    control_r, control_w = os.pipe()
    result_r, result_w = os.pipe()
    try:
        cfg = {
            "isolation": isolation, "tmp": os.path.realpath(work), "timeout_s": timeout_s,
            "memory": memory_bytes, "output": output_bytes,
            "nproc": MAX_PROCESSES + _OWN_PROCESSES if isolation == "namespaces" else 0,
            "control_fd": control_w, "result_fd": result_w,
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
        args: Sequence[str] = [sys.executable, "-s", "-S", "-P", "-c", _BOOT, json.dumps(cfg)]
        with open(stdout, "wb") as out, open(stderr, "wb") as err:
            try:
                proc = subprocess.Popen(
                    args, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=work,
                    env={"PYTHONHASHSEED": "0"}, pass_fds=(control_w, result_w), start_new_session=True,
                )
            finally:
                os.close(control_w)
                os.close(result_w)
        try:
            control_raw, _ = _read(control_r, deadline, _CONTROL_LIMIT)
            raw, eof = _read(result_r, deadline, RESULT_LIMIT)
            timed_out = not eof
            if not timed_out:
                try:
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            if proc.returncode is None:
                _stop(proc, isolation)
    finally:
        os.close(control_r)
        os.close(result_r)
    return SandboxRun(control=_first_json(control_raw), raw=raw, eof=not timed_out, returncode=proc.returncode)
