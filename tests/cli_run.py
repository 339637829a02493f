"""The ``cda`` command run in the test's own process: the function a child's ``python -m cda``
calls (``cda.cli.main.main``), with the child's working folder, environment, standard input and
both streams, its answer shaped as :func:`subprocess.run`'s so a test reads it the same way.

Why: a ``cda`` child pays about half a second of imports before it reads its first argument,
and the message and validation cases of a door only need the door's text and exit code
(docs/testing.md, "CDA's own suite"). Each door keeps at least one real child process per exit
code in its test file; the rest read the same words from the same function here.

xdist-safe: a worker runs one test at a time, and everything this changes (the working folder,
environment variables, ``sys.stdout``/``sys.stderr``) is put back before it returns.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def _environment(changes: Mapping[str, str] | None) -> Iterator[None]:
    """``os.environ`` with ``changes`` set, restored on the way out (as a child's ``env`` would be)."""
    before = {name: os.environ.get(name) for name in changes or {}}
    os.environ.update(changes or {})
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def cda_here(*args: str | Path, cwd: Path | None = None, stdin: str | None = None,
             env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``cda ARGS`` in this process, as ``subprocess.run([sys.executable, "-m", "cda", *args],
    cwd=cwd, input=stdin, env={**os.environ, **env}, capture_output=True, text=True)`` would
    answer: the exit code, stdout and stderr. An exception the command does not turn into a
    message propagates and fails the test (in a child it would be a traceback on stderr, which
    these tests refuse too). ``argparse``'s own exit (``--help``, a usage error) is its code."""
    from cda.cli.main import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(_environment(env))
        # anything written to the process's streams rather than the ones passed in is still the
        # command's output, as it would be in a child
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            code = main(argv, out, err, io.StringIO(stdin or ""))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return subprocess.CompletedProcess(["cda", *argv], code, out.getvalue(), err.getvalue())
