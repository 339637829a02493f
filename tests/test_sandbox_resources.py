"""Attacks on the host's resources from inside a function check (issue 35): nothing of the host's
but CPU time is the check's.

Each attack in :data:`ATTACKS` is a real check that tries to hold memory, disk or another
process beyond what docs/actions.md bounds, and returns True if it got through; the test asserts
it did not, and that it was stopped by the mechanism named beside it (an ``errno`` each mechanism
gives, or a crash). :data:`ATTACKS` and the tests below it are the list the closing note counts.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from cda.contracts.verification import VerifierOutcome
from cda.verifiers import sandbox
from cda.verifiers.function_eval import run_function_check
from cda.verifiers.sandbox import (
    MAX_DESCRIPTORS,
    MAX_PENDING_SIGNALS,
    MAX_PROCESSES,
    PIPE_BYTES,
    REFUSE_ENV,
    REFUSED_SYSCALLS,
    SCRATCH_BYTES,
    process_scratch_root,
    seccomp_program,
)
from tests.test_sandbox import VICTIM, survivors

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux namespaces")

MACHINE = os.uname().machine
_COLUMN = {"x86_64": 0, "aarch64": 1}.get(MACHINE)
#: this machine's numbers for the system calls the attacks make without a C library wrapper
NR: dict[str, int] = {}
if _COLUMN is not None:
    NR = {name: numbers[_COLUMN] for name, numbers in REFUSED_SYSCALLS.items() if numbers[_COLUMN] is not None}
    NR.update(clone=sandbox._CLONE[_COLUMN], clone3=sandbox._CLONE3[_COLUMN], fcntl=sandbox._FCNTL[_COLUMN])

PRELUDE = """
import ctypes, errno, fcntl, mmap, os, resource, signal, socket, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
NR = NUMBERS
EPERM = 1


def sc(name, *args):
    value = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return value, ctypes.get_errno()


def went_through(call):
    # a C call's (value, errno): print the errno (0 if it succeeded) and say whether it did
    value, err = call
    print("errno", 0 if value >= 0 else err)
    return value >= 0


def forked(call):
    # a fork-like call's (value, errno): a child (0) leaves at once, the parent reaps it
    if call[0] == 0:
        os._exit(0)
    if call[0] > 0:
        os.waitpid(call[0], 0)
    return call


def attempt(action):
    # a Python call: print the errno it raised (0 if none) and say whether it succeeded
    try:
        action()
    except OSError as exc:
        print("errno", exc.errno)
        return False
    print("errno", 0)
    return True
""".replace("NUMBERS", repr(NR))


def attack_source(body: str) -> str:
    return PRELUDE + "\n\ndef check(claim):\n" + textwrap.indent(textwrap.dedent(body), "    ")


def run(source: str, memory_mb: int = 64, **kwargs: object) -> VerifierOutcome:
    return run_function_check("attack", source, "the claim", timeout_s=20.0, memory_mb=memory_mb, **kwargs)  # type: ignore[arg-type]


EPERM, EAGAIN, EMFILE, ENOSPC, EROFS, ENOSYS, EACCES = 1, 11, 24, 28, 30, 38, 13
FILTER = "seccomp filter"

# name -> (what stops it, the check's body (True: it got through), the errno it must print)
ATTACKS: dict[str, tuple[str, str, int]] = {
    # -- memory that RLIMIT_AS does not count -------------------------------------------------
    "memfd_create: 1 MiB held by a descriptor": (FILTER, """
        return attempt(lambda: os.write(os.memfd_create("x"), b"x" * (1 << 20)))
    """, EPERM),
    "memfd_secret": (FILTER, 'return went_through(sc("memfd_secret", 0))', EPERM),
    "SysV shared memory (outlives its mapping)": (FILTER, """
        libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
        return went_through((libc.shmget(0, 16 << 20, 0o1600), ctypes.get_errno()))
    """, EPERM),
    "SysV message queue": (FILTER, "return went_through((libc.msgget(0, 0o1600), ctypes.get_errno()))", EPERM),
    "SysV semaphores": (FILTER, "return went_through((libc.semget(0, 100, 0o1600), ctypes.get_errno()))", EPERM),
    "POSIX message queue": (FILTER, """
        libc.mq_open.restype = ctypes.c_int
        return went_through((libc.mq_open(b"/cda-attack", os.O_CREAT | os.O_RDWR, 0o600, None), ctypes.get_errno()))
    """, EPERM),
    "add_key: 16 KiB (root's key quota is 25 MB)": (FILTER, """
        data = b"k" * 16384
        return went_through(sc("add_key", b"user", b"cda-attack", data, len(data), -2))
    """, EPERM),
    "keyctl: a named keyring of its own": (FILTER, 'return went_through(sc("keyctl", 1, b"cda-attack"))', EPERM),
    "request_key: an upcall to a host helper": (FILTER, """
        return went_through(sc("request_key", b"user", b"cda-attack", b"callout", 0))
    """, EPERM),
    "socketpair: socket buffers": (FILTER, "return attempt(socket.socketpair)", EPERM),
    "unix socket": (FILTER, "return attempt(lambda: socket.socket(socket.AF_UNIX))", EPERM),
    "netlink socket": (FILTER, "return attempt(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))", EPERM),
    "inotify watches": (FILTER, "return went_through((libc.inotify_init1(0), ctypes.get_errno()))", EPERM),
    "fanotify": (FILTER, "return went_through((libc.fanotify_init(0x200, 0), ctypes.get_errno()))", EPERM),
    "AIO context (a host-wide count)": (FILTER, """
        context = ctypes.c_ulong(0)
        return went_through(sc("io_setup", 4096, ctypes.byref(context)))
    """, EPERM),
    "Landlock ruleset (rules hold kernel memory per inode)": (FILTER, """
        handled = ctypes.c_uint64(1)
        return went_through(sc("landlock_create_ruleset", ctypes.byref(handled), 8, 0))
    """, EPERM),
    # -- pages pinned in a pipe ---------------------------------------------------------------
    "vmsplice: pages kept after munmap": (FILTER, """
        class Iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        r, w = os.pipe()
        buffer = ctypes.create_string_buffer(65536)
        return went_through((libc.vmsplice(w, ctypes.byref(Iovec(ctypes.addressof(buffer), 65536)), 1, 0),
                             ctypes.get_errno()))
    """, EPERM),
    "splice: page-cache folios into a pipe": (FILTER, """
        r, w = os.pipe()
        with open(sys.executable, "rb") as fh:
            return attempt(lambda: os.splice(fh.fileno(), w, 65536))
    """, EPERM),
    "tee": (FILTER, """
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        os.write(w1, b"x")
        return went_through((libc.tee(r1, w2, 1, 0), ctypes.get_errno()))
    """, EPERM),
    "sendfile into a pipe": (FILTER, """
        r, w = os.pipe()
        with open(sys.executable, "rb") as fh:
            return attempt(lambda: os.sendfile(w, fh.fileno(), 0, 65536))
    """, EPERM),
    "F_SETPIPE_SZ: a 1 MiB pipe": (FILTER, """
        r, w = os.pipe()
        return attempt(lambda: fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20))
    """, EPERM),
    "byte-range locks (~200 bytes each, no limit)": (FILTER, """
        fd = os.open("locked", os.O_CREAT | os.O_RDWR)
        return attempt(lambda: [fcntl.lockf(fd, fcntl.LOCK_SH, 1, 2 * i) for i in range(1000)])
    """, EPERM),
    # -- operations the filter cannot see, kernel surface -------------------------------------
    "io_uring": (FILTER, """
        params = ctypes.create_string_buffer(120)
        return went_through(sc("io_uring_setup", 8, params))
    """, EPERM),
    "userfaultfd": (FILTER, 'return went_through(sc("userfaultfd", 1))', EPERM),  # UFFD_USER_MODE_ONLY
    "/dev/userfaultfd": ("nodev mount", 'return attempt(lambda: os.open("/dev/userfaultfd", os.O_RDWR))', EACCES),
    "perf_event_open on itself": (FILTER, """
        attr = bytearray(128)
        attr[0:4] = (1).to_bytes(4, "little")  # PERF_TYPE_SOFTWARE, config 0: cpu-clock
        attr[4:8] = (128).to_bytes(4, "little")
        attr[40:48] = ((1 << 5) | (1 << 6)).to_bytes(8, "little")  # exclude_kernel, exclude_hv
        buffer = ctypes.create_string_buffer(bytes(attr), 128)
        return went_through(sc("perf_event_open", buffer, 0, -1, -1, 0))
    """, EPERM),
    "bpf map": (FILTER, """
        attr = ctypes.create_string_buffer((2).to_bytes(4, "little") + (4).to_bytes(4, "little") * 2
                                           + (1).to_bytes(4, "little") + bytes(112), 128)
        return went_through(sc("bpf", 0, attr, 128))
    """, EPERM),
    "x32 system call (around the filter's numbers)": ("seccomp filter (x32 bit)", """
        number = 0x40000000 | NR["memfd_create"]
        value = libc.syscall(ctypes.c_long(number), b"x", ctypes.c_long(0))
        return went_through((value, ctypes.get_errno()))
    """, EPERM),
    # -- other processes ----------------------------------------------------------------------
    "ptrace: a child asks to be traced": (FILTER, """
        # PTRACE_TRACEME compares no uids (PTRACE_ATTACH does: as root, the real uid is nobody)
        pid = os.fork()
        if pid == 0:
            os._exit(0 if libc.ptrace(0, 0, None, None) == 0 else ctypes.get_errno())
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        return went_through((-1 if code else 0, code))
    """, EPERM),
    "process_vm_readv": (FILTER, """
        class Iovec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        here, there = ctypes.create_string_buffer(8), ctypes.create_string_buffer(8)
        mine, theirs = Iovec(ctypes.addressof(here), 8), Iovec(ctypes.addressof(there), 8)
        return went_through((libc.process_vm_readv(os.getpid(), ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0),
                             ctypes.get_errno()))
    """, EPERM),
    "pidfd_getfd": (FILTER, 'return went_through(sc("pidfd_getfd", os.pidfd_open(os.getpid()), 0, 0))', EPERM),
    # -- namespaces of its own (where it could mount a tmpfs of any size) ---------------------
    "unshare, then a tmpfs past 64 MiB": (FILTER, """
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
            print("errno", ctypes.get_errno())
            return False
        if libc.mount(b"tmpfs", b".", b"tmpfs", 0, None) != 0:
            print("errno", ctypes.get_errno())
            return False
        for i in range(72):
            with open("big%d" % i, "wb") as fh:
                fh.write(b"x" * (1 << 20))
        print("errno", 0)
        return True
    """, EPERM),
    "clone(CLONE_NEWUSER)": (FILTER, """
        return went_through(forked(sc("clone", 0x10000000 | 17, 0, 0, 0, 0)))  # CLONE_NEWUSER, SIGCHLD
    """, EPERM),
    "clone3 (flags the filter cannot read)": ("seccomp filter (ENOSYS)", """
        args = ctypes.create_string_buffer((0x10000000).to_bytes(8, "little") + bytes(24)
                                           + (17).to_bytes(8, "little") + bytes(48), 88)
        return went_through(forked(sc("clone3", args, 88)))
    """, ENOSYS),
    # -- what the resource limits bound -------------------------------------------------------
    "descriptors past 64": ("RLIMIT_NOFILE", """
        held = []
        try:
            for _ in range(1000):
                held.append(os.open("/dev/null", os.O_RDONLY))
        except OSError as exc:
            print("errno", exc.errno)
        return len(held) > MAX_DESCRIPTORS
    """, EMFILE),
    "pipes filled and left": ("RLIMIT_NOFILE", """
        held = 0
        try:
            for _ in range(200):
                r, w = os.pipe()
                os.set_blocking(w, False)
                try:
                    while True:
                        held += os.write(w, b"x" * 4096)
                except BlockingIOError:
                    pass
                os.close(w)  # the data stays while the read end is open
        except OSError as exc:
            print("errno", exc.errno)
        return held > MAX_DESCRIPTORS * PIPE_BYTES
    """, EMFILE),
    "queued signals": ("RLIMIT_SIGPENDING", """
        # sigqueue, not kill: past the limit kill() drops the signal silently, sigqueue says EAGAIN
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
        queued = 0
        for _ in range(2000):
            if libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), ctypes.c_long(0)) != 0:
                print("errno", ctypes.get_errno())
                break
            queued += 1
        return queued > MAX_PENDING_SIGNALS
    """, EAGAIN),
    "POSIX timers": ("RLIMIT_SIGPENDING", """
        timer = ctypes.c_long()
        made = 0
        for _ in range(2000):
            if libc.timer_create(1, None, ctypes.byref(timer)) != 0:
                print("errno", ctypes.get_errno())
                break
            made += 1
        return made > MAX_PENDING_SIGNALS
    """, EAGAIN),
    "threads past the process limit": ("RLIMIT_NPROC", """
        threading.stack_size(1 << 18)  # small stacks: the address space is not what stops them
        stop = threading.Event()
        started = 0
        try:
            for _ in range(200):
                threading.Thread(target=stop.wait, daemon=True).start()
                started += 1
        except RuntimeError:  # "can't start new thread": clone failed with EAGAIN
            print("errno", errno.EAGAIN)
        stop.set()
        return started >= MAX_PROCESSES
    """, EAGAIN),
    "raising a limit again": ("hard limits", """
        raised = []
        for which in (resource.RLIMIT_AS, resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC, resource.RLIMIT_FSIZE,
                      resource.RLIMIT_SIGPENDING, resource.RLIMIT_CPU):
            soft, hard = resource.getrlimit(which)
            try:
                resource.setrlimit(which, (hard + 1, hard + 1))
                raised.append(which)
            except (ValueError, OSError):
                pass
        print("errno", EPERM if not raised else 0)
        return bool(raised)
    """, EPERM),
    # -- its disk: the tmpfs ------------------------------------------------------------------
    "/dev/shm": ("read-only mounts", 'return attempt(lambda: open("/dev/shm/cda-attack", "wb").write(b"x"))', EROFS),
    "fallocate KEEP_SIZE past the tmpfs, 1 MiB a file": ("64 MiB tmpfs", """
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        for i in range(96):
            fd = os.open("f%d" % i, os.O_CREAT | os.O_RDWR)
            if libc.fallocate(fd, 1, 0, 1 << 20) != 0:
                print("errno", ctypes.get_errno())
                return False
            os.close(fd)
        return True
    """, ENOSPC),
    "user xattrs on its files": ("64 MiB tmpfs (inode space)", """
        for i in range(1000):
            with open("x%d" % i, "w"):
                pass
            try:
                os.setxattr("x%d" % i, "user.a", b"v" * 65536)
            except OSError as exc:
                print("errno", exc.errno)
                return False
        return True
    """, ENOSPC),
}


@pytest.mark.skipif(_COLUMN is None, reason=f"CDA has no system-call table for {MACHINE}: checks are refused there")
@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_on_the_hosts_resources_fails(name: str) -> None:
    mechanism, body, errno_ = ATTACKS[name]
    if name.startswith("x32") and MACHINE != "x86_64":
        pytest.skip("x32 is an ABI of x86_64 kernels only")
    source = attack_source(body).replace("MAX_DESCRIPTORS", str(MAX_DESCRIPTORS)).replace(
        "PIPE_BYTES", str(PIPE_BYTES)).replace("MAX_PENDING_SIGNALS", str(MAX_PENDING_SIGNALS)).replace(
        "MAX_PROCESSES", str(MAX_PROCESSES))
    out = run(source)
    assert out.data.get("isolation") == "namespaces", out
    assert (out.status, out.detail) == ("failed", "check returned False"), (mechanism, out)
    assert out.data.get("stdout_excerpt", "").split()[-2:] == ["errno", str(errno_)], (mechanism, out)


def test_a_shared_mapping_of_its_files_stops_at_the_tmpfs() -> None:
    """mmap(MAP_SHARED) of sparse files in its directory: each page touched is tmpfs memory, so
    past 64 MiB the kernel sends SIGBUS (not counted by RLIMIT_AS past the mapping's life)."""
    source = attack_source("""
        touched = 0
        for i in range(96):
            fd = os.open("m%d" % i, os.O_CREAT | os.O_RDWR)
            os.ftruncate(fd, 1 << 20)
            view = mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED)
            for page in range(0, 1 << 20, 4096):
                view[page] = 1
            view.close()
            os.close(fd)
            touched += 1
        return touched == 96
    """)
    out = run(source)
    assert (out.status, out.detail) == ("failed", "crashed with SIGBUS before returning"), out


# ---- descriptors: nothing of the host's disk -------------------------------------------------
def test_no_descriptor_of_a_check_refers_to_the_hosts_disk() -> None:
    """Its stdout and stderr were files on the host's disk, opened before the tmpfs was mounted:
    fallocate(KEEP_SIZE) held 300 MiB of blocks through each. Now every descriptor it starts with
    is a pipe or /dev/null, and fallocate through any of them fails."""
    before = shutil.disk_usage(tempfile.gettempdir()).free
    source = attack_source("""
        import stat
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        held = []
        for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
            try:
                mode = os.fstat(fd).st_mode
            except OSError:
                continue  # the listing's own descriptor
            kind = "pipe" if stat.S_ISFIFO(mode) else "dev" if stat.S_ISCHR(mode) else "file"
            took = libc.fallocate(fd, 1, 0, 300 << 20) == 0
            held.append("%d:%s:%s" % (fd, kind, "took" if took else "refused"))
        print(" ".join(held))
        return any(not h.endswith(":refused") or ":file:" in h for h in held)
    """)
    out = run(source)
    assert (out.status, out.detail) == ("failed", "check returned False"), out
    held = out.data["stdout_excerpt"].split()
    assert [h.split(":")[:2] for h in held][:3] == [["0", "dev"], ["1", "pipe"], ["2", "dev"]], held
    assert len(held) == 4 and held[3].endswith(":pipe:refused"), held  # the result channel
    assert shutil.disk_usage(tempfile.gettempdir()).free > before - (32 << 20)


def test_stdout_past_the_output_limit_is_cut_and_the_check_told() -> None:
    source = attack_source("""
        written = 0
        try:
            while written < (64 << 20):
                written += os.write(1, b"x" * 65536)
        except OSError as exc:
            print("errno", exc.errno, file=sys.stderr)
            raise
        return True
    """)
    out = run(source)
    assert (out.status, out.data["reason"]) == ("failed", "output"), out
    assert out.data["stdout_excerpt"] == "x" * 200


# ---- ptrace and friends against a sibling under process isolation -------------------------
def test_a_process_check_cannot_trace_or_read_a_sibling(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``process`` isolation there is no PID namespace: a sibling (another check, CDA's
    other children) runs as the same user. The filter refuses ptrace and process_vm_readv."""
    monkeypatch.setenv(REFUSE_ENV, "1")
    sibling = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        source = attack_source(f"""
            class Iovec(ctypes.Structure):
                _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
            here = ctypes.create_string_buffer(8)
            mine, theirs = Iovec(ctypes.addressof(here), 8), Iovec(4096, 8)
            read = libc.process_vm_readv({sibling.pid}, ctypes.byref(mine), 1, ctypes.byref(theirs), 1, 0)
            read_errno = ctypes.get_errno()
            traced = libc.ptrace(16, {sibling.pid}, None, None)  # PTRACE_ATTACH
            print("errno", read_errno, ctypes.get_errno())
            return traced == 0 or read_errno != EPERM
        """)
        out = run(source, isolation="process")
        assert out.data["isolation"] == "process"
        assert (out.status, out.detail, out.data["stdout_excerpt"]) == (
            "failed", "check returned False", "errno 1 1\n"), out
        assert sibling.poll() is None  # not stopped, not killed
        assert "State:\tS" in Path(f"/proc/{sibling.pid}/status").read_text()
    finally:
        sibling.kill()
        sibling.wait()


# ---- the temporary folder, when CDA is killed ------------------------------------------------
def test_a_process_checks_folder_is_swept_by_the_next_run_after_cda_is_killed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``process`` isolation the check works in a folder on the host's disk; a killed CDA
    cannot remove it, so the next run removes every folder whose CDA process is gone."""
    marker = "cda-orphan-" + uuid.uuid4().hex
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), REFUSE_ENV: "1"}
    source = ("import subprocess, sys, time\ndef check(claim):\n"
              "    open('mine.txt', 'w').write('x' * 1000)\n"
              f"    time.sleep(60)  # {marker}\n")
    victim = VICTIM.replace('timeout_s=float(sys.argv[2])', 'timeout_s=float(sys.argv[2]), isolation="process"')
    cda = subprocess.Popen([sys.executable, "-c", victim, str(tmp_path / "log"), "30"], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    assert cda.stdin is not None
    cda.stdin.write(source.encode())
    cda.stdin.close()
    root = scratch / process_scratch_root().name
    end = time.monotonic() + 20
    while not list(root.glob("run-*/mine.txt")) and time.monotonic() < end:
        time.sleep(0.05)
    left = [p.parent for p in root.glob("run-*/mine.txt")]
    assert len(left) == 1, "the check never started"
    cda.kill()
    cda.wait()
    for pid in survivors(marker):  # a process check outlives a killed CDA (docs/actions.md): end it here
        os.kill(pid, signal.SIGKILL)
    assert left[0].exists()  # what the killed CDA could not remove
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setenv(REFUSE_ENV, "1")
    monkeypatch.setattr(tempfile, "tempdir", None)
    out = run("def check(claim):\n    return True\n", isolation="process")
    assert (out.status, out.data["isolation"]) == ("passed", "process")
    assert list(root.iterdir()) == []  # the old folder swept, the new one removed


def test_a_foreign_folder_in_the_sweep_root_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only folders named as CDA names them (run-<pid>-<start time>-…) are swept."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv(REFUSE_ENV, "1")
    monkeypatch.setattr(tempfile, "tempdir", None)
    root = process_scratch_root()
    root.mkdir(mode=0o700)
    (root / "notes").mkdir()
    (root / "run-1-2").mkdir()  # not CDA's pattern: no suffix
    stale = root / "run-999999999-1-abc"  # CDA's pattern, no such process
    stale.mkdir()
    assert run("def check(claim):\n    return True\n", isolation="process").status == "passed"
    assert sorted(p.name for p in root.iterdir()) == ["notes", "run-1-2"]


def test_a_sweep_root_that_is_not_private_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv(REFUSE_ENV, "1")
    monkeypatch.setattr(tempfile, "tempdir", None)
    root = process_scratch_root()
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    out = run("def check(claim):\n    return True\n", isolation="process")
    assert (out.status, out.data["reason"]) == ("failed", "sandbox_error"), out
    assert "is not a private folder of this user" in out.detail


# ---- failing closed where seccomp is refused -------------------------------------------------
NO_SECCOMP = """
import ctypes, json, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
PRCTL, SECCOMP = %d, %d
# this CDA process runs under a filter that makes prctl(PR_SET_SECCOMP) and seccomp(2) fail
# with EINVAL, as on a kernel built without seccomp filters: every process it starts inherits it
code = [(0x20, 0, 0, 0), (0x15, 0, 3, PRCTL), (0x20, 0, 0, 16), (0x15, 3, 0, 22), (0x06, 0, 0, 0x7FFF0000),
        (0x15, 1, 0, SECCOMP), (0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x50016)]
raw = b"".join(struct.pack("=HBBI", *insn) for insn in code)
buffer = ctypes.create_string_buffer(raw, len(raw))


class Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


program = Program(len(code), ctypes.addressof(buffer))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.addressof(program), 0, 0) == 0
assert libc.prctl(22, 2, ctypes.addressof(program), 0, 0) != 0 and ctypes.get_errno() == 22
from cda.verifiers.function_eval import run_function_check
for isolation in ("namespaces", "process"):
    out = run_function_check("t", "def check(claim):\\n    return True\\n", "c", isolation=isolation)
    print(json.dumps(out.model_dump(mode="json")), flush=True)
"""


@pytest.mark.skipif(MACHINE != "x86_64", reason="the harness's filter uses x86_64's prctl and seccomp numbers")
def test_a_kernel_that_refuses_seccomp_filters_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not simulated: CDA runs where the kernel refuses to load a seccomp filter. The check is
    not run under either isolation, and the step is named."""
    done = subprocess.run([sys.executable, "-c", NO_SECCOMP % (157, 317)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    strict, weak = (json.loads(line) for line in done.stdout.splitlines())
    assert (strict["status"], strict["data"]["isolation"]) == ("skipped", "none"), strict
    assert "seccomp: load the filter: Invalid argument" in strict["detail"]
    assert (weak["status"], weak["data"]["isolation"]) == ("skipped", "none"), weak
    assert weak["detail"].endswith("(seccomp: load the filter: Invalid argument); a plain child process "
                                   "(isolation 'process') was refused as well"), weak
    monkeypatch.setattr(sandbox, "seccomp_program", lambda machine: None)  # a machine CDA has no table for
    out = run("def check(claim):\n    return True\n")
    assert (out.status, out.data["reason"]) == ("skipped", "isolation_refused")
    assert "seccomp: no system-call table for this machine" in out.detail
    monkeypatch.setattr(sys, "platform", "darwin")  # no Linux at all: refused before anything starts
    out = run("def check(claim):\n    return True\n", isolation="process")
    assert (out.status, out.data["reason"]) == ("skipped", "isolation_refused")
    assert "Linux namespaces and seccomp (this is darwin)" in out.detail


# ---- the filter's numbers, against an independent table --------------------------------------
def _libseccomp() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return None
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    return lib


@pytest.mark.skipif(_libseccomp() is None, reason="libseccomp (the independent system-call table) is not installed")
def test_the_filters_numbers_are_libseccomps() -> None:
    """Every number the filter refuses is the one libseccomp's own table gives, on both
    architectures CDA has a table for (a wrong number would refuse some other call and let this one through)."""
    lib = _libseccomp()
    assert lib is not None
    table = {**REFUSED_SYSCALLS, "clone": sandbox._CLONE, "clone3": sandbox._CLONE3, "fcntl": sandbox._FCNTL}
    for machine, (audit, column) in sandbox._ARCHES.items():
        for name, numbers in table.items():
            expected = lib.seccomp_syscall_resolve_name_arch(audit, name.encode())
            assert numbers[column] == (expected if expected >= 0 else None), (machine, name, expected)
        assert seccomp_program(machine)


def test_the_documented_bound_adds_up() -> None:
    """docs/actions.md states the bound for the default memory_mb; it is memory_bound's."""
    bound = sandbox.memory_bound(256 << 20)
    assert bound == 32 * ((256 << 20) + (32 << 20) + 64 * PIPE_BYTES) + SCRATCH_BYTES + 64 * 4096
    text = (Path(__file__).resolve().parents[1] / "docs" / "actions.md").read_text(encoding="utf-8")
    assert f"{bound >> 20} MiB" in text


# ---- the limits that bound a file, a crash, an orphan ----------------------------------------
@pytest.mark.parametrize("isolation", ["namespaces", "process"])
def test_a_file_past_one_mib_is_refused(isolation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """RLIMIT_FSIZE: under ``process`` isolation the check writes to the host's disk, 1 MiB a file."""
    monkeypatch.setenv(REFUSE_ENV, "1" if isolation == "process" else "0")
    out = run("def check(claim):\n    open('big', 'wb').write(b'x' * (2 << 20))\n    return True\n",
              isolation="process")
    assert (out.data["isolation"], out.status, out.data["reason"]) == (isolation, "failed", "output"), out


LIMITED_VICTIM = """
import json, resource, sys
for name, value in json.loads(sys.argv[1]).items():  # CDA's own limits, raised before it runs the check
    resource.setrlimit(getattr(resource, name), (value, value))
from cda.verifiers.function_eval import run_function_check
out = run_function_check("attack", sys.stdin.read(), "the claim", timeout_s=30.0)
print(json.dumps(out.model_dump(mode="json")))
"""


def run_in_victim_with(limits: dict[str, int], source: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", LIMITED_VICTIM, json.dumps(limits)], input=source,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


@pytest.mark.skipif(Path("/proc/sys/kernel/core_pattern").read_text().startswith("|"),
                    reason="core_pattern pipes to a helper on this host: no core file to look for")
def test_a_crash_leaves_no_core_dump() -> None:
    """RLIMIT_CORE 0 even where CDA itself may dump core: a crashing child writes no core file."""
    source = ("import os, signal\ndef check(claim):\n    pid = os.fork()\n    if pid == 0:\n"
              "        os.kill(os.getpid(), signal.SIGSEGV)\n    os.waitpid(pid, 0)\n"
              "    dumped = [n for n in os.listdir('.') if n.startswith('core')]\n    print(dumped)\n"
              "    return bool(dumped)\n")
    out = run_in_victim_with({"RLIMIT_CORE": resource.RLIM_INFINITY}, source)
    assert (out["status"], out["detail"], out["data"]["stdout_excerpt"]) == (  # type: ignore[index]
        "failed", "check returned False", "[]\n"), out


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_RTPRIO)[1] < 99 or resource.getrlimit(resource.RLIMIT_NICE)[1] < 40,
                    reason="this host's hard RLIMIT_RTPRIO/RLIMIT_NICE are below 99/40 (and raising a hard limit "
                           "needs CAP_SYS_RESOURCE): CDA here cannot stand for a host that grants real time")
def test_a_check_gets_neither_real_time_nor_a_higher_priority() -> None:
    """Where CDA's user may take real-time scheduling or lower its nice value (an audio group,
    root), a check spinning under SCHED_FIFO would starve the host: RLIMIT_RTPRIO and RLIMIT_NICE are 0."""
    source = attack_source("""
        class Param(ctypes.Structure):
            _fields_ = [("priority", ctypes.c_int)]
        fifo = libc.sched_setscheduler(0, 1, ctypes.byref(Param(10)))  # SCHED_FIFO
        fifo_errno = ctypes.get_errno()
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -10)
            nice_errno = 0
        except OSError as exc:
            nice_errno = exc.errno
        print("errno", fifo_errno if fifo else 0, nice_errno)
        return fifo == 0 or nice_errno == 0
    """)
    out = run_in_victim_with({"RLIMIT_RTPRIO": 99, "RLIMIT_NICE": 40}, source)
    assert (out["status"], out["detail"], out["data"]["stdout_excerpt"]) == (  # type: ignore[index]
        "failed", "check returned False", "errno 1 13\n"), out


@pytest.mark.slow
def test_an_orphaned_process_check_stops_at_its_cpu_limit(tmp_path: Path) -> None:
    """RLIMIT_CPU: a ``process`` check outlives a killed CDA (no namespace to end), but not past
    its CPU limit (timeout + 2 s of CPU). CDA is killed before its own 4 s deadline would stop it."""
    source = "def check(claim):\n    open('started', 'w').close()\n    while True:\n        pass\n"
    victim = VICTIM.replace('timeout_s=float(sys.argv[2])', 'timeout_s=float(sys.argv[2]), isolation="process"')
    cda = subprocess.Popen([sys.executable, "-c", victim, str(tmp_path / "log"), "4"], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, REFUSE_ENV: "1", "TMPDIR": str(tmp_path)})
    assert cda.stdin is not None
    cda.stdin.write(source.encode())
    cda.stdin.close()
    end = time.monotonic() + 20
    while not list(tmp_path.glob("cda-fn-*/run-*/started")) and time.monotonic() < end:
        time.sleep(0.01)
    # the boot's configuration names its CDA and its isolation
    spinning = [pid for pid in survivors(f'"parent": {cda.pid},') if pid in survivors('"isolation": "process"')]
    cda.kill()
    assert spinning, "the check never started"
    assert cda.wait() == -signal.SIGKILL  # killed, not ended by its own deadline
    try:
        end = time.monotonic() + 180  # 6 s of CPU, on a machine shared by eight
        while any(_alive(pid) for pid in spinning) and time.monotonic() < end:
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in spinning)
    finally:
        for pid in spinning:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent to reap it does not)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False



# ---- a sibling check, running at the same time ------------------------------------------------
def test_a_check_cannot_see_signal_or_trace_a_sibling_check() -> None:
    """Two checks at once, each in its own PID namespace: the second finds nothing of the first
    in its /proc (to signal, trace or read), and the first runs on to its end."""
    import threading

    marker = "cda-sibling-" + uuid.uuid4().hex
    # a path both checks can read: Python's installation stays visible in the sandbox wherever it is
    # (the repository does not when it lies under /tmp, as a CI clone made with mktemp does)
    release = Path(sys.prefix) / f".{marker}"
    first_source = (
        "import os, subprocess, sys, time\ndef check(claim):\n"
        f"    child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}])\n"
        f"    while not os.path.exists({str(release)!r}):\n        time.sleep(0.05)\n"
        "    return child.poll() is None\n")
    outcomes: list[VerifierOutcome] = []
    first = threading.Thread(target=lambda: outcomes.append(run_function_check("first", first_source, "c",
                                                                                timeout_s=60.0)))
    first.start()
    try:
        end = time.monotonic() + 30
        while not survivors(marker) and time.monotonic() < end:
            time.sleep(0.05)
        assert survivors(marker), "the first check never started"
        second = attack_source(f"""
            found = []
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        if {marker!r}.encode() in open("/proc/%s/cmdline" % entry, "rb").read():
                            found.append(int(entry))
                    except OSError:
                        pass
            hit = 0
            for pid in found:
                for act in (lambda: os.kill(pid, 9), lambda: libc.ptrace(16, pid, None, None)):
                    try:
                        act()
                        hit += 1
                    except OSError:
                        pass
            print(len(found), hit)
            return bool(found or hit)
        """)
        out = run(second)
        assert (out.status, out.detail, out.data["stdout_excerpt"]) == ("failed", "check returned False", "0 0\n"), out
        assert survivors(marker)
    finally:
        release.touch()
        first.join(60)
        release.unlink()
    assert (outcomes[0].status, outcomes[0].data["isolation"]) == ("passed", "namespaces"), outcomes
