"""What one call would use, read off its validated parameters before anything runs.

The gate (:mod:`cda.operations.gate`) compares these with the principal. Nothing here opens a
file or parses more than the text itself: a path parameter is a name, a ``ken "…"`` line is found
by scanning DSL text (comments skipped), and a :class:`~cda.contracts.action.CDAInputs` says
whether it names a Ken file, carries ``functions`` (code), approvals given as input, or an LLM
endpoint (egress). Scanning is deliberately wide: a string in an Action's inputs that reads like a
``ken`` line counts, whatever field it is in, since the check must hold wherever DSL is accepted.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from cda.access import EGRESS_RANK
from cda.operations.params import DslText, PathParam, marker

__all__ = ["Demands", "demands_of", "ken_lines"]

Where = list[str | int]


@dataclass
class Demands:
    """The concrete needs of a call: paths it names (with where), code, approvals, egress class,
    and the network endpoints (LLM base URLs) it names."""

    paths: list[tuple[Where, str]] = field(default_factory=list)
    endpoints: list[tuple[Where, str]] = field(default_factory=list)
    code: list[Where] = field(default_factory=list)
    approvals: list[tuple[Where, list[str]]] = field(default_factory=list)
    egress: tuple[Where, str] | None = None

    def add_egress(self, where: Where, egress_class: str) -> None:
        if self.egress is None or EGRESS_RANK[egress_class] > EGRESS_RANK[self.egress[1]]:
            self.egress = (where, egress_class)


def ken_lines(text: str) -> list[tuple[str, int, int]]:
    """The paths of the ``ken "…"`` statements in DSL ``text``, each with the line and column of
    its quoted name (comments skipped; a ``ken`` inside another word is not one).

    >>> ken_lines('hyp a\\nken "/etc/k.json" # ken "not this"\\nobserve b ken "x.csv"')
    [('/etc/k.json', 2, 5), ('x.csv', 3, 15)]
    >>> ken_lines('pred token(A)\\nobserve a  # ken "a.json"')
    []
    """
    found: list[tuple[str, int, int]] = []
    n = len(text)
    at = _KEN_SCAN.search(text)
    while at is not None:
        i = at.end()
        if at.group(0) == "ken":  # a comment or a string is skipped whole
            j = i
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] == '"':
                end = text.find('"', j + 1)
                stop = text.find("\n", j + 1)
                if end >= 0 and (stop < 0 or end < stop):
                    line = text.count("\n", 0, j) + 1
                    found.append((text[j + 1:end], line, j - (text.rfind("\n", 0, j) + 1) + 1))
                    i = end + 1
            else:
                i = j
        at = _KEN_SCAN.search(text, i)
    return found


_KEN_SCAN = re.compile(r'#[^\n]*|"[^"]*"?|(?<!\w)ken(?!\w)')
"""What :func:`ken_lines` stops at: a comment (to its line's end), a string (to its closing quote,
or the text's end), or the word ``ken``. One regex scan, not a loop over characters: the gate
reads every DSL text a door receives before it runs (a 360 kB problem: 49 ms by characters)."""


def demands_of(params: BaseModel) -> Demands:
    """Everything ``params`` would make its operation use (see the module docstring)."""
    out = Demands()
    _walk_model(params, [], out)
    return out


def _walk_model(model: BaseModel, where: Where, out: Demands) -> None:
    action = sys.modules.get("cda.contracts.action")  # not loaded: no parameter can be one of its models
    if action is not None and isinstance(model, action.CDAInputs):
        _inputs(model, where, out)
        return
    if action is not None and isinstance(model, action.KenSource):
        if model.path is not None:
            out.paths.append(([*where, "path"], model.path))
        return
    egress = getattr(model, "egress_class", None)
    if callable(egress) and egress() is not None:
        out.add_egress(where, egress())
    endpoints = getattr(model, "endpoint_fields", None)  # parameters that name a URL the call posts to
    if callable(endpoints):
        out.endpoints.extend(([*where, name], str(getattr(model, name))) for name in endpoints())
    code = getattr(model, "code_fields", None)  # parameters that name code to run (a conductor's registry)
    if callable(code):
        out.code.extend([*where, name] for name in code())
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        here = [*where, name]
        if marker(info.metadata, PathParam) is not None:
            for i, item in _items(value):
                out.paths.append((here if i is None else [*here, i], str(item)))
        elif marker(info.metadata, DslText) is not None and isinstance(value, str | list):  # one text, or several
            for i, text in _items(value):
                if isinstance(text, str):
                    out.paths.extend(([*here, *(() if i is None else (i,)), line, column], p)
                                     for p, line, column in ken_lines(text))
        else:
            _walk_value(value, here, out)


def _walk_value(value: Any, where: Where, out: Demands) -> None:
    if isinstance(value, BaseModel):
        _walk_model(value, where, out)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _walk_value(item, [*where, i], out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _walk_value(item, [*where, str(key)], out)


def _items(value: Any) -> list[tuple[int | None, Any]]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [(i, v) for i, v in enumerate(value) if v is not None]
    return [(None, value)]


def _inputs(inputs: Any, where: Where, out: Demands) -> None:
    if inputs.ken is not None and inputs.ken.path is not None:
        out.paths.append(([*where, "ken", "path"], inputs.ken.path))
    if inputs.functions:
        out.code.append([*where, "functions"])
    if inputs.policies.approvals:
        out.approvals.append(([*where, "policies", "approvals"], list(inputs.policies.approvals)))
    if inputs.llm.provider != "offline":
        out.add_egress([*where, "llm"], inputs.llm.egress_class)
        out.endpoints.append(([*where, "llm", "base_url"], str(inputs.llm.base_url)))
    data = inputs.model_dump(mode="json", exclude={"functions", "llm", "seed", "policies"})
    _strings(data, where, out)


def _strings(value: Any, where: Where, out: Demands) -> None:
    """Every string in an Action's inputs, scanned for ``ken`` lines."""
    if isinstance(value, str):
        out.paths.extend(([*where, line, column], p) for p, line, column in ken_lines(value))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _strings(item, [*where, i], out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _strings(item, [*where, str(key)], out)
