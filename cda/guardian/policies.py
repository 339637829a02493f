"""The guardian's policy store: DSL clauses and Cedar policy sets, matched to an action by its
type and resources, decided by the engine, with the minimal facts of the action that violate them.

A store is one TOML file (see docs/guardian.md)::

    [config]
    max_auto_launch_risk = 0.2      # the causal step escalates above this risk
    min_soft_score = 0.5            # the soft policies escalate below this score (0: never)

    [parameters]                    # numeric (or "bool") parameters the policies may compare
    replicas = "count"

    [facts]                         # named Boolean facts of an action, for the DSL policies
    deletes = { action_type = ["db.delete", "db.drop"] }
    touches_prod = { resource = ["prod/*"] }

    [[policy]]
    id = "no_prod_delete"
    kind = "hard"                   # or "soft", with a weight
    action_types = ["db.*"]         # globs; absent: every action
    resources = ["prod/*"]          # globs; absent: every action
    dsl = "not (deletes and touches_prod)"

    [[cedar]]
    id = "tool_access"
    kind = "hard"
    policies = "tools.cedar"        # relative to the store file; schema/entities optional

**How a DSL policy is decided.** The action becomes a small CDA problem. Its vocabulary is
structure (:class:`cda.api.Vocabulary`): one Boolean per declared fact, the metric ``cost`` in
the action's currency, and each declared parameter the action gives (``param_replicas`` in
``count``). The matched policies' formulas, the only DSL text involved (their authors wrote
it), are grounded over it by :func:`cda.api.ground`: hard policies as hard clauses, soft ones
as soft clauses. Each fact of the action is then added as a named observation built with
:mod:`cda.ir` (``f3``: the atom ``touches_prod`` or its negation, closed world, so every atom
is decided; ``fcost``: the cost, exact, in whole units of its unit), and the problem goes to
:func:`cda.api.solve`; nothing here writes DSL text to parse back. When the
facts and the hard policies cannot all hold, the engine's conflict (its minimal unsatisfiable
subsets over the named clauses) names each violated policy with a minimal set of the facts that
violate it; the gate reports the first violated policy in the store's order with its smallest
core. Since every atom and metric is fixed by one fact, each core holds exactly one policy.

A policy that needs a parameter the action does not give (``requires``), or that the engine
refuses for this action (a cost in another currency), is violated: a hard policy that cannot be
checked holds the action back, it never lets it through.

**Cedar policy sets** (:mod:`cda.policy`) are asked once per resource of the action, the
principal ``Agent::"<agent_id>"``, the action ``Action::"<action_type>"``, the resource
``Resource::"<resource>"``; a deny violates the set, and its facts are that request's.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cda.contracts.locations import problem_message
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.errors import BackendUnsupported, CDAError, DSLError
from cda.files import TEXT_MAX_BYTES, parse_toml, read_text
from cda.guardian.proposal import MAX_COST_UNITS, ProposedAction, cost_units

if TYPE_CHECKING:
    from cda.api import Vocabulary
    from cda.ir import Clause, GroundProblem, Node
    from cda.policy import PolicySet

__all__ = [
    "CedarPolicy",
    "DslPolicy",
    "Fact",
    "FactRule",
    "PolicyFileError",
    "PolicyJudgement",
    "PolicyStore",
    "ToolRule",
    "Violation",
    "judge",
    "load_policy_store",
]

_NAME = r"^[a-z][a-z0-9_]{0,63}$"
_POLICY_ID = r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$"
_MAX_METRIC = MAX_COST_UNITS  # every numeric variable of the DSL lies in ±10^9 of its unit (docs/dsl.md)


class PolicyFileError(DSLError):
    """A policy store that cannot be read: bad TOML, a bad field, DSL text the engine refuses
    (with the store file's line and column where they can be found), an unreadable Cedar file."""


# -- the file's layout --------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Config(_Strict):
    max_auto_launch_risk: Decimal = Field(default=Decimal("0.2"), ge=0, le=1)  # DEFAULT_THRESHOLDS
    min_soft_score: Decimal = Field(default=Decimal(0), ge=0, le=1)

    @field_validator("max_auto_launch_risk", "min_soft_score", mode="before")
    @classmethod
    def _no_float(cls, value: object) -> object:
        if isinstance(value, bool) or isinstance(value, float):
            raise ValueError("a number is expected (TOML floats are read exactly)")
        return value


class _FactRule(_Strict):
    action_type: list[str] | None = None
    resource: list[str] | None = None
    tool: list[str] | None = None
    agent: list[str] | None = None
    parameter: str | None = None
    equals: bool | int | str | Decimal | None = None


class _Policy(_Strict):
    id: str = Field(pattern=_POLICY_ID)
    kind: Literal["hard", "soft"] = "hard"
    weight: Decimal = Field(default=Decimal(1), gt=0, le=10**6)
    action_types: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    requires: list[str] = Field(default_factory=list)
    dsl: str = Field(min_length=1, max_length=65536)
    description: str = ""


class _Cedar(_Strict):
    id: str = Field(pattern=_POLICY_ID)
    kind: Literal["hard", "soft"] = "hard"
    weight: Decimal = Field(default=Decimal(1), gt=0, le=10**6)
    action_types: list[str] = Field(default_factory=list)
    resources: list[str] = Field(default_factory=list)
    policies: str
    schema_file: str | None = Field(default=None, alias="schema")
    entities: str | None = None
    description: str = ""


class _ToolRule(_Strict):
    name: str = Field(min_length=1, max_length=128)
    cost: Decimal = Field(default=Decimal(0), ge=0, le=10**9)
    currency: str = Field(default="USD", pattern=r"^[A-Z][A-Z0-9]{2,9}$")
    resources: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(default_factory=list, max_length=64)

    @field_validator("cost", mode="before")
    @classmethod
    def _exact(cls, value: object) -> object:
        if isinstance(value, bool) or isinstance(value, float):
            raise ValueError("a number is expected (TOML numbers are read exactly)")
        if isinstance(value, str):  # "0.25": the same checks as a TOML number
            text = value
            try:
                value = Decimal(text.strip())
            except ArithmeticError:
                raise ValueError(f"{text[:40]!r} is not a decimal number") from None
        if isinstance(value, Decimal):
            if not value.is_finite():  # a TOML nan or inf (as_tuple's exponent is then a letter)
                raise ValueError(f"a cost is a finite number, not {value}")
            if value.as_tuple().exponent < -9:  # type: ignore[operator]
                raise ValueError("a cost has at most 9 decimal places")
        return value


class _StoreFile(_Strict):
    config: _Config = Field(default_factory=_Config)
    tool: list[_ToolRule] = Field(default_factory=list)
    parameters: dict[str, str] = Field(default_factory=dict)
    facts: dict[str, _FactRule] = Field(default_factory=dict)
    policy: list[_Policy] = Field(default_factory=list)
    cedar: list[_Cedar] = Field(default_factory=list)


# -- the store ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FactRule:
    """A named Boolean fact of an action: true when the action matches (any glob of the field,
    or a parameter equal to ``equals``; a parameter without ``equals``: present and true)."""

    name: str
    field: Literal["action_type", "resource", "tool", "agent", "parameter"]
    patterns: tuple[str, ...] = ()
    parameter: str = ""
    equals: object = True

    def holds(self, action: ProposedAction) -> tuple[bool, list[str]]:
        """Whether the fact holds for ``action``, and the JSON paths it was read from."""
        if self.field == "action_type":
            return _any_glob(action.action_type, self.patterns), ["$.action_type"]
        if self.field == "tool":
            return _any_glob(action.tool.name, self.patterns), ["$.tool.name"]
        if self.field == "agent":
            return _any_glob(action.agent_id, self.patterns), ["$.agent_id"]
        if self.field == "resource":
            hits = [f"$.resources[{i}]" for i, r in enumerate(action.resources) if _any_glob(r, self.patterns)]
            return bool(hits), hits or ["$.resources"]
        value = action.parameters.get(self.parameter, _ABSENT)
        same = value is not _ABSENT and type(value) is type(self.equals) and value == self.equals
        return same, [f"$.parameters.{self.parameter}"]


_ABSENT = object()


@dataclass(frozen=True)
class DslPolicy:
    """A policy written as one DSL formula over the action's facts."""

    id: str
    hard: bool
    weight: Fraction
    action_types: tuple[str, ...]
    resources: tuple[str, ...]
    requires: tuple[str, ...]
    dsl: str


@dataclass(frozen=True)
class CedarPolicy:
    """A Cedar policy set asked once per resource of the action; a deny violates it."""

    id: str
    hard: bool
    weight: Fraction
    action_types: tuple[str, ...]
    resources: tuple[str, ...]
    policy_set: PolicySet = field(compare=False)
    digest: str = ""


Policy = DslPolicy | CedarPolicy


@dataclass(frozen=True)
class ToolRule:
    """What a call of an MCP tool whose name matches ``name`` (a glob) costs, and the resources it
    acts on (``{argument}`` in one is replaced by that argument's text): the ``[[tool]]`` tables
    the MCP gateway builds an action from (docs/guardian.md, "The gateway")."""

    name: str
    cost: Decimal
    currency: str
    resources: tuple[str, ...] = ()

#: the thresholds of a store whose ``[config]`` does not set them
DEFAULT_THRESHOLDS = {"max_auto_launch_risk": Fraction(1, 5), "min_soft_score": Fraction(0)}


@dataclass(frozen=True)
class PolicyStore:
    """The policies, the fact vocabulary and the thresholds the gate decides with."""

    policies: tuple[Policy, ...] = ()
    facts: tuple[FactRule, ...] = ()
    parameters: Mapping[str, str] = field(default_factory=dict)
    thresholds: Mapping[str, Fraction] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    digest: str = ""
    tools: tuple[ToolRule, ...] = ()

    def tool_rule(self, name: str) -> ToolRule | None:
        """The first ``[[tool]]`` rule whose name glob matches the tool ``name`` (None: none does)."""
        return next((t for t in self.tools if fnmatch.fnmatchcase(name, t.name)), None)

    def match(self, action: ProposedAction) -> list[Policy]:
        """The policies that apply to ``action``: its type matches one of a policy's
        ``action_types`` globs and one of its resources one of the ``resources`` globs (an empty
        list matches everything), in the store's order."""
        return [p for p in self.policies if _matches(p, action)]

    def get_threshold(self, name: str) -> Fraction:
        """A threshold of the store's ``[config]`` (``max_auto_launch_risk``, ``min_soft_score``)."""
        try:
            return self.thresholds[name]
        except KeyError:
            raise CDAError(f"the policy store has no threshold {name!r} (it has {', '.join(sorted(self.thresholds))})") from None

    def with_policy(self, policy: Policy) -> PolicyStore:
        """This store with one more policy at the end (checked as the file's policies are)."""
        if any(p.id == policy.id for p in self.policies):
            raise PolicyFileError(f"two policies have the id {policy.id!r}")
        if isinstance(policy, DslPolicy):
            for name in policy.requires:
                if name not in self.parameters:
                    raise PolicyFileError(f"policy {policy.id}: requires the parameter {name!r}, which the store does not declare")
            _check_dsl(policy, self.facts, self.parameters, None, None)
        body = {"base": self.digest, "added": _policy_json(policy)}
        return PolicyStore((*self.policies, policy), self.facts, self.parameters, self.thresholds,
                           sha256_hex(canonical_json(body)), self.tools)


def _any_glob(text: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(text, p) for p in patterns)


def _matches(p: Policy, action: ProposedAction) -> bool:
    if p.action_types and not _any_glob(action.action_type, p.action_types):
        return False
    return not p.resources or any(_any_glob(r, p.resources) for r in action.resources)


def _policy_json(p: Policy) -> dict[str, Any]:
    common = {"id": p.id, "hard": p.hard, "weight": str(p.weight), "action_types": list(p.action_types), "resources": list(p.resources)}
    if isinstance(p, DslPolicy):
        return {**common, "dsl": p.dsl, "requires": list(p.requires)}
    return {**common, "cedar": p.digest}


# -- reading a store -----------------------------------------------------------------------------


def load_policy_store(source: Path | str | Mapping[str, Any], *, base: Path | None = None) -> PolicyStore:
    """Read a policy store from a TOML file (a :class:`~pathlib.Path` or a path string) or from a
    mapping of the same layout (Cedar files then relative to ``base``, default the current
    directory). Raises :class:`PolicyFileError` naming the file, and the line and column where
    the mistake can be placed."""
    text: str | None = None
    if isinstance(source, Mapping):
        where, data = "<policies>", dict(source)
        folder = base or Path.cwd()
    else:
        path = Path(source)
        where, folder = str(path), base or path.parent
        text = read_text(path, limit=TEXT_MAX_BYTES)  # parsed whole: the text cap
        try:
            data = parse_toml(text, parse_float=Decimal)
        except tomllib.TOMLDecodeError as exc:
            line, column = _toml_position(str(exc))
            raise PolicyFileError(f"not valid TOML: {str(exc).split(' (at')[0]}", line=line, column=column,
                                  filename=where, source_line=_line(text, line)) from None  # fmt: skip
    try:
        layout = _StoreFile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        at = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in first["loc"]).replace(".[", "[")
        raise PolicyFileError(f"{at}: {problem_message(first)}", filename=where) from None
    return _build(layout, where, folder, text)


def _toml_position(message: str) -> tuple[int | None, int | None]:
    m = re.search(r"at line (\d+), column (\d+)", message)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def _line(text: str, line: int | None) -> str | None:
    if line is None:
        return None
    lines = text.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else None


def _build(layout: _StoreFile, where: str, folder: Path, text: str | None) -> PolicyStore:
    for name, unit in layout.parameters.items():
        if not re.fullmatch(_NAME, name):
            raise PolicyFileError(f"parameters.{name}: a parameter name is lowercase letters, digits and _", filename=where)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,31}", unit):
            raise PolicyFileError(f"parameters.{name}: the unit {unit!r} is not a unit name ('count', 'ms', 'USD', 'bool')", filename=where)
    facts = tuple(_fact_rule(name, rule, where) for name, rule in layout.facts.items())
    ids: set[str] = set()
    policies: list[Policy] = []
    for index, p in enumerate(layout.policy):
        _unique(p.id, ids, where)
        for name in p.requires:
            if name not in layout.parameters:
                raise PolicyFileError(f"policy {p.id}: requires the parameter {name!r}, which [parameters] does not declare", filename=where)
        dsl = DslPolicy(p.id, p.kind == "hard", Fraction(p.weight), tuple(p.action_types), tuple(p.resources),
                        tuple(p.requires), p.dsl)  # fmt: skip
        _check_dsl(dsl, facts, layout.parameters, where, _dsl_start(text, index) if text else None, text)
        policies.append(dsl)
    for c in layout.cedar:
        _unique(c.id, ids, where)
        policies.append(_cedar(c, where, folder))
    thresholds = {"max_auto_launch_risk": Fraction(layout.config.max_auto_launch_risk),
                  "min_soft_score": Fraction(layout.config.min_soft_score)}  # fmt: skip
    body = {
        "policies": [_policy_json(p) for p in policies],
        "facts": [[f.name, f.field, list(f.patterns), f.parameter, repr(f.equals)] for f in facts],
        "parameters": dict(layout.parameters),
        "thresholds": {k: str(v) for k, v in thresholds.items()},
    }
    tools = tuple(ToolRule(t.name, t.cost, t.currency, tuple(t.resources)) for t in layout.tool)
    if tools:  # a store without [[tool]] keeps the digest it had before tool rules existed
        body["tools"] = [[t.name, str(t.cost), t.currency, list(t.resources)] for t in tools]
    return PolicyStore(tuple(policies), facts, dict(layout.parameters), thresholds, sha256_hex(canonical_json(body)),
                       tools)


def _unique(pid: str, ids: set[str], where: str) -> None:
    if pid in ids:
        raise PolicyFileError(f"two policies have the id {pid!r}", filename=where)
    ids.add(pid)


def _fact_rule(name: str, rule: _FactRule, where: str) -> FactRule:
    if not re.fullmatch(_NAME, name) or name == "cost" or name.startswith("param_"):
        raise PolicyFileError(f"facts.{name}: a fact name is lowercase letters, digits and _, not 'cost' or param_…", filename=where)
    given = [k for k in ("action_type", "resource", "tool", "agent", "parameter") if getattr(rule, k) is not None]
    if len(given) != 1:
        raise PolicyFileError(f"facts.{name}: give exactly one of action_type, resource, tool, agent, parameter", filename=where)
    kind = given[0]
    if kind == "parameter":
        assert rule.parameter is not None
        equals: object = True if rule.equals is None else rule.equals
        if isinstance(equals, Decimal):
            equals = int(equals) if equals == equals.to_integral_value() else equals.normalize()
        return FactRule(name, "parameter", (), rule.parameter, equals)
    if rule.equals is not None:
        raise PolicyFileError(f"facts.{name}: 'equals' goes with 'parameter' only", filename=where)
    return FactRule(name, kind, tuple(getattr(rule, kind)))  # type: ignore[arg-type]


def _dsl_start(text: str, index: int) -> tuple[int, int] | None:
    """Line and column (1-based) in the store file where the ``index``-th ``[[policy]]``'s
    ``dsl`` string begins, found by its key; None when it cannot be placed (the message then
    gives the policy and the position inside its DSL)."""
    headers = [m.end() for m in re.finditer(r"(?m)^[ \t]*\[\[[ \t]*policy[ \t]*\]\]", text)]
    if index >= len(headers):
        return None
    end = headers[index + 1] if index + 1 < len(headers) else len(text)
    m = re.compile(r"(?m)^[ \t]*dsl[ \t]*=[ \t]*('''|\"\"\"|'|\")(\r?\n)?").search(text, headers[index], end)
    if m is None:
        return None
    start = m.end()
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return line, column


def _vocabulary(facts: Sequence[FactRule], parameters: Mapping[str, str], requires: Sequence[str], cost_unit: str) -> Vocabulary:
    """The names an action's facts take: one Boolean per fact, the cost, the parameters."""
    from cda.api import Vocabulary

    booleans = [f.name for f in facts] + [f"param_{n}" for n in requires if parameters[n] == "bool"]
    metrics = {"cost": cost_unit} | {f"param_{n}": parameters[n] for n in requires if parameters[n] != "bool"}
    return Vocabulary(tuple(booleans), metrics)


def _soft(p: DslPolicy) -> tuple[str, float]:
    """A soft policy as the API's soft clause: the weight stays an exact Fraction (the API reads
    it with ``exact_number``, which keeps a Fraction as it is; its annotation says float)."""
    return p.dsl, cast(float, p.weight)


def _check_dsl(p: DslPolicy, facts: Sequence[FactRule], parameters: Mapping[str, str], where: str | None,
               start: tuple[int, int] | None, text: str | None = None) -> None:  # fmt: skip
    """Have the engine check the policy's formula against the fact vocabulary; its refusal
    becomes a :class:`PolicyFileError` at the store file's line and column."""
    from cda.api import check

    try:
        if p.hard:
            check(_vocabulary(facts, parameters, p.requires, "USD"), hard=[p.dsl])
        else:
            check(_vocabulary(facts, parameters, p.requires, "USD"), soft=[_soft(p)])
    except DSLError as exc:
        if exc.filename not in ("hard#1", "soft#1"):  # the vocabulary itself: a fact or unit name
            raise PolicyFileError(f"policy {p.id}: the facts and parameters cannot be declared: {exc.message}", filename=where) from None
        line, column = exc.line, exc.column
        if start is not None and line is not None:
            column = (start[1] + (column or 1) - 1) if line == 1 else column
            line = start[0] + line - 1
            shown = _line(text, line) if text is not None else None
            raise PolicyFileError(f"policy {p.id}: {exc.message}", line=line, column=column, filename=where,
                                  source_line=shown) from None  # fmt: skip
        raise PolicyFileError(f"policy {p.id}: line {line}, column {column} of its dsl: {exc.message}", filename=where) from None
    except CDAError as exc:
        raise PolicyFileError(f"policy {p.id}: {exc}", filename=where) from None


def _cedar(c: _Cedar, where: str, folder: Path) -> CedarPolicy:
    """A Cedar policy of the store: its files read once, and the texts parsed are the texts its
    digest covers (a file swapped between a parse and a second read could not pass the pin)."""
    from cda.policy import policy_set_of

    paths = [(folder / name, name) for name in (c.policies, c.schema_file, c.entities) if name is not None]
    try:
        texts = {name: (read_text(path, limit=TEXT_MAX_BYTES if name == c.policies else None), str(path))
                 for path, name in paths}  # the policy text: the text cap; schema and entities are data
        ps = policy_set_of(texts[c.policies], None if c.schema_file is None else texts[c.schema_file],
                           None if c.entities is None else texts[c.entities])
    except DSLError as exc:
        raise PolicyFileError(f"cedar {c.id}: {exc.message}", line=exc.line, column=exc.column,
                              filename=exc.filename or str(folder / c.policies), source_line=exc.source_line) from None  # fmt: skip
    except CDAError as exc:
        raise PolicyFileError(f"cedar {c.id}: {exc}", filename=where) from None
    digest = sha256_hex(canonical_json([texts[name][0] for _, name in paths]))
    return CedarPolicy(c.id, c.kind == "hard", Fraction(c.weight), tuple(c.action_types), tuple(c.resources), ps,
                       digest)  # fmt: skip


# -- deciding an action --------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """One fact of an action as the policies see it: its name, value and the JSON paths it was read from."""

    name: str
    value: str | bool
    paths: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"fact": self.name, "value": self.value, "paths": list(self.paths)}


@dataclass(frozen=True)
class Violation:
    """A hard policy the action violates, with a minimal set of its facts that do (``facts``),
    or why it could not be checked (``problem``)."""

    policy: str
    facts: tuple[Fact, ...]
    problem: str = ""
    cedar: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": self.policy, "facts": [f.to_json() for f in self.facts]}
        if self.problem:
            out["problem"] = self.problem
        if self.cedar:
            out["cedar"] = dict(self.cedar)
        return out


@dataclass(frozen=True)
class PolicyJudgement:
    """What the policies say about one action: the first hard violation (None: none), the soft
    score in [0, 1] (1: no soft policy violated; the violated weight over the matched weight
    taken from 1) and the violated soft policies, heaviest first."""

    violation: Violation | None
    soft_score: Fraction
    soft_violated: tuple[str, ...]
    matched: tuple[str, ...]


def _cost_unit(action: ProposedAction) -> tuple[str, int]:
    found = cost_units(action.cost_estimate, action.currency)  # a validated action's cost always fits
    if found is None:
        raise CDAError(f"the cost estimate {action.cost_estimate} {action.currency} has too many digits for the policies "
                       f"(at most {_MAX_METRIC} of its smallest unit)")  # fmt: skip
    return found


def _parameter_value(action: ProposedAction, name: str, unit: str) -> str | None:
    """The parameter as a DSL fact's right-hand side (``3``, ``true``), or None when it is absent
    or not a value the fact can hold (the policies that require it are then violated)."""
    value = action.parameters.get(name, _ABSENT)
    if unit == "bool":
        return None if not isinstance(value, bool) else ("true" if value else "false")
    if isinstance(value, bool) or not isinstance(value, int) or not -_MAX_METRIC <= value <= _MAX_METRIC:
        return None
    return str(value)


def _facts(gp: GroundProblem, store: PolicyStore, action: ProposedAction, scaled: int,
           present: Sequence[str]) -> tuple[list[Clause], list[Fact]]:
    """The action's facts as observations over ``gp``'s vocabulary, built as IR (each fixes one
    atom or metric), and each one as the report shows it."""
    from cda.ir import AtomInfo, Clause, metric

    f = gp.factory
    clauses: list[Clause] = []
    facts: list[Fact] = []

    def observe(name: str, node: Node, fact: Fact) -> None:
        clauses.append(Clause(name, "observation", node, 0))
        facts.append(fact)

    def boolean(name: str, holds: bool) -> Node:
        gp.atoms.setdefault(name, AtomInfo(name, "var", name, ()))  # declared, though no policy may use it
        gp.observed.add(name)
        return f.atom(name) if holds else f.not_(f.atom(name))

    for i, rule in enumerate(store.facts):
        holds, paths = rule.holds(action)
        observe(f"f{i}", boolean(rule.name, holds), Fact(rule.name, holds, tuple(paths)))
    observe("fcost", f.linear({metric("cost"): 1}, "=", scaled),
            Fact("cost", f"{action.cost_estimate} {action.currency}", ("$.cost_estimate", "$.currency")))
    for name in present:
        unit = store.parameters[name]
        value = _parameter_value(action, name, unit)
        assert value is not None
        where = (f"$.parameters.{name}",)
        if unit == "bool":
            observe(f"fp_{name}", boolean(f"param_{name}", value == "true"), Fact(f"param_{name}", value == "true", where))
        else:
            observe(f"fp_{name}", f.linear({metric(f"param_{name}"): 1}, "=", int(value)), Fact(f"param_{name}", value, where))
    return clauses, facts


def judge(store: PolicyStore, action: ProposedAction, *, seed: int = 0) -> PolicyJudgement:
    """Decide the matched policies on ``action``: the first hard one it violates (store order)
    with a minimal set of violating facts, and the soft score."""
    matched = store.match(action)
    dsl = [p for p in matched if isinstance(p, DslPolicy)]
    violations: dict[str, Violation] = {}
    soft_violated: list[Policy] = []
    present = sorted({name for p in dsl for name in p.requires if _parameter_value(action, name, store.parameters[name]) is not None})
    checkable: list[DslPolicy] = []
    for p in dsl:
        missing = [n for n in p.requires if n not in present]
        if missing:
            problem = f"the action gives no usable value for the parameter(s) {', '.join(missing)} this policy requires"
            if p.hard:
                paths = tuple(f"$.parameters.{n}" for n in missing)
                violations[p.id] = Violation(p.id, tuple(Fact(f"param_{n}", "absent", (paths[i],)) for i, n in enumerate(missing)), problem)
            else:
                soft_violated.append(p)
        else:
            checkable.append(p)
    if checkable:
        _judge_dsl(store, action, checkable, present, seed, violations, soft_violated)
    for c in matched:
        if isinstance(c, CedarPolicy):
            found = _judge_cedar(c, action)
            if found is not None:
                if c.hard:
                    violations[c.id] = found
                else:
                    soft_violated.append(c)
    first = next((violations[p.id] for p in matched if p.id in violations), None)
    soft = [p for p in matched if not p.hard]
    total = sum((p.weight for p in soft), Fraction(0))
    lost = sum((p.weight for p in soft_violated), Fraction(0))
    score = Fraction(1) if total == 0 else 1 - lost / total
    ranked = sorted(soft_violated, key=lambda p: (-p.weight, [q.id for q in matched].index(p.id)))
    return PolicyJudgement(first, score, tuple(p.id for p in ranked), tuple(p.id for p in matched))


def _judge_dsl(store: PolicyStore, action: ProposedAction, policies: Sequence[DslPolicy], present: Sequence[str], seed: int,
               violations: dict[str, Violation], soft_violated: list[Policy]) -> None:  # fmt: skip
    from cda.api import ground, solve

    try:
        unit, scaled = _cost_unit(action)
    except CDAError as exc:
        for p in policies:
            if p.hard:
                violations[p.id] = Violation(p.id, (Fact("cost", str(action.cost_estimate), ("$.cost_estimate",)),), str(exc))
        return
    hard = [p for p in policies if p.hard]
    soft = [p for p in policies if not p.hard]
    try:
        # the user's formulas over the vocabulary, then the action's facts as observations before them
        gp = ground(_vocabulary(store.facts, store.parameters, present, unit),
                    hard=[p.dsl for p in hard], soft=[_soft(p) for p in soft])
        observations, facts = _facts(gp, store, action, scaled, present)
        gp.clauses[:0] = observations
        try:  # clingo(-dl) first: on these problems (single-metric bounds) it answers in half z3's time
            result = solve(gp, "clingo", seed=seed)
        except BackendUnsupported:  # a linear sum of metrics, a constant past 32 bits: z3 decides it
            result = solve(gp, "z3", seed=seed)
    except CDAError as exc:  # e.g. a cost in USD against an action in EUR: decide policy by policy
        if len(policies) > 1:
            for p in policies:
                _judge_dsl(store, action, [p], present, seed, violations, soft_violated)
            return
        p = policies[0]
        message = exc.message if isinstance(exc, DSLError) else str(exc)
        if p.hard:
            violations[p.id] = Violation(p.id, (), f"the policy cannot be checked on this action: {message}")
        else:
            soft_violated.append(p)
        return
    by_name = {f"hard#{i}": p for i, p in enumerate(hard, 1)}
    if result.conflict is not None:
        names = [c.name for c in observations]
        fact_of = dict(zip(names, facts, strict=True))
        cores: dict[str, list[list[str]]] = {}
        for core in result.conflict.cores:
            named = [by_name[n].id for n in core if n in by_name]
            if len(named) == 1:
                cores.setdefault(named[0], []).append([n for n in core if n in fact_of])
        if (not result.conflict.complete or not cores) and len(hard) > 1:
            for p in hard:  # rare: more cores than the engine lists; decide each alone
                _judge_dsl(store, action, [p], present, seed, violations, soft_violated)
            return
        if not cores:  # cannot happen (every atom is fixed by a fact); held back all the same
            violations[hard[0].id] = Violation(hard[0].id, (), "the engine found a conflict without naming the policy")
        order = {n: i for i, n in enumerate(names)}
        for pid, found in cores.items():
            best = min(found, key=lambda c: (len(c), sorted(order[n] for n in c)))
            violations[pid] = Violation(pid, tuple(fact_of[n] for n in sorted(best, key=order.__getitem__)))
        return
    if result.hypotheses:
        violated = set(result.hypotheses[0].violated)
        soft_violated.extend(p for i, p in enumerate(soft, 1) if f"soft#{i}" in violated)


def _judge_cedar(p: CedarPolicy, action: ProposedAction) -> Violation | None:
    from cda.policy import authorize

    resources = list(enumerate(action.resources)) or [(-1, "")]
    context = {"tool": action.tool.name, "tool_version": action.tool.version, "currency": action.currency}
    for i, resource in resources:
        request = {
            "principal": {"type": "Agent", "id": action.agent_id},
            "action": {"type": "Action", "id": action.action_type},
            "resource": {"type": "Resource", "id": resource},
            "context": context,
        }
        paths = ("$.agent_id", "$.action_type", f"$.resources[{i}]" if i >= 0 else "$.resources")
        facts = (Fact("agent", action.agent_id, (paths[0],)), Fact("action_type", action.action_type, (paths[1],)),
                 Fact("resource", resource, (paths[2],)))  # fmt: skip
        try:
            answer = authorize(p.policy_set, request)
        except CDAError as exc:
            return Violation(p.id, facts, f"Cedar refused the request: {exc}")
        if answer.decision == "deny":
            why = "denied by " + ", ".join(answer.reason) if answer.reason else "no policy permits it"
            return Violation(p.id, facts, why, {"decision": "deny", "reason": answer.reason, "errors": answer.errors})
    return None
