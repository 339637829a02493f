"""The operation registry and its doors: declared once, exposed alike, decided by one gate.

* ``DECLARED_IN`` is what the modules declare (a door importing one operation finds its module).
* The five doors — the CLI, the ToolBus, MCP, batch jobs, the conductor's tools — expose exactly the
  operations the registry gives them, with the same parameter names (each door's declared own name
  aside) and the same limits: every checked number is accepted or refused alike at the CLI, in a
  manifest and by the model the ToolBus and MCP validate with; MCP's published bounds are the model's.
* Every operation declares what it needs; the property: for every operation, every principal and
  every hostile variant of its parameters (a file outside the roots, a ``ken`` line in its DSL,
  code, approvals and egress in an Action's inputs), a call is either refused by the gate, with a
  receipt, before it runs, or runs without the access check ever having to refuse anything: it
  never fails later for lack of a permission check.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from cda.contracts import limits
from cda.errors import CDAError
from cda.operations import Door, MemorySink, Principal, Refused, all_operations, anonymous, invoke, local_user
from cda.operations.params import Checked, DslText, PathParam, checker_of, marker
from cda.operations.registry import DECLARED_IN, MODULES, Operation, for_door, module_of
from tests.conftest import EXAMPLES

OPS = all_operations()


def test_every_operation_is_declared_where_a_door_looks_for_it() -> None:
    """``get(name)`` imports only the module ``module_of(name)`` names (a namespace's module, or
    ``DECLARED_IN`` for the engine's words): each operation must be declared there."""
    import sys

    reg = sys.modules["cda.operations.registry"]
    for module in MODULES:
        importlib.import_module(module)
    assert {name: op.run.__module__ for name, op in reg._REGISTRY.items()} == {
        name: module_of(name) for name in reg._REGISTRY}
    assert set(DECLARED_IN) <= set(reg._REGISTRY)


def test_every_operation_says_what_it_needs() -> None:
    for op in OPS.values():
        fields = op.params.model_fields
        names_files = any(marker(list(f.metadata), PathParam | DslText) is not None  # type: ignore[arg-type]
                          or "KenSource" in str(f.annotation) or "CDAInputs" in str(f.annotation)
                          for f in fields.values())
        assert op.needs.files or not names_files, op.name
        if any("CDAInputs" in str(f.annotation) for f in fields.values()):
            assert op.needs.code and op.needs.egress, op.name
        if callable(getattr(op.params, "egress_class", None)):
            assert op.needs.egress, op.name
        assert op.doors, op.name


# ---- the five doors -----------------------------------------------------------------------------

_PROBES = ["-1", "0", "1", "2", "50", "51", "0.5", "1.0", str(limits.MAX_COUNT), str(limits.MAX_COUNT + 1),
           str(limits.MAX_SEED), str(limits.MAX_SEED + 1), "nan", "inf", "1e400"]


def _model_accepts(op: Operation, name: str, value: Any) -> bool:
    field = op.params.model_fields[name]
    try:
        TypeAdapter(Any if not field.metadata else _annotated(field)).validate_python(value)
    except (ValidationError, CDAError):
        return False
    return True


def _annotated(field: Any) -> Any:
    from typing import Annotated

    return Annotated[(field.annotation, *field.metadata)]


def _number(text: str, whole: bool) -> Any:
    return int(text) if whole else float(text)


def _numbers(op: Operation) -> list[tuple[str, Checked]]:
    out = []
    for name, field in op.params.model_fields.items():
        checked = checker_of(list(field.metadata))
        if checked is not None:
            out.append((name, checked))
    return out


def _cli_parsers() -> dict[str, argparse.ArgumentParser]:
    from cda.cli.commands import JOINED, OPERATION_COMMANDS
    from cda.cli.main import _parser

    root = _parser()
    out = {}
    for words, command in OPERATION_COMMANDS.items():
        p: Any = root
        for word in ((" ".join(words),) if (words[0], words[-1]) in JOINED else words):
            p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[word]
        out[command.operation] = p
    return out


def _own(name: str) -> tuple[str, ...]:
    """The parameters command ``name``'s presenter reads from options of its own (``cda diagnose
    --mode top 5``; ``cda policy analyze``'s policy files and ``--links``), as its extras declare them."""
    from cda.cli.commands import OPERATION_COMMANDS, presenter

    command = next(c for c in OPERATION_COMMANDS.values() if c.operation == name)
    shape = presenter(command.extras)(argparse.ArgumentParser(), OPS[name]) if command.extras else None
    return tuple((shape or {}).get("own", ()))


def test_the_cli_offers_each_operation_with_its_parameters_and_limits() -> None:
    parsers = _cli_parsers()
    assert set(parsers) == {op.name for op in for_door(Door.CLI)}
    for name, parser in parsers.items():
        op = OPS[name]
        dests = {a.dest: a for a in parser._actions}
        for param in op.params_at(Door.CLI):
            assert param in dests or param in _own(name), (name, param)
        for param, checked in _numbers(op):
            if param not in dests:
                continue
            action = dests[param]
            for text in _PROBES:
                if checked.whole and not text.lstrip("-").isdigit():
                    continue
                try:
                    action.type(text)  # type: ignore[misc]
                    cli = True
                except argparse.ArgumentTypeError:
                    cli = False
                assert cli == _model_accepts(op, param, _number(text, checked.whole)), (name, param, text)


def test_the_toolbus_methods_are_the_registry_s() -> None:
    from cda.service.protocol import METHODS

    assert set(METHODS) == {op.name for op in for_door(Door.TOOLBUS)}
    for name, (params, result) in METHODS.items():
        assert params is OPS[name].params and result is OPS[name].result  # the very models: same names, limits


def test_the_mcp_tools_are_the_registry_s_with_the_same_bounds() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from cda.mcp.server import build_server

    async def tools() -> dict[str, Any]:
        async with Client(build_server()) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    listed = anyio.run(tools)
    ops = {op.mcp: op for op in for_door(Door.MCP)}
    assert set(listed) == set(ops)
    for tool_name, op in ops.items():
        schema = listed[tool_name].input_schema
        assert set(schema["properties"]) == set(op.params_at(Door.MCP)), tool_name
        model = op.params.model_json_schema()["properties"]
        for param, prop in schema["properties"].items():
            assert _bounds(prop) == _bounds(model[param]), (tool_name, param)
        assert listed[tool_name].output_schema is not None


def _bounds(prop: dict[str, Any]) -> list[tuple[str, Any]]:
    found = []
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "enum", "pattern"):
        if key in prop:
            found.append((key, prop[key]))
    for sub in prop.get("anyOf", []):
        found += _bounds(sub)
    return sorted(found, key=str)


def test_the_job_kinds_are_the_registry_s_with_the_same_limits() -> None:
    from cda.adapters.jobs.kinds import KINDS
    from cda.errors import OptionError

    ops = {op.job: op for op in for_door(Door.JOBS)}
    assert set(KINDS) == set(ops)
    for kind_name, op in ops.items():
        kind = KINDS[kind_name]
        assert set(kind.params) == {op.name_at(Door.JOBS, p) for p in op.params_at(Door.JOBS) if p != kind.main}, kind_name
        for param, checked in _numbers(op):
            door = op.name_at(Door.JOBS, param)
            if door not in kind.params:
                continue
            for text in _PROBES:
                if checked.whole and not text.lstrip("-").isdigit():
                    continue
                value = _number(text, checked.whole)
                try:
                    kind.params[door](door, value)
                    job = True
                except OptionError:
                    job = False
                assert job == _model_accepts(op, param, value), (kind_name, param, text)


def test_the_conductor_tools_are_the_registry_s() -> None:
    import tomllib
    from importlib import resources

    from cda.operations.conductor_tools import cda_toolbox

    toolbox = cda_toolbox()
    shipped = {t["name"]: t for t in tomllib.loads(resources.files("cda.conductor").joinpath("tools.toml").read_text(
        encoding="utf-8"))["tool"]}
    for op in for_door(Door.CONDUCTOR):
        assert op.conductor is not None and op.conductor.name in toolbox.tools, op.name
        assert set(shipped[op.conductor.name]["inputs"]) <= set(op.conductor.inputs), op.name
        assert set(op.conductor.inputs.values()) <= set(op.params.model_fields), op.name


def test_adding_an_operation_is_one_declaration(tmp_path: Path) -> None:
    """A new operation appears at its doors from its declaration alone: the ToolBus validates and
    dispatches it, the gate decides for it."""
    import sys

    from pydantic import BaseModel

    from cda.operations import operation

    reg = sys.modules["cda.operations.registry"]

    class Echo(BaseModel):
        text: str

    @operation("demo.echo", Echo, Echo, summary="say it back", doors={Door.TOOLBUS}, roles={"internal"})
    def echo(call: Any, p: Echo) -> Echo:
        return p

    try:
        assert invoke("demo.echo", {"text": "hi"}, principal=Principal("r", "internal"), door=Door.TOOLBUS) == Echo(
            text="hi")
        with pytest.raises(Refused):
            invoke("demo.echo", {"text": "hi"}, principal=Principal("p", "partner"), door=Door.TOOLBUS)
        assert "demo.echo" in {op.name for op in for_door(Door.TOOLBUS)}
    finally:
        reg._REGISTRY.pop("demo.echo")


# ---- the gate: every operation x every principal x hostile variants ---------------------------

PROBLEM = "hyp a, b\nobservable o\nobserve o\nhard: o iff (a or b)\n"
BENCH = "INPUT(a)\nINPUT(b)\nOUTPUT(z)\ny = AND(a, b)\nz = NOT(y)\n"
OUTSIDE = "/etc/hostname"
INPUTS = {"problem": "why", "dsl": PROBLEM}


def _examples(root: Path) -> dict[str, dict[str, Any]]:
    action = json.loads((EXAMPLES / "guardian" / "launch.json").read_text(encoding="utf-8"))
    (root / "p.cda").write_text(PROBLEM, encoding="utf-8")
    return {
        "check": {"dsl": PROBLEM}, "solve": {"dsl": PROBLEM, "backend": "clingo"},
        "explain_conflict": {"dsl": PROBLEM},
        "prove": {"fol": "premise P(a)\nclaim P(a)\n"},
        "diagnose": {"bench": BENCH, "observations": "a=1 b=1 z=1\n"},
        "probe": {"bench": BENCH, "observations": "a=1 b=1 z=1\n"},
        "actions.run": {"inputs": INPUTS},
        "actions.start": {"ability": "cda", "inputs": INPUTS},
        "actions.cancel": {"action_id": "a1"}, "actions.get": {"action_id": "a1"},
        "actions.refresh": {"action_id": "a1"},
        "actions.approve": {"action_id": "a1", "approval": "egress:external"},
        "actions.deny": {"action_id": "a1", "approval": "egress:external"},
        "actions.accept_update": {"action_id": "a1", "update": "b.r2"},
        "investigate.start": {"dsl": PROBLEM},
        "investigate.observe": {"session_id": "s1", "observation": "not o"},
        "investigate.status": {"session_id": "s1"}, "investigate.history": {"session_id": "s1"},
        "investigate.undo": {"session_id": "s1"}, "investigate.close": {"session_id": "s1"},
        "investigate.revise": {"session_id": "s1", "add": ["fact q"]},
        "investigate.note": {"session_id": "s1", "step": 0, "text": "seen"},
        "investigate.share": {"session_id": "s1", "member": "bob"},
        "report.check": {"draft": {"conclusion": {"root_cause": "db", "confidence": 0.3}}, "observations": ["db slow"]},
        "guard.evaluate": {"action": action}, "guard.escalations": {"state": "open"}, "guard.export": {"format": "csv"},
        "guard.resolve": {"escalation_id": "esc-1", "decision": "approve", "by": "alice", "reason": "ok",
                          "by_key": str(root / "alice.key")},
        "conduct.request": {"utterance": "compute 1 + 2"},
        "conduct.answer": {"obligation": 1, "text": "x"}, "conduct.trace": {"request": 1},
        "reflect.approve": {"action_id": "a1", "reviewer": "bob"},
        "reflect.trace": {"action_id": "a1", "approval": "x"},
        "artifacts.get": {"id": "summary:" + "0" * 16},
        "artifacts.integrity": {"action_id": "cda-" + "0" * 16},
        "policy.authorize": {"path": str(root / "p.cedar"), "request": str(root / "r.json")},
        "policy.test": {"path": str(root / "t.json")},
        "policy.analyze": {"path": str(root / "p.cedar"), "analysis": "always-denies", "schema": str(root / "s.json")},
        "policy.authorize_batch": {"path": str(root / "p.cedar"), "requests": str(root / "r.json")},
        "session_put": {"session": "s", "name": "x", "statement": "hyp q"},
        "session_remove": {"session": "s", "name": "x"}, "session_show": {"session": "s"},
        "session_solve": {"session": "s"},
    }


def _hostile(op: Operation, params: dict[str, Any], how: str, root: Path) -> dict[str, Any]:
    out = copy.deepcopy(params)
    if how == "outside":
        twins = {"path": ("dsl", "fol", "bench", "inputs"), "observations_path": ("observations",),
                 "action_path": ("action",)}  # the text a file parameter stands for: one or the other
        for name, field in op.params.model_fields.items():
            if marker(list(field.metadata), PathParam) is not None:
                out[name] = [OUTSIDE] if "list" in str(field.annotation) else OUTSIDE
                for twin in twins.get(name, ()):
                    out.pop(twin, None)
    elif how == "ken":
        for name, field in op.params.model_fields.items():
            if marker(list(field.metadata), DslText) is not None and isinstance(out.get(name), str):
                out[name] += f'\nken "{OUTSIDE}"\n'
        if "inputs" in out:
            out["inputs"] = {**out["inputs"], "dsl": PROBLEM + f'ken "{OUTSIDE}"\n'}
    elif how == "inputs_ken" and "inputs" in out:
        out["inputs"] = {**out["inputs"], "ken": {"path": OUTSIDE.replace("hostname", "k.json")}}
    elif how == "code" and "inputs" in out:
        out["inputs"] = {**out["inputs"], "functions": [{"name": "f", "source": "def check(c):\n    return True\n"}]}
    elif how == "egress" and "inputs" in out:
        out["inputs"] = {**out["inputs"], "policies": {"approvals": ["egress:external"]},
                         "llm": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}}
    elif how == "translator" and op.name == "conduct.request":
        out.update(translator="openai", llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    return out


class _Ran(Exception):  # noqa: N818 - a marker: the operation ran past the gate into its door's facilities
    pass


class _Desk:
    """A door facility that records the operation ran (the gate let it through) and stops there."""

    def __getattr__(self, name: str) -> Any:
        def ran(*args: Any, **kwargs: Any) -> Any:
            raise _Ran(name)

        return ran


def _env(root: Path) -> SimpleNamespace:
    from cda.operations.artifacts import ArtifactShelf
    from cda.operations.guard import GuardDesk
    from cda.operations.investigate import desk_for

    return SimpleNamespace(actions=_Desk(), investigations=desk_for(root / "inv.sqlite", sessions_file=True),
                           guardian=GuardDesk(EXAMPLES / "guardian" / "policies.toml", root / "ledger.sqlite"),
                           conductor_db=root / "ir.sqlite", reflection=_Desk(), read_trace=_Desk().read,
                           artifacts=ArtifactShelf(root, root / "receipts.sqlite", lambda a: None),
                           sessions={}, out_dir=None, runs=[], ken_cache={})


def _principals(root: Path) -> list[Principal]:
    return [local_user(), local_user((root,), code=False, approves=False), Principal("p", "partner"),
            Principal("r", "internal", approves=True), Principal("a", "approver", approves=True), anonymous()]


HOW = ["plain", "outside", "ken", "inputs_ken", "code", "egress", "translator"]


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_call_is_refused_by_the_gate_or_runs_without_a_later_refusal(tmp_path: Path, name: str) -> None:
    """Every principal x every hostile variant x both egress caps, for this operation (the whole
    product: 1,344 calls over the registry)."""
    op = OPS[name]
    outcomes: set[str] = set()
    for principal in _principals(tmp_path):
        for how in HOW:
            for cap in ("local", "external"):
                params = _hostile(op, _examples(tmp_path)[name], how, tmp_path)
                sink = MemorySink()
                refused = None
                try:
                    invoke(op, params, principal=principal, door=Door.TOOLBUS, env=_env(tmp_path), base_dir=tmp_path,
                           egress_cap=cap, sink=sink)  # type: ignore[arg-type]
                    outcomes.add("ran")
                except Refused as exc:
                    refused = exc
                    outcomes.add("refused")
                except (_Ran, CDAError, ValidationError, ValueError, OSError):
                    outcomes.add("ran")  # past the gate (or malformed parameters): what matters is below
                names = [r[0] for r in sink.records]
                case = (principal.role, principal.roots, how, cap)
                assert "access.refused" not in names, (case, sink.records)  # never a refusal past the gate
                if refused is not None:
                    assert names and names[-1] == "gate.refused", case  # a refusal is a receipt
                if principal == local_user() and how == "plain" and "local" in op.roles:
                    assert refused is None, (case, refused)  # the local user at its own machine is never refused
    assert "ran" in outcomes  # the property is not met by refusing everything


@pytest.mark.parametrize(("listed", "url", "allowed"), [
    ("", "http://127.0.0.1:9/v1", False),
    ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/", True),  # a trailing slash is the same endpoint
    ("https://LLM.example/v1", "https://llm.example:443/v1", True),  # case and the default port
    ("http://127.0.0.1:9/v1", "http://localhost:9/v1", False),  # another name is another endpoint
    ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/../admin", False),
    ("http://127.0.0.1:9/v1", "http://u:p@127.0.0.1:9/v1", False),  # credentials in the URL
    ("http://127.0.0.1:9/v1", "file:///etc/passwd", False),
    ("http://a.example/v1, http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", True),
])
def test_only_the_operator_s_llm_endpoints_for_a_caller_that_may_not_choose(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listed: str, url: str, allowed: bool) -> None:
    from cda.operations.gate import decide

    monkeypatch.setenv("CDA_LLM_ENDPOINTS", listed)
    conduct = OPS["conduct.request"]
    params = conduct.params.model_validate({"utterance": "compute 1 + 1", "translator": "openai",
                                            "llm_base_url": url, "llm_model": "m"})
    for principal, chooses in [(local_user(), True), (anonymous(), True), (local_user((tmp_path,)), False),
                               (Principal("p", "partner"), False), (Principal("r", "internal", approves=True), False)]:
        decision = decide(conduct, principal, params, base_dir=tmp_path, egress_cap="external")
        if chooses or allowed:
            assert decision.refusal is None, (principal, decision)
        else:
            assert decision.refusal is not None and decision.refusal[0] == "egress", (principal, decision)
            assert decision.refusal[2] == ["llm_base_url"] and "CDA_LLM_ENDPOINTS" in decision.refusal[1]


def test_every_operation_has_an_example_for_the_property(tmp_path: Path) -> None:
    assert set(_examples(tmp_path)) == set(OPS)


@pytest.mark.parametrize("doc", ["service.md", "agents.md"])
def test_the_docs_state_who_may_do_what_as_the_registry_decides(doc: str) -> None:
    from cda.operations.table import who_may_do_what
    from tests.conftest import ROOT

    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    start = text.index("-->\n", text.index("<!-- who-may-do-what")) + 4
    end = text.index("<!-- /who-may-do-what -->")
    assert text[start:end] == who_may_do_what(), "regenerate with cda.operations.table.who_may_do_what()"


def _splits(run: str) -> bool:
    """Whether ``run`` is the grammar's keywords and numbers, one after the other (by recursion)."""
    import re
    from importlib import resources

    words = set(re.findall(r'"([A-Za-z_]+)"', resources.files("cda.encodings").joinpath("grammar.lark").read_text()))
    if not run:
        return True
    digits = len(run) - len(run.lstrip("0123456789"))
    if digits and _splits(run[digits:]):
        return True
    return any(run.startswith(w) and _splits(run[len(w):]) for w in words)


def _ken_lines_by_characters(text: str) -> list[tuple[str, int, int]]:
    """An oracle for ``ken_lines``: the grammar's lexing rules walked one character at a time."""
    word = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
    found: list[tuple[str, int, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 1
            i = j + 1 if j < n and text[j] == '"' else j
        elif c in word:
            k = i
            while k < n and text[k] in word:
                k += 1
            run = text[i:k]
            if not run.endswith("ken") or not _splits(run[:-3]):  # a name (or numbers and keywords, then one)
                i = k
                continue
            j = k
            while j < n:  # whitespace and comments between the keyword and its string
                if text[j] in " \t\f\r\n":
                    j += 1
                elif text[j] == "#":
                    stop = text.find("\n", j)
                    j = n if stop < 0 else stop
                else:
                    break
            if j < n and text[j] == '"':
                end, stop = text.find('"', j + 1), text.find("\n", j + 1)
                if end >= 0 and (stop < 0 or end < stop):
                    found.append((text[j + 1:end], text.count("\n", 0, j) + 1, j - (text.rfind("\n", 0, j) + 1) + 1))
                    i = end + 1
                    continue
            i = j
        else:
            i += 1
    return found


_KEN_PIECES = ["ken", 'ken "x.csv"', '"', "#", "\n", "a", "_", "token", 'ken"y"\n', "kenx", "  ", "é", 'ken\n"z"',
               '"ken "w""', "\t", "\r", "1", "\f", "# c\n", "12", "ken1", "x1",
               "unsat", "broken", "top", "in"]


@given(st.lists(st.sampled_from(_KEN_PIECES), max_size=24).map("".join))
@settings(max_examples=400, deadline=None)
def test_ken_lines_scan_agrees_with_a_character_walk(text: str) -> None:
    from cda.operations.demands import ken_lines

    assert ken_lines(text) == _ken_lines_by_characters(text)


_STATEMENTS = ["hyp a", "observe a", "hard: a or b", "soft 2: a", "observe value(metric:m) >= 1", "hyp b",
               "expect status unsat", "expect status sat", "goal best_explanation top 3", "hard: a and not b"]
_GAPS = [" ", "\n", "\f", "\t", "\r\n", " # ken \"not\"\n", "\n# c\n", ""]


@given(st.lists(st.tuples(st.sampled_from(_STATEMENTS), st.sampled_from(_GAPS), st.booleans(),
                          st.sampled_from(_GAPS), st.sampled_from(["/p.json", "k.csv", ""])), max_size=6))
@settings(max_examples=300, deadline=None)
def test_ken_lines_finds_every_ken_statement_the_parser_reads(parts: list[tuple[str, str, bool, str, str]]) -> None:
    """The oracle is the DSL's own parser (its lexer skips \\f and comments between ``ken`` and
    the file's name; ``1ken`` is a number and the keyword): whatever it would load, the gate sees.
    A gap of "" glues a statement to ``ken`` (``… >= 1ken "…"``)."""
    from cda.encodings.lark_reader import read
    from cda.errors import DSLSyntaxError
    from cda.operations.demands import ken_lines

    text = "metric m: ms\nhyp a, b\n"
    for statement, gap, ken, inner, path in parts:
        text += statement + (gap + f'ken{inner}"{path}"' if ken else "") + (gap or " ")
    try:
        program = read(text, "start", None)
    except DSLSyntaxError:
        return  # nothing is loaded from a text that does not parse
    loads = [(s.path, *s.pos) for s in program if type(s).__name__ == "KenLoad"]
    assert ken_lines(text) == loads, text
