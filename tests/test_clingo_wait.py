"""Waiting on clingo's solve handle (docs/architecture.md, "Waiting on clingo").

clasp's timed ``SolveHandle.wait(t)`` returns ``False`` whenever its condition variable wakes
without a result, which may be long before ``t`` seconds. The backend once read that ``False`` as
"out of time": one spurious wake-up turned a search with a 600 s budget into a labelled partial
(status ``unknown``) after a few milliseconds. Two tests: the wait loop against a handle that wakes
early, and the real library with one spurious wake-up injected below it (a preloaded
``pthread_cond_clockwait``/``pthread_cond_timedwait`` that returns at once the first time, which
POSIX allows any condition variable to do).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cda.contracts.deadline import Deadline
from cda.solver.clingo_backend import _wait

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pump_diagnosis.cda"


class EarlyHandle:
    """A solve handle whose first ``early`` timed waits return ``False`` at once, as clasp's do on a
    wake-up without a result; it records the timeouts it was given."""

    def __init__(self, early: int, ready_after: int | None) -> None:
        self.early = early
        self.ready_after = ready_after
        self.timeouts: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.timeouts.append(timeout)
        if self.ready_after is not None and len(self.timeouts) > self.ready_after:
            return True
        if len(self.timeouts) <= self.early or timeout <= 0.0:
            return False
        time.sleep(min(timeout, 0.01))  # a real wait for the rest: the time goes by
        return False


def test_an_early_false_is_not_a_timeout() -> None:
    handle = EarlyHandle(early=3, ready_after=3)
    assert _wait(handle, Deadline(600.0)) is True  # type: ignore[arg-type]
    assert len(handle.timeouts) == 4
    assert all(t > 0.0 for t in handle.timeouts)  # each wait asked for the time that was left


def test_the_deadline_alone_ends_the_wait() -> None:
    handle = EarlyHandle(early=5, ready_after=None)
    deadline = Deadline(0.05)
    assert _wait(handle, deadline) is False  # type: ignore[arg-type]
    assert deadline.expired()  # it gave up only when the time was up
    assert handle.timeouts[-1] == 0.0  # and looked once more for a result that came with it


def test_no_deadline_waits_for_the_result() -> None:
    handle = EarlyHandle(early=0, ready_after=0)
    assert _wait(handle, Deadline(None)) is True  # type: ignore[arg-type]
    assert handle.timeouts == [-1.0]


SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
/* One spurious wake-up per thread, and only of a wait meant to last more than a minute (clasp's
   handle.wait(600)): Python's own short timed waits (the GIL's, 5 ms) must not take it first. */
static __thread int woken = 0;
static double secs(const struct timespec *t) { return (double)t->tv_sec + t->tv_nsec / 1e9; }
static int far(clockid_t k, const struct timespec *t) {
    struct timespec now;
    clock_gettime(k, &now);
    double ahead = secs(t) - secs(&now);
    return ahead > 60.0 && ahead < 1e7;
}
static int spurious(int known, clockid_t k, const struct timespec *t) {
    if (woken) return 0;
    if (known ? far(k, t) : (far(CLOCK_REALTIME, t) || far(CLOCK_MONOTONIC, t))) { woken = 1; return 1; }
    return 0;
}
int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k, const struct timespec *t) {
    static int (*real)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *) = 0;
    if (spurious(1, k, t)) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "pthread_cond_clockwait");
    return real(c, m, k, t);
}
int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) {
    static int (*real)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *) = 0;
    if (spurious(0, 0, t)) return 0;
    if (!real) real = dlsym(RTLD_NEXT, "pthread_cond_timedwait");
    return real(c, m, t);
}
"""

RAW_WAIT = textwrap.dedent("""
    import clingo
    ctl = clingo.Control(["0"])
    ctl.add("base", [], "{a(1..40)}.  % 2^40 models: never done before the first wait returns")
    ctl.ground([("base", [])])
    with ctl.solve(async_=True, on_model=lambda m: True) as handle:
        print(handle.wait(600.0))
        handle.cancel()
""")


@pytest.fixture(scope="module")
def spurious_wakeup(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the preloaded wake-up (the EarlyHandle tests still ran)")
    folder = tmp_path_factory.mktemp("shim")
    (folder / "spurious.c").write_text(SHIM)
    lib = folder / "spurious.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(lib), str(folder / "spurious.c"), "-ldl"],
                   check=True, capture_output=True)
    return lib


def _run(args: list[str], env_extra: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CDA_KEY_DIR": str(tmp_path / "keys"), **env_extra}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)


def test_one_spurious_wakeup_leaves_the_answer_whole(spurious_wakeup: Path, tmp_path: Path) -> None:
    preload = {"LD_PRELOAD": str(spurious_wakeup)}
    # the injection works: raw clingo's timed wait answers False long before its 600 s
    raw = _run(["-c", RAW_WAIT], preload, tmp_path)
    assert raw.returncode == 0, raw.stderr
    assert raw.stdout.strip() == "False"

    solve = ["-m", "cda", "solve", "--backend", "clingo", "--timeout", "600", "--json", str(EXAMPLE)]
    plain = _run(solve, {}, tmp_path)
    woken = _run(solve, preload, tmp_path)
    expected, got = json.loads(plain.stdout), json.loads(woken.stdout)
    assert woken.returncode == plain.returncode, woken.stderr
    assert expected["partial"] is False and expected["status"] == "sat"
    assert got == expected  # same answer, not a partial with 599 s of the budget left
