"""``diagnose`` and ``probe`` (docs/diagnosis.md): a circuit as ``.bench`` text (``bench``) or a
file (``path``: a ``.bench`` netlist or an mbd-mobs ``.wcnf[.gz]`` instance), and its
observations as text (``observations``) or a file (``observations_path``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from cda.contracts import limits
from cda.diagnosis.diagnose import DiagnosisReport
from cda.diagnosis.reports import ProbeReport
from cda.errors import CDAError
from cda.operations.base import Params, at, one_source
from cda.operations.params import Backend, Checked, Seed, Timeout, optional_path, optional_text
from cda.operations.registry import ConductorTool, Door, Needs, operation

__all__ = ["DiagnoseParams", "ProbeParams"]

Count = Annotated[Annotated[int, Field(ge=1, le=limits.MAX_COUNT)] | None,
                  BeforeValidator(lambda v, info: v if v is None else limits.count(info.field_name, v)),
                  Checked(limits.count, True)]
Probability = Annotated[Annotated[float, Field(gt=0, lt=1)],
                        BeforeValidator(lambda v, info: limits.probability(info.field_name, v)),
                        Checked(limits.probability, False, exact=True)]


class _Circuit(Params):
    bench: optional_text("the netlist as .bench text") = None  # type: ignore[valid-type]
    path: optional_path("a .bench netlist or an mbd-mobs .wcnf[.gz] instance on this machine") = None  # type: ignore[valid-type]
    observations: optional_text("the observations as text (a .bench netlist needs them)",  # type: ignore[valid-type]
                                min_length=0) = None
    observations_path: optional_path("an observations file on this machine") = None  # type: ignore[valid-type]
    backend: Backend = Field(default="auto", description="auto, z3 or clingo")
    timeout: Timeout = None

    @model_validator(mode="after")
    def _sources(self) -> Any:
        one_source(self.bench, self.path, "bench")
        if self.observations is not None and self.observations_path is not None:
            raise ValueError("give either 'observations' (the text) or 'observations_path' (a file), not both")
        return self

    @contextmanager
    def files(self, call: Any) -> Iterator[tuple[Path, Path | None]]:
        """The netlist and observations as files (text is written to a private temporary folder)."""
        with tempfile.TemporaryDirectory(prefix="cda-circuit-") as folder:
            if self.path is not None:
                netlist = at(call, self.path)
            else:
                netlist = Path(folder) / "circuit.bench"
                netlist.write_text(self.bench or "", encoding="utf-8")
            obs: Path | None = None
            if self.observations_path is not None:
                obs = at(call, self.observations_path)
            elif self.observations is not None:
                obs = Path(folder) / "observations.txt"
                obs.write_text(self.observations, encoding="utf-8")
            from cda.access import current, granted, with_root

            try:
                with granted(with_root(current(), Path(folder))):  # the call's own temporary folder, whatever its roots
                    yield netlist, obs
            except CDAError as exc:
                raise _unplaced(exc, folder) from None

    def label(self) -> str:
        return self.path if self.path is not None else "circuit.bench"


def _unplaced(exc: CDAError, folder: str) -> CDAError:
    """``exc`` with this call's scratch folder taken out of what it says: a caller sent text and
    reads ``circuit.bench:2: …``, never the server's ``/tmp/cda-circuit-…`` (issue 27)."""
    prefix = folder.rstrip(os.sep) + os.sep
    for name in ("filename", "message"):
        value = getattr(exc, name, None)
        if isinstance(value, str):
            setattr(exc, name, value.replace(prefix, ""))
    exc.args = tuple(a.replace(prefix, "") if isinstance(a, str) else a for a in exc.args)
    return exc


class DiagnoseParams(_Circuit):
    mode: Literal["all", "top", "min_cardinality"] = Field(default="all", description="all, top K or min_cardinality")
    k: Count = Field(default=None, description="with mode top: how many diagnoses")
    seed: Seed = 0

    @model_validator(mode="after")
    def _k(self) -> DiagnoseParams:
        if self.mode == "top" and self.k is None:
            raise ValueError("mode 'top' needs k (how many diagnoses, at least 1)")
        if self.mode != "top" and self.k is not None:
            raise ValueError(f"k goes with mode 'top', not {self.mode!r}")
        return self


class ProbeParams(_Circuit):
    top: Annotated[int, Field(ge=1, le=limits.MAX_COUNT),  # type: ignore[valid-type]
                   BeforeValidator(lambda v, info: limits.count(info.field_name, v)),
                   Checked(limits.count, True)] = Field(default=5, description="how many candidate nets to list")
    prior: Probability = Field(default=0.01, description="per-gate failure probability")
    max_size: Count = Field(default=None, description="only diagnoses of at most this many gates")


_NEEDS = Needs(files=True, long=True)
#: the CLI and a manifest name the observations file as they always have: --observations, params.observations
_FILE_NAMES = {Door.CLI: {"observations_path": "observations"}, Door.JOBS: {"observations_path": "observations"}}


@operation("diagnose", DiagnoseParams, DiagnosisReport, summary="every subset-minimal diagnosis of a circuit",
           doors={Door.CLI, Door.MCP, Door.JOBS, Door.CONDUCTOR}, needs=_NEEDS, cli_positional=("path",),
           conductor=ConductorTool("cda.diagnose", {"circuit": "path", "observations": "observations_path"}),
           door_only={Door.CLI: ("bench", "observations"), Door.JOBS: ("bench", "observations"),
                      Door.CONDUCTOR: ("bench", "observations", "backend", "timeout", "mode", "k", "seed")},
           renames=_FILE_NAMES)
def diagnose(call: Any, p: DiagnoseParams) -> DiagnosisReport:
    from cda.diagnosis.diagnose import diagnose as run_diagnose

    with p.files(call) as (netlist, obs):
        report = run_diagnose(netlist, obs, backend=p.backend, mode=p.mode, k=p.k, timeout=p.timeout, seed=p.seed)
    return report.model_copy(update={"file": p.label()})


@operation("probe", ProbeParams, ProbeReport, summary="the next-best nets to measure (expected information gain)",
           doors={Door.CLI, Door.MCP}, needs=_NEEDS, cli_positional=("path",),
           door_only={Door.CLI: ("bench", "observations")}, renames=_FILE_NAMES)
def probe(call: Any, p: ProbeParams) -> ProbeReport:
    from cda.diagnosis.diagnose import load_instance
    from cda.diagnosis.probe import probe as run_probe
    from cda.ir import MinimalGoal

    with p.files(call) as (netlist, obs):
        inst = load_instance(netlist, obs, MinimalGoal("all"))
        return run_probe(inst, backend=p.backend, top=p.top, failure=p.prior, max_size=p.max_size,
                         timeout=p.timeout, file=p.label())
