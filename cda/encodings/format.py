"""AST → canonical DSL text: the inverse of :mod:`cda.encodings.parse`, up to positions.

The printer adds parentheses only where the grammar needs them, so that
``parse(format(ast))`` gives back ``ast`` (positions aside). Binding, loosest first:
``iff`` < ``implies`` (right-associative) < ``or`` < ``and`` < ``not``/quantifiers <
everything else. A quantifier's body extends as far right as it can, so a quantifier is
parenthesised unless nothing follows it.

Canonical choices: a soft clause's weight before its colon, numbers as plain decimals,
quantifiers closed off in parentheses unless nothing follows, ``holds(…)``/``prefer(…)``
dropped (the parser drops them too), and for the reader an operand of ``iff`` or ``implies``
that is itself a connective in parentheses (``a iff (b or c)``, never ``a iff b or c``).

:func:`format_source` (``cda fmt``) keeps every statement on the line it began on: an unnamed
clause is named by its kind and line (``soft@20``, docs/dsl.md), so a formatter that moved
statements would rename the clauses of every file it touched. Declarations written together
stay on one line, blank lines stay, and a statement written over several lines keeps its line
breaks (its lines are only stripped of trailing blanks).

>>> from cda.encodings.parse import parse_problem
>>> ast = parse_problem("hyp a, b\\nsoft s: prefer(not(a and b)) weight 0.5\\nhard: (forall x in D: a) or b")
>>> print(format_problem(ast))
hyp a
hyp b
soft s weight 0.5: not (a and b)
hard: (forall x in D: a) or b
<BLANKLINE>
>>> format_formula(parse_problem("hard: a implies (b implies c) iff d").statements[0].formula)
'(a implies (b implies c)) iff d'

An AST the grammar cannot spell (an ``and`` of one operand, a fraction without a finite
decimal expansion, a name that is not an identifier) raises ``ValueError``.
"""

from __future__ import annotations

import re
from fractions import Fraction

from cda.encodings import ast as A

__all__ = ["format_formula", "format_arith", "format_clause", "format_statement", "format_problem", "format_source",
           "format_expectation"]

# binding levels: a context asks for at least this level, or gets parentheses
_IFF, _IMPL, _OR, _AND, _UNARY, _PRIMARY = range(6)
_NARY_LEVEL = {"iff": _IFF, "or": _OR, "and": _AND}
_NARY_CHILD = {"iff": _IMPL, "or": _AND, "and": _UNARY}

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_UNIT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[/*][A-Za-z_][A-Za-z0-9_]*)*\Z")
_CMP = ("<=", ">=", "!=", "<", ">", "=")
_CARD = ("at_most", "at_least", "exactly")
_ATOM_KINDS = ("hyp", "obs", "pred")
_TERM_KINDS = ("entity", "provider")
_SIG_KINDS = ("hyp", "observable", "pred", "var")


def _name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"{name!r} is not a DSL name")
    return name


def _int(k: int) -> str:
    if k < 0:
        raise ValueError(f"{k} is not a whole number the grammar can spell")
    return str(k)


def _number(value: Fraction) -> str:
    """An exact decimal for ``value`` (the grammar has no fractions)."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    den, digits = value.denominator, 0
    while den % 10 == 0:
        den, digits = den // 10, digits + 1
    while den % 2 == 0 or den % 5 == 0:  # pad to a power of ten
        den, digits = (den // 2 if den % 2 == 0 else den // 5), digits + 1
    if den != 1:
        raise ValueError(f"{value} has no finite decimal expansion")
    scaled = abs(value.numerator) * 10**digits // value.denominator
    whole, frac = divmod(scaled, 10**digits)
    text = f"{whole}.{str(frac).rjust(digits, '0').rstrip('0')}"
    return "-" + text if value < 0 else text


def _term(term: A.Term) -> str:
    if term.kind is None:
        return _name(term.name)
    if term.kind not in _TERM_KINDS:
        raise ValueError(f"unknown term prefix {term.kind!r}")
    return f"{term.kind}:{_name(term.name)}"


def _atom(node: A.FAtom) -> str:
    prefix = ""
    if node.kind is not None:
        if node.kind not in _ATOM_KINDS:
            raise ValueError(f"unknown atom prefix {node.kind!r}")
        prefix = f"{node.kind}:"
    text = prefix + _name(node.pred)
    if node.args:
        text += "(" + ", ".join(_term(t) for t in node.args) + ")"
    return text


def _ref(ref: A.ARef) -> str:
    if ref.kind == "metric":
        return f"value(metric:{_name(ref.name)})"
    if ref.kind == "event":
        return f"time(event:{_name(ref.name)})"
    raise ValueError(f"unknown reference kind {ref.kind!r}")


def _event(ref: A.ARef) -> str:
    if ref.kind != "event":
        raise ValueError(f"expected an event reference, got {ref.kind!r}")
    return f"event:{_name(ref.name)}"


def _quantity(q: A.AQuantity) -> str:
    text = _number(q.value)
    if q.unit is not None:
        if not _UNIT.match(q.unit):
            raise ValueError(f"{q.unit!r} is not a unit the grammar can spell")
        text += f" {q.unit}"
    return text


def format_arith(arith: A.Arith) -> str:
    """One side of a comparison: a flat sum of scaled references and constants.

    >>> from cda.encodings.parse import parse_clause
    >>> format_arith(parse_clause("2 * value(metric:c) - time(event:e) + 3 s >= 0")[0].lhs)
    '2 * value(metric:c) - time(event:e) + 3 s'
    """
    if not arith.terms:
        raise ValueError("an empty sum has no spelling")
    parts: list[str] = []
    for i, term in enumerate(arith.terms):
        coef = Fraction(term.coef)
        if (term.ref is None) == (term.quantity is None):
            raise ValueError("an arithmetic term needs exactly one of ref and quantity")
        if i == 0:
            if term.ref is not None:
                if coef == 1:
                    parts.append(_ref(term.ref))
                elif coef == -1:
                    parts.append("-" + _ref(term.ref))
                else:
                    parts.append(f"{_number(coef)} * {_ref(term.ref)}")
            else:
                assert term.quantity is not None
                if coef != 1:
                    raise ValueError("a leading constant cannot carry a coefficient")
                parts.append(_quantity(term.quantity))
            continue
        sign = "-" if coef < 0 else "+"
        size = abs(coef)
        if term.ref is not None:
            body = _ref(term.ref) if size == 1 else f"{_number(size)} * {_ref(term.ref)}"
        else:
            assert term.quantity is not None
            if size != 1:
                raise ValueError("a constant in a sum cannot carry a coefficient")
            body = _quantity(term.quantity)
        parts.append(f"{sign} {body}")
    return " ".join(parts)


def _risk(node: A.FRisk) -> str:
    if node.op not in _CMP:
        raise ValueError(f"unknown comparison {node.op!r}")
    cond = f"risk {node.op} {_name(node.level)}"
    if node.provider is None:
        return cond
    return f"use({_term(node.provider)}) only_if {cond}"


def _fmt(f: A.Formula, need: int, tail: bool) -> str:
    """``f`` printed for a spot that binds at ``need``; ``tail``: nothing follows it there."""
    # a quantifier's body would swallow whatever follows it, so it is closed off unless at the end
    if isinstance(f, A.FQuant) and not tail:
        return f"({_bare(f, True)[1]})"
    level, text = _bare(f, tail)
    return f"({_bare(f, True)[1]})" if level < need else text


def _clear(f: A.Formula, need: int, tail: bool) -> str:
    """An operand of ``iff``/``implies``: a connective there is parenthesised for the reader, though
    the grammar would not need it (``a iff (b or c)``)."""
    if isinstance(f, A.FImplies) or (isinstance(f, A.FNary) and f.op in _NARY_LEVEL):
        return f"({_bare(f, True)[1]})"
    return _fmt(f, need, tail)


def _bare(f: A.Formula, tail: bool) -> tuple[int, str]:
    """(binding level, text) of ``f`` without outer parentheses."""
    if isinstance(f, A.FAtom):
        return _PRIMARY, _atom(f)
    if isinstance(f, A.FConst):
        return _PRIMARY, "true" if f.value else "false"
    if isinstance(f, A.FNot):
        return _UNARY, "not " + _fmt(f.arg, _UNARY, tail)
    if isinstance(f, A.FNary):
        if f.op == "xor":
            if len(f.args) < 2:
                raise ValueError("xor needs at least two operands")
            return _PRIMARY, "xor(" + ", ".join(_fmt(a, _IFF, True) for a in f.args) + ")"
        if f.op not in _NARY_LEVEL:
            raise ValueError(f"unknown connective {f.op!r}")
        if len(f.args) < 2:
            raise ValueError(f"'{f.op}' needs at least two operands to be spelled")
        child, last = _NARY_CHILD[f.op], len(f.args) - 1
        if f.op == "iff":
            parts = [_clear(a, child, tail and i == last) for i, a in enumerate(f.args)]
        else:
            parts = [_fmt(a, child, tail and i == last) for i, a in enumerate(f.args)]
        return _NARY_LEVEL[f.op], f" {f.op} ".join(parts)
    if isinstance(f, A.FImplies):
        return _IMPL, f"{_clear(f.lhs, _OR, False)} implies {_clear(f.rhs, _IMPL, tail)}"
    if isinstance(f, A.FCard):
        if f.op not in _CARD:
            raise ValueError(f"unknown cardinality {f.op!r}")
        args = ", ".join(_fmt(a, _IFF, True) for a in f.args)
        return _PRIMARY, f"{f.op}({_int(f.k)}, [{args}])"
    if isinstance(f, A.FQuant):
        if f.quantifier not in ("forall", "exists"):
            raise ValueError(f"unknown quantifier {f.quantifier!r}")
        if f.var == "path":
            raise ValueError("'exists path' would read as a path clause")
        head = f"{f.quantifier} {_name(f.var)} in {_name(f.domain)}: "
        return _UNARY, head + _fmt(f.body, _IFF, True)
    if isinstance(f, A.FBefore):
        return _PRIMARY, f"before({_event(f.first)}, {_event(f.second)})"
    if isinstance(f, A.FWithin):
        return _PRIMARY, f"within({_event(f.first)}, {_quantity(f.span)} of {_event(f.second)})"
    if isinstance(f, A.FPath):
        word = "hop" if f.hops == 1 else "hops"
        return _PRIMARY, (
            f"exists path({_term(f.source)} ->{_name(f.relation)}-> {_term(f.target)} within {_int(f.hops)} {word})"
        )
    if isinstance(f, A.FCompare):
        if f.op not in _CMP:
            raise ValueError(f"unknown comparison {f.op!r}")
        return _PRIMARY, f"{format_arith(f.lhs)} {f.op} {format_arith(f.rhs)}"
    if isinstance(f, A.FRisk):
        return _PRIMARY, _risk(f)
    raise TypeError(f"not a formula: {type(f).__name__}")


def format_formula(f: A.Formula) -> str:
    """A formula as DSL text, parenthesised only where the grammar needs it.

    >>> from cda.encodings.parse import parse_clause
    >>> format_formula(parse_clause("not(slow(api)) and (a or b) and (forall s in S: x(s))")[0])
    'not slow(api) and (a or b) and forall s in S: x(s)'
    """
    return _fmt(f, _IFF, True)


def format_clause(f: A.Formula, weight: Fraction | None = None) -> str:
    """A clause string as :func:`~cda.encodings.parse.parse_clause` reads it (weight trailing).

    >>> from cda.encodings.parse import parse_clause
    >>> format_clause(*parse_clause("prefer(p(a)) weight 0.4"))
    'p(a) weight 0.4'
    """
    text = format_formula(f)
    return text if weight is None else f"{text} weight {_number(weight)}"


def format_statement(st: A.Statement) -> str:
    """One statement on one line (no newline).

    >>> from cda.encodings.parse import parse_problem
    >>> [format_statement(s) for s in parse_problem("domain S = {a,b}\\nsoft weight 2: not x").statements]
    ['domain S = {a, b}', 'soft weight 2: not x']
    """
    if isinstance(st, A.DomainDecl):
        return f"domain {_name(st.name)} = {{{', '.join(_name(v) for v in st.values)}}}"
    if isinstance(st, A.PredDecl):
        if st.kind not in _SIG_KINDS:
            raise ValueError(f"unknown declaration kind {st.kind!r}")
        sig = _name(st.name)
        if st.domains:
            sig += "(" + ", ".join(_name(d) for d in st.domains) + ")"
        return f"{st.kind} {sig}"
    if isinstance(st, A.EventDecl):
        return f"event {_name(st.name)}"
    if isinstance(st, A.MetricDecl):
        if not _UNIT.match(st.unit):
            raise ValueError(f"{st.unit!r} is not a unit the grammar can spell")
        return f"metric {_name(st.name)} : {st.unit}"
    if isinstance(st, A.Fact):
        return f"fact {_atom(st.atom)}"
    if isinstance(st, A.Observe):
        label = f"{_name(st.name)}: " if st.name is not None else ""
        return f"observe {label}{format_formula(st.formula)}"
    if isinstance(st, A.Hard):
        label = f" {_name(st.name)}" if st.name is not None else ""
        return f"hard{label}: {format_formula(st.formula)}"
    if isinstance(st, A.Soft):
        label = f" {_name(st.name)}" if st.name is not None else ""
        weight = f" weight {_number(st.weight)}" if st.weight is not None else ""
        return f"soft{label}{weight}: {format_formula(st.formula)}"
    if isinstance(st, A.GoalBest):
        return "goal best_explanation" + (f" top {_int(st.top)}" if st.top is not None else "")
    if isinstance(st, A.GoalMinimal):
        if st.mode == "top":
            if st.k is None:
                raise ValueError("goal minimal_explanations top needs a count")
            return f"goal minimal_explanations top {_int(st.k)}"
        if st.mode not in ("all", "min_cardinality"):
            raise ValueError(f"unknown minimal_explanations mode {st.mode!r}")
        return "goal minimal_explanations" + ("" if st.mode == "all" else f" {st.mode}")  # all: the default
    if isinstance(st, A.GoalClaim):
        if st.mode not in ("prove", "disprove"):
            raise ValueError(f"unknown goal {st.mode!r}")
        return f"goal {st.mode} {format_formula(st.formula)}"
    if isinstance(st, A.Expect):
        label = f"{_name(st.name)}: " if st.name is not None else ""
        return f"expect {label}{format_expectation(st)}"
    if isinstance(st, A.KenLoad):
        if '"' in st.path or "\n" in st.path:
            raise ValueError(f"{st.path!r} cannot be quoted in the DSL")
        return f'ken "{st.path}"'
    if isinstance(st, A.FolBlock):
        return st.text  # first-order text is kept verbatim (docs/fol.md)
    raise TypeError(f"not a statement: {type(st).__name__}")


def format_expectation(st: A.Expect) -> str:
    """What an ``expect`` asserts, as written after ``expect [name:]``.

    >>> from cda.encodings.parse import parse_problem
    >>> [format_expectation(s) for s in parse_problem("expect best [{a},{ down(db) }]\\nexpect cost<=2.50").statements]
    ['best [{a}, {down(db)}]', 'cost <= 2.5']
    """
    if st.kind == "status" and st.value in ("sat", "unsat", "unknown"):
        return f"status {st.value}"
    if st.kind == "best":
        return "best [" + ", ".join("{" + ", ".join(_atom(a) for a in s) + "}" for s in st.sets) + "]"
    if st.kind == "cost" and st.op in _CMP and isinstance(st.value, Fraction):
        return f"cost {st.op} {_number(st.value)}"
    if st.kind == "core" and isinstance(st.value, str):
        return f"in_every_core {_name(st.value)}"
    if st.kind == "minimal" and st.op in _CMP and isinstance(st.value, int):
        return f"minimal_explanations {st.op} {_int(st.value)}"
    raise ValueError(f"an expectation the grammar cannot spell: {st.kind} {st.op} {st.value!r}")


def format_problem(ast: A.ProblemAST) -> str:
    """A whole problem: one statement per line, in source order, ending with a newline."""
    return "".join(format_statement(st) + "\n" for st in ast.statements)


def _split_comment(line: str) -> tuple[str, str]:
    """A line's code and its ``#`` comment (a ``#`` inside a quoted ``ken`` path is code).

    >>> _split_comment('ken "a#b.json"  # the graph')
    ('ken "a#b.json"', '# the graph')
    """
    quoted = False
    for i, c in enumerate(line):
        if c == '"':
            quoted = not quoted
        elif c == "#" and not quoted:
            return line[:i].rstrip(), line[i:].rstrip()
    return line.rstrip(), ""


def _together(here: list[A.Statement]) -> str:
    """The statements that began on one line, on one line: declarations written together
    (``hyp a, b``) stay together."""
    if len(here) == 1:
        return format_statement(here[0])
    kinds = {(type(st), getattr(st, "kind", None)) for st in here}
    if len(kinds) == 1 and isinstance(here[0], A.PredDecl | A.EventDecl):
        first, *rest = (format_statement(st) for st in here)
        keyword = first.split(" ", 1)[0]
        return ", ".join([first, *(text[len(keyword) + 1:] for text in rest)])
    raise ValueError("statements that share a line other than a declaration list")


def format_source(ast: A.ProblemAST) -> str:
    """The canonical text of a parsed file, its comments and blank lines kept (``cda fmt``).

    Each statement is printed by :func:`format_statement` on the line where it began, so every
    statement keeps its line and every unnamed clause its name (``soft@20``); declarations
    written together stay together; a comment at the end of a statement's line keeps its column
    when the code still fits before it (else it follows two spaces); a statement written over
    several lines is kept as written (trailing blanks stripped), its line breaks being the
    author's; comment lines lose their indentation; blank lines at the end go.

    >>> from cda.encodings.parse import parse_problem
    >>> print(format_source(parse_problem("# pumps\\nhyp a,b      # two\\n\\n\\nhard :a and\\n  b   \\nsoft: x iff y or z\\n\\n")), end="")
    # pumps
    hyp a, b     # two
    <BLANKLINE>
    <BLANKLINE>
    hard :a and
      b
    soft: x iff (y or z)
    """
    lines = ast.source.split("\n")
    starting: dict[int, list[A.Statement]] = {}
    for st in ast.statements:
        starting.setdefault(st.pos[0], []).append(st)
    out: list[str] = []
    skip_to = 0  # the last line already printed (a fol block's, a statement kept as written)
    for number, line in enumerate(lines, 1):
        if number <= skip_to:
            continue
        code, comment = _split_comment(line)
        here = starting.get(number, [])
        blocks = [st for st in here if isinstance(st, A.FolBlock)]
        if blocks:  # a '#' after a block's opening brace is first-order text, kept in the block
            out.extend(format_statement(st) for st in here)
            block = blocks[-1]
            end = number + block.text.count("\n")
            start = block.pos[1] - 1 if end == number else 0
            tail = lines[end - 1][start + len(block.text.split("\n")[-1]):]
            if end > number:  # statements after the closing brace stay on its line
                skip_to = end
                out[-1] = " ".join([out[-1], *(format_statement(st) for st in starting.get(end, []))])
            tail_comment = _split_comment(tail)[1]
            if tail_comment:
                out[-1] += "  " + tail_comment
        elif here:
            last = number  # the statement's last line: continuation lines hold code and start nothing
            for later in range(number + 1, len(lines) + 1):
                if later in starting:
                    break
                if _split_comment(lines[later - 1])[0].strip():
                    last = later
            if last > number:  # written over several lines: kept as written
                out.extend(text.rstrip() for text in lines[number - 1:last])
                skip_to = last
                continue
            printed = _together(here)
            if comment:
                column = line.index(comment)
                printed = printed.ljust(column) if len(printed) + 2 <= column else printed + "  "
                printed += comment
            out.append(printed)
        elif comment:
            out.append(comment.strip())
        else:
            out.append("")
    while out and out[-1] == "":
        out.pop()
    return "".join(line + "\n" for line in out)
