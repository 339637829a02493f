"""Checked, grounded problems: AST → :class:`~cda.encodings.ir.GroundProblem`.

This is the type checker and the grounder in one walk. It resolves every name against the
declarations, checks arities, domains, prefixes (``hyp:``, ``event:``…) and units, unrolls
quantifiers over their finite domains, evaluates closed predicates and Ken paths, encodes
paths over hypothetical edges as bounded reachability, and normalises every comparison to an
integer linear constraint. Every mistake raises ``DSLTypeError``/``UnitError`` at its spot.

Semantics fixed here (see docs/dsl.md):

* ``pred`` predicates are *closed*: true exactly for their ``fact`` lines and Ken edges.
* ``hyp`` (abducibles), ``observable`` and ``var`` atoms are free Boolean choices.
* metrics are whole numbers of their declared unit, events whole seconds.

Grounding is bounded in time and size. The grounder counts *instances* (each value a quantifier
variable takes, in every grounding of its body, and each atom of a declared ``hyp``/``observable``
predicate): past :data:`MAX_GROUND_INSTANCES` it refuses the problem (:class:`~cda.errors.
BudgetExceeded`, naming the statement) before memory runs into gigabytes, and every
:attr:`~cda.contracts.deadline.Deadline.EVERY` instances it reads the run's deadline, raising
:class:`~cda.contracts.deadline.OutOfTime` ("while grounding (N of at most M instances)") that the
API turns into a labelled partial result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import product
from typing import Any

from cda.contracts import limits
from cda.contracts.deadline import NO_DEADLINE, Deadline, OutOfTime
from cda.encodings import ast as A
from cda.encodings import numbers, units
from cda.encodings.construct import fast_constructor
from cda.encodings.ir import (
    NUM_MAX,
    Atom,
    AtomInfo,
    Claim,
    Clause,
    Const,
    Expectation,
    GroundProblem,
    MinimalGoal,
    Node,
    NodeFactory,
    NumVar,
    SoftClause,
    walk,
)
from cda.errors import BudgetExceeded, DSLTypeError, UnitError
from cda.ken.graph import KenGraph

__all__ = ["ground_problem", "Located", "RISK_LEVELS", "MAX_GROUND_INSTANCES", "instance_bound"]

#: the most instances one problem may ground (quantifier instances plus declared hyp/observable
#: atoms). Measured on ``forall x, y, z`` over ``hyp r(D, D, D)``: 436,000 instances (60 values)
#: take 2 s and 230 MB to ground and 1 GB with z3's terms; 992,000 (79 values) 2.7 GB; 2 million
#: (100 values) 5 GB. Past this a problem is refused, naming the statement that overflowed,
#: rather than let it run the machine out of memory
MAX_GROUND_INSTANCES = 500_000

RISK_LEVELS = ("low", "medium", "high", "hard")

#: words of the grammar; declaring one as a name would make formulas unreadable
RESERVED = frozenset(
    "domain hyp observable pred var event metric fact observe hard soft goal ken not and or implies iff "
    "xor forall exists in holds prefer at_most at_least exactly before within of path hops hop value time "
    "only_if risk weight top prove disprove best_explanation minimal_explanations min_cardinality true false low medium "
    "high expect".split()
)
OPEN_KINDS = ("hyp", "observable", "var")
_PREFIX_KIND = {"hyp": "hyp", "obs": "observable", "pred": "pred"}


_FAtom, _FNot, _FNary, _FImplies, _Hard = A.FAtom, A.FNot, A.FNary, A.FImplies, A.Hard
_AND_OR = frozenset(("and", "or"))
_SHAPE_KEY = A.SHAPE_KEY

#: reader shape -> the function grounding its formulas (``None``: the shape holds a node the
#: compiled form does not cover; grounded node by node). Process-wide, as the reader's shapes.
_SHAPE_GROUNDERS: dict[tuple[str, ...], Callable[..., Node] | None] = {}
_MAX_SHAPE_GROUNDERS = 1024
_UNCOMPILED = object()
_NO_BINDINGS: dict[str, str] = {}  # never written: an atom's variables are looked up in it
_Clause = fast_constructor(Clause)  # a problem's clauses are made by the thousand


def _compile_grounder(formula: A.Formula) -> Callable[..., Node] | None:
    """A function ``(formula, atom, plain, f, negation, env) -> Node`` doing what
    :meth:`_Grounder.formula` does on every formula with ``formula``'s structure: the atoms,
    negations, ``and``/``or`` and ``implies`` of a reader shape, each operand reached by its path
    from the top. ``None`` for anything else (an ``iff`` chain, whose operands are all grounded
    before it folds, included).

    Why: a large problem's clauses come in a few shapes; walking each one node by node, a type
    test and a call per node, was a third of grounding it. A plain atom met before is looked up
    in ``plain`` (the grounder's atoms by name) and the negation of a node met before in
    ``negation`` (the factory's, by the node's number) without a call; on a miss, ``atom`` and
    ``f.not_`` make them, so the factory's calls come in the walk's order (the same numbers).
    """
    lines: list[str] = []

    def fresh(value: str) -> str:
        name = f"x{len(lines)}"
        lines.append(f"{name} = {value}")
        return name

    def source(n: object, path: str) -> str:
        kind = type(n)
        if kind is _FAtom and n.kind is None and n.args == ():  # type: ignore[attr-defined]
            node = fresh(path)
            return fresh(f"plain({node}.pred) or atom({node}, env)")
        if kind is _FNot:
            arg = source(n.arg, path + ".arg")  # type: ignore[attr-defined]
            return fresh(f"negation({arg}.uid) or f.not_({arg})")
        if kind is _FNary and n.op in _AND_OR:  # type: ignore[attr-defined]
            args = [source(a, f"{path}.args[{i}]") for i, a in enumerate(n.args)]  # type: ignore[attr-defined]
            if len(args) == 2:
                return fresh(f"f.{'or2' if n.op == 'or' else 'and2'}({args[0]}, {args[1]})")  # type: ignore[attr-defined]
            return fresh(f"f.{'or_' if n.op == 'or' else 'and_'}(({''.join(a + ', ' for a in args)}))")  # type: ignore[attr-defined]
        if kind is _FImplies:  # the factory's implies: or_((not_(lhs), rhs)), in that order
            lhs = source(n.lhs, path + ".lhs")  # type: ignore[attr-defined]
            rhs = source(n.rhs, path + ".rhs")  # type: ignore[attr-defined]
            return fresh(f"f.or2(negation({lhs}.uid) or f.not_({lhs}), {rhs})")
        raise LookupError(kind)

    try:
        top = source(formula, "F")
    except (LookupError, RecursionError):
        return None
    code = "def ground(F, atom, plain, f, negation, env):\n" + "".join(f"    {line}\n" for line in lines)
    code += f"    return {top}\n"
    namespace: dict[str, Any] = {}
    try:
        exec(code, namespace)  # as the reader compiles its shapes
    except (SyntaxError, RecursionError, MemoryError):  # nested past the compiler's limits
        return None
    ground: Callable[..., Node] = namespace["ground"]
    return ground


def _num(value: Fraction) -> str:
    return numbers.show(value)


def _fmt_atom(pred: str, args: Sequence[str]) -> str:
    return f"{pred}({', '.join(args)})" if args else pred


class _Grounder:
    def __init__(self, ast: A.ProblemAST, ken: KenGraph | None, deadline: Deadline = NO_DEADLINE) -> None:
        self.ast = ast
        self.deadline = deadline
        self.instances = 0  # grounded so far (see the module's docstring)
        self.bound = 0  # at most this many in all: known once :meth:`instance_bound` was asked
        self.at: A.Pos = (0, 0)  # the statement being grounded, for the size refusal
        self.lines = ast.source.split("\n")  # lark counts lines by "\n" only
        self.filename = ast.filename
        self.f = NodeFactory()
        self.gp = GroundProblem(factory=self.f, filename=ast.filename)
        self.domains: dict[str, tuple[str, ...]] = {}
        #: each domain's values by position: membership tests, and domain order for the guards
        self.domain_index: dict[str, dict[str, int]] = {}
        self.preds: dict[str, A.PredDecl] = {}
        self.events: dict[str, A.EventDecl] = {}
        self.metrics: dict[str, A.MetricDecl] = {}
        self.closed_facts: dict[str, set[tuple[str, ...]]] = {}
        # closed facts by (predicate, argument position, the other arguments): the values there
        self._fact_index: dict[tuple[str, int], dict[tuple[str, ...], set[str]]] = {}
        self._successors: dict[tuple[str, str], frozenset[str]] = {}  # Ken's related_by, as sets
        self.ken = ken if ken is not None else KenGraph()
        self.names: set[str] = set()
        #: expect in_every_core NAME, checked once every clause is known: the name, its error
        self.core_names: list[tuple[str, DSLTypeError]] = []
        self.risk_used = False
        # argument-free atoms, once checked: the same node whatever the environment (the checks
        # read only the declarations and the closed facts, which are complete before any formula)
        self._plain_atoms: dict[str | tuple[str, str], Node] = {}
        self._plain_get = self._plain_atoms.get  # for the compiled grounders

    # ---- errors
    def err(self, message: str, pos: A.Pos, cls: type[DSLTypeError] = DSLTypeError) -> DSLTypeError:
        line, col = pos
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else None
        return cls(message, line=line or None, column=col or None, source_line=src, filename=self.filename)

    # ---- declarations
    def declare(self, statements: list[A.Statement]) -> None:
        taken: dict[str, str] = {}

        def claim_name(name: str, what: str, pos: A.Pos) -> None:
            if name in RESERVED:
                raise self.err(f"'{name}' is a reserved word and cannot name {what}", pos)
            if name in taken:
                raise self.err(f"'{name}' is already declared as {taken[name]}", pos)
            taken[name] = what

        for st in statements:
            if isinstance(st, A.DomainDecl):
                claim_name(st.name, "a domain", st.pos)
                if not st.values:
                    raise self.err(
                        f"domain {st.name} is empty: list at least one value (a quantifier over it, or a "
                        "predicate on it, would have no instances)",
                        st.pos,
                    )
                if len(set(st.values)) != len(st.values):
                    raise self.err(f"domain {st.name} lists a value twice", st.pos)
                for value in st.values:
                    if value in RESERVED:
                        raise self.err(f"'{value}' is a reserved word and cannot be a domain value", st.pos)
                self.domains[st.name] = st.values
                self.domain_index[st.name] = {v: i for i, v in enumerate(st.values)}
        for st in statements:
            if isinstance(st, A.PredDecl):
                claim_name(st.name, f"{'an' if st.kind[:1] in 'aeiou' else 'a'} {st.kind} predicate", st.pos)
                for dom, dpos in zip(st.domains, st.domain_pos):
                    if dom not in self.domains:
                        raise self.err(f"unknown domain '{dom}'{self._known(self.domains)}", dpos)
                self.preds[st.name] = st
            elif isinstance(st, A.EventDecl):
                claim_name(st.name, "an event", st.pos)
                self.events[st.name] = st
            elif isinstance(st, A.MetricDecl):
                claim_name(st.name, "a metric", st.pos)
                reason = units.check_unit(st.unit)
                if reason:
                    raise self.err(reason, st.unit_pos, UnitError)
                self.metrics[st.name] = st
        # every instance of an abducible or observable exists, used or not, in declaration order
        for decl in self.preds.values():
            if decl.kind in ("hyp", "observable"):
                self.at = decl.pos
                size = math.prod(len(self.domains[d]) for d in decl.domains)
                if self.instances + size > MAX_GROUND_INSTANCES:
                    self.instances += size
                    raise self._too_large()
                for args in product(*(self.domains[d] for d in decl.domains)):
                    self._step()
                    self._register_atom(decl.name, decl.kind, args)
        for name in self.events:
            self.gp.numvars[f"event:{name}"] = NumVar(f"event:{name}", "event", "s")
        for name, metric in self.metrics.items():
            self.gp.numvars[f"metric:{name}"] = NumVar(f"metric:{name}", "metric", metric.unit)

    def _step(self) -> None:
        """Count one instance: refuse past the size limit, stop when the deadline has passed."""
        self.instances += 1
        if self.instances > MAX_GROUND_INSTANCES:
            raise self._too_large()
        if self.deadline.tick():
            if not self.bound:
                self.bound = instance_bound(self.ast.statements, self.domains)
            raise OutOfTime(
                f"while grounding ({self.instances:,} of at most {max(self.bound, self.instances):,} instances)"
            )

    def _too_large(self) -> BudgetExceeded:
        where = f"{self.filename or '<input>'}:{self.at[0]}:{self.at[1]}" if self.at[0] else (self.filename or "<input>")
        return BudgetExceeded(
            f"{where}: the problem grounds to more than {MAX_GROUND_INSTANCES:,} instances (quantifier instances "
            f"and declared hyp/observable atoms; {self.instances:,} counted up to this statement): "
            "use smaller domains, guard quantifiers with a closed predicate (`forall t in D: depends(s, t) "
            "implies ...` grounds only the facts), or split the problem"
        )

    @staticmethod
    def _known(table: Iterable[str]) -> str:
        names = sorted(table)
        return f" (known: {', '.join(names[:12])}{', …' if len(names) > 12 else ''})" if names else ""

    def _register_atom(self, pred: str, kind: str, args: Sequence[str]) -> Node:
        name = _fmt_atom(pred, args)
        if name not in self.gp.atoms:
            self.gp.atoms[name] = AtomInfo(name, kind, pred, tuple(args))
        return self.f.atom(name)

    # ---- terms and atoms
    def term_value(self, term: A.Term, env: dict[str, str]) -> str:
        if term.kind is None and term.name in env:
            return env[term.name]
        return term.name

    def atom(self, node: A.FAtom, env: dict[str, str]) -> Node:
        if not node.args:
            key = node.pred if node.kind is None else (node.kind, node.pred)
            found = self._plain_atoms.get(key)
            if found is None:
                found = self._plain_atoms[key] = self._atom(node, env)
            return found
        return self._atom(node, env)

    def _atom(self, node: A.FAtom, env: dict[str, str]) -> Node:
        if node.pred == "use" and node.pred not in self.preds:
            if len(node.args) != 1:
                raise self.err("use(provider:X) takes one provider", node.pos)
            value = self.term_value(node.args[0], env)
            return self._register_atom("use", "var", (value,))
        decl = self.preds.get(node.pred)
        if decl is None:
            raise self.err(f"unknown predicate '{node.pred}'{self._known(self.preds)}", node.pos)
        if node.kind is not None and _PREFIX_KIND[node.kind] != decl.kind:
            raise self.err(
                f"'{node.kind}:{node.pred}' but {node.pred} is declared {decl.kind}, not {_PREFIX_KIND[node.kind]}",
                node.pos,
            )
        if len(node.args) != len(decl.domains):
            raise self.err(
                f"{node.pred} takes {len(decl.domains)} argument{'s' if len(decl.domains) != 1 else ''}, given {len(node.args)}",
                node.pos,
            )
        values = []
        for term, dom in zip(node.args, decl.domains):
            value = self.term_value(term, env)
            if value not in self.domain_index[dom]:
                raise self.err(
                    f"'{value}' is not in domain {dom} = {{{', '.join(self.domains[dom])}}}", term.pos
                )
            values.append(value)
        if decl.kind == "pred":
            return self.f.const(self._closed_holds(decl.name, tuple(values)))
        return self._register_atom(decl.name, decl.kind, values)

    def _closed_holds(self, pred: str, args: tuple[str, ...]) -> bool:
        if args in self.closed_facts.get(pred, ()):
            return True
        return len(args) == 2 and args[1] in self._related(args[0], pred)

    def _related(self, node: str, relation: str) -> frozenset[str]:
        """Ken's ``related_by``, asked once per node and relation (Ken cannot change meanwhile)."""
        key = (node, relation)
        found = self._successors.get(key)
        if found is None:
            found = self._successors[key] = frozenset(self.ken.related_by(node, relation))
        return found

    # ---- quantifiers guarded by a closed predicate
    def _instances(self, node: A.FQuant, values: tuple[str, ...], env: dict[str, str]) -> Sequence[str]:
        """The values of ``node.var`` worth grounding ``node.body`` for.

        In ``exists t in D: depends(s, t) and φ`` (or ``forall t in D: depends(s, t) implies φ``)
        the instances where the closed guard ``depends(s, t)`` is false ground to ``false``
        (``true``), which ``or`` (``and``) drops. Grounding only the guard's instances gives the
        same formula and costs the guard's facts, not the domain: a 1,000-service graph grounded
        in 8 s, all of it building instances that were then dropped. It is done only when
        grounding the skipped instances could not have raised an error or registered an atom
        (:meth:`_static_ok`), so a mistake is reported as before.
        """
        guard = self._guard(node)
        if guard is None or not self._static_ok(node.body, env, {node.var: node.domain}):
            return values
        decl = self.preds[guard.pred]
        slots = [i for i, term in enumerate(guard.args) if term.kind is None and term.name == node.var]
        fixed = [self.term_value(term, env) for term in guard.args]
        if len(slots) != 1:  # the variable twice (depends(t, t)): test each value
            return [v for v in values if self._closed_holds(decl.name, tuple(v if i in slots else a for i, a in enumerate(fixed)))]
        slot = slots[0]
        found = set(self._facts_at(decl.name, slot).get(tuple(fixed[:slot] + fixed[slot + 1 :]), ()))
        if len(fixed) == 2 and slot == 1:
            found |= self._related(fixed[0], decl.name)
        elif len(fixed) == 2:  # Ken answers successors only: test each value
            found.update(v for v in values if fixed[1] in self._related(v, decl.name))
        rank = self.domain_index[node.domain]
        return sorted((v for v in found if v in rank), key=rank.__getitem__)  # in domain order, as before

    def _guard(self, node: A.FQuant) -> A.FAtom | None:
        """A closed-predicate atom on ``node.var`` that must hold for an instance to matter: a
        conjunct of an ``exists`` body, or of the premise of a ``forall`` body's ``implies``."""
        body = node.body
        if node.quantifier == "forall":
            if not isinstance(body, A.FImplies):
                return None
            body = body.lhs
        conjuncts = body.args if isinstance(body, A.FNary) and body.op == "and" else (body,)
        for c in conjuncts:
            if not isinstance(c, A.FAtom) or c.kind not in (None, "pred"):
                continue
            decl = self.preds.get(c.pred)
            if decl is not None and decl.kind == "pred" and any(t.kind is None and t.name == node.var for t in c.args):
                return c
        return None

    def _facts_at(self, pred: str, slot: int) -> dict[tuple[str, ...], set[str]]:
        """``pred``'s facts by their other arguments: the values at ``slot``."""
        index = self._fact_index.get((pred, slot))
        if index is None:
            index = self._fact_index[(pred, slot)] = {}
            for args in self.closed_facts.get(pred, ()):
                index.setdefault(args[:slot] + args[slot + 1 :], set()).add(args[slot])
        return index

    def _static_ok(self, node: A.Formula, env: dict[str, str], bound: dict[str, str]) -> bool:
        """Whether grounding ``node`` raises no error and registers no atom for any values of
        the variables in ``bound`` (variable → domain). Only formulas of declared ``hyp``,
        ``observable`` and ``pred`` atoms qualify (those atoms all exist before grounding), and
        a variable's domain must lie inside each argument's declared domain."""
        if isinstance(node, A.FAtom):
            decl = self.preds.get(node.pred)
            if decl is None or decl.kind not in ("hyp", "observable", "pred") or len(node.args) != len(decl.domains):
                return False
            if node.kind is not None and _PREFIX_KIND[node.kind] != decl.kind:
                return False
            for term, dom in zip(node.args, decl.domains):
                if term.kind is None and term.name in bound:
                    inner = bound[term.name]
                    if inner != dom and not self.domain_index[inner].keys() <= self.domain_index[dom].keys():
                        return False
                elif self.term_value(term, env) not in self.domain_index[dom]:
                    return False
            return True
        if isinstance(node, A.FNot):
            return self._static_ok(node.arg, env, bound)
        if isinstance(node, (A.FNary, A.FCard)):
            return all(self._static_ok(a, env, bound) for a in node.args)
        if isinstance(node, A.FImplies):
            return self._static_ok(node.lhs, env, bound) and self._static_ok(node.rhs, env, bound)
        if isinstance(node, A.FConst):
            return True
        if isinstance(node, A.FQuant):
            return node.domain in self.domains and self._static_ok(node.body, env, {**bound, node.var: node.domain})
        return False

    # ---- formulas
    def shaped(self, shape: tuple[str, ...], formula: A.Formula) -> Node:
        """:meth:`formula` of ``formula`` (no variables bound), by the function compiled for its
        reader's shape (:data:`~cda.encodings.ast.SHAPE_KEY`), compiled from this formula on the
        shape's first use: the same calls of the factory in the same order (the nodes get the
        same numbers), without a walk's dispatch per node."""
        ground = _SHAPE_GROUNDERS.get(shape, _UNCOMPILED)
        if ground is _UNCOMPILED:
            ground = _compile_grounder(formula)
            if len(_SHAPE_GROUNDERS) < _MAX_SHAPE_GROUNDERS:
                _SHAPE_GROUNDERS[shape] = ground
        if ground is None:
            return self.formula(formula, {})
        return ground(formula, self.atom, self._plain_get, self.f, self.f.negation, _NO_BINDINGS)  # type: ignore[operator]

    def formula(self, node: A.Formula, env: dict[str, str]) -> Node:
        f = self.f
        # the commonest forms first, by exact type, an atom operand grounded without a call of
        # this method: large problems are mostly atoms, negations, and/or, implies (a subclass of
        # a node type, if one is ever made, takes the general path below)
        kind = type(node)
        n: Any = node  # its type is told by ``kind``
        if kind is _FAtom:
            return self.atom(n, env)
        if kind is _FNot:
            arg = n.arg
            return f.not_(self.atom(arg, env) if type(arg) is _FAtom else self.formula(arg, env))
        if kind is _FNary and n.op in _AND_OR:
            atom, formula = self.atom, self.formula
            args = [atom(a, env) if type(a) is _FAtom else formula(a, env) for a in n.args]
            return f.or_(args) if n.op == "or" else f.and_(args)
        if kind is _FImplies:
            lhs, rhs = n.lhs, n.rhs
            return f.implies(
                self.atom(lhs, env) if type(lhs) is _FAtom else self.formula(lhs, env),
                self.atom(rhs, env) if type(rhs) is _FAtom else self.formula(rhs, env),
            )
        if isinstance(node, A.FAtom):
            return self.atom(node, env)
        if isinstance(node, A.FNot):
            return f.not_(self.formula(node.arg, env))
        if isinstance(node, A.FNary):
            args = [self.formula(a, env) for a in node.args]
            if node.op == "or":
                return f.or_(args)
            if node.op == "and":
                return f.and_(args)
            if node.op == "xor":
                return f.xor(args)
            out = args[0]  # iff chains associate to the left
            for nxt in args[1:]:
                out = f.iff(out, nxt)
            return out
        if isinstance(node, A.FImplies):
            return f.implies(self.formula(node.lhs, env), self.formula(node.rhs, env))
        if isinstance(node, A.FConst):
            return f.const(node.value)
        if isinstance(node, A.FCard):
            op = {"at_most": "<=", "at_least": ">=", "exactly": "="}[node.op]
            return f.card(op, node.k, [self.formula(a, env) for a in node.args])
        if isinstance(node, A.FQuant):
            values = self.domains.get(node.domain)
            if values is None:
                raise self.err(f"unknown domain '{node.domain}'{self._known(self.domains)}", node.domain_pos)
            parts = []
            for v in self._instances(node, values, env):
                self._step()
                parts.append(self.formula(node.body, {**env, node.var: v}))
            return f.and_(parts) if node.quantifier == "forall" else f.or_(parts)
        if isinstance(node, A.FBefore):
            a, b = self.event_var(node.first), self.event_var(node.second)
            return f.linear({a: 1, b: -1} if a != b else {}, "<=", -1)
        if isinstance(node, A.FWithin):
            a, b = self.event_var(node.first), self.event_var(node.second)
            span = self.quantity_in(node.span, "s", "an event time")
            limit = math.floor(span)
            if a == b:
                return f.const(limit >= 0)
            if limit >= 2 * NUM_MAX:  # two times in [-10⁹, 10⁹] s are never further apart
                self._range_note(node.pos, True, f"a span of {_num(span)} s")
            return f.and_([f.linear({a: 1, b: -1}, "<=", limit), f.linear({a: -1, b: 1}, "<=", limit)])
        if isinstance(node, A.FPath):
            return self.path(node, env)
        if isinstance(node, A.FCompare):
            return self.compare(node)
        if isinstance(node, A.FRisk):
            return self.risk(node, env)
        raise TypeError(f"unhandled AST node {type(node).__name__}")

    # ---- risk policy: a one-hot choice of level, low < medium < high < hard
    def risk(self, node: A.FRisk, env: dict[str, str]) -> Node:
        if node.level not in RISK_LEVELS:
            raise self.err(f"unknown risk level '{node.level}' (levels: {', '.join(RISK_LEVELS)})", node.pos)
        if not self.risk_used:
            self.risk_used = True
            levels = [self._register_atom("risk", "var", (lvl,)) for lvl in RISK_LEVELS]
            self.gp.background.append(self.f.card("=", 1, levels))
        rank = RISK_LEVELS.index(node.level)
        ops = {
            "<=": lambda r: r <= rank,
            "<": lambda r: r < rank,
            ">=": lambda r: r >= rank,
            ">": lambda r: r > rank,
            "=": lambda r: r == rank,
            "!=": lambda r: r != rank,
        }
        allowed = [self.f.atom(_fmt_atom("risk", (lvl,))) for r, lvl in enumerate(RISK_LEVELS) if ops[node.op](r)]
        condition = self.f.or_(allowed)
        if node.provider is None:
            return condition
        use = self.atom(A.FAtom(None, "use", (node.provider,), node.provider.pos), env)
        return self.f.implies(use, condition)

    # ---- paths: Ken (closed) or bounded reachability (hypothetical edges)
    def path(self, node: A.FPath, env: dict[str, str]) -> Node:
        src, dst = self.term_value(node.source, env), self.term_value(node.target, env)
        decl = self.preds.get(node.relation)
        if node.hops < 1:
            raise self.err("a path needs at least 1 hop", node.pos)
        if decl is not None and decl.kind in OPEN_KINDS:
            if len(decl.domains) != 2:
                raise self.err(f"path relation {decl.name} must take 2 arguments", node.relation_pos)
            nodes = self.domain_index[decl.domains[0]].keys() | self.domain_index[decl.domains[1]].keys()
            for term, value in ((node.source, src), (node.target, dst)):
                if value not in nodes:
                    raise self.err(f"'{value}' is not a node of relation {decl.name}", term.pos)
            if src == dst:  # the empty path: a node reaches itself, as on the graph
                return self.f.true
            return self._reach(decl, src, dst, node.hops)
        if decl is not None and len(decl.domains) != 2:
            raise self.err(f"path relation {decl.name} must take 2 arguments", node.relation_pos)
        if decl is None and not self.ken.has_relation(node.relation):
            raise self.err(
                f"relation '{node.relation}' is neither a declared predicate nor a Ken relation", node.relation_pos
            )
        for term, value in ((node.source, src), (node.target, dst)):
            if not self.ken.has_node(value) and not any(value in vs for vs in self.domain_index.values()):
                raise self.err(f"unknown entity '{value}' (not in Ken nor in any domain)", term.pos)
        if src == dst:
            return self.f.true
        return self.f.const(self.ken.path(src, dst, relation=node.relation, max_hops=node.hops) is not None)

    def _reach(self, decl: A.PredDecl, src: str, dst: str, hops: int) -> Node:
        """reach_k(y): a path of 1..k edges from src to y, as a shared formula DAG."""
        d0, d1 = self.domain_index[decl.domains[0]], self.domain_index[decl.domains[1]]

        def edge(a: str, b: str) -> Node:
            if a in d0 and b in d1:
                return self._register_atom(decl.name, decl.kind, (a, b))
            return self.f.false

        nodes = list(dict.fromkeys(self.domains[decl.domains[0]] + self.domains[decl.domains[1]]))
        reach = {y: edge(src, y) for y in nodes}
        # a shortest path visits each node once: more than len(nodes) - 1 hops adds nothing
        for _ in range(min(hops, len(nodes) - 1) - 1):
            reach = {y: self.f.or_([reach[y]] + [self.f.and_([reach[z], edge(z, y)]) for z in nodes]) for y in nodes}
        return reach[dst]

    # ---- arithmetic
    def event_var(self, ref: A.ARef) -> str:
        if ref.name not in self.events:
            raise self.err(f"unknown event '{ref.name}'{self._known(self.events)}", ref.pos)
        return f"event:{ref.name}"

    def ref_var(self, ref: A.ARef) -> tuple[str, str]:
        if ref.kind == "event":
            return self.event_var(ref), "s"
        if ref.name not in self.metrics:
            raise self.err(f"unknown metric '{ref.name}'{self._known(self.metrics)}", ref.pos)
        return f"metric:{ref.name}", self.metrics[ref.name].unit

    def affine(self, from_unit: str, to_unit: str, pos: A.Pos) -> tuple[Fraction, Fraction] | None:
        """:func:`units.affine`, its refusal (a logarithmic unit) placed at ``pos``."""
        try:
            return units.affine(from_unit, to_unit)
        except UnitError as exc:
            raise self.err(exc.message, pos, UnitError) from None

    def quantity_in(self, q: A.AQuantity, unit: str, what: str) -> Fraction:
        """``q`` expressed in ``unit``; ``what`` names the thing ``q`` is compared with."""
        if q.unit is None:
            return q.value
        reason = units.check_unit(q.unit)
        if reason:
            raise self.err(reason, q.pos, UnitError)
        conversion = self.affine(q.unit, unit, q.pos)
        if conversion is None:
            raise self.err(
                f"unit mismatch: {_num(q.value)} {q.unit} against {what} in {unit} ({units.mismatch(q.unit, unit)})",
                q.pos,
                UnitError,
            )
        a, b = conversion
        return q.value * a + b

    def compare(self, node: A.FCompare) -> Node:
        # the reference unit: the first numeric reference's unit, else the first unit written
        ref_unit: str | None = None
        for term in node.lhs.terms + node.rhs.terms:
            if term.ref is not None:
                ref_unit = self.ref_var(term.ref)[1]
                break
        if ref_unit is None:
            for term in node.lhs.terms + node.rhs.terms:
                if term.quantity is not None and term.quantity.unit is not None:
                    ref_unit = term.quantity.unit
                    break
        first_ref = next((t.ref for t in node.lhs.terms + node.rhs.terms if t.ref is not None), None)
        ref_desc = "the other side"
        if first_ref is not None:
            ref_desc = f"{first_ref.kind}:{first_ref.name}"
        coefs: dict[str, Fraction] = {}
        constant = Fraction(0)
        for side, sign in ((node.lhs, 1), (node.rhs, -1)):
            for term in side.terms:
                if term.ref is not None:
                    var, unit = self.ref_var(term.ref)
                    if ref_unit is not None and self.affine(unit, ref_unit, term.pos) is None:
                        raise self.err(
                            f"unit mismatch: {var} is in {unit} but {ref_desc} is in {ref_unit} "
                            f"({units.mismatch(unit, ref_unit)})",
                            term.pos,
                            UnitError,
                        )
                    a, b = self.affine(unit, ref_unit, term.pos) if ref_unit else (Fraction(1), Fraction(0))  # type: ignore[misc]
                    coefs[var] = coefs.get(var, Fraction(0)) + sign * term.coef * a
                    constant += sign * term.coef * b
                else:
                    assert term.quantity is not None
                    value = self.quantity_in(term.quantity, ref_unit, ref_desc) if ref_unit else term.quantity.value
                    constant += sign * term.coef * value
        # sum(coefs * x) + constant  op  0   →   sum(coefs * x)  op  -constant, over integers
        bound = -constant
        scale = math.lcm(*(c.denominator for c in coefs.values()), bound.denominator)
        ints = {v: int(c * scale) for v, c in coefs.items()}
        b = bound * scale
        assert b.denominator == 1
        b_int = int(b)
        result = self._linear(ints, node.op, b_int)
        g = math.gcd(*ints.values())
        # decided by the variables' range alone, with a bound outside it: say so, or a bound the
        # user meant (5e9 ms) would be a silent conflict (or a silently dropped clause)
        if isinstance(result, Const) and g and abs(b_int) > NUM_MAX * g:
            what = f"the bound {_num(bound)} {ref_unit}" if ref_unit else f"the bound {_num(bound)}"
            self._range_note(node.pos, result.value, what)
        elif node.op in ("=", "!=") and g and b_int % g:
            self._whole_note(node.pos, node.op == "!=", coefs, bound, ref_unit)
        return result

    def _linear(self, ints: dict[str, int], op: str, b_int: int) -> Node:
        f = self.f
        neg = {v: -c for v, c in ints.items()}
        if op == "<=":
            return f.linear(ints, "<=", b_int)
        if op == "<":
            return f.linear(ints, "<=", b_int - 1)
        if op == ">=":
            return f.linear(neg, "<=", -b_int)
        if op == ">":
            return f.linear(neg, "<=", -b_int - 1)
        if op == "=":
            return f.linear(ints, "=", b_int)
        return f.not_(f.linear(ints, "=", b_int))

    def _range_note(self, pos: A.Pos, value: bool, what: str) -> None:
        """A note on the result: this comparison was decided by the numeric range, not the solver."""
        where = f"{self.filename or '<input>'}:{pos[0]}:{pos[1]}" if pos[0] else (self.filename or "<input>")
        note = (
            f"{where}: {what} lies outside the numeric range (every metric and event is a whole number "
            f"in [-10^9, 10^9] of its unit), so the comparison is {'true' if value else 'false'} in every model"
        )
        if note not in self.gp.notes:
            self.gp.notes.append(note)

    def _whole_note(self, pos: A.Pos, value: bool, coefs: dict[str, Fraction], bound: Fraction,
                    unit: str | None) -> None:
        """A note on the result: this (in)equality needs a non-whole value of a whole-numbered
        metric or event (``value(metric:latency) = 200.5 ms`` with ``metric latency : ms``), so
        it is decided by integrality alone, as a bound outside the range is (docs/dsl.md, Units)."""
        where = f"{self.filename or '<input>'}:{pos[0]}:{pos[1]}" if pos[0] else (self.filename or "<input>")
        unit_text = f" {unit}" if unit else ""
        names = [f"{kind} {name}" for kind, _, name in (var.partition(":") for var in coefs)]
        whole = f"whole {unit}" if unit else "whole units"
        if len(coefs) == 1:
            (coef,) = coefs.values()
            what = f"{names[0]} counts {whole}, and {_num(bound / coef)}{unit_text} is not a whole number of them"
        else:
            what = f"{' and '.join(names)} count {whole}, which never make up {_num(bound)}{unit_text}"
        hint = "declare a finer unit to compare with it" if any(n.startswith("metric ") for n in names) else (
            "event times are whole seconds")
        note = (
            f"{where}: {what} ({hint}), so the comparison is "
            f"{'true' if value else 'false'} in every model"
        )
        if note not in self.gp.notes:
            self.gp.notes.append(note)

    # ---- statements
    def unique_name(self, given: str | None, prefix: str, pos: A.Pos, name_pos: A.Pos | None = None) -> str:
        if given is not None:
            if given in self.names:
                raise self.err(f"the name '{given}' is used by another clause", name_pos or pos)
            self.names.add(given)
            return given
        name = f"{prefix}@{pos[0]}"
        if name in self.names:
            name = f"{prefix}@{pos[0]}:{pos[1]}"
        self.names.add(name)
        return name

    def statements(self, statements: list[A.Statement]) -> None:
        # declarations and facts are read first, from the statements that are no hard clause
        # (most of a large problem: one type test each here, not one pass per kind)
        others = [st for st in statements if type(st) is not _Hard]
        self.declare(others)
        for st in others:  # closed facts first: they may be used before they appear
            if isinstance(st, A.Fact):
                decl = self.preds.get(st.atom.pred)
                if decl is not None and decl.kind == "pred":
                    values = tuple(self._fact_args(st.atom, decl))
                    self.closed_facts.setdefault(decl.name, set()).add(values)
                    if len(values) == 2:
                        self.ken.add_edge(values[0], decl.name, values[1])
        for st in statements:
            self.statement(st, st.pos[0])

    def statement(self, st: A.Statement, line: int, text: str | None = None) -> None:
        """Check and ground one statement; ``line`` names an unnamed clause (``observe@12``).

        ``text`` is a claim's text when the statement was written outside the problem's own
        text (a claim string), where the line cannot be read back.
        """
        at = self.at = (line, st.pos[1])
        if type(st) is _Hard:  # the commonest statement, by its exact type (the isinstance chain below takes the rest)
            formula = st.formula  # type: ignore[attr-defined]
            shape = formula.__dict__.get(_SHAPE_KEY)
            node = self.formula(formula, {}) if shape is None else self.shaped(shape, formula)
            name = st.name  # type: ignore[attr-defined]
            if name is None:  # unique_name's, without the call
                names = self.names
                name = f"hard@{line}"
                if name in names:
                    name = f"hard@{line}:{at[1]}"
                names.add(name)
            else:
                name = self.unique_name(name, "hard", at, st.name_pos)  # type: ignore[attr-defined]
            self.gp.clauses.append(_Clause(name, "hard", node, line))
            return
        if isinstance(st, A.Fact):
            decl = self.preds.get(st.atom.pred)
            if decl is None:
                raise self.err(f"unknown predicate '{st.atom.pred}'{self._known(self.preds)}", st.atom.pos)
            if decl.kind != "pred":
                node = self.atom(st.atom, {})
                self.gp.clauses.append(Clause(self.unique_name(None, "fact", at), "fact", node, line))
        elif isinstance(st, A.Observe):
            self._no_abducibles(st.formula)
            node = self.formula(st.formula, {})
            for sub in walk([node]):
                if isinstance(sub, Atom) and self.gp.atoms[sub.name].kind == "observable":
                    self.gp.observed.add(sub.name)
            name = self.unique_name(st.name, "observe", at, st.name_pos)
            self.gp.clauses.append(Clause(name, "observation", node, line))
        elif isinstance(st, A.Hard):
            node = self.formula(st.formula, {})
            name = self.unique_name(st.name, "hard", at, st.name_pos)
            self.gp.clauses.append(Clause(name, "hard", node, line))
        elif isinstance(st, A.Soft):
            self.add_soft(st.name, st.weight, st.formula, at, st.name_pos, st.weight_pos)
        elif isinstance(st, A.FolBlock):
            self.gp.fol_blocks += 1
        elif isinstance(st, A.GoalBest):
            if st.top is not None and st.top < 1:
                raise self.err("top must be at least 1", st.pos)
            if st.top is not None and st.top > limits.MAX_COUNT:  # here, where the file and line are known
                raise self.err(f"top must be at most {limits.MAX_COUNT:,}, not {st.top}", st.pos)
            self.gp.top = st.top
        elif isinstance(st, A.GoalMinimal):
            if st.mode == "top" and (st.k is None or st.k < 1):
                raise self.err("top must be at least 1", st.pos)
            if st.mode == "top" and st.k is not None and st.k > limits.MAX_COUNT:
                raise self.err(f"top must be at most {limits.MAX_COUNT:,}, not {st.k}", st.pos)
            self.gp.minimal = MinimalGoal(st.mode, st.k)
        elif isinstance(st, A.Expect):
            self.expectation(st, at)
        elif isinstance(st, A.GoalClaim):
            node = self.formula(st.formula, {})
            name = self.unique_name(None, st.mode, at)
            self.gp.claims.append(Claim(name, st.mode, node, self._text_of(st) if text is None else text, line))

    def expectation(self, st: A.Expect, at: A.Pos) -> None:
        """Check an ``expect`` (atoms of ``best`` are declared abducibles with values in their
        domains; a ``cost`` bound is not negative) and keep it for after the solve."""
        from cda.encodings.format import format_expectation  # the canonical text names the test

        sets: list[frozenset[str]] = []
        for atoms in st.sets:
            names = []
            for atom in atoms:
                decl = self.preds.get(atom.pred)
                if decl is None or decl.kind != "hyp" or atom.kind not in (None, "hyp"):
                    raise self.err(f"expect best lists hypotheses: '{atom.pred}' is not a declared hyp", atom.pos)
                names.append(_fmt_atom(decl.name, self._fact_args(atom, decl)))
            sets.append(frozenset(names))
        if st.kind == "cost" and isinstance(st.value, Fraction) and st.value < 0:
            raise self.err("a cost is never negative (a sum of positive weights)", st.value_pos)
        if st.kind == "core" and isinstance(st.value, str):
            self.core_names.append((st.value, self.err(
                f"expect in_every_core: no clause is named '{st.value}' (name it: hard NAME: …)", st.value_pos)))
        name = self.unique_name(st.name, "expect", at, st.name_pos)
        self.gp.expectations.append(
            Expectation(name, st.kind, st.op, st.value, tuple(sets), format_expectation(st), at[0])
        )

    def add_soft(
        self,
        name: str | None,
        weight: Fraction | None,
        formula: A.Formula,
        pos: A.Pos,
        name_pos: A.Pos | None = None,
        weight_pos: A.Pos | None = None,
    ) -> None:
        w = Fraction(1) if weight is None else weight
        if w <= 0:
            raise self.err(f"a soft clause's weight must be positive, given {_num(w)}", weight_pos or pos)
        node = self.formula(formula, {})
        self.gp.soft.append(SoftClause(self.unique_name(name, "soft", pos, name_pos), node, w, pos[0]))

    def _no_abducibles(self, formula: A.Formula) -> None:
        """Observations are facts about observables: refuse any abducible, at its position."""
        stack: list[object] = [formula]
        while stack:
            node = stack.pop()
            if isinstance(node, A.FAtom):
                decl = self.preds.get(node.pred)
                if decl is not None and decl.kind == "hyp":
                    raise self.err(
                        f"an observation cannot mention the abducible {node.pred}: observations are facts "
                        "about observables",
                        node.pos,
                    )
            elif isinstance(node, A.FNot):
                stack.append(node.arg)
            elif isinstance(node, (A.FNary, A.FCard)):
                stack.extend(node.args)
            elif isinstance(node, A.FImplies):
                stack.extend((node.lhs, node.rhs))
            elif isinstance(node, A.FQuant):
                stack.append(node.body)

    def _fact_args(self, atom: A.FAtom, decl: A.PredDecl) -> list[str]:
        if len(atom.args) != len(decl.domains):
            raise self.err(f"{decl.name} takes {len(decl.domains)} arguments, given {len(atom.args)}", atom.pos)
        out = []
        for term, dom in zip(atom.args, decl.domains):
            if term.name not in self.domain_index[dom]:
                raise self.err(f"'{term.name}' is not in domain {dom} = {{{', '.join(self.domains[dom])}}}", term.pos)
            out.append(term.name)
        return out

    def _text_of(self, st: A.GoalClaim) -> str:
        line = self.lines[st.pos[0] - 1] if 0 < st.pos[0] <= len(self.lines) else ""
        text = line[st.pos[1] - 1 :].split("#", 1)[0].strip()
        for word in ("goal", st.mode):
            text = text[len(word) :].strip() if text.startswith(word) else text
        return " ".join(text.split())


def instance_bound(statements: Sequence[A.Statement], domains: dict[str, tuple[str, ...]]) -> int:
    """At most how many instances ``statements`` ground to: every quantifier over its whole
    domain (a guard may skip some), plus the atoms of every declared hyp/observable predicate.

    >>> from cda.encodings.parse import parse_problem
    >>> ast = parse_problem("domain D = {a, b, c}\\nhyp r(D, D)\\nhard: forall x in D: forall y in D: r(x, y)")
    >>> instance_bound(ast.statements, {"D": ("a", "b", "c")})
    21
    """

    def of(node: object) -> int:
        if isinstance(node, A.FQuant):
            return len(domains.get(node.domain, ())) * (1 + of(node.body))
        if isinstance(node, A.FNot):
            return of(node.arg)
        if isinstance(node, (A.FNary, A.FCard)):
            return sum(of(a) for a in node.args)
        if isinstance(node, A.FImplies):
            return of(node.lhs) + of(node.rhs)
        return 0

    total = 0
    for st in statements:
        if isinstance(st, A.PredDecl) and st.kind in ("hyp", "observable"):
            total += math.prod(len(domains.get(d, ())) for d in st.domains)
        formula = getattr(st, "formula", None)
        if formula is not None:
            total += of(formula)
    return total


@dataclass(frozen=True)
class Located:
    """A statement written outside the problem's own text: a clause string, a field of an Action.

    Its positions point into ``source``, which ``filename`` names (``constraints.hard[0]``), so
    an error in it names its own origin; ``line`` is the line it takes in the problem, which
    names it when it has no name (``observe@12``); ``text`` is a claim's text as written.
    """

    statement: A.Statement
    filename: str
    source: str
    line: int
    text: str | None = None


def ground_problem(
    ast: A.ProblemAST,
    ken: KenGraph | None = None,
    extra: Sequence[Located] = (),
    deadline: Deadline = NO_DEADLINE,
) -> GroundProblem:
    """Check and ground a parsed problem and the statements written outside it (``extra``),
    after the problem's own, in order; an error in one of those is reported at its origin.

    Raises :class:`~cda.contracts.deadline.OutOfTime` when ``deadline`` passes, and
    :class:`~cda.errors.BudgetExceeded` past :data:`MAX_GROUND_INSTANCES` instances.
    """
    g = _Grounder(ast, ken.merged(KenGraph()) if ken is not None else None, deadline)
    try:
        g.statements(ast.statements)
        for located in extra:
            g.lines, g.filename = located.source.split("\n"), located.filename
            g.statement(located.statement, located.line, located.text)
        clauses = {c.name for c in g.gp.clauses} | {s.name for s in g.gp.soft}
        for name, error in g.core_names:
            if name not in clauses:
                raise error
    except RecursionError:
        raise DSLTypeError(
            "a formula is nested too deeply to ground; split it into several named clauses", filename=g.filename
        ) from None
    return g.gp
