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
from functools import lru_cache
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
    its quoted name, found as the DSL's own lexer could find them (cda/encodings/grammar.lark): a
    comment runs to its line's end, a string to its closing quote on the same line, and
    whitespace (``\\f`` included) and comments may stand between ``ken`` and its string.

    ``ken`` is the keyword where a name does not run into it: lark's contextual lexer splits
    keywords off a longer word where no name can stand, so a word made of keywords and numbers
    before ``ken`` is split too (``expect status unsatken "…"`` is ``unsat`` and a ``ken`` line,
    ``top 1ken "…"`` a number and one), while ``broken "…"`` is a name (and, a string standing
    only in a ``ken`` statement, a syntax error).

    >>> ken_lines('hyp a\\nken "/etc/k.json" # ken "not this"\\nobserve b ken "x.csv"')
    [('/etc/k.json', 2, 5), ('x.csv', 3, 15)]
    >>> ken_lines('pred token(A)\\nobserve a  # ken "a.json"')
    []
    >>> ken_lines('ken # a comment\\n\\f "/p"\\nobserve x >= 1ken "/q"\\nexpect status unsatken "/r"')
    [('/p', 2, 3), ('/q', 3, 19), ('/r', 4, 24)]
    >>> ken_lines('observe broken "/s"')
    []
    """
    found: list[tuple[str, int, int]] = []
    at = _KEN_SCAN.search(text)
    while at is not None:
        i = at.end()
        if at.group(0) == "ken" and _keyword_at(text, at.start()):  # a comment or a string is skipped whole
            j = _GAP.match(text, i).end()  # type: ignore[union-attr]  # matches the empty gap too
            string = _STRING.match(text, j)
            if string is not None:
                line = text.count("\n", 0, j) + 1
                found.append((string.group(0)[1:-1], line, j - (text.rfind("\n", 0, j) + 1) + 1))
                i = string.end()
            else:
                i = j
        at = _KEN_SCAN.search(text, i)
    return found


def _keyword_at(text: str, start: int) -> bool:
    """Whether ``ken`` at ``start`` can be lexed as the keyword: the run of name characters just
    before it is empty, or made of the grammar's keywords and digits (split off by lark)."""
    k = start
    while k > 0 and text[k - 1] in _NAME_CHARS:
        k -= 1
    return k == start or _split_off().fullmatch(text, k, start) is not None


@lru_cache(maxsize=1)
def _split_off() -> re.Pattern[str]:
    """Runs lark may split into keywords and numbers: the grammar's own words, longest first.
    A digit is one step of the star, never ``[0-9]+`` (the same language): a run of digits had
    2**n ways to be split, and a caller's ``000…0zken`` (27 digits) held the gate 25 s, each two
    more digits 3.5 times longer (audit3). No keyword is made of others, so a run splits one way
    at most and the match is linear."""
    from importlib import resources

    grammar = resources.files("cda.encodings").joinpath("grammar.lark").read_text(encoding="utf-8")
    words = sorted(set(re.findall(r'"([A-Za-z_]+)"', grammar)), key=lambda w: (-len(w), w))
    return re.compile("(?:" + "|".join(words) + "|[0-9])*")


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_KEN_SCAN = re.compile(r'#[^\n]*|"[^"\n]*"?|ken(?![A-Za-z0-9_])')
"""What :func:`ken_lines` stops at: a comment (to its line's end), a string (to its closing quote,
or its line's end: the grammar's STRING holds no newline), or ``ken`` not followed by a name
character (``kenx`` is one name). One regex scan, not a loop over characters: the gate reads every
DSL text a door receives before it runs (a 360 kB problem: 49 ms by characters)."""
_GAP = re.compile(r"(?:[ \t\f\r\n]+|#[^\n]*)*")  # the grammar's %ignore: WS and COMMENT
_STRING = re.compile(r'"[^"\n]*"')  # the grammar's STRING


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
