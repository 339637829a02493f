"""The ordered statuses (:mod:`cda.contracts.status`) as pydantic field types: the enum in
Python, its string in JSON and in the JSON schema.

A module of their own so that a model that needs only a status field (``cda prove``'s
:class:`~cda.contracts.fol.ProofResult`) does not build the solve result's models with it
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

from typing import Annotated

from pydantic import PlainSerializer, WithJsonSchema

from cda.contracts.status import SolverStatus, VerdictStatus

__all__ = ["VerdictStatusField", "SolverStatusField"]

#: the statuses as ordered enums (``min`` lowers them); dumped, and described in the JSON schema,
#: as their strings (a plain string put in by ``model_copy`` dumps the same, without a warning)
VerdictStatusField = Annotated[
    VerdictStatus, PlainSerializer(str, return_type=str), WithJsonSchema(VerdictStatus.json_schema())
]
SolverStatusField = Annotated[
    SolverStatus, PlainSerializer(str, return_type=str), WithJsonSchema(SolverStatus.json_schema())
]
