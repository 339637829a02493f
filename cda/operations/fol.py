"""``prove``: first-order claims (docs/fol.md), given as ``.fol`` text (``fol``) or a file
(``path``: a ``.fol`` file, or a ``.cda`` file's ``fol { … }`` blocks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from cda.contracts.fol import ProofResult
from cda.errors import CDAError
from cda.operations.base import Params, at, one_source
from cda.operations.params import Backend, Timeout, optional_path, optional_text
from cda.operations.registry import ConductorTool, Door, Needs, operation

__all__ = ["ProveOutput", "ProveParams", "fol_blocks_of", "read_fol_file"]


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
    from cda.contracts.deadline import Deadline, deadline_scope
    from cda.fol.parse import parse_fol
    from cda.fol.prove import prove_all

    # reading gets one claim's budget: a file that takes longer to read is answered "time ran out"
    with deadline_scope(Deadline(p.timeout)):  # (BudgetExceeded, exit 3), not proved after it
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


# ---- where first-order claims come from: a .fol file, or the fol { … } blocks of a .cda file


def read_fol_file(path: Path | str) -> Any:
    """Read and check a ``.fol`` file, or the ``fol { … }`` blocks of a ``.cda`` file; raises
    ``DSLSyntaxError``/``DSLTypeError`` (with the file name, line, column and a caret) or
    ``CDAError`` when the file cannot be read."""
    from cda.files import TEXT_MAX_BYTES, read_text
    from cda.fol.parse import parse_fol

    path = Path(path)
    text = read_text(path, limit=TEXT_MAX_BYTES)
    if path.suffix == ".cda":
        text = fol_blocks_of(text, str(path))
    return parse_fol(text, filename=str(path))


def fol_blocks_of(text: str, filename: str) -> str:
    r"""The ``fol`` blocks of a ``.cda`` text, everything else blanked out (newlines kept), so
    the first-order parser reports lines and columns of the original file.

    >>> fol_blocks_of("hyp a\nfol { premise P(a)\n claim P(a) }\n", "x.cda").split("\n")
    ['     ', '      premise P(a)', ' claim P(a)  ', '']
    """
    from cda.encodings.ast import FolBlock  # the DSL's reader, only for a .cda file (not at start-up)
    from cda.encodings.parse import parse_problem

    blocks = [st for st in parse_problem(text, filename).statements if isinstance(st, FolBlock)]
    if not blocks:
        raise CDAError(f"{filename}: no fol {{ … }} block to prove (see docs/fol.md)")
    keep = [False] * len(text)
    starts = _line_starts(text)
    for block in blocks:
        start = starts[block.pos[0] - 1] + block.pos[1] - 1
        body_start = text.index("{", start) + 1
        body_end = start + len(block.text) - 1  # the closing brace
        for i in range(body_start, body_end):
            keep[i] = True
    return "".join(c if keep[i] or c == "\n" else " " for i, c in enumerate(text))


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    return starts
