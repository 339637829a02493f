"""The pytest plugin, run for real by pytest's ``pytester`` on generated suites: items per goal,
``expect`` and claim; failure reports; ``-k``, ``-x``, ``--junitxml``, ``-n 2`` (pytest-xdist),
``--cda-backend``; opt-in collection; the ``cda_solve`` fixture.

Plugin autoloading is off in the inner runs (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) and the plugin
is named with ``-p``, so these runs are the same whether or not CDA's entry point is installed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

GOALS = """\
hyp a, b
hard h: a or b
hard only_a: not b
goal prove a
goal prove b
"""
EXPECTS = """\
hyp a, b, c
observable o
observe o
hard: o iff (a or b)
soft: not a weight 1
soft: not b weight 1
soft: not c
expect status sat
expect ties: best [{a}, {b}]
expect cost <= 1
expect minimal_explanations = 2
expect wrong: best [{c}]
"""
CLAIMS = """\
premise all_men: forall x (Man(x) -> Mortal(x))
premise Man(socrates)
claim mortal: Mortal(socrates)
claim immortal: ¬Mortal(socrates)
"""
BAD = "hyp a\nhard: a and\n"

# item name -> outcome, the same in every run below
EXPECTED = {
    "goals.cda::prove a": "passed",
    "goals.cda::prove b": "failed",
    "expects.cda::expect status sat": "passed",
    "expects.cda::expect ties": "passed",
    "expects.cda::expect cost <= 1": "passed",
    "expects.cda::expect minimal_explanations = 2": "passed",
    "expects.cda::expect wrong": "failed",
    "claims.fol::claim mortal": "passed",
    "claims.fol::claim immortal": "failed",
    "bad.cda::check": "failed",
}


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makefile(".cda", goals=GOALS, expects=EXPECTS, bad=BAD)
    pytester.makefile(".fol", claims=CLAIMS)
    return pytester


def _run(pytester: pytest.Pytester, *args: str, subprocess: bool = False) -> pytest.RunResult:
    argv = ("-p", "cda.adapters.pytest_plugin", "-p", "no:cacheprovider", *args)
    return pytester.runpytest_subprocess(*argv) if subprocess else pytester.runpytest(*argv)


def _outcomes(junit: Path) -> dict[str, str]:
    """``classname::name`` -> passed/failed, from a JUnit XML file."""
    out = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        out[f"{case.get('classname')}::{case.get('name')}"] = "failed" if failed else "passed"
    return out


def test_items_outcomes_and_failure_reports(suite: pytest.Pytester) -> None:
    result = _run(suite, "--cda", "-v", "--junitxml=out.xml")
    result.assert_outcomes(passed=6, failed=4)
    text = result.stdout.str()
    # a refuted goal: its justification core, the breaking witness, the counter-world
    assert "prove b: REFUTED" in text
    assert "justification core: only_a" in text
    # an expectation: what the answer holds instead
    assert "expect best [{c}]: FAILED" in text
    assert "the least-cost hypotheses (cost 1) are [{a}, {b}]; expected but not among them: [{c}]" in text
    # a first-order claim: the premises that refute it
    assert "immortal: ¬Mortal(socrates)" in text and "premises used: all_men, p2" in text
    # a file that does not parse: one failing item with the compiler-style message
    assert "bad.cda:2:12: syntax error: unexpected end of input" in text
    assert _outcomes(suite.path / "out.xml") == _expected_junit()


def test_breaking_witness_and_counter_world(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makefile(".cda", open="hyp a, b\nhard: a or b\ngoal prove a\n")
    result = _run(pytester, "--cda")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*prove a: INCONCLUSIVE*",
        "*breaking witness: the goal fails under {b}",
        "*counter-world: b true, every other abducible false",
        "*holds under: {a}",
    ])


def test_claims_of_fol_blocks_in_a_cda_file_are_items(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makefile(".cda", mixed="hyp a\nhard: a\ngoal prove a\nfol {\n  premise Man(socrates)\n"
                                    "  claim yes: Man(socrates)\n  claim no: Man(plato)\n}\n")
    result = _run(pytester, "--cda", "-v")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*mixed.cda::prove a PASSED*", "*mixed.cda::claim yes PASSED*",
                                 "*mixed.cda::claim no FAILED*", "*no: Man(plato)*", "*INCONCLUSIVE*"])


def test_collection_is_opt_in_and_patterns_are_configurable(suite: pytest.Pytester) -> None:
    _run(suite).assert_outcomes()  # no --cda, no ini: nothing collected
    suite.makeini("[pytest]\ncda_collect = true\ncda_patterns = goals.cda\n")
    result = _run(suite, "-v")
    result.assert_outcomes(passed=1, failed=1)
    assert "expects.cda" not in result.stdout.str()


def test_k_and_x(suite: pytest.Pytester) -> None:
    result = _run(suite, "--cda", "-k", "ties or mortal", "-v")
    result.assert_outcomes(passed=2, failed=1)  # -k matches substrings: ties, mortal and immortal
    result = _run(suite, "--cda", "-x", "goals.cda", "expects.cda")
    result.assert_outcomes(passed=1, failed=1)  # stopped at the first failure (prove b)


def test_junit_and_xdist_give_the_same_results(suite: pytest.Pytester) -> None:
    _run(suite, "--cda", "--junitxml=one.xml")
    serial = _outcomes(suite.path / "one.xml")
    result = _run(suite, "--cda", "-p", "xdist.plugin", "-n", "2", "--junitxml=two.xml", subprocess=True)
    result.assert_outcomes(passed=6, failed=4)
    assert "2 workers" in result.stdout.str()
    assert _outcomes(suite.path / "two.xml") == serial
    assert serial == _expected_junit()


def _expected_junit() -> dict[str, str]:
    """:data:`EXPECTED` as JUnit names it (classname: the file, name: the item)."""
    return dict(EXPECTED)


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_backend_option_and_cda_solve_fixture(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                              backend: str) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makefile(".cda", goals=GOALS)
    pytester.makepyfile(test_fixture=f"""
        def test_backend(cda_solve):
            result = cda_solve("hyp a\\nhard: a\\ngoal prove a")
            assert result.backend == {backend!r}
            assert result.verdicts[0].status == "supported"
    """)
    result = _run(pytester, "--cda", f"--cda-backend={backend}")
    result.assert_outcomes(passed=2, failed=1)  # the fixture's test, prove a; prove b fails on both backends
