"""The guardian's causal model as data: a structural causal model on a DAG, read from a TOML or
JSON file (or the same thing as a dict) and checked before anything is simulated.

A model names its **nodes**; each node is set by the proposed action (an *input*), computed from
its parents by a *mechanism*, or both (an input that falls back to its mechanism when the action
leaves the field out). Mechanisms, with ``η = intercept + Σ coef·parent`` over the node's
``parents`` table and ``ε ~ N(0, noise²)``:

* ``linear``: ``value = η + ε``;
* ``bernoulli``: ``value`` is 1 with probability ``sigmoid(η)``, else 0 (no ``noise``: the draw
  is the noise);
* ``logistic``: ``value = scale · sigmoid(η + ε)``, a bounded quantity in (0, scale) such as a
  rate (``scale`` defaults to 1).

**KPIs** name a node, a threshold and a direction: ``above`` counts a sample as crossing when
the node's value is greater than the threshold, ``below`` when it is less.

Every number is read exactly (TOML and JSON decimals as :class:`~decimal.Decimal`, kept as
:class:`~fractions.Fraction`) and bounded: finite, ``0`` or between ``1e-30`` and ``1e12`` in size, at
most 40 significant digits; it becomes a float once, when :mod:`cda.guardian.causal` simulates.
A mistake is a :class:`CausalModelError` naming the file and the field path
(``marketing.toml: nodes.reach.parents.spend: ...``); a cycle is named edge by edge.

>>> model = load_causal_model({"nodes": {"x": {"input": "x"},
...     "y": {"mechanism": "linear", "intercept": 1, "parents": {"x": 2}, "noise": 0.5}},
...     "kpis": [{"node": "y", "threshold": 10, "direction": "above"}]})
>>> [n.name for n in model.nodes], model.kpis[0].name
(['x', 'y'], 'y')
>>> load_causal_model({"nodes": {"a": {"mechanism": "linear", "parents": {"b": 1}},
...     "b": {"mechanism": "linear", "parents": {"a": 1}}}, "kpis": [{"node": "a", "threshold": 0,
...     "direction": "above"}]})
Traceback (most recent call last):
cda.guardian.causal_model.CausalModelError: model: nodes: the graph has a cycle: a -> b -> a
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from cda.contracts.receipt import canonical_json, sha256_hex
from cda.errors import CDAError
from cda.files import is_stdin, parse_json, parse_toml, read_text

__all__ = [
    "FORMAT",
    "KPI",
    "MAX_KPIS",
    "MAX_MAGNITUDE",
    "MAX_NODES",
    "MECHANISMS",
    "CausalError",
    "CausalInputError",
    "CausalModel",
    "CausalModelError",
    "Direction",
    "Mechanism",
    "Node",
    "exact_text",
    "load_causal_model",
    "read_number",
]

FORMAT = 1
"""The model format's version (the optional top-level ``format`` key)."""
MECHANISMS = ("linear", "bernoulli", "logistic")
MAX_NODES = 1000
MAX_KPIS = 100
MAX_MAGNITUDE = 10**12
"""The largest size of any number in a model or an input: a value stays far inside the float range
after many layers of coefficients (and an overflow is still caught when simulating)."""
_MIN_MAGNITUDE = Fraction(1, 10**30)
_MAX_DIGITS = 40
_MAX_BITS = 256  # a Fraction given directly: numerator and denominator this long at most
_ASCII_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_MAX_SEGMENTS = 8


def _is_name(text: str) -> bool:
    """A node or KPI name: a letter or ``_``, then letters, digits or ``_``; 64 at most."""
    return 0 < len(text) <= 64 and not text[0].isdigit() and set(text) <= _ASCII_WORD


def _is_segment(text: str) -> bool:
    """One name of a field path: letters, digits, ``_`` or ``-``; 64 at most."""
    return 0 < len(text) <= 64 and set(text) <= _ASCII_WORD | {"-"}


Mechanism = Literal["linear", "bernoulli", "logistic"]
Direction = Literal["above", "below"]


class CausalError(CDAError, ValueError):
    """Root of the causal simulator's errors."""


class CausalModelError(CausalError):
    """A model file (or dict) that is not a valid causal model; names the file and field path."""


class CausalInputError(CausalError):
    """An action whose parameters cannot feed the model: a declared input field missing or not a
    bounded number. ``path`` is the field path in the action's parameters (dotted), so the gate
    can answer ``malformed_action`` with it."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True, slots=True)
class Node:
    """One node of the model, its numbers exact.

    ``input`` is the dotted field path in the action's parameters that sets the node
    (``do(node = value)``), or ``None``; ``mechanism`` is ``None`` only for a pure input, whose
    field is then required. ``parents`` maps each parent to its coefficient, sorted by name.
    """

    name: str
    mechanism: Mechanism | None = None
    input: str | None = None
    intercept: Fraction = Fraction(0)
    parents: tuple[tuple[str, Fraction], ...] = ()
    noise: Fraction = Fraction(0)
    scale: Fraction = Fraction(1)
    description: str = ""

    @property
    def input_path(self) -> tuple[str, ...]:
        return tuple(self.input.split(".")) if self.input else ()

    def as_dict(self) -> dict[str, Any]:
        """The node as the model file writes it (numbers exact: ``int`` or :class:`Fraction`)."""
        out: dict[str, Any] = {}
        if self.input is not None:
            out["input"] = self.input
        if self.mechanism is not None:
            out["mechanism"] = self.mechanism
            out["intercept"] = _plain(self.intercept)
            out["parents"] = {p: _plain(c) for p, c in self.parents}
            if self.mechanism != "bernoulli":
                out["noise"] = _plain(self.noise)
            if self.mechanism == "logistic":
                out["scale"] = _plain(self.scale)
        if self.description:
            out["description"] = self.description
        return out


@dataclass(frozen=True, slots=True)
class KPI:
    """A node watched by the gate: a sample *crosses* when its value is strictly above (or
    below) ``threshold``."""

    name: str
    node: str
    threshold: Fraction
    direction: Direction

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node": self.node, "threshold": _plain(self.threshold), "direction": self.direction}


@dataclass(frozen=True)
class CausalModel:
    """A checked model: ``nodes`` in topological order (ties broken by name, so the order, and the
    simulation's bytes, do not depend on how the file lists them), ``kpis`` as declared.

    ``digest`` is the SHA-256 of :meth:`canonical`, the model's content hash; ``source`` names
    where it was read from (a file, or ``model`` for a dict) for messages only.
    """

    name: str
    nodes: tuple[Node, ...]
    kpis: tuple[KPI, ...]
    description: str = ""
    source: str = field(default="model", compare=False)
    digest: str = field(default="", compare=False)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    @property
    def inputs(self) -> tuple[Node, ...]:
        """The nodes an action can set, in topological order."""
        return tuple(n for n in self.nodes if n.input is not None)

    def as_dict(self) -> dict[str, Any]:
        """The model as a dict :func:`load_causal_model` reads back to an equal model."""
        return {
            "format": FORMAT,
            "name": self.name,
            "description": self.description,
            "nodes": {n.name: n.as_dict() for n in self.nodes},
            "kpis": [k.as_dict() for k in self.kpis],
        }

    def canonical(self) -> str:
        """The canonical JSON of :meth:`as_dict` with every number as its exact text: what
        :attr:`digest` is computed over."""
        return canonical_json(_texts(self.as_dict()))


# ------------------------------------------------------------------------------- exact numbers


def exact_text(value: Fraction) -> str:
    """An exact number as text: ``12``, ``0.05`` (a terminating decimal) or ``1/3``, as the
    engine's unit checks write numbers (:func:`cda.ir.show_number`).

    >>> exact_text(Fraction(1, 20)), exact_text(Fraction(-7)), exact_text(Fraction(1, 3))
    ('0.05', '-7', '1/3')
    """
    from cda.ir import show_number

    return show_number(value)


def _plain(value: Fraction) -> int | Fraction:
    return value.numerator if value.denominator == 1 else value


def _texts(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _texts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_texts(v) for v in value]
    if isinstance(value, Fraction):
        return exact_text(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def read_number(value: object, where: str, error: type[CausalError] = CausalModelError, **extra: Any) -> Fraction:
    """``value`` as an exact, bounded number; ``where`` names it in the refusal (raised as
    ``error(message, **extra)``). Accepts ``int``, :class:`Decimal`, :class:`Fraction` and a finite
    ``float`` (read as the decimal its shortest repr writes: ``0.1`` is 1/10); refuses Booleans, text, NaN, infinities
    and sizes outside 1e-30..1e12 (0 is fine).

    >>> read_number(Decimal("0.25"), "x")
    Fraction(1, 4)
    >>> read_number(float("nan"), "nodes.y.noise")
    Traceback (most recent call last):
    cda.guardian.causal_model.CausalModelError: nodes.y.noise: must be a finite number, not nan
    """

    def refuse(why: str) -> CausalError:
        return error(f"{where}: {why}", **extra)

    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | Fraction):
        raise refuse(f"must be a number, not {_kind(value)}")
    if isinstance(value, float | Decimal) and not (value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)):
        raise refuse(f"must be a finite number, not {value}")
    if isinstance(value, Decimal):
        digits = len(value.as_tuple().digits)
        if value and (digits > _MAX_DIGITS or not -31 <= value.adjusted() <= 12):
            raise refuse(f"must be 0 or between 1e-30 and 1e12 in size with at most {_MAX_DIGITS} digits, not {_cut(value)}")
    if isinstance(value, int) and value.bit_length() > 64:
        raise refuse(f"must be at most 1e12 in size, not {_cut(value)}")
    if isinstance(value, Fraction) and max(value.numerator.bit_length(), value.denominator.bit_length()) > _MAX_BITS:
        raise refuse(f"must be a number of at most {_MAX_BITS} bits over {_MAX_BITS} bits")
    # a float is the number its shortest repr writes (0.1 is 1/10, as the user typed it)
    exact = Fraction(Decimal(repr(value))) if isinstance(value, float) else Fraction(value)
    if exact and not _MIN_MAGNITUDE <= abs(exact) <= MAX_MAGNITUDE:
        raise refuse(f"must be 0 or between 1e-30 and 1e12 in size, not {_cut(value)}")
    return exact


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a Boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"text ({_cut(value)!r})" if len(value) <= 40 else "text"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _cut(value: object) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:20] + "…" + text[-10:]


# ------------------------------------------------------------------------------------ loading


def load_causal_model(source: str | PathLike[str] | Mapping[str, Any]) -> CausalModel:
    """Read and check a causal model: a ``.toml`` or ``.json`` file, or its dict.

    Every way it can be wrong is a :class:`CausalModelError` naming the file (``model`` for a
    dict) and the field path: a cycle (named edge by edge), an unknown parent, a node with neither
    a mechanism nor an input, a bad or unbounded number, a KPI on an unknown node, an unknown key.
    """
    if isinstance(source, Mapping):
        return _build(source, "model")
    path = Path(source)
    where = str(path)
    stdin = is_stdin(path)
    if not stdin and path.suffix.lower() not in (".toml", ".json"):
        raise CausalModelError(f"{where}: a causal model file ends in .toml or .json")
    try:
        text = read_text(path)
    except CDAError as exc:
        raise CausalModelError(str(exc)) from None
    suffix = (".json" if text.lstrip().startswith("{") else ".toml") if stdin else path.suffix.lower()
    if suffix == ".toml":
        try:
            data: Any = parse_toml(text, parse_float=Decimal)
        except tomllib.TOMLDecodeError as exc:
            raise CausalModelError(f"{where}: not valid TOML: {exc}") from None
        except ValueError as exc:  # an integer longer than Python's digit limit
            raise CausalModelError(f"{where}: not valid TOML: {exc}") from None
    else:
        data = _parse_json(text, where)
    if not isinstance(data, Mapping):
        raise CausalModelError(f"{where}: a causal model is a JSON object (a table), not {_kind(data)}")
    return _build(data, where)


def _parse_json(text: str, where: str) -> Any:
    def constant(name: str) -> Decimal:
        return Decimal(name)  # NaN / Infinity: refused with its field path by read_number

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        table: dict[str, Any] = {}
        for key, value in pairs:
            if key in table:
                raise CausalModelError(f"{where}: the key {_cut(key)!r} appears twice in one object")
            table[key] = value
        return table

    try:
        return json.loads(text, parse_float=Decimal, parse_constant=constant, object_pairs_hook=unique)
    except CausalModelError:
        raise
    except ValueError:
        return parse_json(text, where, CausalModelError)  # the one place that words JSON errors


_TOP_KEYS = {"format", "name", "description", "nodes", "kpis"}
_NODE_KEYS = {"input", "mechanism", "intercept", "parents", "noise", "scale", "description"}
_KPI_KEYS = {"name", "node", "threshold", "direction"}


def _build(data: Mapping[str, Any], where: str) -> CausalModel:
    def fail(path: str, why: str) -> CausalModelError:
        return CausalModelError(f"{where}: {path}: {why}")

    _known_keys(data, _TOP_KEYS, "", fail)
    if "format" in data and (isinstance(data["format"], bool) or data["format"] != FORMAT):
        raise fail("format", f"this CDA reads format {FORMAT}, not {_cut(data['format'])}")
    name = _text(data.get("name", ""), "name", fail, pattern=True, empty=True) or "model"
    description = _text(data.get("description", ""), "description", fail)
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, Mapping) or not raw_nodes:
        raise fail("nodes", "a model needs a table of nodes, one or more")
    if len(raw_nodes) > MAX_NODES:
        raise fail("nodes", f"at most {MAX_NODES} nodes, not {len(raw_nodes)}")
    nodes = {str(key): _node(key, value, where, fail) for key, value in raw_nodes.items()}
    for node in nodes.values():
        for parent, _ in node.parents:
            if parent not in nodes:
                raise fail(f"nodes.{node.name}.parents.{parent}", f"unknown parent {parent!r} (nodes: {_listed(nodes)})")
    order = _topological(nodes, fail)
    kpis = _kpis(data.get("kpis"), nodes, where, fail)
    model = CausalModel(name=name, nodes=tuple(nodes[n] for n in order), kpis=kpis, description=description,
                        source=where)
    object.__setattr__(model, "digest", sha256_hex(model.canonical()))
    return model


def _known_keys(table: Mapping[str, Any], known: set[str], path: str, fail: Any) -> None:
    for key in table:
        if key not in known:
            at = f"{path}.{key}" if path else str(key)
            raise fail(at, f"unknown key (known: {', '.join(sorted(known))})")


def _text(value: object, path: str, fail: Any, *, pattern: bool = False, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise fail(path, f"must be text, not {_kind(value)}")
    if pattern and not (empty and value == "") and not _is_name(value):
        raise fail(path, f"a name is a letter or _ then letters, digits or _ (at most 64), not {_cut(value)!r}")
    if len(value) > 1024:
        raise fail(path, "at most 1024 characters")
    return value


def _node(key: object, value: object, where: str, fail: Any) -> Node:
    name = _text(key, "nodes", fail, pattern=True)
    at = f"nodes.{name}"
    if not isinstance(value, Mapping):
        raise fail(at, f"a node is a table, not {_kind(value)}")
    _known_keys(value, _NODE_KEYS, at, fail)
    description = _text(value.get("description", ""), f"{at}.description", fail)
    source = value.get("input")
    if source is not None:
        source = _text(source, f"{at}.input", fail)
        segments = source.split(".")
        if len(segments) > _MAX_SEGMENTS or not all(_is_segment(s) for s in segments):
            raise fail(f"{at}.input", f"a field path is up to {_MAX_SEGMENTS} dot-separated names "
                                      f"(letters, digits, _ or -), not {_cut(source)!r}")
    mechanism = value.get("mechanism")
    if mechanism is None:
        if source is None:
            raise fail(at, f"missing mechanism: a node is computed by a mechanism ({', '.join(MECHANISMS)}), "
                           "set by the action (input = \"field.path\"), or both")
        for k in ("intercept", "parents", "noise", "scale"):
            if k in value:
                raise fail(f"{at}.{k}", "an input node without a mechanism has no parents, intercept, noise or scale")
        return Node(name=name, input=source, description=description)
    if mechanism not in MECHANISMS:
        raise fail(f"{at}.mechanism", f"one of {', '.join(MECHANISMS)}, not {_cut(mechanism)!r}")
    intercept = read_number(value.get("intercept", 0), f"{where}: {at}.intercept")
    raw_parents = value.get("parents", {})
    if not isinstance(raw_parents, Mapping):
        raise fail(f"{at}.parents", f"a table of parent = coefficient, not {_kind(raw_parents)}")
    parents: list[tuple[str, Fraction]] = []
    for parent, coefficient in raw_parents.items():
        pname = _text(parent, f"{at}.parents", fail, pattern=True)
        parents.append((pname, read_number(coefficient, f"{where}: {at}.parents.{pname}")))
    parents.sort()
    noise = Fraction(0)
    if "noise" in value:
        if mechanism == "bernoulli":
            raise fail(f"{at}.noise", "a bernoulli node has no noise (its draw is the noise)")
        noise = read_number(value["noise"], f"{where}: {at}.noise")
        if noise < 0:
            raise fail(f"{at}.noise", f"a standard deviation is 0 or more, not {exact_text(noise)}")
    scale = Fraction(1)
    if "scale" in value:
        if mechanism != "logistic":
            raise fail(f"{at}.scale", "only a logistic node has a scale")
        scale = read_number(value["scale"], f"{where}: {at}.scale")
        if scale <= 0:
            raise fail(f"{at}.scale", f"a scale is more than 0, not {exact_text(scale)}")
    return Node(name=name, mechanism=mechanism, input=source, intercept=intercept, parents=tuple(parents),
                noise=noise, scale=scale, description=description)


def _topological(nodes: Mapping[str, Node], fail: Any) -> list[str]:
    """The nodes in topological order, ties broken by name; a cycle is named edge by edge."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(sorted(nodes))
    graph.add_edges_from((parent, node.name) for node in nodes.values() for parent, _ in node.parents)
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        return list(nx.lexicographical_topological_sort(graph))
    names = [u for u, _ in cycle]
    raise fail("nodes", f"the graph has a cycle: {' -> '.join([*names, names[0]])}")


def _kpis(raw: object, nodes: Mapping[str, Node], where: str, fail: Any) -> tuple[KPI, ...]:
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise fail("kpis", "a model needs a list of KPIs, one or more (what its risk is measured on)")
    if len(raw) > MAX_KPIS:
        raise fail("kpis", f"at most {MAX_KPIS} KPIs, not {len(raw)}")
    out: list[KPI] = []
    for i, item in enumerate(raw):
        at = f"kpis[{i}]"
        if not isinstance(item, Mapping):
            raise fail(at, f"a KPI is a table, not {_kind(item)}")
        _known_keys(item, _KPI_KEYS, at, fail)
        for key in ("node", "threshold", "direction"):
            if key not in item:
                raise fail(f"{at}.{key}", "missing (a KPI names a node, a threshold and a direction)")
        node = _text(item["node"], f"{at}.node", fail)
        if node not in nodes:
            raise fail(f"{at}.node", f"unknown node {_cut(node)!r} (nodes: {_listed(nodes)})")
        name = _text(item.get("name", node), f"{at}.name", fail, pattern=True)
        if any(k.name == name for k in out):
            raise fail(f"{at}.name", f"a second KPI named {name!r}")
        threshold = read_number(item["threshold"], f"{where}: {at}.threshold")
        direction = item["direction"]
        if direction not in ("above", "below"):
            raise fail(f"{at}.direction", f"above or below (which side of the threshold is a crossing), not {_cut(direction)!r}")
        out.append(KPI(name=name, node=node, threshold=threshold, direction=direction))
    return tuple(out)


def _listed(nodes: Mapping[str, Any]) -> str:
    names = sorted(nodes)
    return ", ".join(names[:12]) + (", …" if len(names) > 12 else "")
