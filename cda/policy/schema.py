"""Cedar schemas, in the human form (``.cedarschema``) and the JSON form, read into one model.

CDA uses a schema to read typed JSON (request contexts and entity attributes, where ``ip`` and
``decimal`` values are written as strings and entity references as ``{"type", "id"}``), to add
the actions and their groups to the entity store as Cedar does, and to know the environments an
analysis ranges over (which principal and resource types an action applies to, the context's
type).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cda.errors import DSLError, DSLSyntaxError
from cda.policy.lexer import Token, tokenize
from cda.policy.syntax import UnsupportedConstruct
from cda.policy.values import EntityUID

__all__ = ["SType", "EntityDecl", "ActionDecl", "Schema", "parse_schema", "parse_schema_json", "read_schema_text"]

_BUILTIN = {"Long": "Long", "String": "String", "Bool": "Bool", "Boolean": "Bool"}
_EXT = {"ipaddr", "decimal", "datetime", "duration"}


@dataclass(frozen=True)
class SType:
    """A schema type: ``kind`` is Long, String, Bool, Entity (``name``), Ext (``name``), Set
    (``elem``) or Record (``attrs``: name -> (type, required))."""

    kind: str
    name: str = ""
    elem: SType | None = None
    attrs: tuple[tuple[str, SType, bool], ...] = ()

    def attr_map(self) -> dict[str, tuple[SType, bool]]:
        return {n: (t, r) for n, t, r in self.attrs}


EMPTY_RECORD = SType("Record")


@dataclass
class EntityDecl:
    name: str
    parents: list[str] = field(default_factory=list)
    attrs: SType = EMPTY_RECORD
    tags: SType | None = None
    enum: list[str] | None = None


@dataclass
class ActionDecl:
    uid: EntityUID
    parents: list[EntityUID] = field(default_factory=list)
    principals: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    context: SType = EMPTY_RECORD


@dataclass
class Schema:
    entities: dict[str, EntityDecl] = field(default_factory=dict)
    actions: dict[EntityUID, ActionDecl] = field(default_factory=dict)


def read_schema_text(text: str, filename: str) -> Schema:
    """A schema in either form: JSON when the text starts with ``{`` and parses as JSON."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            return parse_schema_json(data, filename)
    return parse_schema(text, filename)


# ---------------------------------------------------------------- the human form


def parse_schema(text: str, filename: str = "<schema>") -> Schema:
    """A ``.cedarschema`` text."""
    p = _SchemaParser(text, filename)
    p.schema_file()
    return p.resolve()


class _SchemaParser:
    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.filename = filename
        self.toks = tokenize(text, filename)
        self.i = 0
        # raw declarations, resolved once every name is known
        self.common: dict[str, tuple[str, Any]] = {}  # qualified name -> (namespace, raw type)
        self.raw_entities: list[tuple[str, str, list[str], Any, Any, list[str] | None]] = []
        self.raw_actions: list[tuple[str, EntityUID, list[tuple[str | None, str]], list[str], list[str], Any]] = []

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def advance(self) -> Token:
        t = self.toks[self.i]
        self.i = min(self.i + 1, len(self.toks) - 1)
        return t

    def at(self, s: str) -> bool:
        return self.tok.kind in ("punct", "ident") and self.tok.text == s

    def accept(self, s: str) -> bool:
        if self.at(s):
            self.advance()
            return True
        return False

    def fail(self, expected: str) -> Any:
        t = self.tok
        found = "the end of the text" if t.kind == "eof" else repr(t.text)
        lines = self.text.split("\n")
        raise DSLSyntaxError(f"expected {expected}, found {found}", line=t.line, column=t.column,
                             source_line=lines[t.line - 1] if t.line <= len(lines) else "", filename=self.filename)  # fmt: skip

    def expect(self, s: str) -> Token:
        if not self.at(s):
            self.fail(repr(s))
        return self.advance()

    def ident(self, what: str = "a name") -> str:
        if self.tok.kind != "ident":
            self.fail(what)
        return self.advance().text

    def name(self) -> str:
        if self.tok.kind == "str":
            return _unquote(self.advance().text)
        return self.ident("a name or a quoted name")

    def path(self) -> str:
        parts = [self.ident("a type name")]
        while self.at("::") and self.toks[self.i + 1].kind == "ident":
            self.advance()
            parts.append(self.advance().text)
        return "::".join(parts)

    def annotations(self) -> None:
        while self.accept("@"):
            self.ident("an annotation name")
            if self.accept("("):
                if self.tok.kind != "str":
                    self.fail("a string")
                self.advance()
                self.expect(")")

    def schema_file(self) -> None:
        while self.tok.kind != "eof":
            self.annotations()
            if self.accept("namespace"):
                ns = self.path()
                self.expect("{")
                while not self.at("}"):
                    self.annotations()
                    self.decl(ns)
                self.expect("}")
            else:
                self.decl("")

    def decl(self, ns: str) -> None:
        def q(n: str) -> str:
            return f"{ns}::{n}" if ns else n

        if self.accept("entity"):
            names = [self.ident("an entity type name")]
            while self.accept(","):
                names.append(self.ident("an entity type name"))
            if self.accept("enum"):
                self.expect("[")
                values: list[str] = []
                while self.tok.kind == "str":
                    values.append(_unquote(self.advance().text))
                    if not self.accept(","):
                        break
                self.expect("]")
                self.expect(";")
                for n in names:
                    self.raw_entities.append((ns, q(n), [], None, None, values))
                return
            parents: list[str] = []
            if self.accept("in"):
                parents = self.type_list()
            attrs = None
            self.accept("=")
            if self.at("{"):
                attrs = self.record()
            tags = None
            if self.accept("tags"):
                tags = self.type_expr()
            self.expect(";")
            for n in names:
                self.raw_entities.append((ns, q(n), parents, attrs, tags, None))
        elif self.accept("action"):
            names = [self.name()]
            while self.accept(","):
                names.append(self.name())
            parents_a: list[tuple[str | None, str]] = []
            if self.accept("in"):
                if self.accept("["):
                    while not self.at("]"):
                        parents_a.append(self.action_ref())
                        if not self.accept(","):
                            break
                    self.expect("]")
                else:
                    parents_a.append(self.action_ref())
            principals: list[str] = []
            resources: list[str] = []
            context: Any = None
            if self.accept("appliesTo"):
                self.expect("{")
                while not self.at("}"):
                    self.annotations()
                    key = self.ident("principal, resource or context")
                    self.expect(":")
                    if key == "principal":
                        principals = self.type_list()
                    elif key == "resource":
                        resources = self.type_list()
                    elif key == "context":
                        context = self.type_expr()
                    else:
                        self.i -= 2
                        self.fail("principal, resource or context")
                    if not self.accept(","):
                        break
                self.expect("}")
            if self.at("attributes"):
                self.fail("';' (action attributes are not part of Cedar 4)")
            self.expect(";")
            for n in names:
                self.raw_actions.append((ns, EntityUID(q("Action"), n), parents_a, principals, resources, context))
        elif self.accept("type"):
            n = self.ident("a type name")
            self.expect("=")
            self.common[q(n)] = (ns, self.type_expr())
            self.expect(";")
        else:
            self.fail("'entity', 'action', 'type' or 'namespace'")

    def action_ref(self) -> tuple[str | None, str]:
        if self.tok.kind == "str":
            return (None, _unquote(self.advance().text))
        parts = [self.ident("an action name")]
        while self.accept("::"):
            if self.tok.kind == "str":
                return ("::".join(parts), _unquote(self.advance().text))
            parts.append(self.ident("a name"))
        if len(parts) != 1:
            self.fail("an action name")
        return (None, parts[0])

    def type_list(self) -> list[str]:
        if self.accept("["):
            out: list[str] = []
            while not self.at("]"):
                out.append(self.path())
                if not self.accept(","):
                    break
            self.expect("]")
            return out
        return [self.path()]

    def type_expr(self) -> Any:
        if self.at("{"):
            return self.record()
        if self.at("Set") and self.toks[self.i + 1].text == "<":
            self.advance()
            self.expect("<")
            elem = self.type_expr()
            self.expect(">")
            return ("set", elem)
        return ("name", self.path())

    def record(self) -> Any:
        self.expect("{")
        attrs: list[tuple[str, Any, bool]] = []
        while not self.at("}"):
            self.annotations()
            n = self.name()
            required = not self.accept("?")
            self.expect(":")
            attrs.append((n, self.type_expr(), required))
            if not self.accept(","):
                break
        self.expect("}")
        return ("record", attrs)

    # -- resolution of names
    def resolve(self) -> Schema:
        entity_names = {e[1] for e in self.raw_entities}
        schema = Schema()

        def rtype(ns: str, raw: Any, depth: int = 0) -> SType:
            if depth > 50:
                raise DSLError("a common type refers to itself", filename=self.filename)
            if raw is None:
                return EMPTY_RECORD
            kind = raw[0]
            if kind == "set":
                return SType("Set", elem=rtype(ns, raw[1], depth + 1))
            if kind == "record":
                return SType("Record", attrs=tuple((n, rtype(ns, t, depth + 1), r) for n, t, r in raw[1]))
            n = raw[1]
            if n.startswith("__cedar::"):
                base = n[len("__cedar::") :]
                if base in _BUILTIN:
                    return SType(_BUILTIN[base])
                if base in _EXT:
                    return SType("Ext", name=base)
            for cand in ([f"{ns}::{n}"] if ns else []) + [n]:
                if cand in self.common:
                    cns, craw = self.common[cand]
                    return rtype(cns, craw, depth + 1)
                if cand in entity_names:
                    return SType("Entity", name=cand)
            if n in _BUILTIN:
                return SType(_BUILTIN[n])
            if n in _EXT:
                return SType("Ext", name=n)
            raise DSLError(f"unknown type {n!r} in the schema", filename=self.filename)

        def ename(ns: str, n: str) -> str:
            if ns and f"{ns}::{n}" in entity_names:
                return f"{ns}::{n}"
            return n

        for ns, name, parents, attrs, tags, enum in self.raw_entities:
            schema.entities[name] = EntityDecl(
                name, [ename(ns, p) for p in parents], rtype(ns, attrs), rtype(ns, tags) if tags is not None else None,
                enum)  # fmt: skip
        for ns, uid, parents_a, principals, resources, context in self.raw_actions:
            schema.actions[uid] = ActionDecl(
                uid,
                [EntityUID(t if t is not None else uid.type, i) for t, i in parents_a],
                [ename(ns, p) for p in principals],
                [ename(ns, r) for r in resources],
                rtype(ns, context),
            )
        return schema


def _unquote(s: str) -> str:
    from cda.policy.lexer import unescape

    return "".join(c for c in unescape(s[1:-1]) if c is not None)


# ---------------------------------------------------------------- the JSON form


def _qualifier(ns: str) -> Any:
    def q(n: str) -> str:
        return f"{ns}::{n}" if ns else n

    return q


def parse_schema_json(data: dict[str, Any], filename: str = "<schema.json>") -> Schema:
    """A schema in Cedar's JSON form: ``{"Namespace": {"entityTypes", "actions", "commonTypes"}}``."""
    schema = Schema()
    common: dict[str, tuple[str, Any]] = {}
    entity_names: set[str] = set()

    def bad(msg: str) -> DSLError:
        return DSLError(msg, filename=filename)

    if not isinstance(data, dict):
        raise bad("a JSON schema is an object of namespaces")
    for ns, body in data.items():
        if not isinstance(body, dict):
            raise bad(f"namespace {ns!r} must be an object")
        q = _qualifier(ns)
        for n, t in (body.get("commonTypes") or {}).items():
            common[q(n)] = (ns, t)
        for n in body.get("entityTypes") or {}:
            entity_names.add(q(n))

    def rtype(ns: str, t: Any, depth: int = 0) -> SType:
        if depth > 50 or not isinstance(t, dict):
            raise bad(f"a type must be an object, not {t!r}")
        kind = t.get("type")
        if kind in ("Long", "String", "Boolean", "Bool"):
            return SType(_BUILTIN[kind])
        if kind == "Set":
            return SType("Set", elem=rtype(ns, t.get("element"), depth + 1))
        if kind == "Record":
            attrs = t.get("attributes") or {}
            return SType("Record", attrs=tuple(
                (n, rtype(ns, a, depth + 1), bool(a.get("required", True))) for n, a in attrs.items()))  # fmt: skip
        if kind == "Extension":
            return SType("Ext", name=str(t.get("name")))
        n = t.get("name") if kind in ("Entity", "EntityOrCommon") else kind
        if not isinstance(n, str):
            raise bad(f"unknown type {t!r}")
        for cand in ([f"{ns}::{n}"] if ns else []) + [n]:
            if cand in common and kind != "Entity":
                cns, craw = common[cand]
                return rtype(cns, craw, depth + 1)
            if cand in entity_names:
                return SType("Entity", name=cand)
        if n in _EXT:
            return SType("Ext", name=n)
        if n in _BUILTIN:
            return SType(_BUILTIN[n])
        raise bad(f"unknown type {n!r} in the schema")

    for ns, body in data.items():
        q = _qualifier(ns)
        for n, e in (body.get("entityTypes") or {}).items():
            if "enum" in e:
                schema.entities[q(n)] = EntityDecl(q(n), enum=[str(v) for v in e["enum"]])
                continue
            parents = [q(p) if q(p) in entity_names else p for p in e.get("memberOfTypes") or []]
            shape = e.get("shape")
            tags = e.get("tags")
            schema.entities[q(n)] = EntityDecl(q(n), parents, rtype(ns, shape) if shape else EMPTY_RECORD,
                                               rtype(ns, tags) if tags else None)  # fmt: skip
        for n, a in (body.get("actions") or {}).items():
            uid = EntityUID(q("Action"), n)
            if "attributes" in a and a["attributes"]:
                raise UnsupportedConstruct("action attributes", filename=filename)
            parents_a = [EntityUID(p.get("type") or uid.type, p["id"]) for p in a.get("memberOf") or []]
            ap = a.get("appliesTo") or {}
            ctx = ap.get("context")
            schema.actions[uid] = ActionDecl(
                uid, parents_a,
                [q(p) if q(p) in entity_names else p for p in ap.get("principalTypes") or []],
                [q(r) if q(r) in entity_names else r for r in ap.get("resourceTypes") or []],
                rtype(ns, ctx) if ctx else EMPTY_RECORD,
            )  # fmt: skip
    return schema
