"""The abstain gate (seed 001): coverage, the abstain rule, the epistemic report, enforcement, review.

The expected coverage of the hand-built graph below is derived by hand (in the comments), and
random graphs are checked against an independent oracle: networkx shortest-path lengths on the
causal view of ``KenGraph.graph``.
"""

from __future__ import annotations

import random

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from cda.contracts.abstain import (
    AbstainConfigError,
    AbstainThresholds,
    ChainEdge,
    Conclusion,
    CoverageFigures,
    CoverageReport,
    EpistemicReport,
    HypothesisClaim,
    MatchedEntity,
    RootCause,
    Violation,
    band_of,
    band_rank,
)
from cda.contracts.result import Hypothesis, Verdict
from cda.errors import CDAError
from cda.ken.graph import KenGraph
from cda.verifiers.abstain import (
    apply_enforcement,
    enforce,
    epistemic_report,
    low_coverage_review,
    should_abstain,
)
from cda.verifiers.coverage import coverage_report

SAFE = {"search", "neighborhood", "path", "related_by"}

EDGES = [
    ("db_pool_exhausted", "causes", "db_slow"),
    ("cache_miss_storm", "causes", "db_slow"),
    ("db_slow", "causes", "api_latency"),
    ("deploy_v2", "triggers", "cache_miss_storm"),
    ("config_drift", "causes", "deploy_v2"),
    ("api_latency", "affects", "checkout"),  # api_latency is a cause of checkout, not an effect
    ("api", "depends", "auth"),  # auth failing makes api fail
    ("auth", "depends", "db"),
    ("api", "owned_by", "team_a"),
    ("raise_pool_size", "fixes", "db_pool_exhausted"),
    ("warm_cache", "mitigates", "cache_miss_storm"),
    ("rollback_v2", "fixes", "deploy_v2"),
    ("db_slow", "fixed_by", "add_index"),
    ("reorg", "fixes", "team_a"),  # fixes nothing causal
]

OBSERVATIONS = ["api_latency p99 is 2300 ms since 09:40", "db_slow warnings in the log; pool at 97%"]


def make_ken(edges: list[tuple[str, str, str]] = EDGES) -> KenGraph:
    ken = KenGraph()
    for s, r, t in edges:
        ken.add_edge(s, r, t)
    ken.add_node("db_pool_exhausted", label="pool of 200 connections exhausted")
    return ken


class GuardedKen(KenGraph):
    """A KenGraph that counts the safe queries and refuses everything else."""

    def __init__(self, ken: KenGraph) -> None:
        super().__init__(ken.graph)
        self.calls: list[tuple[object, ...]] = []

    def search(self, text: str, limit: int = 50) -> list[str]:
        self.calls.append(("search", text, limit))
        return super().search(text, limit)

    def neighborhood(self, node: str, hops: int = 1, relation: str | None = None) -> list[str]:
        self.calls.append(("neighborhood", node, hops, relation))
        return super().neighborhood(node, hops, relation)

    def related_by(self, node: str, relation: str) -> list[str]:
        self.calls.append(("related_by", node, relation))
        return super().related_by(node, relation)

    def path(self, source: str, target: str, relation: str | None = None, max_hops: int | None = None) -> list[str] | None:
        self.calls.append(("path", source, target, relation, max_hops))
        return super().path(source, target, relation, max_hops)

    def has_node(self, node: str) -> bool:
        raise AssertionError("has_node is not in the safe query set")

    def has_relation(self, relation: str) -> bool:
        raise AssertionError("has_relation is not in the safe query set")

    @property
    def graph(self) -> nx.MultiDiGraph:
        raise AssertionError("the raw graph is not in the safe query set")


# ---------------------------------------------------------------- coverage on the hand-built graph


def test_coverage_of_the_hand_built_graph_matches_the_hand_derivation() -> None:
    rep = coverage_report(make_ken(), OBSERVATIONS, ["api_latency", "ghost"])
    # terms: api_latency, p99, ms, since | db_slow, warnings, log, pool; "pool" is a word of
    # db_pool_exhausted and of raise_pool_size
    assert rep.matched_entities == [
        MatchedEntity(node="api_latency", terms=["api_latency"], observations=[0]),
        MatchedEntity(node="db_pool_exhausted", terms=["pool"], observations=[1]),
        MatchedEntity(node="db_slow", terms=["db_slow"], observations=[1]),
        MatchedEntity(node="raise_pool_size", terms=["pool"], observations=[1]),
    ]
    assert rep.symptoms == ["api_latency"] and rep.unmatched_symptoms == ["ghost"]
    # backwards from api_latency: db_slow (1); cache_miss_storm, db_pool_exhausted (2); deploy_v2 (3);
    # config_drift is 4 steps away and checkout is an effect, so neither is a cause.
    assert rep.root_causes == [
        RootCause(node="cache_miss_storm", symptoms=["api_latency"], hops=2),
        RootCause(node="db_pool_exhausted", symptoms=["api_latency"], hops=2),
        RootCause(node="db_slow", symptoms=["api_latency"], hops=1),
        RootCause(node="deploy_v2", symptoms=["api_latency"], hops=3),
    ]
    assert [c.nodes for c in rep.causal_chains] == [
        ["cache_miss_storm", "db_slow", "api_latency"],
        ["db_pool_exhausted", "db_slow", "api_latency"],
        ["db_slow", "api_latency"],
        ["deploy_v2", "cache_miss_storm", "db_slow", "api_latency"],
    ]
    assert rep.causal_chains[3].edges == [
        ChainEdge(source="deploy_v2", relation="triggers", target="cache_miss_storm"),
        ChainEdge(source="cache_miss_storm", relation="causes", target="db_slow"),
        ChainEdge(source="db_slow", relation="causes", target="api_latency"),
    ]
    assert rep.required_nodes == ["api_latency", "cache_miss_storm", "db_pool_exhausted", "db_slow", "deploy_v2"]
    # fixes of required nodes, both ways round; reorg fixes team_a, which is not in the picture
    assert [(f.node, f.targets, f.relations) for f in rep.relevant_fixes] == [
        ("add_index", ["db_slow"], ["fixed_by"]),
        ("raise_pool_size", ["db_pool_exhausted"], ["fixes"]),
        ("rollback_v2", ["deploy_v2"], ["fixes"]),
        ("warm_cache", ["cache_miss_storm"], ["mitigates"]),
    ]
    assert rep.figures() == CoverageFigures(
        matched_entities_count=4, root_causes_count=4, causal_chains_count=4,
        required_nodes_count=5, relevant_fixes_count=4,
    )
    assert rep.observations == OBSERVATIONS


def test_depth_bounds_the_chains_and_dependencies_point_backwards() -> None:
    ken = make_ken()
    deeper = coverage_report(ken, [], ["api_latency"], depth=4)
    assert "config_drift" in [r.node for r in deeper.root_causes]
    assert coverage_report(ken, [], ["api_latency"], depth=0).root_causes == []
    # api depends auth depends db: db and auth can make api fail; the edges keep Ken's orientation
    dep = coverage_report(ken, [], ["api"])
    assert [(r.node, r.hops) for r in dep.root_causes] == [("auth", 1), ("db", 2)]
    assert dep.causal_chains[1].nodes == ["db", "auth", "api"]
    assert dep.causal_chains[1].edges == [
        ChainEdge(source="auth", relation="depends", target="db"),
        ChainEdge(source="api", relation="depends", target="auth"),
    ]
    # with no dependency relations configured, nothing reaches api
    assert coverage_report(ken, [], ["api"], dependency_relations=()).root_causes == []


def test_word_matching_does_not_match_inside_words_but_substring_mode_reads_labels() -> None:
    ken = KenGraph()
    ken.add_edge("rapid_deploy", "causes", "api")
    ken.add_node("db1", label="Primary database")
    assert [m.node for m in coverage_report(ken, ["the api is down"], []).matched_entities] == ["api"]
    assert [m.node for m in coverage_report(ken, ["database slow"], []).matched_entities] == []
    sub = coverage_report(ken, ["the api is down; database slow"], [], match="substring")
    assert [m.node for m in sub.matched_entities] == ["api", "db1", "rapid_deploy"]


def test_coverage_uses_only_the_safe_queries_and_records_each_once() -> None:
    guarded = GuardedKen(make_ken())
    rep = coverage_report(guarded, OBSERVATIONS, ["api_latency", "ghost"])
    assert {q.name for q in rep.queries} <= SAFE
    assert len(rep.queries) == len(guarded.calls) == len(set(guarded.calls))
    assert [q.name for q in rep.queries] == [c[0] for c in guarded.calls]
    assert rep.root_causes_count == 4  # the guard did not change the answer


def test_coverage_is_byte_identical_whatever_the_insertion_order() -> None:
    texts = set()
    rng = random.Random(7)
    for _ in range(6):
        edges = list(EDGES)
        rng.shuffle(edges)
        texts.add(coverage_report(make_ken(edges), OBSERVATIONS, ["api_latency", "api"]).model_dump_json())
    assert len(texts) == 1


def test_bad_coverage_parameters_are_refused() -> None:
    ken = make_ken()
    with pytest.raises(AbstainConfigError, match="depth"):
        coverage_report(ken, [], [], depth=-1)
    with pytest.raises(AbstainConfigError, match="limit"):
        coverage_report(ken, [], [], limit=0)
    with pytest.raises(AbstainConfigError, match="'causes'"):
        coverage_report(ken, [], [], dependency_relations=("causes",))


def test_counts_must_be_the_lengths_of_the_lists() -> None:
    with pytest.raises(ValidationError, match="root_causes_count"):
        CoverageReport(root_causes_count=2)
    rep = CoverageReport(required_nodes=["a", "b"])
    assert rep.required_nodes_count == 2
    assert CoverageReport.model_validate_json(rep.model_dump_json()) == rep


# ---------------------------------------------------------------- the oracle on random graphs

RELATIONS = ["causes", "depends", "owned_by", "fixes", "fixed_by"]
NODES = [f"n{i}" for i in range(6)]


@st.composite
def random_graphs(draw: st.DrawFn) -> tuple[list[tuple[str, str, str]], list[str], int]:
    edges = draw(
        st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(RELATIONS), st.sampled_from(NODES)), max_size=14)
    )
    symptoms = draw(st.lists(st.sampled_from([*NODES, "absent"]), max_size=3))
    return edges, symptoms, draw(st.integers(0, 4))


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(random_graphs())
def test_root_causes_chains_and_fixes_agree_with_networkx(case: tuple[list[tuple[str, str, str]], list[str], int]) -> None:
    edges, symptoms, depth = case
    ken = KenGraph()
    for s, r, t in edges:
        ken.add_edge(s, r, t)
    rep = coverage_report(ken, [], symptoms, depth=depth, causal_relations=("causes",),
                          dependency_relations=("depends",), fix_relations=("fixes",), fixed_by_relations=("fixed_by",))

    causal = nx.DiGraph()  # cause -> effect
    causal.add_nodes_from(ken.graph.nodes)
    for u, v, rel in ken.graph.edges(keys=True):
        if rel == "causes":
            causal.add_edge(u, v)
        elif rel == "depends":
            causal.add_edge(v, u)
    present = sorted({s for s in symptoms if s in ken.graph})
    expected: dict[str, dict[str, int]] = {}
    for s in present:
        for node, length in nx.single_source_shortest_path_length(causal.reverse(copy=True), s, cutoff=depth).items():
            if node != s:
                expected.setdefault(node, {})[s] = length
    assert rep.symptoms == present
    assert rep.unmatched_symptoms == sorted(set(symptoms) - set(present))
    assert {r.node: (r.symptoms, r.hops) for r in rep.root_causes} == {
        n: (sorted(d), min(d.values())) for n, d in expected.items()
    }
    assert sorted((c.root_cause, c.symptom) for c in rep.causal_chains) == sorted(
        (n, s) for n, d in expected.items() for s in d
    )
    for chain in rep.causal_chains:
        assert chain.nodes == min(nx.all_shortest_paths(causal, chain.root_cause, chain.symptom))
        assert len(chain.edges) == expected[chain.root_cause][chain.symptom]
        for step, edge in enumerate(chain.edges):
            assert ken.graph.has_edge(edge.source, edge.target, key=edge.relation)
            cause, effect = chain.nodes[step], chain.nodes[step + 1]
            assert (edge.source, edge.target) == ((cause, effect) if edge.relation == "causes" else (effect, cause))
    assert rep.required_nodes == sorted({n for c in rep.causal_chains for n in c.nodes})
    targets = set(rep.required_nodes) | set(present)
    fixes: dict[str, set[str]] = {}
    for u, v, rel in ken.graph.edges(keys=True):
        if u == v:  # a node is not its own fix
            continue
        if rel == "fixes" and v in targets:
            fixes.setdefault(u, set()).add(v)
        elif rel == "fixed_by" and u in targets:
            fixes.setdefault(v, set()).add(u)
    assert {f.node: f.targets for f in rep.relevant_fixes} == {n: sorted(t) for n, t in fixes.items()}


# ---------------------------------------------------------------- the abstain rule


def coverage_with(rc: int = 1, ch: int = 1, ent: int = 1, req: int = 3, fixes: int = 0) -> CoverageReport:
    """A coverage report with exactly these counts (contents are placeholders)."""
    return CoverageReport.model_validate({
        "observations": ["obs"],
        "symptoms": ["s"],
        "matched_entities": [{"node": f"e{i}", "terms": ["t"], "observations": [0]} for i in range(ent)],
        "root_causes": [{"node": f"r{i}", "symptoms": ["s"], "hops": 1} for i in range(rc)],
        "causal_chains": [
            {"root_cause": f"r{i}", "symptom": "s", "nodes": [f"r{i}", "s"],
             "edges": [{"source": f"r{i}", "relation": "causes", "target": "s"}]} for i in range(ch)
        ],
        "required_nodes": [f"q{i}" for i in range(req)],
        "relevant_fixes": [{"node": f"f{i}", "targets": ["s"], "relations": ["fixes"]} for i in range(fixes)],
    })


def test_default_rule_abstains_exactly_when_root_causes_or_chains_are_zero() -> None:
    t = AbstainThresholds()
    assert should_abstain(coverage_with(rc=1, ch=1, ent=0), t) is None  # entities are optional (off)
    out = should_abstain(coverage_with(rc=0, ch=1), t)
    assert out is not None and out.reasons == ["root_causes_count 0 < 1"]
    out = should_abstain(coverage_with(rc=1, ch=0), t)
    assert out is not None and out.reasons == ["causal_chains_count 0 < 1"]
    out = should_abstain(coverage_with(rc=0, ch=0), t)
    assert out is not None and out.reasons == ["root_causes_count 0 < 1", "causal_chains_count 0 < 1"]


@pytest.mark.parametrize("field,figure", [("min_root_causes", "rc"), ("min_chains", "ch"), ("min_entities", "ent")])
@pytest.mark.parametrize("least", [1, 2, 5])
def test_each_threshold_fires_below_and_not_at_its_minimum(field: str, figure: str, least: int) -> None:
    t = AbstainThresholds.model_validate({field: least})
    base = {"rc": 5, "ch": 5, "ent": 5}
    assert should_abstain(coverage_with(**{**base, figure: least}), t) is None
    assert should_abstain(coverage_with(**{**base, figure: least + 1}), t) is None
    below = should_abstain(coverage_with(**{**base, figure: least - 1}), t)
    assert below is not None and len(below.reasons) == 1 and below.reasons[0].endswith(f"{least - 1} < {least}")


def test_the_gate_can_be_disabled_and_required_nodes_never_abstain() -> None:
    assert should_abstain(coverage_with(rc=0, ch=0), AbstainThresholds(abstain_gate_enabled=False)) is None
    assert should_abstain(coverage_with(req=0), AbstainThresholds()) is None


def test_the_abstain_output_says_what_is_missing_and_quotes_the_observations() -> None:
    ken = make_ken()
    rep = coverage_report(ken, ["reorg announced for team_a"], ["team_a", "ghost"])
    out = should_abstain(rep, AbstainThresholds())
    assert out is not None
    data = out.model_dump()
    assert data["mode"] == "ABSTAIN" and data["action"]["next_step"] == "REQUEST_MORE_DATA_OR_AUGMENT_CKG"
    assert data["reason"] == "Insufficient CKG coverage to support grounded diagnosis"
    assert data["action"]["suggested_ckg_augment_inputs"] == ["raw_report", "raw_debug_query", "agent_output",
                                                              "judge_feedback"]
    assert data["coverage"] == {"matched_entities_count": 2, "root_causes_count": 0, "causal_chains_count": 0,
                                "required_nodes_count": 0, "relevant_fixes_count": 1}
    assert data["observations"] == ["reorg announced for team_a"]
    assert "symptom 'ghost' is not a Ken node" in out.missing_knowledge
    assert any("no Ken node causes 'team_a'" in m for m in out.missing_knowledge)
    assert any("team_a" in c and "ghost" in c for c in out.action.collect_next)
    assert out.summary.startswith("ABSTAIN: ")


# ---------------------------------------------------------------- thresholds from the environment


def test_the_seeds_flag_names_work_beside_the_cda_aliases() -> None:
    t = AbstainThresholds.from_env({"MIN_REQUIRED_NODES": "5", "ENABLE_LOW_COVERAGE_VERIFIER": "false",
                                    "ABSTAIN_MIN_ROOT_CAUSES": "2", "CDA_ABSTAIN_MIN_ROOT_CAUSES": "2"})
    assert (t.min_required_nodes, t.low_coverage_verifier_enabled, t.min_root_causes) == (5, False, 2)
    with pytest.raises(AbstainConfigError, match="ABSTAIN_MIN_CHAINS='2' and CDA_ABSTAIN_MIN_CHAINS='3' disagree"):
        AbstainThresholds.from_env({"ABSTAIN_MIN_CHAINS": "2", "CDA_ABSTAIN_MIN_CHAINS": "3"})


def test_thresholds_load_from_env_vars() -> None:
    t = AbstainThresholds.from_env({
        "CDA_ABSTAIN_MIN_ROOT_CAUSES": "2", "CDA_ABSTAIN_MIN_CHAINS": " 3 ", "CDA_ABSTAIN_MIN_ENTITIES": "1",
        "CDA_MIN_REQUIRED_NODES": "0", "CDA_REVIEW_MIN_ENTITIES": "4", "CDA_ENABLE_ABSTAIN_GATE": "false",
        "CDA_ENABLE_LOW_COVERAGE_VERIFIER": "Off", "UNRELATED": "x",
    })
    assert t == AbstainThresholds(min_root_causes=2, min_chains=3, min_entities=1, min_required_nodes=0,
                                  review_min_entities=4, abstain_gate_enabled=False,
                                  low_coverage_verifier_enabled=False)
    assert AbstainThresholds.from_env({}) == AbstainThresholds()
    assert AbstainThresholds.from_env({"CDA_ABSTAIN_MIN_CHAINS": ""}) == AbstainThresholds()  # empty = unset
    defaults = AbstainThresholds()
    assert (defaults.min_root_causes, defaults.min_chains, defaults.min_entities, defaults.min_required_nodes) == (1, 1, 0, 3)


@pytest.mark.parametrize("var,value", [
    ("CDA_ABSTAIN_MIN_ENTITIES", "two"),
    ("CDA_ABSTAIN_MIN_ROOT_CAUSES", "-1"),
    ("CDA_ABSTAIN_MIN_CHAINS", "1.5"),
    ("CDA_MIN_REQUIRED_NODES", "３"),
    ("CDA_ENABLE_ABSTAIN_GATE", "maybe"),
    ("CDA_ENABLE_LOW_COVERAGE_VERIFIER", "2"),
])
def test_bad_env_values_are_cda_errors_naming_the_variable(var: str, value: str) -> None:
    with pytest.raises(CDAError, match=var) as info:
        AbstainThresholds.from_env({var: value})
    assert isinstance(info.value, ValueError) and repr(value) in str(info.value)


# ---------------------------------------------------------------- the epistemic report


def solver_output() -> tuple[list[Hypothesis], list[Verdict]]:
    hyps = [
        Hypothesis(id="h1", assumed=["down(db_pool_exhausted)"], cost=0.0, posterior=0.7, violated=[]),
        Hypothesis(id="h2", assumed=["down(cache_miss_storm)"], cost=1.0, posterior=0.3, violated=["quiet_cache"]),
    ]
    verdicts = [
        Verdict(name="g1", goal="prove", claim="holds(down(db_pool_exhausted))", status="supported",
                confidence=1.0, justification=["c1"], witnesses=[]),
        Verdict(name="g2", goal="prove", claim="down(cache_miss_storm)", status="inconclusive",
                confidence=0.3, justification=[], witnesses=[]),
    ]
    return hyps, verdicts


def test_epistemic_report_separates_what_is_observed_grounded_hypothesised_and_concluded() -> None:
    ken = make_ken()
    cov = coverage_report(ken, OBSERVATIONS, ["api_latency"])
    hyps, verdicts = solver_output()
    rep = epistemic_report(OBSERVATIONS, cov, hyps, verdicts)
    assert [(o.text, o.source, o.index) for o in rep.observations] == [(t, "input", i) for i, t in enumerate(OBSERVATIONS)]
    assert rep.ken_facts and all(f.source == "ken" and f.nodes for f in rep.ken_facts)
    assert all(ken.has_node(n) for f in rep.ken_facts for n in f.nodes)
    assert "db_slow causes api_latency" in [f.text for f in rep.ken_facts]
    h1, h2 = rep.hypotheses
    assert (h1.verified, h1.supported_by, h1.band, h1.nodes) == (True, ["g1"], "high", ["db_pool_exhausted"])
    assert (h2.verified, h2.confidence, h2.band) == (False, 0.3, "low")  # inconclusive is not support
    assert h2.what_would_confirm and "violates soft clause quiet_cache" in h2.why
    c = rep.conclusion
    assert (c.root_cause, c.confidence, c.band, c.verified) == ("down(db_pool_exhausted)", 1.0, "high", True)
    assert "verdict g1 supports down(db_pool_exhausted)" in c.justification
    assert enforce(rep, OBSERVATIONS, ken) == []  # what CDA writes passes its own rules
    again = epistemic_report(OBSERVATIONS, cov, hyps, verdicts)
    assert again.model_dump_json() == rep.model_dump_json()


def test_without_coverage_the_same_answer_is_at_most_medium() -> None:
    hyps, verdicts = solver_output()
    rep = epistemic_report(OBSERVATIONS, CoverageReport(observations=OBSERVATIONS), hyps, verdicts)
    assert (rep.conclusion.confidence, rep.conclusion.band) == (0.84, "medium")
    assert any("coverage is too low" in c for c in rep.caveats)
    unverified = epistemic_report(OBSERVATIONS, coverage_with(), hyps, [], root_cause="down(db_slow)", confidence=0.95)
    assert unverified.conclusion.band == "medium" and any("no solver verdict" in c for c in unverified.caveats)


def test_the_models_refuse_a_high_band_without_coverage_or_a_matching_confidence() -> None:
    high = Conclusion(root_cause="x", confidence=0.9, verified=True)
    assert high.band == "high"
    with pytest.raises(ValidationError, match="needs Ken coverage"):
        EpistemicReport(conclusion=high, coverage=coverage_with(rc=0).figures())
    with pytest.raises(ValidationError, match="needs Ken coverage"):
        EpistemicReport(conclusion=high, coverage=coverage_with(rc=1, ch=1).figures(), min_chains=2)
    with pytest.raises(ValidationError, match="supporting solver verdict"):
        EpistemicReport(conclusion=Conclusion(root_cause="x", confidence=0.9), coverage=coverage_with().figures())
    assert EpistemicReport(conclusion=high, coverage=coverage_with().figures()).conclusion.band == "high"
    with pytest.raises(ValidationError, match="does not match"):
        Conclusion(root_cause="x", confidence=0.2, band="high")
    with pytest.raises(ValidationError, match="at most medium"):
        HypothesisClaim(id="h", text="x", confidence=0.95)
    with pytest.raises(ValidationError, match="ge=1|greater than or equal to 1"):
        EpistemicReport(coverage=coverage_with().figures(), min_root_causes=0)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    rc=st.integers(0, 3), ch=st.integers(0, 3), min_rc=st.integers(0, 3), min_ch=st.integers(0, 3),
    requested=st.floats(0.0, 1.0), proved=st.booleans(),
)
def test_band_high_implies_coverage_above_threshold(
    rc: int, ch: int, min_rc: int, min_ch: int, requested: float, proved: bool
) -> None:
    t = AbstainThresholds(min_root_causes=min_rc, min_chains=min_ch)
    hyps, verdicts = solver_output()
    rep = epistemic_report(OBSERVATIONS, coverage_with(rc=rc, ch=ch), hyps, verdicts if proved else [],
                           thresholds=t, root_cause="down(db_pool_exhausted)", confidence=requested)
    covered = rc >= max(1, min_rc) and ch >= max(1, min_ch)
    c = rep.conclusion
    if c.band == "high":
        assert covered and proved
    assert c.confidence <= requested and c.band == band_of(c.confidence)
    if covered and proved:  # and the cap is no stronger than it must be
        assert c.confidence == requested


# ---------------------------------------------------------------- enforcement


def draft(**conclusion: object) -> EpistemicReport:
    """The honest report of the hand-built graph, with its conclusion replaced."""
    ken = make_ken()
    cov = coverage_report(ken, OBSERVATIONS, ["api_latency"])
    hyps, verdicts = solver_output()
    rep = epistemic_report(OBSERVATIONS, cov, hyps, verdicts)
    data = rep.model_dump()
    data["conclusion"] = {**{k: v for k, v in data["conclusion"].items() if k != "band"}, **conclusion}
    return EpistemicReport.model_validate(data, context={"draft": True})  # a model's draft may invent numbers


def test_enforce_catches_an_invented_number_and_an_unknown_node() -> None:
    ken = make_ken()
    rep = draft(justification=["p99 went from 2300.0 ms to 4100 ms", "the pool has 200 slots"],
                nodes=["db_pool_exhausted", "ghost_service"])
    found = enforce(rep, OBSERVATIONS, ken)
    assert [(v.kind, v.location, v.span) for v in found] == [
        ("UNSUPPORTED_METRIC", "conclusion.justification[0]", "4100"),  # 2300.0 ms is observed
        ("UNSUPPORTED_METRIC", "conclusion.justification[1]", "200"),  # a Ken label says 200: no measurement
        ("UNKNOWN_NODE", "conclusion.nodes", "ghost_service"),
    ]
    text = "entity:ghost_service is at 41% while entity:db_slow sits at 97% since 09:40"
    assert [(v.kind, v.span) for v in enforce(text, OBSERVATIONS, ken)] == [
        ("UNSUPPORTED_METRIC", "41"), ("UNKNOWN_NODE", "ghost_service"),
    ]
    log: list = []
    enforce(text, OBSERVATIONS, GuardedKen(ken), log=log)
    assert log and {q.name for q in log} <= SAFE


def test_a_number_is_grounded_only_by_an_observation_with_its_unit() -> None:
    """Before: "20 mV" passed because a Ken label said "board rev 2024"; a unit was never compared."""
    ken = KenGraph()
    ken.add_node("board", label="board rev 2024")
    observations = ["VCORE at 725mV", "p99 2300 ms", "20 restarts today"]
    cases = {
        "VCORE ripple of 20 mV": ["20"],  # 20 is observed, but as restarts, not mV
        "board rev 2024": ["2024"],  # only in a Ken label
        "p99 2300 s": ["2300"],  # seconds were never observed
        "VCORE 725 mV, p99 2300 ms after 20 restarts": [],
        "2300 in total": [],  # a bare number matches the value under any unit
    }
    for text, flagged in cases.items():
        assert [v.span for v in enforce(text, observations, ken)] == flagged, text


def test_an_ungrounded_root_cause_becomes_a_hypothesis_without_the_invented_number() -> None:
    cov = coverage_report(make_ken(), OBSERVATIONS, ["api_latency"])
    rep = draft(root_cause="db_pool_exhausted at 4100 ms", confidence=0.8, verified=False)
    review = low_coverage_review(rep, cov.model_copy(update={"required_nodes": [], "required_nodes_count": 0}),
                                 AbstainThresholds())
    assert review.status == "NEEDS_REWRITE" and review.rewritten is not None
    assert review.rewritten.conclusion.root_cause == "UNKNOWN"
    demoted = [h for h in review.rewritten.hypotheses if h.id == "conclusion"]
    assert [h.text for h in demoted] == ["db_pool_exhausted at"] and not demoted[0].verified


def test_enforce_requires_observations_verbatim() -> None:
    rep = draft()
    data = rep.model_dump()
    data["observations"][0]["text"] = "api_latency p99 is 2900 ms"
    found = enforce(EpistemicReport.model_validate(data), OBSERVATIONS, make_ken())
    assert [(v.kind, v.location) for v in found] == [("UNGROUNDED_OBSERVATION", "observations[0]")]


def test_apply_enforcement_downgrades_one_band_per_violation() -> None:
    rep = draft()
    assert rep.conclusion.band == "high"
    found = enforce(draft(justification=["rose by 4100 ms"]), OBSERVATIONS, make_ken())
    once = apply_enforcement(rep, found)
    assert (once.conclusion.confidence, once.conclusion.band, once.conclusion.verified) == (0.84, "medium", False)
    assert once.violations == found and any("UNSUPPORTED_METRIC" in c for c in once.caveats)
    twice = apply_enforcement(once, found)
    assert twice.conclusion.band == "low"
    assert apply_enforcement(rep, []) == rep


violation_st = st.builds(
    Violation,
    kind=st.sampled_from(["UNSUPPORTED_METRIC", "UNKNOWN_NODE", "UNGROUNDED_NODE", "UNGROUNDED_ROOT_CAUSE"]),
    location=st.sampled_from(["text", "conclusion.nodes", "conclusion.justification[0]", "hypotheses[0].text",
                              "hypotheses[1].why[0]", "ken_facts[0].nodes", "observations[1]"]),
    span=st.sampled_from(["42", "ghost"]),
    fix=st.sampled_from(["remove", "downgrade_to_hypothesis"]),
    detail=st.just("test"),
)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(requested=st.floats(0.0, 1.0), proved=st.booleans(), violations=st.lists(violation_st, max_size=4))
def test_enforcement_never_raises_confidence(requested: float, proved: bool, violations: list[Violation]) -> None:
    hyps, verdicts = solver_output()
    rep = epistemic_report(OBSERVATIONS, coverage_with(), hyps, verdicts if proved else [],
                           root_cause="down(db_pool_exhausted)", confidence=requested)
    out = apply_enforcement(rep, violations)
    assert out.conclusion.confidence <= rep.conclusion.confidence
    assert band_rank(out.conclusion.band) <= band_rank(rep.conclusion.band)
    assert out.conclusion.verified <= rep.conclusion.verified
    if violations and rep.conclusion.band != "low":
        assert band_rank(out.conclusion.band) < band_rank(rep.conclusion.band)
    for before, after in zip(rep.hypotheses, out.hypotheses, strict=True):
        assert after.confidence <= before.confidence and after.verified <= before.verified
        assert band_rank(after.band) <= band_rank(before.band)


# ---------------------------------------------------------------- the low-coverage review


def test_review_is_skipped_when_coverage_is_sufficient() -> None:
    cov = coverage_report(make_ken(), OBSERVATIONS, ["api_latency"])
    review = low_coverage_review(draft(justification=["invented 4100"]), cov, AbstainThresholds())
    assert (review.status, review.triggered, review.violations) == ("OK", False, [])


def test_review_needs_rewrite_for_an_invented_metric_and_an_unreached_node_on_low_coverage() -> None:
    ken = make_ken()
    obs = ["cache_miss_storm alerts since the deploy"]
    cov = coverage_report(ken, obs, ["cache_miss_storm"], depth=1)  # one cause: deploy_v2
    assert cov.required_nodes_count == 2  # below the default minimum of 3: low coverage
    hyps = [Hypothesis(id="h1", assumed=["down(deploy_v2)"], cost=0.0, posterior=0.8, violated=[])]
    rep = epistemic_report(obs, cov, hyps, [])
    data = rep.model_dump()
    data["hypotheses"][0]["why"].append("error rate rose to 12%")
    data["hypotheses"].append({"id": "h2", "text": "config_drift", "confidence": 0.4, "nodes": ["config_drift"]})
    rep = EpistemicReport.model_validate(data, context={"draft": True})
    review = low_coverage_review(rep, cov, AbstainThresholds())
    assert review.status == "NEEDS_REWRITE" and review.triggered
    assert review.reasons == ["required_nodes_count 2 < 3"]
    assert [(v.kind, v.location, v.span) for v in review.violations] == [
        ("UNSUPPORTED_METRIC", "hypotheses[0].why[1]", "12"),
        ("UNGROUNDED_NODE", "hypotheses[1].nodes", "config_drift"),  # in Ken, but not reached
    ]
    new = review.rewritten
    assert new is not None
    assert "error rate rose to 12%" not in new.hypotheses[0].why and new.hypotheses[1].nodes == []
    assert new.conclusion.confidence <= rep.conclusion.confidence
    assert all(a.confidence <= b.confidence for a, b in zip(new.hypotheses, rep.hypotheses, strict=True))
    again = low_coverage_review(new, cov, AbstainThresholds())
    assert (again.status, again.violations, again.triggered) == ("OK", [], True)


def test_review_abstains_on_a_root_cause_that_ken_cannot_ground() -> None:
    ken = make_ken()
    obs = ["team_a reports auth errors"]
    cov = coverage_report(ken, obs, ["team_a"])
    assert cov.root_causes_count == 0
    rep = epistemic_report(obs, cov, [], [], root_cause="down(auth)", confidence=0.7)
    review = low_coverage_review(rep, cov, AbstainThresholds())
    assert review.status == "ABSTAIN" and review.abstain is not None and review.rewritten is None
    assert review.violations[0].kind == "UNGROUNDED_ROOT_CAUSE" and review.violations[0].fix == "abstain"
    # with the gate off the seed's other answer: conclusion UNKNOWN, the claim kept as a hypothesis
    off = low_coverage_review(rep, cov, AbstainThresholds(abstain_gate_enabled=False))
    assert off.status == "NEEDS_REWRITE" and off.rewritten is not None
    assert off.rewritten.conclusion.root_cause == "UNKNOWN" and off.rewritten.conclusion.band == "low"
    moved = off.rewritten.hypotheses[-1]
    assert (moved.text, moved.verified, moved.band) == ("down(auth)", False, "low")
    # and with the review itself disabled, nothing runs
    skipped = low_coverage_review(rep, cov, AbstainThresholds(low_coverage_verifier_enabled=False))
    assert (skipped.status, skipped.triggered) == ("OK", False)


def test_a_report_with_an_invented_number_cannot_be_built_unless_it_records_the_violation() -> None:
    """Before: the docstring said a rule-breaking report could not be built, and it could."""
    data = draft(justification=["p99 rose to 4100 ms"]).model_dump()
    data["conclusion"].pop("band")
    with pytest.raises(ValidationError, match=r"conclusion.justification\[0\]: the number 4100 ms occurs in no observation"):
        EpistemicReport.model_validate(data)
    data["violations"] = [{"kind": "UNSUPPORTED_METRIC", "location": "conclusion.justification[0]", "span": "4100",
                           "fix": "remove", "detail": "downgraded"}]
    assert EpistemicReport.model_validate(data).violations  # acknowledged (and downgraded): allowed
    data["violations"] = []
    data["conclusion"]["justification"] = ["p99 at 2300 ms"]  # observed, with its unit
    assert EpistemicReport.model_validate(data).conclusion.justification == ["p99 at 2300 ms"]


def test_a_number_keeps_its_sign_grouping_and_exponent_when_grounded() -> None:
    """Enforcement: '-40 C' is not grounded by '40 C', nor '2,300 ms' by '300 ms over 2 hosts',
    nor '1.5e3 ms' by '1.5 s' (a review found all three passing as grounded)."""
    from cda.contracts.abstain import ungrounded_quantities

    for claim, observation in [("temp -40 C", "temp 40 C"), ("p99 2,300 ms", "300 ms over 2 hosts"),
                               ("latency 1.5e3 ms", "1.5 s")]:
        assert ungrounded_quantities([("c", claim)], [observation]) != [], (claim, observation)
    for claim, observation in [("temp -40 C", "it read -40 C"), ("p99 2,300 ms", "p99 2,300 ms"),
                               ("1.5e3 ms", "1500 ms")]:
        assert ungrounded_quantities([("c", claim)], [observation]) == [], (claim, observation)
