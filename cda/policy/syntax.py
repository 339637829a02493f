"""The Cedar abstract syntax: policies, their scope and conditions, and expressions.

Every node keeps its position (``line``, ``column``, 1-based) so an evaluation error or a
refusal can point at the spot in the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cda.errors import DSLError
from cda.policy.values import EntityUID, Value

__all__ = [
    "Pos",
    "Expr",
    "Lit",
    "Var",
    "Unary",
    "Binary",
    "And",
    "Or",
    "If",
    "Has",
    "Like",
    "Is",
    "SetLit",
    "RecLit",
    "GetAttr",
    "Call",
    "Method",
    "Scope",
    "ActionScope",
    "Policy",
    "STAR",
    "UnsupportedConstruct",
]

Pos = tuple[int, int]
STAR = None  # the wildcard in a ``like`` pattern (the other parts are literal strings)


class UnsupportedConstruct(DSLError):
    """A Cedar construct CDA does not encode: refused by name at its place, never guessed at."""

    @property
    def kind(self) -> str:
        return "unsupported"


@dataclass(frozen=True, slots=True)
class Lit:
    value: Value
    pos: Pos


@dataclass(frozen=True, slots=True)
class Var:
    name: Literal["principal", "action", "resource", "context"]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Unary:
    op: Literal["!", "-"]
    arg: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Binary:
    """``== != < <= > >= + - * in`` (``&&`` and ``||`` are :class:`And` and :class:`Or`)."""

    op: str
    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class And:
    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Or:
    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: Expr
    orelse: Expr
    pos: Pos


@dataclass(frozen=True, slots=True)
class Has:
    arg: Expr
    attr: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Like:
    arg: Expr
    pattern: tuple[str | None, ...]  # literal pieces and STAR
    pos: Pos


@dataclass(frozen=True, slots=True)
class Is:
    arg: Expr
    type: str
    within: Expr | None
    pos: Pos


@dataclass(frozen=True, slots=True)
class SetLit:
    items: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class RecLit:
    items: tuple[tuple[str, Expr], ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class GetAttr:
    arg: Expr
    attr: str
    pos: Pos


@dataclass(frozen=True, slots=True)
class Call:
    """An extension function: ``ip("…")``, ``decimal("…")``."""

    name: str
    args: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True, slots=True)
class Method:
    """``e.m(args)``: set methods, extension methods, ``getTag``/``hasTag``."""

    arg: Expr
    name: str
    args: tuple[Expr, ...]
    pos: Pos


Expr = Lit | Var | Unary | Binary | And | Or | If | Has | Like | Is | SetLit | RecLit | GetAttr | Call | Method


@dataclass(frozen=True, slots=True)
class Scope:
    """The principal or resource part of a policy's scope.

    ``kind``: ``any`` (no constraint), ``eq`` (``== E``), ``in`` (``in E``), ``is`` (``is T``),
    ``is_in`` (``is T in E``). In a template, ``slot`` (``?principal`` or ``?resource``) stands
    where ``entity`` would be, until a link fills it (:mod:`cda.policy.templates`).
    """

    kind: Literal["any", "eq", "in", "is", "is_in"]
    entity: EntityUID | None = None
    type: str | None = None
    slot: str | None = None


@dataclass(frozen=True, slots=True)
class ActionScope:
    """``action``, ``action == A``, ``action in A``, ``action in [A, B]`` (kind ``in`` with
    several entities)."""

    kind: Literal["any", "eq", "in"]
    entities: tuple[EntityUID, ...] = ()


@dataclass(frozen=True, slots=True)
class Policy:
    id: str
    effect: Literal["permit", "forbid"]
    principal: Scope
    action: ActionScope
    resource: Scope
    conditions: tuple[tuple[Literal["when", "unless"], Expr], ...]
    annotations: dict[str, str] = field(default_factory=dict, compare=False)
    pos: Pos = (0, 0)
    filename: str = field(default="<policies>", compare=False)

    @property
    def slots(self) -> tuple[str, ...]:
        """The template slots of the scope (``?principal``, ``?resource``); empty for a policy."""
        return tuple(s.slot for s in (self.principal, self.resource) if s.slot is not None)
