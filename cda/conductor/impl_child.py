"""The child process an ``impl = "module:function"`` tool runs in (docs/conductor.md, "Your own tools").

Why a child process and not a thread: Python cannot stop a thread, so a function that never
returns (a loop, a hung socket) would hold the conductor — or a server's worker — for good, and a
cancel could only abandon it still running. A process can be killed: the function gets the same
``timeout_s``, output cap and Ctrl-C/cancel handling as a ``command`` tool
(:func:`cda.conductor.usertools._run_program`), at the cost of one interpreter start per call.

This file is run by path (``python impl_child.py``), so it imports nothing of ``cda`` (a start
costs the interpreter and pydantic, not the engine); the parent imports :func:`load_module` from
here so both load a user's module the same way. The protocol: a JSON object on standard input
(``path``: the parent's import path, ``base_dir``, ``target``, ``inputs``); one JSON object
written to the standard output the parent reads (``{"outputs": {...}}`` or ``{"error": "..."}``).
What the user's function prints goes to standard error, so it cannot forge the answer.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["load_module"]


class _SourceOnly(importlib.machinery.SourceFileLoader):
    """Compile the user's tool from its source every time, and never write (or read) a
    ``__pycache__`` beside it: the user's folder holds only what the user put there."""

    def get_code(self, fullname: str) -> Any:
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)


def load_module(name: str, base_dir: Path) -> Any:
    """A module beside the registry (``base_dir/name.py`` or a package there) is read afresh
    from its file on each load — an edited tool is the tool that runs; any other is imported."""
    relative = Path(*name.split("."))
    for candidate in (base_dir / relative.with_suffix(".py"), base_dir / relative / "__init__.py"):
        if candidate.is_file():
            loader = _SourceOnly(f"cda_user_tool.{name}", str(candidate))
            spec = importlib.util.spec_from_file_location(f"cda_user_tool.{name}", candidate, loader=loader)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return importlib.import_module(name)


def _check(request: dict[str, Any]) -> dict[str, Any]:
    """The registry's load-time check of ``target`` (a module that imports, a function in it),
    made here so that what the module does as it imports (exit, loop, kill itself, ``Ctrl-C``) is
    this process's, never the conductor's: ``{"outputs": {}}``, or ``{"error": …, "raised": […]}``
    with the names of the exception's classes (the parent words them, ``cda.conductor.tooling.said``)."""
    module_name, _, function_name = request["target"].partition(":")
    try:
        module = load_module(module_name, Path(request["base_dir"]))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        return {"error": f"the module does not import: it exited (status {code})", "raised": []}
    except BaseException as exc:  # (KeyboardInterrupt raised by the module itself included)
        return {"error": f"{exc}".strip() or "no detail was given",
                "raised": [cls.__name__ for cls in type(exc).__mro__]}
    if not callable(getattr(module, function_name, None)):
        return {"error": f"{module_name} has no function {function_name!r}", "raised": []}
    return {"outputs": {}}


def _call(request: dict[str, Any]) -> dict[str, Any]:
    from pydantic import BaseModel, ValidationError, validate_call

    target = request["target"]
    module_name, _, function_name = target.partition(":")
    try:
        module = load_module(module_name, Path(request["base_dir"]))
    except Exception as exc:  # the file changed since the registry was loaded
        return {"error": f"{target}: the module does not import: {exc}"}
    fn = getattr(module, function_name, None)
    if not callable(fn):
        return {"error": f"{target}: {module_name} has no function {function_name!r}"}
    try:
        result = validate_call(validate_return=True)(fn)(**request["inputs"])
    except ValidationError as exc:
        return {"error": f"{target}: {exc.error_count()} problem(s): " + "; ".join(
            f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])}
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    if not isinstance(result, dict):
        return {"error": f"{target} returned {type(result).__name__}, not a dict of outputs"}
    return {"outputs": result}


def main() -> None:
    answer = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # the function's prints go to standard error; only this process writes the answer
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.buffer.read())
    sys.path[:] = request["path"]
    try:
        reply = _check(request) if request.get("check") else _call(request)
    except Exception as exc:  # the user's function failing is the tool's error, named by its kind
        reply = {"error": f"{request['target']} raised {type(exc).__name__}: {exc}"}
    try:
        text = json.dumps(reply, allow_nan=False)
    except (TypeError, ValueError) as exc:
        text = json.dumps({"error": f"{request['target']}: its outputs are not JSON ({exc})"})
    answer.write(text)
    answer.flush()


if __name__ == "__main__":
    main()
