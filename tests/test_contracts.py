"""The Action contracts: round trips, clear validation errors, events, and the committed schemas."""

from __future__ import annotations

import io
import json
import math
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from cda.cli.schema import main_schema
from cda.contracts import schema as schema_mod
from cda.contracts.action import (
    ActionVerdict,
    Budgets,
    CDAInputs,
    CDAOutputs,
    Constraints,
    DisplayPlan,
    FunctionCheck,
    Goals,
    KenEdge,
    KenNode,
    KenSource,
    NextTestSuggestion,
    Policies,
    SeedSpec,
    SoftConstraint,
)
from cda.contracts.events import (
    EVENT_TYPES,
    ActionCheckpoint,
    ActionCompleted,
    ActionFailed,
    ActionLinked,
    ActionNotice,
    ActionPartial,
    ActionProgress,
    ActionStarted,
    ActionUpdateAvailable,
    ActionWaitingUser,
    event_without_time,
    parse_event,
)
from cda.contracts.hypothesis_record import HypothesisRecord, TraceRecord
from cda.contracts.refs import ArtifactRef, SpanRef
from cda.contracts.schema import CONTRACTS, check_schemas, render_schemas, schema_diff, write_schemas
from tests.conftest import EXAMPLES, ROOT

SCHEMAS = ROOT / "schemas"
OUTAGE = EXAMPLES / "service_outage.cda"

CHECK_SOURCE = '''\
KNOWN_UP = {"cache"}

def check(claim: str) -> bool:
    """A claim 'down(x)' fails when x answered a health probe."""
    name = claim.removeprefix("down(").removesuffix(")")
    return name not in KNOWN_UP
'''


def outage_inputs() -> CDAInputs:
    """A realistic Action input for examples/service_outage.cda, in the shape of spec §2.1."""
    text = OUTAGE.read_text(encoding="utf-8")
    observations: list[SpanRef | ArtifactRef] = []
    for line in ("observe slow(web)", "observe slow(api)", "observe not slow(cache)"):
        start = text.index(line)
        observations.append(SpanRef(source="examples/service_outage.cda", start=start, end=start + len(line), excerpt=line))
    observations.append(ArtifactRef(artifact_id="art:grafana-2024-05-01", media_type="image/png"))
    deps = [("web", "api"), ("api", "auth"), ("api", "cache"), ("auth", "db"), ("queue", "db")]
    return CDAInputs(
        problem="The web front end and the API are slow, the cache is fast. Which service is down?",
        observations=observations,
        goals=Goals(kind="prove", success_criteria=["one explanation above 0.8"], claims=["slow(api)", "down(db)"], top=3),
        constraints=Constraints(
            hard=["at_most(1, [down(web), down(api), down(auth), down(db), down(cache), down(queue)])"],
            soft=[SoftConstraint(clause="not down(db)", weight=2.0, name="db_rare"), SoftConstraint(clause="not down(auth)")],
        ),
        dsl=text,
        ken=KenSource(
            nodes=[KenNode(id=s, label="Service", text=f"the {s} service") for s in ("web", "api", "auth", "db", "cache", "queue")],
            edges=[KenEdge(source=u, relation="depends", target=v) for u, v in deps],
        ),
        policies=Policies(pii_posture="off", egress="local", approvals=["ops-lead:read-metrics"]),
        budgets=Budgets(tokens=20_000, wall=30.0),
        risk_class="medium",
        seed=SeedSpec(purpose="outage-2024-05-01"),
        functions=[FunctionCheck(name="health_probe", source=CHECK_SOURCE, claims=["down(cache)"], timeout_s=2.0)],
        backend="clingo",
    )


def outage_outputs() -> CDAOutputs:
    return CDAOutputs(
        action_id="act-1",
        status="completed",
        summary_artifact_id="art:summary-1",
        plan_bundle_id="art:plan-1",
        evidence_bundle_id="art:evidence-1",
        verdicts=[
            ActionVerdict(hypothesis_id="H1", status="supported", confidence=1.0, band="high", claim="slow(api)"),
            ActionVerdict(
                hypothesis_id="H2", status="inconclusive", confidence=0.0625, band="low", claim="down(db)",
                caveats=["only 4 of 6 services observed"],
            ),
        ],
        next_tests=[
            NextTestSuggestion(question="Is auth slow?", suggested_ability="sandbox", expected_discriminative_power=0.92, observable="slow(auth)")
        ],
        caveats=["posterior over enumerated hypotheses"],
    )


def one_of_each_event() -> list[BaseModel]:
    return [
        ActionStarted(action_id="a", seq=0, ts=1.5, inputs_hash="ab" * 32),
        ActionProgress(action_id="a", seq=1, phase="solve", fraction=0.25, message="enumerating"),
        ActionNotice(action_id="a", seq=2, level="warning", message="egress denied; evidence stubbed"),
        ActionWaitingUser(action_id="a", seq=3, reason="external check needs approval", approvals_needed=["egress:external"]),
        ActionLinked(action_id="a", seq=4, linked_action_id="b", ability="research", edge="bind"),
        ActionCheckpoint(action_id="a", seq=5, kind="verifier_update", payload={"verifier": "units", "passed": True}),
        ActionCompleted(action_id="a", seq=6, outputs=outage_outputs()),
        ActionPartial(action_id="a", seq=7, caveats=["wall budget ran out"], next_tests=[NextTestSuggestion(question="Is db up?")]),
        ActionFailed(action_id="a", seq=8, error="line 3: unexpected ')'", error_type="DSLSyntaxError"),
        ActionUpdateAvailable(action_id="a", seq=9, sub_action="research-0123456789ab.r2", revision=2,
                              sha256="cd" * 32, artifact_id="research-0123456789ab:output"),
    ]


SEED_TRACE = {
    "focus_subsystem": "messaging",
    "global_invariants": [
        "event-ordering is monotonic per conversation",
        "privacy boundaries between private and group channels",
    ],
    "candidate_hypotheses": [
        {
            "id": "H1",
            "statement": "Duplicate messages caused by non-idempotent consumer retry.",
            "assumptions": ["retry policy can replay same event", "dedup key is not persisted"],
            "evidence_for": ["duplicates appear after retry spikes", "same payload hash observed twice"],
            "evidence_against": ["no duplicates in low-load path"],
            "falsifiers": ["dedup key persisted and checked before write", "replay test shows single insert"],
            "confidence": 0.62,
            "next_probe": "Run replay test with forced retry and inspect dedup storage writes.",
        }
    ],
    "selected_hypothesis_id": "H1",
    "selected_hypothesis_reason": "Highest expected uncertainty reduction with one bounded experiment.",
    "integration_risks": ["cross-service event ordering drift"],
    "policy_fallback_applied": False,
}


def error_text(exc: pytest.ExceptionInfo[ValidationError]) -> str:
    return str(exc.value)


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize(
    "model",
    [
        outage_inputs(),
        CDAInputs(dsl="observe slow(web)"),
        outage_outputs(),
        DisplayPlan(),
        KenSource(path="ken/services.graphml"),
        HypothesisRecord(
            id="H1", statement="db is down", assumptions=["down(db)"],
            evidence_for=[SpanRef(source="examples/service_outage.cda", start=3, end=9, excerpt="slow(web)"), "api slow"],
            confidence=0.3,
        ),
        TraceRecord.model_validate(SEED_TRACE),
        *one_of_each_event(),
    ],
    ids=lambda m: type(m).__name__,
)
def test_json_round_trip_is_equal_and_stable(model: BaseModel) -> None:
    text = model.model_dump_json()
    again = type(model).model_validate_json(text)
    assert again == model
    assert again.model_dump_json() == text


@given(confidence=st.floats(min_value=0.0, max_value=1.0), weight=st.floats(min_value=1e-30, max_value=1e30))  # the DSL literal range
def test_floats_survive_json_exactly(confidence: float, weight: float) -> None:
    verdict = ActionVerdict(hypothesis_id="H", status="inconclusive", confidence=confidence, band="low", claim="c")
    assert ActionVerdict.model_validate_json(verdict.model_dump_json()).confidence == confidence
    soft = SoftConstraint(clause="not down(db)", weight=weight)
    assert SoftConstraint.model_validate_json(soft.model_dump_json()).weight == Decimal(repr(weight))  # as it prints


def test_observations_are_discriminated_on_kind() -> None:
    data = {"dsl": "x", "observations": [{"kind": "artifact", "artifact_id": "d1"}, {"kind": "span", "source": "d1", "start": 0, "end": 4}]}
    inputs = CDAInputs.model_validate(data)
    assert [type(o) for o in inputs.observations] == [ArtifactRef, SpanRef]
    with pytest.raises(ValidationError, match="kind"):
        CDAInputs.model_validate({"dsl": "x", "observations": [{"kind": "video", "artifact_id": "d1"}]})


def test_display_plan_defaults_are_the_specs() -> None:
    assert DisplayPlan().model_dump() == {
        "primary": {"kind": "summary", "id_ref": "summary_artifact_id"},
        "chips": ["receipts", "context_pack"],
        "drawers": {"integrity": True},
    }
    # defaults are not shared between instances
    a, b = DisplayPlan(), DisplayPlan()
    a.chips.append("x")
    assert b.chips == ["receipts", "context_pack"]


def test_seed_trace_template_parses_verbatim() -> None:
    trace = TraceRecord.model_validate(SEED_TRACE)
    assert trace.candidate_hypotheses[0].confidence == 0.62
    assert trace.model_dump(exclude={"confidence"}) == SEED_TRACE


# ---------------------------------------------------------------- validation errors


def test_empty_problem_and_dsl_is_refused_clearly() -> None:
    with pytest.raises(ValidationError) as exc:
        CDAInputs(problem="  ", dsl="\n")
    assert "'problem'" in error_text(exc) and "'dsl'" in error_text(exc) and "both empty" in error_text(exc)
    assert CDAInputs(problem="why?").dsl == "" and CDAInputs(dsl="observe slow(web)").problem == ""


def test_bad_enum_value_names_the_field_and_the_choices() -> None:
    with pytest.raises(ValidationError) as exc:
        CDAInputs(problem="p", risk_class="extreme")  # type: ignore[arg-type]
    text = error_text(exc)
    assert "risk_class" in text and "'low', 'medium', 'high' or 'hard'" in text
    with pytest.raises(ValidationError, match="goals.kind"):
        CDAInputs.model_validate({"problem": "p", "goals": {"kind": "explain"}})


@pytest.mark.parametrize("weight", [-1.0, 0.0, math.inf, math.nan])
def test_soft_weight_must_be_positive_and_finite(weight: float) -> None:
    with pytest.raises(ValidationError) as exc:
        CDAInputs.model_validate({"problem": "p", "constraints": {"soft": [{"clause": "not down(db)", "weight": weight}]}})
    assert "constraints.soft.0.weight" in error_text(exc)


def test_unknown_field_is_an_error_not_ignored() -> None:
    with pytest.raises(ValidationError, match="budgets.wal\n.*Extra inputs are not permitted"):
        CDAInputs.model_validate({"problem": "p", "budgets": {"wal": 3}})


@pytest.mark.parametrize(
    ("ken", "message"),
    [
        ({"path": "g.txt"}, "must end in one of .json, .csv, .graphml"),
        ({}, "give a 'path'"),
        ({"path": "g.json", "nodes": [{"id": "a"}]}, "not both"),
        ({"nodes": [{"id": "a"}, {"id": "a"}]}, "node id 'a' appears twice"),
    ],
)
def test_ken_source_errors(ken: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        KenSource.model_validate(ken)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def check(claim):\n    return (", "source line"),
        ("def probe(claim):\n    return True\n", "must define check"),
    ],
)
def test_function_source_is_parsed_not_run(source: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        FunctionCheck(name="f", source=source)
    # parsing never executes: a check whose module body would raise is still accepted
    FunctionCheck(name="f", source="raise SystemExit(1)\ncheck = lambda claim: True\n")


def test_budgets_and_confidences_are_bounded() -> None:
    with pytest.raises(ValidationError, match="budgets.wall"):
        CDAInputs.model_validate({"problem": "p", "budgets": {"wall": 0}})
    with pytest.raises(ValidationError, match="confidence"):
        ActionVerdict(hypothesis_id="H", status="supported", confidence=1.5, band="high", claim="c")
    with pytest.raises(ValidationError, match="confidence\n  Input should be less than or equal to 1"):
        HypothesisRecord(id="H", statement="s", confidence=1.2)
    with pytest.raises(ValidationError, match="evidence_for.0.SpanRef.source\n  Field required"):
        HypothesisRecord.model_validate({"id": "H", "statement": "s", "confidence": 0.5, "evidence_for": [{"kind": "span"}]})


def test_trace_selected_id_must_be_a_candidate() -> None:
    with pytest.raises(ValidationError, match="'H9' is not among the candidates \\(H1\\)"):
        TraceRecord.model_validate({**SEED_TRACE, "selected_hypothesis_id": "H9"})
    twice = {**SEED_TRACE, "candidate_hypotheses": SEED_TRACE["candidate_hypotheses"] * 2}  # type: ignore[operator]
    with pytest.raises(ValidationError, match="'H1' appears twice"):
        TraceRecord.model_validate(twice)


# ---------------------------------------------------------------- events


def test_every_event_type_parses_to_its_class() -> None:
    events = one_of_each_event()
    assert {type(e) for e in events} == set(EVENT_TYPES.values())
    for event in events:
        data = json.loads(event.model_dump_json())
        parsed = parse_event(data)
        assert type(parsed) is type(event) and parsed == event
        assert EVENT_TYPES[data["type"]] is type(event)


def test_unknown_or_missing_type_and_bad_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="action_started"):
        parse_event({"type": "action_exploded", "action_id": "a", "seq": 0})
    with pytest.raises(ValidationError, match="type"):
        parse_event({"action_id": "a", "seq": 0})
    with pytest.raises(ValidationError, match="seq"):
        parse_event({"type": "action_notice", "action_id": "a", "seq": -1, "message": "m"})
    with pytest.raises(ValidationError, match="kind"):
        parse_event({"type": "action_checkpoint", "action_id": "a", "seq": 0, "kind": "raw_trace"})
    with pytest.raises(ValidationError, match="fraction"):
        parse_event({"type": "action_progress", "action_id": "a", "seq": 0, "phase": "p", "fraction": 1.01})


def test_event_without_time_ignores_only_the_timestamp() -> None:
    early = ActionProgress(action_id="a", seq=1, ts=100.0, phase="solve", fraction=0.5)
    late = early.model_copy(update={"ts": 200.5})
    assert early != late
    assert event_without_time(early) == event_without_time(late)
    assert "ts" not in event_without_time(early)
    assert event_without_time(early) != event_without_time(early.model_copy(update={"seq": 2}))
    assert event_without_time(early)["type"] == "action_progress"


# ---------------------------------------------------------------- committed schemas


def test_committed_schemas_are_current() -> None:
    assert check_schemas(SCHEMAS) == [], "run: python -c 'from pathlib import Path; from cda.contracts.schema import write_schemas; write_schemas(Path(\"schemas\"))'"


def test_writing_to_a_fresh_folder_reproduces_the_committed_bytes(tmp_path: Path) -> None:
    written = write_schemas(tmp_path / "out")
    assert [p.name for p in written] == sorted(p.name for p in SCHEMAS.glob("*.schema.json"))
    for path in written:
        assert path.read_bytes() == (SCHEMAS / path.name).read_bytes(), path.name
        text = path.read_text(encoding="utf-8")
        assert text.endswith("}\n") and "\n  \"" in text
    assert {f"{name}.schema.json" for name in CONTRACTS} | {"ActionEvent.schema.json"} == {p.name for p in written}
    assert render_schemas() == render_schemas()


def test_check_finds_stale_missing_and_extra_files(tmp_path: Path) -> None:
    copy = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, copy)
    assert check_schemas(copy) == []
    target = copy / "CDAInputs.schema.json"
    data = json.loads(target.read_text(encoding="utf-8"))
    data["properties"]["risk_class"]["default"] = "high"
    target.write_text(json.dumps(data, sort_keys=True, indent=2) + "\n", encoding="utf-8")
    (copy / "SpanRef.schema.json").unlink()
    (copy / "Old.schema.json").write_text(json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema",
                                                      "$id": "Old.schema.json"}) + "\n", encoding="utf-8")
    (copy / "README.md").write_text("not a schema\n", encoding="utf-8")
    assert schema_diff(copy) == {
        "CDAInputs.schema.json": "stale",
        "Old.schema.json": "extra",
        "SpanRef.schema.json": "missing",
    }
    assert check_schemas(copy) == ["CDAInputs.schema.json", "Old.schema.json", "SpanRef.schema.json"]
    write_schemas(copy)
    assert check_schemas(copy) == [] and (copy / "README.md").exists()


def test_a_changed_model_makes_the_committed_folder_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    class Probe(BaseModel):
        x: int

    monkeypatch.setitem(schema_mod.CONTRACTS, "SpanRef", Probe)
    monkeypatch.setitem(schema_mod.CONTRACTS, "Probe", Probe)
    assert schema_diff(SCHEMAS) == {"Probe.schema.json": "missing", "SpanRef.schema.json": "stale"}


def test_schema_cli_writes_and_checks(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    out, err = io.StringIO(), io.StringIO()
    assert main_schema(folder, check=True, out=out, err=err) == 1
    assert f"missing: {folder / 'CDAInputs.schema.json'}" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main_schema(folder, check=False, out=out, err=err) == 0
    assert out.getvalue() == f"wrote {len(render_schemas())} schemas to {folder}\n" and err.getvalue() == ""
    out, err = io.StringIO(), io.StringIO()
    assert main_schema(folder, check=True, out=out, err=err) == 0
    assert "current" in out.getvalue() and err.getvalue() == ""
    (folder / "Receipt.schema.json").write_text("{}\n", encoding="utf-8")
    err = io.StringIO()
    assert main_schema(folder, check=True, out=io.StringIO(), err=err) == 1
    assert err.getvalue().splitlines()[0] == f"stale: {folder / 'Receipt.schema.json'}"
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    err = io.StringIO()
    assert main_schema(blocker, check=False, out=io.StringIO(), err=err) == 2
    assert err.getvalue().startswith("cda: error:")


# ---------------------------------------------------------------- JSON Schema validates data


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        schema = root["$defs"][name]
    return schema


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
_IGNORED = {"title", "description", "default", "$schema", "$id", "$defs", "discriminator"}


def json_schema_errors(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    """A small validator for the JSON Schema keywords pydantic emits (no jsonschema dependency).

    An unknown keyword fails the test, so a pydantic upgrade that emits one is noticed."""
    schema = _resolve(schema, root)
    unknown = set(schema) - _IGNORED - {
        "type", "properties", "required", "additionalProperties", "items", "enum", "const",
        "anyOf", "oneOf", "minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength", "pattern", "maxItems",
    }
    assert not unknown, f"validator does not know {unknown}"
    errors: list[str] = []
    kind = schema.get("type")
    ok = True
    for one in (kind if isinstance(kind, list) else [kind] if kind is not None else []):  # a list: any of them
        if one == "integer":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif one == "number":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, _TYPES[one])
        if ok:
            break
    if not ok:
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    number, text = isinstance(value, int | float) and not isinstance(value, bool), isinstance(value, str)
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} != {schema['const']!r}")
    if number and "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: below minimum")
    if number and "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{where}: above maximum")
    if number and "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errors.append(f"{where}: not above exclusiveMinimum")
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where}: too short")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: too long")
    if text and "pattern" in schema and re.search(schema["pattern"], value) is None:  # JSON Schema: not anchored
        errors.append(f"{where}: does not match {schema['pattern']}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{where}: too many items")
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matches = sum(not json_schema_errors(value, s, root, where) for s in schema[key])
            if matches == 0 or (key == "oneOf" and matches > 1):
                errors.append(f"{where}: {matches} branches of {key} match")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        errors += [f"{where}: missing {name}" for name in schema.get("required", []) if name not in value]
        for name, item in value.items():
            if name in props:
                errors += json_schema_errors(item, props[name], root, f"{where}.{name}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unexpected {name}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += json_schema_errors(item, schema["additionalProperties"], root, f"{where}.{name}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += json_schema_errors(item, schema["items"], root, f"{where}[{i}]")
    return errors


def test_committed_cdainputs_schema_validates_the_outage_example() -> None:
    root = json.loads((SCHEMAS / "CDAInputs.schema.json").read_text(encoding="utf-8"))
    data = json.loads(outage_inputs().model_dump_json())
    assert json_schema_errors(data, root, root) == []
    assert json_schema_errors({"problem": "p"}, root, root) == []
    bad = {**data, "risk_class": "extreme", "surprise": 1}
    bad["constraints"] = {"soft": [{"clause": "c", "weight": -1}]}
    errors = json_schema_errors(bad, root, root)
    assert "$.risk_class: 'extreme' not in ['low', 'medium', 'high', 'hard']" in errors
    assert "$: unexpected surprise" in errors
    assert "$.constraints.soft[0].weight: not above exclusiveMinimum" in errors


def test_committed_event_schema_validates_each_event() -> None:
    root = json.loads((SCHEMAS / "ActionEvent.schema.json").read_text(encoding="utf-8"))
    for event in one_of_each_event():
        assert json_schema_errors(json.loads(event.model_dump_json()), root, root) == [], type(event).__name__
    assert json_schema_errors({"type": "action_failed", "action_id": "a", "seq": 0}, root, root) != []


def test_outage_inputs_agree_with_the_example_file() -> None:
    inputs = outage_inputs()
    for obs in inputs.observations:
        if isinstance(obs, SpanRef):
            assert obs.start is not None and obs.end is not None
            assert inputs.dsl[obs.start : obs.end] == obs.excerpt


def test_a_span_that_ends_before_it_starts_is_refused_at_its_end_field() -> None:
    from pydantic import ValidationError

    from cda.contracts.action import CDAInputs
    from cda.contracts.locations import validation_problems

    data = {"problem": "p", "dsl": "hyp a\n", "goals": {"kind": "prove", "claims": ["a"]},
            "observations": [{"kind": "span", "source": "log", "start": 30, "end": 2}]}
    with pytest.raises(ValidationError) as info:
        CDAInputs.model_validate(data)
    assert validation_problems(info.value) == (
        "observations[0].span.end: the span ends (end=2) before it starts (start=30)"
    )
    data["observations"] = [{"kind": "span", "source": "log", "start": 2, "end": 2}]  # an empty span is fine
    assert CDAInputs.model_validate(data).observations[0].end == 2
