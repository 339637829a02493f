"""``cda mcp``: CDA as a Model Context Protocol server, over stdio or streamable HTTP.

Tools (structured output: each returns a pydantic model, its JSON schema published):

* ``check``, ``solve``, ``explain_conflict`` on DSL text; ``prove`` on ``.fol`` text;
* ``diagnose`` and ``probe`` on a ``.bench`` netlist and its observations (as text);
* ``run_action`` on a ``CDAInputs`` object, with a progress notification per
  ``action_progress`` event of the run;
* ``session_put``, ``session_remove``, ``session_show``, ``session_solve``: a problem edited
  item by item, by name (:mod:`cda.mcp.session`).

Resources: ``cda://docs/dsl`` (docs/dsl.md, the language) and ``cda://examples/NAME`` (the
example problems), when the files are there (a source checkout).

A mistake in the input is a tool error (``isError``) whose text is the compiler-style message
(``file:line:col: error: …`` and a caret) followed by the JSON object ``cda … --json`` prints
(``line``, ``column``, ``expected`` …); it never stops the server. The ``mcp`` SDK is imported
only by this command (extra ``cda[mcp]``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, Field

from cda.cli.ci_report import error_object
from cda.contracts.action import CDAOutputs
from cda.contracts.fol import ProofResult
from cda.contracts.result import CheckReport, Conflict, SolveResult
from cda.diagnosis.diagnose import DiagnosisReport
from cda.diagnosis.probe import ProbeReport
from cda.errors import CDAError
from cda.mcp.session import ClauseSession, ItemError

__all__ = ["build_server", "main_mcp"]

_ROOT = Path(__file__).resolve().parents[2]
_BACKEND = Field(default="auto", description="auto, z3 or clingo")
_TIMEOUT = Field(default=None, description="seconds (none: no limit)")


class ProveOutput(BaseModel):
    results: list[ProofResult]


class ConflictOutput(BaseModel):
    status: str
    conflict: Conflict | None = Field(description="null when the clauses are consistent")


class SessionOutput(BaseModel):
    session: str
    items: list[str] = Field(description="the item names, in order")
    text: str = Field(description="the problem the items make, as solved")
    changed: str = Field(default="", description="what the call did")


class SessionSolveOutput(BaseModel):
    session: str
    solved_again: bool = Field(description="false when the session had not changed since the last solve")
    result: SolveResult


def _tool_error(exc: CDAError, source: str) -> Exception:
    """The SDK's tool error carrying the compiler-style message and the JSON error object."""
    from mcp.server.mcpserver.exceptions import ToolError

    from cda.errors import DSLError

    inner = exc.error if isinstance(exc, ItemError) else exc
    if isinstance(inner, DSLError) and inner.filename is None:
        inner.with_filename(source)
    data = error_object(inner, source)
    if isinstance(exc, ItemError):
        data["item"] = exc.item
    return ToolError(f"{exc.render() if not isinstance(exc, ItemError) else 'cda: error: ' + str(exc)}\n"
                     f"{json.dumps(data, ensure_ascii=False)}")


def _guard(source: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except CDAError as exc:
        raise _tool_error(exc, source) from None


def _timeout(value: float | None) -> float | None:
    if value is None:
        return None
    from cda.contracts import limits

    return limits.seconds("timeout", value)


def build_server() -> Any:
    """The server, its tools and resources registered (the SDK imported here)."""
    from mcp.server.mcpserver import Context, MCPServer

    from cda.cli.main import _version

    # the SDK reads the tools' annotations (strings here) in this module's namespace
    globals()["Context"] = Context

    server = MCPServer(
        name="cda",
        log_level="WARNING",
        version=_version(),
        instructions=(
            "CDA: constraint-driven abduction. Write a problem in the CDA DSL (resource cda://docs/dsl): "
            "check it, solve it (ranked explanations, verdicts on claims with proofs and counterexamples, "
            "next tests, conflicts), or build it item by item in a session and re-solve after each edit."
        ),
    )
    sessions: dict[str, ClauseSession] = {}

    @server.tool(description="Parse and type-check DSL text; counts of what it declares.")
    def check(dsl: str) -> CheckReport:
        from cda.api import check as run_check

        return _guard("dsl", run_check, dsl)  # type: ignore[no-any-return]

    @server.tool(description="Solve DSL text: ranked hypotheses, verdicts, next tests, conflict, expectations.")
    def solve(dsl: str, backend: str = _BACKEND, top: int | None = None, seed: int = 0,
              timeout: float | None = _TIMEOUT) -> SolveResult:
        from cda.api import solve as run_solve

        return _guard("dsl", lambda: run_solve(dsl, backend=backend, top=top, seed=seed,  # type: ignore[no-any-return]
                                               timeout=_timeout(timeout)))

    @server.tool(description="The minimal conflicts (cores) and corrections of inconsistent DSL clauses.")
    def explain_conflict(dsl: str, backend: str = _BACKEND, timeout: float | None = _TIMEOUT) -> ConflictOutput:
        from cda.api import solve as run_solve

        result = _guard("dsl", lambda: run_solve(dsl, backend=backend, timeout=_timeout(timeout)))
        return ConflictOutput(status=str(result.status), conflict=result.conflict)

    @server.tool(description="Prove or refute the claims of first-order text in the .fol format (docs/fol.md).")
    def prove(fol: str, backend: str = _BACKEND, timeout: float | None = Field(default=10.0)) -> ProveOutput:
        from cda.fol.parse import parse_fol
        from cda.fol.prove import prove_all

        def run() -> ProveOutput:
            problem = parse_fol(fol, filename="fol")
            if not problem.claims:
                raise CDAError("fol: no claim to prove (add a line 'claim φ')")
            return ProveOutput(results=prove_all(problem, _timeout(timeout), backend=backend))

        return _guard("fol", run)  # type: ignore[no-any-return]

    def _circuit(folder: str, bench: str, observations: str) -> tuple[Path, Path]:
        netlist, obs = Path(folder) / "circuit.bench", Path(folder) / "observations.txt"
        netlist.write_text(bench, encoding="utf-8")
        obs.write_text(observations, encoding="utf-8")
        return netlist, obs

    @server.tool(description="Minimal diagnoses of a .bench netlist given observations (docs/diagnosis.md).")
    def diagnose(bench: str, observations: str, mode: str = "all", k: int | None = None,
                 backend: str = _BACKEND, timeout: float | None = _TIMEOUT) -> DiagnosisReport:
        from cda.diagnosis.diagnose import diagnose as run_diagnose

        with tempfile.TemporaryDirectory(prefix="cda-mcp-") as folder:
            netlist, obs = _circuit(folder, bench, observations)
            return _guard("circuit.bench", lambda: run_diagnose(  # type: ignore[no-any-return]
                netlist, obs, backend=backend, mode=mode, k=k, timeout=_timeout(timeout)))  # type: ignore[arg-type]

    @server.tool(description="The next-best nets to measure (expected information gain) in a .bench netlist.")
    def probe(bench: str, observations: str, top: int = 5, backend: str = _BACKEND,
              timeout: float | None = _TIMEOUT) -> ProbeReport:
        from cda.diagnosis.diagnose import load_instance
        from cda.diagnosis.probe import probe as run_probe
        from cda.encodings.ir import MinimalGoal

        with tempfile.TemporaryDirectory(prefix="cda-mcp-") as folder:
            netlist, obs = _circuit(folder, bench, observations)

            def run() -> ProbeReport:
                inst = load_instance(netlist, obs, MinimalGoal("all"))
                return run_probe(inst, backend=backend, top=top, timeout=_timeout(timeout), file="circuit.bench")

            return _guard("circuit.bench", run)  # type: ignore[no-any-return]

    @server.tool(description="Run a CDA Action on CDAInputs; progress notifications follow its events.")
    async def run_action(inputs: dict[str, Any], ctx: Context) -> CDAOutputs:
        import anyio
        import anyio.from_thread
        import anyio.to_thread
        from pydantic import ValidationError

        from cda.adapters.action_entry import run_inputs
        from cda.contracts.action import CDAInputs
        from cda.contracts.locations import validation_problems

        try:
            parsed = CDAInputs.model_validate(inputs)
        except ValidationError as exc:
            raise _tool_error(CDAError(f"inputs do not match CDAInputs: {validation_problems(exc)}"), "inputs") from None

        def forward(event: Any) -> None:
            if event.type == "action_progress":
                anyio.from_thread.run(ctx.report_progress, float(event.fraction), 1.0, f"{event.phase}: {event.message}")

        try:
            run = await anyio.to_thread.run_sync(lambda: run_inputs(parsed, None, subscribers=[forward]))
        except CDAError as exc:
            raise _tool_error(exc, "inputs") from None
        return run.outputs

    @server.tool(description="Add an item (one or more DSL statements) to a session under a name, or replace it.")
    def session_put(session: str, name: str, statement: str) -> SessionOutput:
        state = sessions.setdefault(session, ClauseSession())
        new = _guard(name, state.put, name, statement)
        return SessionOutput(session=session, items=list(state.items), text=state.text(),
                             changed=f"{'added' if new else 'replaced'} {name}")

    @server.tool(description="Remove an item of a session by name.")
    def session_remove(session: str, name: str) -> SessionOutput:
        state = sessions.setdefault(session, ClauseSession())
        _guard(name, state.remove, name)
        return SessionOutput(session=session, items=list(state.items), text=state.text(), changed=f"removed {name}")

    @server.tool(description="The items of a session and the problem they make.")
    def session_show(session: str) -> SessionOutput:
        state = sessions.setdefault(session, ClauseSession())
        return SessionOutput(session=session, items=list(state.items), text=state.text())

    @server.tool(description="Solve a session's problem (the last answer again if nothing changed).")
    def session_solve(session: str, backend: str = _BACKEND, top: int | None = None, seed: int = 0) -> SessionSolveOutput:
        state = sessions.setdefault(session, ClauseSession())
        before = state.solves
        result = _guard(session, state.solve, backend=backend, top=top, seed=seed)
        return SessionSolveOutput(session=session, solved_again=state.solves > before, result=result)

    docs = _ROOT / "docs" / "dsl.md"
    if docs.is_file():
        @server.resource("cda://docs/dsl", name="dsl", description="The CDA DSL reference", mime_type="text/markdown")
        def dsl_reference() -> str:
            return docs.read_text(encoding="utf-8")

    examples = _ROOT / "examples"
    for path in sorted(examples.glob("*.cda")) + sorted(examples.glob("*.fol")) if examples.is_dir() else []:
        server.resource(f"cda://examples/{path.name}", name=path.stem, description=f"example problem {path.name}",
                        mime_type="text/plain")(_reader(path))
    return server


def _reader(path: Path) -> Any:
    def read() -> str:
        return path.read_text(encoding="utf-8")

    read.__name__ = f"example_{path.stem}"
    return read


def main_mcp(transport: str, host: str, port: int, err: TextIO) -> int:
    """``cda mcp``: serve until the client closes stdio (or until interrupted, over HTTP)."""
    try:
        server = build_server()
    except ImportError:
        err.write("cda: error: cda mcp needs the MCP SDK: pip install 'cda[mcp]'\n")
        return 2
    if transport == "stdio":
        server.run("stdio")
    else:
        err.write(f"cda: MCP over streamable HTTP at http://{host}:{port}/mcp\n")
        server.run("streamable-http", host=host, port=port)
    return 0
