"""Attacks on the function-check sandbox (issue 13): each is a real check that tries to escape.

Every attack must fail: the check is not reported passed, the loopback listener the test starts
receives nothing, files the test owns stay as they were, the parent survives and no process the
check started outlives it. The tests here are the escapes (network, filesystem, processes, the
parent); the attacks on the host's resources (memory, disk, descriptors, other processes) are in
``tests/test_sandbox_resources.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cda.contracts.verification import VerifierOutcome
from cda.verifiers.function_eval import run_function_check
from cda.verifiers.sandbox import MAX_PROCESSES, REFUSE_ENV
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kernel sandbox is Linux namespaces")


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback TCP listener; the test asserts nobody connected."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


def nobody_connected(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return True
    conn.close()
    return False


def check(body: str, **subs: object) -> str:
    """A check's source: ``body`` is the body of ``check(claim)``; it returns True if the attack worked."""
    text = textwrap.dedent(body)
    for key, value in subs.items():
        text = text.replace(key, str(value))
    return "import os, sys, socket, subprocess, time, ctypes\ndef check(claim):\n" + textwrap.indent(text, "    ")


def run(source: str, timeout_s: float = 5.0, **kwargs: object) -> VerifierOutcome:
    return run_function_check("attack", source, "the claim", timeout_s=timeout_s, **kwargs)  # type: ignore[arg-type]


def survivors(marker: str) -> list[int]:
    """Host processes whose command line holds ``marker`` (the host's /proc sees every namespace)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


CONNECT = """
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(2)
s.connect(("127.0.0.1", PORT))
s.sendall(b"escaped")
return True
"""

NETWORK_ATTACKS = {
    "plain socket": CONNECT,
    "socket.__mro__": """
        raw = socket.socket.__mro__[-2](2, 1)
        raw.connect(("127.0.0.1", PORT))
        return True
    """,
    "re-imported _socket": """
        for name in [m for m in sys.modules if m in ("_socket", "socket")]:
            del sys.modules[name]
        import importlib
        fresh = importlib.import_module("_socket")
        s = fresh.socket(2, 1)
        s.connect(("127.0.0.1", PORT))
        return True
    """,
    "ctypes connect": """
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(2, 1, 0)
        if fd < 0:
            return False
        addr = (ctypes.c_ubyte * 16)(2, 0, PORT >> 8, PORT & 255, 127, 0, 0, 1)
        return libc.connect(fd, addr, 16) == 0
    """,
    "python -c subprocess": """
        code = "import socket; s = socket.create_connection(('127.0.0.1', PORT), 2); s.sendall(b'x')"
        return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
    """,
    "loopback brought up": """
        subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True)
        s = socket.socket()
        s.connect(("127.0.0.1", PORT))
        return True
    """,
}


@pytest.mark.parametrize("attack", sorted(NETWORK_ATTACKS))
def test_network_escapes_fail(attack: str, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    out = run(check(NETWORK_ATTACKS[attack], PORT=port))
    assert out.status == "failed" and out.data["isolation"] == "namespaces", out
    assert nobody_connected(listener)


@pytest.mark.parametrize("where", ["/tmp (hidden)", "elsewhere (covered)"])
def test_a_unix_socket_on_the_filesystem_cannot_be_reached(where: str, tmp_path: Path) -> None:
    """A network namespace does not cover a socket reached by its path (a docker.sock, a server's
    socket): as root, the check's effective uid owns them and a read-only mount does not stop connect."""
    base = tmp_path if where.startswith("/tmp") else Path(tempfile.mkdtemp(prefix=".sock-", dir=ROOT))
    path = base / "service.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.setblocking(False)
    try:
        out = run(check("""
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect("PATH")
            s.sendall(b"escaped")
            return True
        """, PATH=path))
        assert out.status == "failed" and out.data["isolation"] == "namespaces", out
        assert nobody_connected(server)
    finally:
        server.close()
        if base != tmp_path:
            shutil.rmtree(base)


def test_a_fifo_of_another_program_cannot_be_written(tmp_path: Path) -> None:
    """A FIFO (say /run/initctl) is writable by its owner on a read-only mount: /tmp and /run are hidden."""
    fifo = tmp_path / "control.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        out = run(check("""
            fd = os.open("FIFO", os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"shutdown")
            return True
        """, FIFO=fifo))
        assert out.status == "failed", out
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)


def test_writes_outside_the_temporary_directory_fail(tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("original", encoding="utf-8")
    source = check("""
        wrote = 0
        for i in range(50):
            try:
                with open("DIR/escape-%d.txt" % i, "w") as fh:
                    fh.write("x")
                wrote += 1
            except OSError:
                pass
        for path in ("DIR/victim.txt", "/tmp/cda-escape-UUID"):
            try:
                with open(path, "w") as fh:
                    fh.write("changed")
                wrote += 1
            except OSError:
                pass
        try:
            os.rename("DIR/victim.txt", "DIR/moved.txt")
            wrote += 1
        except OSError:
            pass
        with open("mine.txt", "w") as fh:  # its own directory stays writable
            fh.write("ok")
        print("wrote", wrote)
        return wrote > 0
    """, DIR=tmp_path, UUID=uuid.uuid4().hex)
    out = run(source)
    assert (out.status, out.data.get("stdout_excerpt")) == ("failed", "wrote 0\n"), out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["victim.txt"]
    assert target.read_text(encoding="utf-8") == "original"
    assert not list(Path("/tmp").glob("cda-escape-*"))


def test_the_checks_own_directory_is_bounded(tmp_path: Path) -> None:
    """Its directory is a 64 MiB tmpfs: writing 200 MiB in 1 MiB files fills it, not the host's disk."""
    before = shutil.disk_usage(tempfile.gettempdir()).free
    source = check("""
        written = 0
        try:
            for i in range(200):
                with open("f%d" % i, "wb") as fh:
                    fh.write(b"x" * (1 << 20))
                written += 1
        except OSError as exc:
            print(written, exc.errno)
        return written == 200
    """)
    out = run(source, timeout_s=20.0)
    assert out.status == "failed", out
    written, errno_ = out.data["stdout_excerpt"].split()
    assert int(written) <= 64 and errno_ in ("28", "27")  # ENOSPC (or EFBIG)
    assert shutil.disk_usage(tempfile.gettempdir()).free > before - (32 << 20)


def test_a_nested_namespace_cannot_remount_the_filesystem_writable(tmp_path: Path) -> None:
    source = check("""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        steps = [libc.unshare(0x10000000 | 0x00020000)]  # a user and mount namespace of its own
        steps.append(libc.mount(None, b"/", None, 32 | 4096, None))  # MS_REMOUNT | MS_BIND, without MS_RDONLY
        steps.append(libc.mount(None, b"DIR", None, 32 | 4096, None))
        try:
            with open("DIR/remounted.txt", "w") as fh:
                fh.write("x")
            return True
        except OSError as exc:
            print(steps, exc.errno)
            return False
    """, DIR=tmp_path)
    out = run(source)
    assert out.status == "failed", out
    assert list(tmp_path.iterdir()) == []


def test_device_nodes_other_than_null_zero_random_cannot_be_opened() -> None:
    """As root the check's effective uid owns every device node: a raw disk would bypass the
    read-only mounts (a read-only mount does not cover writes to a device). Only the harmless four open."""
    disks = sorted("/dev/" + name for name in os.listdir("/sys/block") if os.path.exists("/dev/" + name))
    source = check("""
        opened = []
        for path in DISKS + ["/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/loop-control"]:
            for mode in ("rb", "r+b"):
                try:
                    with open(path, mode) as fh:
                        fh.read(1)
                    opened.append(path)
                except OSError:
                    pass
        print(opened)
        return bool(opened)
    """, DISKS=repr(disks))
    out = run(source)
    assert (out.status, out.data.get("stdout_excerpt")) == ("failed", "[]\n"), out


SYSCTL_WRITE = """
def write_back():  # writes a global sysctl's current value back: harmless, but must be refused
    wrote = []
    for path in ("/proc/sys/vm/swappiness", "/proc/sys/kernel/printk_ratelimit"):
        try:
            value = open(path).read()
            with open(path, "w") as fh:
                fh.write(value)
            wrote.append(path)
        except OSError:
            pass
    return wrote
"""


@pytest.mark.parametrize("nested", [False, True])
def test_global_sysctls_cannot_be_written(nested: bool) -> None:
    """As root the check's effective uid passes the sysctls' permission test: /proc is read-only,
    and a fresh /proc in a nested namespace must be read-only too (the kernel locks the flag)."""
    source = SYSCTL_WRITE + check("""
        if not NESTED:
            wrote = write_back()
        else:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
            if libc.unshare(0x10000000 | 0x00020000 | 0x20000000) != 0:  # user, mount, PID
                return False
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                mounted = libc.mount(b"proc", b"/proc", b"proc", 0, None) == 0
                os.write(w, b"mounted " if mounted else b"refused ")
                os.write(w, " ".join(write_back()).encode())
                os._exit(0)
            os.close(w)
            os.waitpid(pid, 0)
            text = os.read(r, 1000).decode()
            print(text)
            wrote = text.split()[1:]
        print(wrote)
        return bool(wrote)
    """, NESTED=nested)
    out = run(source)
    assert out.status == "failed" and out.data["isolation"] == "namespaces", out


# ---- the parent: environment, descriptors, signals ------------------------------------------
VICTIM = """
import json, os, sys
from cda.verifiers.function_eval import run_function_check
log = open(sys.argv[1], "a")  # a descriptor the check must not reach through /proc/<ppid>/fd
source = sys.stdin.read().replace("PARENT", str(os.getpid()))
out = run_function_check("attack", source, "the claim", timeout_s=float(sys.argv[2]))
print(json.dumps(out.model_dump(mode="json")))
"""


def run_in_victim(tmp_path: Path, source: str, timeout_s: float = 5.0) -> tuple[VerifierOutcome, str]:
    """Run ``source`` from a separate CDA process with a secret in its environment and a file open."""
    secret = "s3cret-" + uuid.uuid4().hex
    log = tmp_path / "receipts.log"
    log.write_text("intact\n", encoding="utf-8")
    env = {**os.environ, "CDA_REFLECTION_SECRET": secret}
    done = subprocess.run([sys.executable, "-c", VICTIM, str(log), str(timeout_s)], input=source,
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr  # the parent survived and printed its outcome
    assert log.read_text(encoding="utf-8") == "intact\n"
    assert secret not in done.stdout and secret not in done.stderr
    return VerifierOutcome.model_validate(json.loads(done.stdout)), secret


def test_the_parents_environment_and_descriptors_are_out_of_reach(tmp_path: Path) -> None:
    source = check("""
        seen = []
        for pid in ("PARENT", str(os.getppid()), "self", "1"):
            for what in ("environ", "cmdline"):
                try:
                    with open("/proc/%s/%s" % (pid, what), "rb") as fh:
                        seen.append(fh.read().decode("latin-1"))
                except OSError:
                    pass
            try:
                for fd in os.listdir("/proc/%s/fd" % pid):
                    target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
                    seen.append(target)
                    if "receipts.log" in target:
                        with open("/proc/%s/fd/%s" % (pid, fd), "w") as fh:
                            fh.write("tampered")
            except OSError:
                pass
        text = " ".join(seen)
        print(text[-190:])
        return "s3cret" in text or "receipts.log" in text
    """)
    out, secret = run_in_victim(tmp_path, source)
    assert out.status == "failed" and out.data["isolation"] == "namespaces", out
    assert secret not in json.dumps(out.model_dump(mode="json"))


KEYRING_VICTIM = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
long = ctypes.c_long
assert libc.syscall(long(250), long(1), None) >= 0  # this CDA process: a session keyring of its own
secret = sys.argv[1].encode()
assert libc.syscall(long(248), b"user", b"cda-secret", secret, long(len(secret)), long(-3)) > 0  # add_key to @s
from cda.verifiers.function_eval import run_function_check
out = run_function_check("attack", sys.stdin.read(), "the claim")
print(json.dumps(out.model_dump(mode="json")))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the harness calls keyctl by its x86_64 number")
def test_cdas_session_keyring_is_out_of_reach() -> None:
    secret = "k3y-" + uuid.uuid4().hex
    source = check("""
        libc = ctypes.CDLL(None, use_errno=True)
        long = ctypes.c_long
        found = []
        for ring in (-3, -4, -5, -1, -2):  # session, user, user-session, thread, process
            key = libc.syscall(long(250), long(10), long(ring), b"user", b"cda-secret", long(0))  # KEYCTL_SEARCH
            if key > 0:
                buf = ctypes.create_string_buffer(200)
                n = libc.syscall(long(250), long(11), long(key), buf, long(200))  # KEYCTL_READ
                found.append(buf.raw[:max(n, 0)].decode())
        print(found)
        return bool(found)
    """)
    done = subprocess.run([sys.executable, "-c", KEYRING_VICTIM, secret], input=source, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["status"], out["data"]["stdout_excerpt"]) == ("failed", "[]\n"), out
    assert secret not in done.stdout


def test_killing_the_parent_fails_and_the_parent_survives(tmp_path: Path) -> None:
    source = check("""
        import signal
        hits = 0
        for pid in (PARENT, os.getppid(), 1):  # never -1: were the sandbox broken, that kills the machine
            try:
                os.kill(pid, signal.SIGKILL)
                hits += 1
            except OSError:
                pass
        time.sleep(0.2)
        print("signals delivered", hits)
        return True
    """)
    out, _ = run_in_victim(tmp_path, source)
    assert out.data["isolation"] == "namespaces"  # the victim printed it: it was not killed


# ---- processes: fork bomb, setsid children, memory ------------------------------------------
def test_a_fork_bomb_is_bounded() -> None:
    marker = "cda-bomb-" + uuid.uuid4().hex
    source = check("""
        started = 0
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(30)", "MARKER"])
            started += 1
        print("started", started)
        return started >= 200
    """, MARKER=marker)
    out = run(source)
    assert out.status == "failed", out
    started = int(out.data["stdout_excerpt"].split()[1])
    assert 0 < started < MAX_PROCESSES
    assert survivors(marker) == []


@pytest.mark.parametrize("ends", ["by timing out", "by returning"])
def test_setsid_children_do_not_outlive_the_check(ends: str, tmp_path: Path, listener: socket.socket) -> None:
    marker = "cda-daemon-" + uuid.uuid4().hex
    port = listener.getsockname()[1]
    late = (f"import os, socket, time\ntime.sleep(1.0)\nopen({str(tmp_path / 'alive')!r}, 'w').write('alive')\n"
            f"socket.create_connection(('127.0.0.1', {port}), 1)\n")
    source = check("""
        subprocess.Popen([sys.executable, "-c", LATE, "MARKER"], start_new_session=True)
        if os.fork() == 0:  # a classic daemon: fork, setsid, fork again
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", LATE, "MARKER"])
            os._exit(0)
        time.sleep(0.3)
        if ENDS:
            while True:
                pass
        return True
    """, LATE=repr(late), MARKER=marker, ENDS=ends == "by timing out")
    out = run(source, timeout_s=1.0)
    assert out.data["isolation"] == "namespaces"
    assert out.data["reason"] == ("timeout" if ends == "by timing out" else "returned"), out
    assert survivors(marker) == []
    time.sleep(1.2)  # past the moment a survivor would write and connect
    assert survivors(marker) == [] and list(tmp_path.iterdir()) == []
    assert nobody_connected(listener)


def test_a_10_gb_mapping_is_refused() -> None:
    source = check("""
        import mmap
        m = mmap.mmap(-1, 10 << 30)
        m[-1] = 1
        return True
    """)
    out = run(source)
    assert out.status == "failed" and out.data["isolation"] == "namespaces", out
    assert out.detail in ("exceeded memory limit (256 MB)", "raised OSError: [Errno 12] Cannot allocate memory")


def test_a_flood_on_the_result_channel_stays_bounded() -> None:
    source = check("""
        for fd in os.listdir("/proc/self/fd"):
            try:
                os.write(int(fd), b'{"kind": "raised", "type": "' + b"T" * 100000 + b'", "message": 7}')
            except OSError:
                pass
        return True
    """)
    out = run(source)
    assert out.status == "failed" and len(out.detail) < 450, out.detail[:100]


# ---- a legitimate check, and failing closed -------------------------------------------------
def test_a_legitimate_check_passes_and_names_its_isolation() -> None:
    source = check("""
        import json, re
        with open("scratch.txt", "w") as fh:
            fh.write(claim)
        subprocess.run([sys.executable, "-c", "import os; os.urandom(8)"], stdout=subprocess.DEVNULL, check=True)
        return re.fullmatch("the claim", open("scratch.txt").read()) is not None
    """)
    out = run(source)
    assert (out.status, out.data["isolation"]) == ("passed", "namespaces")


def test_where_the_kernel_refuses_namespaces_the_check_is_not_run(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REFUSE_ENV, "1")
    source = check("""
        open("DIR/ran.txt", "w").write("x")
        return True
    """, DIR=tmp_path)
    out = run(source)
    assert (out.status, out.data["reason"], out.data["isolation"]) == ("skipped", "isolation_refused", "none")
    assert "unshare: Operation not permitted" in out.detail and out.confidence_cap == 0.5
    assert not (tmp_path / "ran.txt").exists()  # not run at all
    # named by the caller, the weaker mode runs it, and says so (it could write there: it is weaker)
    weaker = run(source, isolation="process")
    assert (weaker.status, weaker.data["isolation"]) == ("passed", "process")
    assert (tmp_path / "ran.txt").exists()
    monkeypatch.setenv(REFUSE_ENV, "0")
    (tmp_path / "ran.txt").unlink()
    assert run(source, isolation="process").data["isolation"] == "namespaces"  # never weaker than needed


REAL_REFUSAL = """
import ctypes, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
go_r, go_w = os.pipe()
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:  # CDA, in a user namespace whose kernel limit forbids any nested one
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(3)
    os.write(ready_w, b"u")
    os.read(go_r, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as fh:
        fh.write("0")
    from cda.verifiers.function_eval import run_function_check
    source = "def check(claim):\\n    return True\\n"
    for isolation in ("namespaces", "process"):
        out = run_function_check("t", source, "c", isolation=isolation)
        print(json.dumps(out.model_dump(mode="json")), flush=True)
    os._exit(0)
os.read(ready_r, 1)
for name, text in (("uid_map", "0 0 1\\n65534 65534 1\\n"), ("setgroups", "deny"), ("gid_map", "0 0 1\\n")):
    with open("/proc/%d/%s" % (pid, name), "w") as fh:
        fh.write(text)
os.write(go_w, b"m")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mapping two uids into the harness's namespace needs root")
def test_a_real_kernel_refusal_fails_closed() -> None:
    """Not simulated: CDA runs where the kernel refuses user namespaces (max_user_namespaces 0)."""
    done = subprocess.run([sys.executable, "-c", REAL_REFUSAL], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    strict, weak = (json.loads(line) for line in done.stdout.splitlines())
    assert (strict["status"], strict["data"]["isolation"]) == ("skipped", "none")
    assert "unshare: No space left on device" in strict["detail"]
    assert (weak["status"], weak["data"]["isolation"]) == ("passed", "process")


def test_limits_out_of_range_are_refused_by_the_check_itself() -> None:
    src = "def check(claim):\n    return True\n"
    for kwargs in ({"timeout_s": 601.0}, {"memory_mb": 4097}, {"isolation": "none"}):
        out = run(src, **kwargs)
        assert (out.status, out.data["reason"], out.data["isolation"]) == ("failed", "invalid_limits", "none")


# ---- through the Action runner: the budget, failing closed, the parent's signal ---------------
def _action(tmp_path: Path, source: str, **function: object) -> tuple[object, dict[str, object]]:
    from cda.actions.runner import run_action
    from cda.contracts.action import CDAInputs

    inputs = {"problem": "p", "dsl": "pred a\nhard: a\n", "goals": {"kind": "prove", "claims": ["a"]},
              "budgets": function.pop("budgets", {"wall": None}),
              "functions": [{"name": "probe", "source": source, "claims": ["a"], **function}]}
    run = run_action(CDAInputs.model_validate(inputs), out_dir=tmp_path)
    verifiers = json.loads((run.artifact_dir / "cda_plan" / "verifiers.json").read_text(encoding="utf-8"))
    return run, next(v for v in verifiers if v["verifier"] == "function")


def test_a_check_is_stopped_when_the_actions_budget_reaches_its_reserve(tmp_path: Path) -> None:
    from tests.timing import Stopwatch

    with Stopwatch() as watch:
        run, outcome = _action(tmp_path, "def check(claim):\n    while True:\n        pass\n",
                               timeout_s=60, budgets={"wall": 2})
    # not 60 s: the check had until the reserve (1.6 s) at most (time uncontended for a CPU, tests/timing.py)
    assert watch.uncontended < 2.5, watch
    assert (outcome["status"], outcome["data"]["reason"]) == ("failed", "budget")
    assert run.events[-1].type == "action_partial"  # type: ignore[attr-defined]


def test_the_runner_fails_closed_and_names_a_weaker_isolation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REFUSE_ENV, "1")
    source = "def check(claim):\n    return True\n"
    run, outcome = _action(tmp_path / "strict", source)
    assert (outcome["status"], outcome["data"]["isolation"]) == ("skipped", "none")
    verdict = run.outputs.verdicts[0]  # type: ignore[attr-defined]
    assert verdict.confidence <= 0.5 and any("not run: the kernel refused" in c for c in verdict.caveats)
    run, outcome = _action(tmp_path / "weak", source, isolation="process")
    assert (outcome["status"], outcome["data"]["isolation"]) == ("passed", "process")
    assert any("with process isolation only" in c for c in run.outputs.caveats)  # type: ignore[attr-defined]


def test_a_check_that_kills_the_parent_leaves_the_run_ending_with_its_terminal_event(tmp_path: Path) -> None:
    source = check("""
        import signal
        for pid in (PARENT, os.getppid(), 1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return True
    """, PARENT=os.getpid())
    run, outcome = _action(tmp_path, source)
    assert outcome["data"]["isolation"] == "namespaces"
    assert run.events[-1].type == "action_completed"  # type: ignore[attr-defined]


def test_a_check_dies_with_cda(tmp_path: Path) -> None:
    """CDA killed while a check sleeps: the boot notices its parent is gone and ends the namespace."""
    marker = "cda-orphan-" + uuid.uuid4().hex
    source = check("""
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "MARKER"], start_new_session=True)
        time.sleep(60)
    """, MARKER=marker)
    scratch = tmp_path / "tmp"  # CDA's temporary folder, which a killed CDA could not clean
    scratch.mkdir()
    cda = subprocess.Popen([sys.executable, "-c", VICTIM, str(tmp_path / "log"), "30"], stdin=subprocess.PIPE,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "TMPDIR": str(scratch)})
    assert cda.stdin is not None
    cda.stdin.write(source.encode())
    cda.stdin.close()
    end = time.monotonic() + 10
    while not survivors(marker) and time.monotonic() < end:
        time.sleep(0.05)
    assert survivors(marker), "the check never started"
    cda.kill()
    cda.wait()
    end = time.monotonic() + 3
    while survivors(marker) and time.monotonic() < end:
        time.sleep(0.05)
    assert survivors(marker) == []
    # nothing of the check was on the host's disk (its directory was a tmpfs of the namespace's
    # own /tmp): a killed CDA leaves no folder behind (before, one stayed, with the check's output)
    assert list(scratch.iterdir()) == []


def test_the_signing_key_is_hidden_from_a_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that read CDA's signing key could sign a forged log's head: its folder is covered,
    wherever it is (here under the home folder, outside the /tmp the sandbox hides anyway)."""
    from cda.keys.signing import load_signer

    folder = Path.home() / f".cda-sandbox-key-{uuid.uuid4().hex}"
    monkeypatch.setenv("CDA_KEY_DIR", str(folder))
    try:
        signer = load_signer()
        key_file = next(folder.iterdir())
        secret = key_file.read_text().strip()
        source = f"def check(claim):\n    raise ValueError(open({str(key_file)!r}).read())\n"
        outcome = run(source)
        assert secret[:16] not in json.dumps(outcome.model_dump())
        assert outcome.status != "passed" and outcome.data.get("isolation") == "namespaces"
        assert signer is not None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_runs_own_store_reads_as_empty_in_a_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The receipt store of the run (other actions' data, the approval secret in reflection_meta)
    is covered for the check (it reads as empty, or not at all), wherever it is; a file beside it
    is not, so the test tells covered from unreadable. The folder is inside Python's installation: a place the sandbox keeps
    readable (read-only) wherever the tests run, /tmp included."""
    import sys

    from cda.actions.runner import _store_files

    folder = Path(sys.prefix) / f"cda-sandbox-store-{uuid.uuid4().hex}"
    folder.mkdir(mode=0o755)
    try:
        store, beside = folder / "receipts.sqlite", folder / "notes.txt"
        store.write_text("SECRET-APPROVAL-KEY-0123456789")
        beside.write_text("PLAIN-NOTE")

        class Log:
            path = store

        cover = _store_files(Log())
        assert store in cover
        source = ("def check(claim):\n"
                  f"    note = open({str(beside)!r}).read()\n"
                  "    try:\n"
                  f"        data = open({str(store)!r}).read()\n"
                  "    except OSError as exc:\n"
                  "        data = type(exc).__name__\n"
                  "    raise ValueError(note + ' | ' + repr(data))\n")
        outcome = run_function_check("peek", source, "x", cover=cover)
        text = json.dumps(outcome.model_dump())
        assert "SECRET-APPROVAL" not in text and "PLAIN-NOTE" in text, text
        assert outcome.data.get("isolation") == "namespaces"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
