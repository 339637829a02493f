"""Cedar policy text to :class:`~cda.policy.syntax.Policy` objects (recursive descent).

Errors name the file, line and column and what was expected there. Constructs of Cedar that CDA
does not encode (``action is`` in a scope) are refused by name with
:class:`~cda.policy.syntax.UnsupportedConstruct`. Templates (``principal == ?principal``,
``resource in ?resource`` in the scope, the only place Cedar allows a slot) are read when the
caller asks for them (``templates=True``: a policy set with links, :mod:`cda.policy.templates`)
and refused by name otherwise. Policy ids follow Cedar's
``PolicySet::from_str``: ``policy0``, ``policy1``, … in order (an ``@id`` annotation is kept
as an annotation).
"""

from __future__ import annotations

from typing import Literal, NoReturn

from cda.errors import DSLSyntaxError
from cda.policy.lexer import Token, tokenize, unescape
from cda.policy.syntax import (
    ActionScope,
    And,
    Binary,
    Call,
    Expr,
    GetAttr,
    Has,
    If,
    Is,
    Like,
    Lit,
    Method,
    Or,
    Policy,
    RecLit,
    Scope,
    SetLit,
    Unary,
    UnsupportedConstruct,
    Var,
)
from cda.policy.values import LONG_MAX, LONG_MIN, EntityUID

__all__ = ["parse_policies", "parse_expression", "parse_entity_ref", "EXTENSION_FUNCTIONS", "METHODS"]

EXTENSION_FUNCTIONS = {"ip": 1, "decimal": 1, "datetime": 1, "duration": 1}
#: methods and their arity (besides the receiver)
METHODS = {
    "contains": 1,
    "containsAll": 1,
    "containsAny": 1,
    "isEmpty": 0,
    "getTag": 1,
    "hasTag": 1,
    "isIpv4": 0,
    "isIpv6": 0,
    "isLoopback": 0,
    "isMulticast": 0,
    "isInRange": 1,
    "lessThan": 1,
    "lessThanOrEqual": 1,
    "greaterThan": 1,
    "greaterThanOrEqual": 1,
    "offset": 1,
    "durationSince": 1,
    "toDate": 0,
    "toTime": 0,
    "toDays": 0,
    "toHours": 0,
    "toMinutes": 0,
    "toSeconds": 0,
    "toMilliseconds": 0,
}
_VARS = ("principal", "action", "resource", "context")
_RELOPS = ("==", "!=", "<", "<=", ">", ">=")


def parse_policies(text: str, filename: str = "<policies>", *, templates: bool = False) -> list[Policy]:
    """Every policy of ``text``, in order; with ``templates``, templates among them (a policy
    whose :attr:`~cda.policy.syntax.Policy.slots` is not empty), else a slot is refused."""
    p = _Parser(text, filename, templates)
    out: list[Policy] = []
    try:
        while p.tok.kind != "eof":
            out.append(p.policy(f"policy{len(out)}"))
    except RecursionError:
        t = p.tok
        raise DSLSyntaxError("the expression is nested too deeply to read", line=t.line, column=t.column,
                             filename=filename) from None  # fmt: skip
    return out


def parse_expression(text: str, filename: str = "<expr>") -> Expr:
    """One Cedar expression (used for tests and the request's context written as Cedar)."""
    p = _Parser(text, filename)
    e = p.expr()
    p.expect_kind("eof", "the end of the expression")
    return e


def parse_entity_ref(text: str, default_type: str | None = None) -> EntityUID:
    """``Type::"id"`` (or a bare ``id`` of ``default_type``), as given on a command line."""
    if default_type is not None and "::" not in text:
        return EntityUID(default_type, text.strip('"'))
    p = _Parser(text, "<command line>")
    uid = p.entity()
    p.expect_kind("eof", "the end of the entity")
    return uid


class _Parser:
    def __init__(self, text: str, filename: str, templates: bool = False) -> None:
        self.text = text
        self.filename = filename
        self.templates = templates
        self.toks = tokenize(text, filename)
        self.i = 0
        self.tok = self.toks[0]

    # -- helpers
    def advance(self) -> Token:
        t = self.tok
        self.i += 1
        self.tok = self.toks[min(self.i, len(self.toks) - 1)]
        return t

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def _source_line(self, line: int) -> str:
        lines = self.text.split("\n")
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def fail(self, expected: str, tok: Token | None = None) -> NoReturn:
        t = tok or self.tok
        found = "the end of the text" if t.kind == "eof" else repr(t.text)
        raise DSLSyntaxError(
            f"expected {expected}, found {found}",
            line=t.line,
            column=t.column,
            source_line=self._source_line(t.line),
            filename=self.filename,
        )

    def refuse(self, what: str, tok: Token) -> NoReturn:
        raise UnsupportedConstruct(
            f"{what} is not supported by CDA's Cedar reader",
            line=tok.line,
            column=tok.column,
            source_line=self._source_line(tok.line),
            filename=self.filename,
        )

    def at(self, text: str) -> bool:
        return self.tok.kind in ("punct", "ident") and self.tok.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.advance()
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.at(text):
            self.fail(what or repr(text))
        return self.advance()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.tok.kind != kind:
            self.fail(what)
        return self.advance()

    def string(self, tok: Token) -> str:
        try:
            chars = unescape(tok.text[1:-1])
        except ValueError as e:
            raise DSLSyntaxError(
                str(e), line=tok.line, column=tok.column, source_line=self._source_line(tok.line), filename=self.filename
            ) from None
        return "".join(c for c in chars if c is not None)

    # -- policies
    def policy(self, pid: str) -> Policy:
        annotations: dict[str, str] = {}
        start = self.tok
        while self.accept("@"):
            name = self.expect_kind("ident", "an annotation name").text
            value = ""
            if self.accept("("):
                value = self.string(self.expect_kind("str", "a string"))
                self.expect(")")
            if name in annotations:
                self.fail("an annotation not given before")
            annotations[name] = value
        eff = self.tok
        if not (self.at("permit") or self.at("forbid")):
            self.fail("'permit' or 'forbid'")
        self.advance()
        effect: Literal["permit", "forbid"] = "permit" if eff.text == "permit" else "forbid"
        self.expect("(")
        principal = self.scope("principal")
        self.expect(",")
        action = self.action_scope()
        self.expect(",")
        resource = self.scope("resource")
        self.accept(",")
        self.expect(")")
        conds: list[tuple[Literal["when", "unless"], Expr]] = []
        while self.at("when") or self.at("unless"):
            kind: Literal["when", "unless"] = "when" if self.advance().text == "when" else "unless"
            self.expect("{")
            conds.append((kind, self.expr()))
            self.expect("}")
        self.expect(";", "';' or a 'when'/'unless' condition")
        return Policy(pid, effect, principal, action, resource, tuple(conds), annotations, (start.line, start.column),
                      self.filename)  # fmt: skip

    def scope(self, var: str) -> Scope:
        self.expect(var)
        if self.accept("=="):
            return self.entity_or_slot("eq", var)
        if self.accept("in"):
            return self.entity_or_slot("in", var)
        if self.accept("is"):
            t = self.path("an entity type")
            if self.accept("in"):
                return self.entity_or_slot("is_in", var, t)
            return Scope("is", None, t)
        return Scope("any")

    def action_scope(self) -> ActionScope:
        self.expect("action")
        if self.accept("=="):
            return ActionScope("eq", (self.entity(),))
        if self.accept("in"):
            if self.accept("["):
                ents: list[EntityUID] = []
                while not self.at("]"):
                    ents.append(self.entity())
                    if not self.accept(","):
                        break
                self.expect("]")
                return ActionScope("in", tuple(ents))
            return ActionScope("in", (self.entity(),))
        if self.at("is"):
            self.refuse("'action is …' in a scope", self.tok)
        return ActionScope("any")

    def entity_or_slot(self, kind: Literal["eq", "in", "is_in"], var: str, etype: str | None = None) -> Scope:
        if not self.at("?"):
            return Scope(kind, self.entity(), etype)
        q = self.tok
        if not self.templates:
            self.refuse("a template slot (?principal/?resource)", q)
        self.advance()
        name = self.tok
        if name.kind != "ident" or name.text != var or (name.line, name.column) != (q.line, q.column + 1):
            self.fail(f"the slot ?{var} (a {var} scope takes only ?{var})", name)
        self.advance()
        return Scope(kind, None, etype, f"?{var}")

    def path(self, what: str) -> str:
        parts = [self.expect_kind("ident", what).text]
        while self.at("::") and self.peek().kind == "ident":
            self.advance()
            parts.append(self.advance().text)
        return "::".join(parts)

    def entity(self) -> EntityUID:
        parts = [self.expect_kind("ident", "an entity (Type::\"id\")").text]
        while True:
            self.expect("::", "'::'")
            if self.tok.kind == "str":
                return EntityUID("::".join(parts), self.string(self.advance()))
            parts.append(self.expect_kind("ident", "a name or a quoted id").text)

    # -- expressions
    def expr(self) -> Expr:
        if self.at("if"):
            t = self.advance()
            c = self.expr()
            self.expect("then")
            a = self.expr()
            self.expect("else")
            b = self.expr()
            return If(c, a, b, (t.line, t.column))
        return self.or_()

    def or_(self) -> Expr:
        e = self.and_()
        while self.at("||"):
            t = self.advance()
            e = Or(e, self.and_(), (t.line, t.column))
        return e

    def and_(self) -> Expr:
        e = self.relation()
        while self.at("&&"):
            t = self.advance()
            e = And(e, self.relation(), (t.line, t.column))
        return e

    def relation(self) -> Expr:
        e = self.add()
        t = self.tok
        pos = (t.line, t.column)
        if t.kind == "punct" and t.text in _RELOPS:
            self.advance()
            return Binary(t.text, e, self.add(), pos)
        if self.at("in"):
            self.advance()
            return Binary("in", e, self.add(), pos)
        if self.at("has"):
            self.advance()
            attrs = [self.attr_name()]
            while self.at("."):  # `e has a.b` is `e has a && e.a has b`
                self.advance()
                attrs.append(self.attr_name())
            out: Expr = Has(e, attrs[0], pos)
            base = e
            for prev, nxt in zip(attrs, attrs[1:], strict=False):
                base = GetAttr(base, prev, pos)
                out = And(out, Has(base, nxt, pos), pos)
            return out
        if self.at("like"):
            self.advance()
            s = self.expect_kind("str", "a pattern string")
            try:
                pat = unescape(s.text[1:-1], pattern=True)
            except ValueError as err:
                raise DSLSyntaxError(str(err), line=s.line, column=s.column, filename=self.filename) from None
            return Like(e, _pattern(pat), pos)
        if self.at("is"):
            self.advance()
            ty = self.path("an entity type")
            within = self.add() if self.accept("in") else None
            return Is(e, ty, within, pos)
        return e

    def attr_name(self) -> str:
        if self.tok.kind == "ident":
            return self.advance().text
        if self.tok.kind == "str":
            return self.string(self.advance())
        self.fail("an attribute name")

    def add(self) -> Expr:
        e = self.mult()
        while self.tok.kind == "punct" and self.tok.text in ("+", "-"):
            t = self.advance()
            e = Binary(t.text, e, self.mult(), (t.line, t.column))
        return e

    def mult(self) -> Expr:
        e = self.unary()
        while self.at("*"):
            t = self.advance()
            e = Binary("*", e, self.unary(), (t.line, t.column))
        return e

    def unary(self) -> Expr:
        ops: list[Token] = []
        while self.tok.kind == "punct" and self.tok.text in ("!", "-"):
            ops.append(self.advance())
        if ops and ops[-1].text == "-" and self.tok.kind == "int":
            # a negative literal: `-9223372036854775808` is a long, not an overflow
            t = self.advance()
            e: Expr = self.member(self.int_lit(t, negative=True))
            ops.pop()
        else:
            e = self.member(None)
        for op in reversed(ops):
            e = Unary("!" if op.text == "!" else "-", e, (op.line, op.column))
        return e

    def int_lit(self, t: Token, negative: bool = False) -> Lit:
        v = -int(t.text) if negative else int(t.text)
        if not (LONG_MIN <= v <= LONG_MAX):
            self.fail("a long within 64 bits", t)
        return Lit(v, (t.line, t.column))

    def member(self, start: Expr | None) -> Expr:
        e = start if start is not None else self.primary()
        while True:
            if self.at("."):
                self.advance()
                name_tok = self.expect_kind("ident", "an attribute or method name")
                pos = (name_tok.line, name_tok.column)
                if self.at("("):
                    if name_tok.text not in METHODS:
                        self.fail("a known method name", name_tok)
                    args = self.call_args()  # a wrong arity is an evaluation error, as in Cedar
                    e = Method(e, name_tok.text, args, pos)
                else:
                    e = GetAttr(e, name_tok.text, pos)
            elif self.at("["):
                t = self.advance()
                s = self.expect_kind("str", "a quoted attribute name")
                self.expect("]")
                e = GetAttr(e, self.string(s), (t.line, t.column))
            else:
                return e

    def call_args(self) -> tuple[Expr, ...]:
        self.expect("(")
        args: list[Expr] = []
        while not self.at(")"):
            args.append(self.expr())
            if not self.accept(","):
                break
        self.expect(")", "')' or ','")
        return tuple(args)

    def primary(self) -> Expr:
        t = self.tok
        pos = (t.line, t.column)
        if t.kind == "int":
            self.advance()
            return self.int_lit(t)
        if t.kind == "str":
            self.advance()
            return Lit(self.string(t), pos)
        if t.kind == "punct":
            if t.text == "(":
                self.advance()
                e = self.expr()
                self.expect(")")
                return e
            if t.text == "[":
                self.advance()
                items: list[Expr] = []
                while not self.at("]"):
                    items.append(self.expr())
                    if not self.accept(","):
                        break
                self.expect("]", "']' or ','")
                return SetLit(tuple(items), pos)
            if t.text == "{":
                self.advance()
                rec: list[tuple[str, Expr]] = []
                seen: set[str] = set()
                while not self.at("}"):
                    k = self.tok
                    name = self.attr_name()
                    if name in seen:
                        self.fail("an attribute not given before", k)
                    seen.add(name)
                    self.expect(":")
                    rec.append((name, self.expr()))
                    if not self.accept(","):
                        break
                self.expect("}", "'}' or ','")
                return RecLit(tuple(rec), pos)
            if t.text == "?":
                self.refuse("a template slot in a condition (Cedar allows ?principal/?resource only in the scope)"
                            if self.templates else "a template slot (?principal/?resource)", t)  # fmt: skip
            self.fail("an expression")
        if t.kind != "ident":
            self.fail("an expression")
        if t.text in ("true", "false"):
            self.advance()
            return Lit(t.text == "true", pos)
        if t.text in _VARS and not (self.peek().kind == "punct" and self.peek().text == "::"):
            self.advance()
            return Var(t.text, pos)  # type: ignore[arg-type]
        if t.text == "if":
            return self.expr()
        # a path: an entity `A::B::"id"` or an extension function `ip(…)` / `A::f(…)`
        parts = [self.advance().text]
        while self.at("::"):
            self.advance()
            if self.tok.kind == "str":
                return Lit(EntityUID("::".join(parts), self.string(self.advance())), pos)
            parts.append(self.expect_kind("ident", "a name or a quoted id").text)
        name = "::".join(parts)
        if self.at("("):
            if name not in EXTENSION_FUNCTIONS:
                self.fail("a known extension function (ip, decimal, datetime, duration)", t)
            args = self.call_args()  # a wrong arity is an evaluation error, as in Cedar
            return Call(name, args, pos)
        self.fail("an expression (a literal, a variable, an entity, a call)", t)


def _pattern(chars: list[str | None]) -> tuple[str | None, ...]:
    out: list[str | None] = []
    for c in chars:
        if c is None:
            if not out or out[-1] is not None:
                out.append(None)
        elif out and out[-1] is not None:
            out[-1] += c
        else:
            out.append(c)
    return tuple(out)
