"""The engine's operations: ``check``, ``solve``, ``explain_conflict`` on a problem given as DSL
text (``dsl``) or as a ``.cda`` file (``path``), with Ken graph files (``ken``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from cda.contracts.result import CheckReport, Conflict, SolveResult
from cda.operations.base import Params, at, ken_graph, one_source
from cda.operations.params import Backend, Seed, Timeout, Top, optional_path, optional_text, path_list
from cda.operations.registry import ConductorTool, Door, Needs, operation

__all__ = ["CheckParams", "ConflictOutput", "ConflictParams", "SolveParams"]

_DSL = optional_text("the problem as DSL text (docs/dsl.md)", dsl=True)
_PATH = optional_path("a .cda file on this machine (the local user, under its roots)")
_KEN = path_list("Ken graph files (.json/.csv/.graphml), merged")


class _Problem(Params):
    dsl: _DSL = None  # type: ignore[valid-type]
    path: _PATH = None  # type: ignore[valid-type]
    ken: _KEN = Field(default_factory=list)  # type: ignore[valid-type]

    @model_validator(mode="after")
    def _one(self) -> Any:
        one_source(self.dsl, self.path, "dsl")
        return self

    def source(self, call: Any) -> str | Path:
        return self.dsl if self.dsl is not None else at(call, self.path or "")


class CheckParams(_Problem):
    pass


class SolveParams(_Problem):
    backend: Backend = Field(default="auto", description="auto (chosen per problem), z3 or clingo")
    top: Top = None
    seed: Seed = 0
    timeout: Timeout = None
    cross_check: bool = Field(default=False, description="solve on z3 and clingo and compare; a disagreement "
                              "makes the verdicts it touches inconclusive")


class ConflictParams(_Problem):
    backend: Backend = Field(default="auto", description="auto (chosen per problem), z3 or clingo")
    timeout: Timeout = None


class ConflictOutput(BaseModel):
    status: str
    conflict: Conflict | None = Field(description="null when the clauses are consistent")


_FILES = Needs(files=True)
_SOLVE = Needs(files=True, long=True)


@operation("check", CheckParams, CheckReport, summary="parse and type-check a problem; counts of what it declares",
           doors={Door.CLI, Door.MCP, Door.JOBS}, needs=_FILES, cli_positional=("path",),
           door_only={Door.JOBS: ("dsl", "ken"), Door.CLI: ("dsl",)})
def check(call: Any, p: CheckParams) -> CheckReport:
    from cda.api import check as run_check

    return run_check(p.source(call), ken=ken_graph(call, p.ken))


@operation("solve", SolveParams, SolveResult,
           summary="rank explanations, check claims (verdicts with proofs), propose next tests, explain conflicts",
           doors={Door.CLI, Door.MCP, Door.JOBS, Door.CONDUCTOR}, needs=_SOLVE, cli_positional=("path",),
           conductor=ConductorTool("cda.solve", {"problem": "path", "backend": "backend"}),
           door_only={Door.JOBS: ("dsl", "ken"), Door.CLI: ("dsl",),
                      Door.CONDUCTOR: ("dsl", "ken", "top", "timeout", "cross_check", "seed")})
def solve(call: Any, p: SolveParams) -> SolveResult:
    from cda.api import solve as run_solve
    from cda.api import solve_cross_checked

    ken = ken_graph(call, p.ken) if p.ken else getattr(call.env, "ken", None)
    if p.cross_check:
        return solve_cross_checked(p.source(call), top=p.top, seed=p.seed, timeout=p.timeout, ken=ken)
    return run_solve(p.source(call), backend=p.backend, top=p.top, seed=p.seed, timeout=p.timeout, ken=ken)


@operation("explain_conflict", ConflictParams, ConflictOutput,
           summary="the minimal conflicts (cores) and corrections of inconsistent clauses",
           doors={Door.MCP}, needs=_SOLVE)
def explain_conflict(call: Any, p: ConflictParams) -> ConflictOutput:
    from cda.api import solve as run_solve

    result = run_solve(p.source(call), backend=p.backend, timeout=p.timeout, ken=ken_graph(call, p.ken))
    return ConflictOutput(status=str(result.status), conflict=result.conflict)
