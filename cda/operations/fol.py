"""``prove``: first-order claims (docs/fol.md), given as ``.fol`` text (``fol``) or a file
(``path``: a ``.fol`` file, or a ``.cda`` file's ``fol { … }`` blocks)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

from cda.contracts.fol import ProofResult
from cda.errors import CDAError
from cda.operations.base import Params, at, one_source
from cda.operations.params import Backend, Timeout, optional_path, optional_text
from cda.operations.registry import ConductorTool, Door, Needs, operation

__all__ = ["ProveOutput", "ProveParams"]


class ProveParams(Params):
    fol: optional_text("first-order text in the .fol format (docs/fol.md)") = None  # type: ignore[valid-type]
    path: optional_path("a .fol file, or a .cda file with fol { … } blocks, on this machine") = None  # type: ignore[valid-type]
    backend: Backend = Field(default="auto", description="auto, z3 or clingo")
    timeout: Timeout = Field(default=10.0, description="seconds for each claim, not for the whole file (none: no limit)")
    cross_check: bool = Field(default=False, description="re-solve on the other backend and compare")
    unique_names: bool = Field(default=False, description="read distinct constants as distinct objects")

    @model_validator(mode="after")
    def _one(self) -> ProveParams:
        one_source(self.fol, self.path, "fol")
        return self


class ProveOutput(BaseModel):
    results: list[ProofResult]


@operation("prove", ProveParams, ProveOutput, summary="prove or refute first-order claims",
           doors={Door.CLI, Door.MCP, Door.JOBS, Door.CONDUCTOR}, needs=Needs(files=True, long=True),
           cli_positional=("path",), conductor=ConductorTool("cda.prove", {"problem": "path"}),
           door_only={Door.JOBS: ("fol",), Door.CLI: ("fol",),
                      Door.CONDUCTOR: ("fol", "backend", "timeout", "cross_check", "unique_names")})
def prove(call: Any, p: ProveParams) -> ProveOutput:
    from cda.fol.parse import parse_fol
    from cda.fol.prove import prove_all
    from cda.fol.source import read_fol_file

    if p.path is not None:
        problem = read_fol_file(at(call, p.path))
        where = p.path
    else:
        problem = parse_fol(p.fol or "", filename="fol")
        where = "fol"
    if not problem.claims:
        raise CDAError(f"{where}: no claim to prove (add a line 'claim φ')")
    return ProveOutput(results=prove_all(problem, p.timeout, backend=p.backend, cross_check=p.cross_check,
                                         unique_names=p.unique_names))
