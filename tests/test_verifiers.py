"""The independent verifiers: units, temporal, arithmetic, function evaluator, Ken evidence, agreement.

Each verifier is checked on cases with known answers and, where the answer space is large,
against an oracle that shares no code with it: a hand-written table of dimensions for units,
``fractions.Fraction`` for arithmetic, plain integer comparison with a hand-written table of
seconds for temporal claims, networkx for Ken paths. No test asserts a duration.
"""

from __future__ import annotations

import builtins
import json
import socket
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import networkx as nx
import pint
import pytest
import sympy.parsing.sympy_parser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cda
import cda.verifiers.agreement as agreement_module
from cda.contracts.receipt import canonical_json
from cda.contracts.verification import VerifierOutcome
from cda.ken.graph import KenGraph
from cda.solver.backend import Deadline, make_backend, selector
from cda.solver.engine import EngineOptions
from cda.verifiers.agreement import AgreementReport
from cda.verifiers.agreement_outcome import agreement_outcome, outcome_from_report
from cda.verifiers.arithmetic import verify_arithmetic
from cda.verifiers.function_eval import OUTPUT_LIMIT, run_function_check
from cda.verifiers.ken_evidence import KenQueryRecord, ken_evidence
from cda.verifiers.temporal import event_times, verify_temporal
from cda.verifiers.units_check import verify_units, verify_units_declared


def dump(outcomes: list[VerifierOutcome]) -> str:
    return canonical_json([o.model_dump(mode="json") for o in outcomes])


# ==== units ==================================================================================
def units_one(metrics: dict[str, str], claim: str) -> VerifierOutcome:
    return verify_units_declared(metrics, [claim])[0]


def test_units_compatible_quantities_pass() -> None:
    out = units_one({"latency": "ms"}, "value(metric:latency) <= 1.5 s")
    assert out.status == "passed" and out.verifier == "units"
    assert out.data["checked"][0]["compatible"] is True


def test_units_mismatch_fails_naming_both_units() -> None:
    out = units_one({"latency": "USD"}, "value(metric:latency) <= 1.5 s")
    assert out.status == "failed" and out.confidence_cap == 0.0
    assert "USD" in out.detail and "1.5 s" in out.detail and "[time]" in out.detail


@pytest.mark.parametrize(
    ("metrics", "claim", "status"),
    [
        ({"cost": "USD"}, "value(metric:cost) <= 5000 USD", "passed"),
        ({"cost": "EUR"}, "value(metric:cost) <= 5000 USD", "failed"),  # currencies do not convert
        ({"a": "USD", "b": "EUR"}, "value(metric:a) + value(metric:b) <= 10 USD", "failed"),
        ({"a": "km", "b": "m"}, "value(metric:a) - 2 * value(metric:b) >= 3 ft", "passed"),
        ({"speed": "km/h"}, "value(metric:speed) < 30 m/s", "passed"),
        ({"speed": "km/h"}, "value(metric:speed) < 30 m", "failed"),
        ({"t": "degF"}, "value(metric:t) <= 30 degC", "passed"),
        ({"x": "ms"}, "value(metric:x) <= 5", "skipped"),  # a bare number takes x's unit
        ({"x": "ms"}, "not (value(metric:x) <= 2 s) implies value(metric:x) > 3 kg", "failed"),
        ({}, "time(event:a) - time(event:b) <= 2 h", "passed"),
        ({}, "within(event:a, 14 d of event:b)", "passed"),
        ({}, "within(event:a, 3 USD of event:b)", "failed"),
        ({"x": "ms"}, "value(metric:x) <= 3 parsecs_per_fortnight", "failed"),  # pint does not know it
        ({"x": "ms"}, "value(metric:y) <= 1 s", "inconclusive"),  # undeclared metric
        ({"x": "ms"}, "value(metric:x) <=", "inconclusive"),  # does not parse
        ({}, "down(db)", "skipped"),
    ],
)
def test_units_known_cases(metrics: dict[str, str], claim: str, status: str) -> None:
    assert units_one(metrics, claim).status == status


def test_units_reads_declarations_from_the_problem_text() -> None:
    problem = "metric latency : ms\nmetric cost : EUR\nhyp slow\nhard: slow implies value(metric:latency) >= 200 ms"
    outs = verify_units(problem, ["value(metric:latency) <= 1.5 s", "value(metric:cost) <= 5 USD"])
    assert [o.status for o in outs] == ["passed", "failed"]
    assert "EUR" in outs[1].detail and "USD" in outs[1].detail


def test_units_unparsable_problem_makes_every_claim_inconclusive() -> None:
    outs = verify_units("metric : :", ["value(metric:x) <= 1 s", "1 s <= 2 s"])
    assert [o.status for o in outs] == ["inconclusive", "inconclusive"]
    assert all("problem text does not parse" in o.detail for o in outs)


# hand-written dimensions: the oracle does not ask pint (a sanity test below checks pint agrees)
UNIT_DIMENSIONS = {
    "ms": "time", "s": "time", "min": "time", "h": "time", "d": "time", "week": "time",
    "m": "length", "km": "length", "ft": "length", "mile": "length",
    "g": "mass", "kg": "mass", "lb": "mass",
    "m/s": "speed", "km/h": "speed", "mile/h": "speed",
    "J": "energy", "kWh": "energy", "W": "power", "kW": "power",
    "bit": "information", "byte": "information",
    "USD": "USD", "EUR": "EUR", "GBP": "GBP",
}


@pytest.fixture(scope="module")
def plain_pint() -> pint.UnitRegistry:
    ureg: pint.UnitRegistry = pint.UnitRegistry()
    for code in ("USD", "EUR", "GBP"):
        ureg.define(f"{code} = [currency_{code}]")
    return ureg


def test_the_hand_table_agrees_with_pint(plain_pint: pint.UnitRegistry) -> None:
    units = sorted(UNIT_DIMENSIONS)
    for a in units:
        for b in units:
            same = plain_pint.parse_units(a).dimensionality == plain_pint.parse_units(b).dimensionality
            assert same == (UNIT_DIMENSIONS[a] == UNIT_DIMENSIONS[b]), (a, b)


@settings(max_examples=150, deadline=None)
@given(
    declared=st.sampled_from(sorted(UNIT_DIMENSIONS)),
    written=st.sampled_from(sorted(UNIT_DIMENSIONS)),
    op=st.sampled_from(["<=", "<", ">=", ">", "=", "!="]),
    value=st.decimals(min_value=-1000, max_value=1000, places=2, allow_nan=False),
    metric_on_left=st.booleans(),
)
def test_units_match_the_hand_table(declared: str, written: str, op: str, value: Any, metric_on_left: bool) -> None:
    quantity = f"{value} {written}"
    claim = f"value(metric:m) {op} {quantity}" if metric_on_left else f"{quantity} {op} value(metric:m)"
    out = units_one({"m": declared}, claim)
    expected = "passed" if UNIT_DIMENSIONS[declared] == UNIT_DIMENSIONS[written] else "failed"
    assert out.status == expected, out.detail
    if expected == "failed":
        assert declared in out.detail and written in out.detail


# ==== temporal ===============================================================================
def temporal_one(events: dict[str, int], claim: str) -> VerifierOutcome:
    return verify_temporal(events, [claim])[0]


@pytest.mark.parametrize(
    ("claim", "status"),
    [
        ("before(event:deploy, event:outage)", "passed"),
        ("before(event:outage, event:deploy)", "failed"),
        ("before(event:deploy, event:deploy)", "failed"),  # strict
        ("within(event:outage, 2h of event:deploy)", "passed"),  # 5400 s apart
        ("within(event:outage, 90 s of event:deploy)", "failed"),
        ("within(event:deploy, 5400 s of event:outage)", "passed"),  # the bound is inclusive
        ("within(event:deploy, 5399 s of event:outage)", "failed"),
        ("within(event:deploy, 1.5 h of event:outage)", "passed"),
        ("within(event:deploy, 14d of event:outage)", "passed"),
        ("time(event:outage) - time(event:deploy) <= 2 h", "passed"),
        ("time(event:outage) - time(event:deploy) > 2 h", "failed"),
        ("before(event:deploy, event:outage) and not within(event:outage, 1 min of event:deploy)", "passed"),
        ("before(event:outage, event:deploy) or within(event:outage, 1 h of event:deploy)", "failed"),
        ("before(event:outage, event:deploy) implies false", "passed"),
        ("before(event:deploy, event:audit)", "inconclusive"),  # no time for audit
        ("down(db) and before(event:deploy, event:outage)", "inconclusive"),  # not temporal
        ("value(metric:cost) <= 3 USD", "inconclusive"),
        ("within(event:deploy, 3 USD of event:outage)", "inconclusive"),  # not a duration
        ("before(event:deploy,", "inconclusive"),
    ],
)
def test_temporal_known_cases(claim: str, status: str) -> None:
    out = temporal_one({"deploy": 1000, "outage": 6400}, claim)
    assert out.status == status, out.detail
    if status == "failed":
        assert out.confidence_cap == 0.0


def test_temporal_unknown_event_is_named() -> None:
    out = temporal_one({"deploy": 0}, "before(event:deploy, event:audit)")
    assert out.status == "inconclusive" and "audit" in out.detail


def test_temporal_detail_shows_the_times() -> None:
    out = temporal_one({"deploy": 100, "outage": 50}, "before(event:deploy, event:outage)")
    assert out.detail == "deploy at 100 s is not before outage at 50 s"
    assert out.data == {"holds": False, "events": {"deploy": 100, "outage": 50}}


SECONDS = {"s": 1, "min": 60, "h": 3600, "d": 86400}  # hand-written, not pint's


@settings(max_examples=200, deadline=None)
@given(
    a=st.integers(-10**9, 10**9),
    b=st.integers(-10**9, 10**9),
    amount=st.integers(0, 10**4),
    unit=st.sampled_from(sorted(SECONDS)),
)
def test_temporal_matches_integer_comparison(a: int, b: int, amount: int, unit: str) -> None:
    events = {"x": a, "y": b}
    before, within = verify_temporal(
        events, ["before(event:x, event:y)", f"within(event:x, {amount} {unit} of event:y)"]
    )
    assert before.status == ("passed" if a < b else "failed")
    assert within.status == ("passed" if abs(a - b) <= amount * SECONDS[unit] else "failed")


def test_event_times_from_a_real_solver_model() -> None:
    gp = cda.ground("event deploy, outage\nhard: before(event:deploy, event:outage)\n"
                    "hard: time(event:outage) - time(event:deploy) >= 2 h")
    backend = make_backend("z3", gp, seed=0, deadline=Deadline(None), weights={})
    outcome = backend.check([(selector(c.name), True) for c in gp.clauses])
    assert outcome.status == "sat" and outcome.model is not None
    times = event_times(outcome.model)
    assert sorted(times) == ["deploy", "outage"]
    outs = verify_temporal(times, ["before(event:deploy, event:outage)", "within(event:deploy, 1 h of event:outage)"])
    assert [o.status for o in outs] == ["passed", "failed"]


def test_event_times_ignores_booleans_and_other_variables() -> None:
    assert event_times({"event:a": 3, "event:flag": True, "metric:a": 7, "a": False}) == {"a": 3}


# ==== arithmetic =============================================================================
@pytest.mark.parametrize(
    ("claim", "status"),
    [
        ("120 + 80 = 200", "passed"),
        ("0.1 + 0.2 == 0.3", "passed"),  # exact rationals, not floats
        ("3 * 1.5 <= 4", "failed"),
        ("1/3 + 1/3 + 1/3 = 1", "passed"),
        ("2 ** 10 = 1024", "passed"),
        ("-2 ** 2 = -4", "passed"),  # Python precedence
        ("2 ** 3 ** 2 = 512", "passed"),  # right associative
        ("(1 + 2) * 3 != 9", "failed"),
        ("1 < 2 <= 2 < 3", "passed"),
        ("1 < 3 < 2", "failed"),
        ("1e3 = 1000", "passed"),
        ("2.5e-1 = 1/4", "passed"),
        ("2 ** 0.5 < 1.5", "passed"),  # exact irrational
        ("4 ** 0.5 = 2", "passed"),
        ("1 ≤ 2", "passed"),
        ("1 / 0 = 1", "inconclusive"),
        ("0 ** -1 = 1", "inconclusive"),
        ("(-8) ** (1/3) < 0", "inconclusive"),  # not a real number
        ("1 + 1", "inconclusive"),  # nothing compared
        ("", "inconclusive"),
        ("(1 + 2 = 3", "inconclusive"),
        ("1.2.3 = 1", "inconclusive"),
        ("10 ** 10 ** 10 > 0", "inconclusive"),  # guarded, not computed
        ("(10 ** 9000) ** 9000 > 0", "inconclusive"),
        ("1e1000000000 > 0", "inconclusive"),
        ("(" * 200 + "1" + ")" * 200 + " = 1", "inconclusive"),
        ("1 = 1" + " + 1" * 3000, "inconclusive"),  # too long
    ],
)
def test_arithmetic_known_cases(claim: str, status: str) -> None:
    out = verify_arithmetic([claim])[0]
    assert out.status == status, out.detail
    assert (out.confidence_cap == 0.0) == (status == "failed")


def test_arithmetic_detail_is_exact() -> None:
    out = verify_arithmetic(["0.1 + 0.2 == 0.3"])[0]
    assert out.detail == "true in exact arithmetic: 3/10 = 3/10"
    assert out.data == {"values": ["3/10", "3/10"], "comparisons": ["="], "holds": True}


def test_arithmetic_elides_huge_values() -> None:
    out = verify_arithmetic(["10 ** 9000 > 1", "3 ** 100 + 1 > 3 ** 100"])
    assert out[0].status == "passed" and out[0].data["values"][0] == "≈1.00000000000E+9000 (too long to print exactly)"
    assert out[1].status == "passed" and out[1].data["values"][0] == str(3**100 + 1)  # short enough: exact
    assert all(len(o.detail) < 200 for o in out)


INJECTIONS = [
    "__import__('os').system('true') == 0",
    "x = 1",
    "pi > 3",
    "E ** 1 > 2",
    "(1).__class__ == 1",
    "1 .real == 1",
    "[1][0] == 1",
    "1 if 1 else 0 == 1",
    "lambda: 0 == 0",
    "1; 1 == 1",
    "'1' == '1'",
    "1 == 1 # comment",
    "0x10 == 16",
    "1_000 == 1000",
    "sqrt(4) = 2",
]


@pytest.mark.parametrize("claim", INJECTIONS)
def test_arithmetic_rejects_anything_but_numbers_and_operators(claim: str) -> None:
    out = verify_arithmetic([claim])[0]
    assert out.status == "inconclusive", out.detail


def test_arithmetic_never_evaluates_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "pwned"
    payload = f"__import__('pathlib').Path({str(target)!r}).touch() == None"

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("eval-like entry point used")

    # sympy imports some of its own modules lazily on first arithmetic (Add.flatten imports
    # sympy.tensor.tensor), and importing runs the module's code through builtins.exec: do that once
    # before exec is forbidden, so only what the verifier does with the claims is under test
    verify_arithmetic(["0.5 + 0.25 == 0.75", "2 ** 0.5 < 1.5"])
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(sympy.parsing.sympy_parser, "parse_expr", forbidden)
    outs = verify_arithmetic([payload, "0.1 + 0.2 == 0.3", "2 ** 0.5 < 1.5"])
    assert [o.status for o in outs] == ["inconclusive", "passed", "passed"]
    assert not target.exists()


# random expression trees, evaluated by Fraction (the oracle) and rendered fully parenthesised
Tree = tuple[Any, ...]


def leaves() -> st.SearchStrategy[Tree]:
    ints = st.integers(-50, 50).map(lambda n: ("num", str(n)))
    decimals = st.tuples(st.integers(-999, 999), st.integers(1, 3)).map(
        lambda p: ("num", f"{'-' if p[0] < 0 else ''}{abs(p[0]) // 10 ** p[1]}.{str(abs(p[0]) % 10 ** p[1]).rjust(p[1], '0')}")
    )
    return ints | decimals


def extend(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
    binary = st.tuples(st.sampled_from(["+", "-", "*", "/"]), children, children)
    power = st.tuples(st.just("**"), children, st.integers(-2, 3))
    negate = st.tuples(st.just("neg"), children)
    return binary | power | negate


TREES = st.recursive(leaves(), extend, max_leaves=8)


def render(t: Tree) -> str:
    if t[0] == "num":
        return f"({t[1]})"
    if t[0] == "neg":
        return f"(-{render(t[1])})"
    if t[0] == "**":
        return f"({render(t[1])} ** ({t[2]}))"
    return f"({render(t[1])} {t[0]} {render(t[2])})"


def fraction_value(t: Tree) -> Fraction:
    if t[0] == "num":
        return Fraction(t[1])
    if t[0] == "neg":
        return -fraction_value(t[1])
    if t[0] == "**":
        return fraction_value(t[1]) ** t[2]  # type: ignore[no-any-return]
    a, b = fraction_value(t[1]), fraction_value(t[2])
    ops: dict[str, Callable[[Fraction, Fraction], Fraction]] = {
        "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x / y,
    }
    return ops[t[0]](a, b)


COMPARE: dict[str, Callable[[Fraction, Fraction], bool]] = {
    "=": lambda x, y: x == y, "==": lambda x, y: x == y, "!=": lambda x, y: x != y,
    "<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y,
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(left=TREES, right=TREES, op=st.sampled_from(sorted(COMPARE)))
def test_arithmetic_matches_fractions(left: Tree, right: Tree, op: str) -> None:
    claim = f"{render(left)} {op} {render(right)}"
    out = verify_arithmetic([claim])[0]
    try:
        a, b = fraction_value(left), fraction_value(right)
    except ZeroDivisionError:
        assert out.status == "inconclusive" and "division by zero" in out.detail
        return
    assert out.status == ("passed" if COMPARE[op](a, b) else "failed"), (claim, out.detail)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=TREES)
def test_arithmetic_equals_its_own_fraction_value(tree: Tree) -> None:
    try:
        value = fraction_value(tree)
    except ZeroDivisionError:
        return
    out = verify_arithmetic([f"{render(tree)} = {value.numerator} / {value.denominator}"])[0]
    assert out.status == "passed", out.detail


# ==== function evaluator =====================================================================
def run_check(source: str, timeout_s: float = 5.0, **kwargs: Any) -> VerifierOutcome:
    return run_function_check("t", source, "the claim", timeout_s=timeout_s, **kwargs)


@pytest.mark.parametrize(
    ("source", "status", "detail"),
    [
        ("def check(claim):\n    return claim == 'the claim'\n", "passed", "check returned True"),
        ("def check(claim):\n    return False\n", "failed", "check returned False"),
        ("def check(claim):\n    return 1 / 0\n", "failed", "raised ZeroDivisionError: division by zero"),
        ("def check(claim):\n    return 1\n", "failed", "check returned int, not bool"),
        ("import sys\ndef check(claim):\n    sys.exit(3)\n", "failed", "called sys.exit(3)"),
        ("import os\ndef check(claim):\n    os._exit(3)\n", "failed", "exited with status 3 without a result"),
        ("x = 1\n", "failed", "the source defines no function check(claim)"),
        ("raise KeyError('k')\n", "failed", "raised KeyError: 'k' while loading the source"),
        ("def check(claim):\n    x = bytearray(2 * 1024 ** 3)\n    return True\n", "failed",
         "exceeded memory limit (256 MB)"),
        ("def check(claim):\n    print('x' * (4 << 20))\n    return True\n", "failed",
         f"exceeded the output limit ({OUTPUT_LIMIT} bytes)"),
        ("import os, signal\ndef check(claim):\n    os.kill(os.getpid(), signal.SIGSEGV)\n", "failed",
         "crashed with SIGSEGV before returning"),
        ("import pytest\ndef check(claim):\n    return True\n", "failed",  # no site-packages in the child
         "raised ModuleNotFoundError: No module named 'pytest' while loading the source"),
    ],
)
def test_function_outcomes(source: str, status: str, detail: str) -> None:
    out = run_check(source)
    assert (out.status, out.detail) == (status, detail)
    assert out.verifier == "function" and out.data["limits"] == {"timeout_s": 5.0, "memory_mb": 256}


def test_function_syntax_error_is_an_outcome() -> None:
    out = run_check("def check(claim) return True")
    assert out.status == "failed" and out.detail.startswith("raised SyntaxError")


@pytest.mark.parametrize(
    "source",
    ["def check(claim):\n    while True:\n        pass\n", "import time\ndef check(claim):\n    time.sleep(600)\n"],
)
def test_function_timeout(source: str) -> None:
    out = run_check(source, timeout_s=1.0)
    assert (out.status, out.detail, out.confidence_cap) == ("failed", "timed out after 1.0 s", 0.5)
    assert out.data["reason"] == "timeout"


@pytest.mark.parametrize("refuse", ["", "1"])
def test_function_socket_is_refused(refuse: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under either isolation the seccomp filter refuses socket(2) itself (and with namespaces the
    network namespace has no network besides)."""
    detail = "raised PermissionError: [Errno 1] Operation not permitted"
    monkeypatch.setenv("CDA_SANDBOX_REFUSE", refuse)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        sources = [
            f"import socket\ndef check(claim):\n    s = socket.socket()\n    s.connect(('127.0.0.1', {port}))\n    return True\n",
            f"import socket\ndef check(claim):\n    socket.create_connection(('127.0.0.1', {port}))\n    return True\n",
            f"import http.client\ndef check(claim):\n    http.client.HTTPConnection('127.0.0.1', {port}).request('GET', '/')\n"
            "    return True\n",
        ]
        for source in sources:
            out = run_check(source, isolation="process")
            assert (out.status, out.detail) == ("failed", detail)
            assert out.data["isolation"] == ("process" if refuse else "namespaces")
        server.setblocking(False)
        with pytest.raises(BlockingIOError):  # nobody connected
            server.accept()
    finally:
        server.close()


def test_function_garbage_on_stdout_does_not_confuse_the_result() -> None:
    source = (
        "import os, sys\n"
        "def check(claim):\n"
        "    print('{\"kind\": \"value\", \"value\": false}')\n"
        "    os.write(1, bytes(range(256)))\n"
        "    sys.stderr.write('noise')\n"
        "    return True\n"
    )
    out = run_check(source)
    assert (out.status, out.detail) == ("passed", "check returned True")
    assert out.data["stdout_excerpt"]


def test_function_child_runs_isolated() -> None:
    source = (
        "import os, sys\n"
        "def check(claim):\n"
        "    env_ok = set(os.environ) <= {'PYTHONHASHSEED', 'LC_CTYPE'}\n"  # LC_CTYPE: PEP 538 coercion
        "    files = os.listdir('.') == []\n"  # its own tmpfs, empty: its input came on a descriptor, stdout is a pipe
        "    stdin_empty = sys.stdin.read() == ''\n"
        "    return env_ok and files and stdin_empty\n"
    )
    assert run_check(source).status == "passed"


def test_function_result_is_deterministic() -> None:
    source = "def check(claim):\n    print(hash('abc'), list({'a', 'b', 'c', 'd'}))\n    return True\n"
    first, second = run_check(source), run_check(source)
    assert canonical_json(first.model_dump(mode="json")) == canonical_json(second.model_dump(mode="json"))
    looping = "def check(claim):\n    while True:\n        pass\n"
    a, b = run_check(looping, timeout_s=0.5), run_check(looping, timeout_s=0.5)
    assert a.model_dump() == b.model_dump()


@pytest.mark.parametrize(("timeout_s", "memory_mb"), [(0.0, 256), (-1.0, 256), (float("nan"), 256), (5.0, 1)])
def test_function_bad_limits_are_an_outcome(timeout_s: float, memory_mb: int) -> None:
    out = run_check("def check(claim):\n    return True\n", timeout_s=timeout_s, memory_mb=memory_mb)
    assert out.status == "failed" and out.data["reason"] == "invalid_limits"


# ==== Ken evidence ===========================================================================
EDGES = [
    ("api", "depends", "auth"),
    ("api", "depends", "cache"),
    ("auth", "depends", "db"),
    ("cache", "depends", "db"),
    ("db", "depends", "disk"),
    ("db", "status", "degraded"),
    ("api", "owned_by", "team_a"),
]


class SpyKen(KenGraph):
    """Records every public method called, to prove only the safe query set is used."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] | None = None  # None while the graph is being built

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_") and name not in ("calls", "graph"):
            calls = object.__getattribute__(self, "__dict__").get("calls")
            if calls is not None:
                calls.append(name)
        return object.__getattribute__(self, name)


def make_ken() -> SpyKen:
    ken = SpyKen()
    for s, r, t in EDGES:
        ken.add_edge(s, r, t)
    ken.add_node("api", label="Public API gateway")
    ken.add_node("db", text="Primary Postgres")
    ken.calls = []
    return ken


def test_ken_binary_atom_cites_the_edge_and_its_nodes() -> None:
    ken = make_ken()
    outs, records = ken_evidence(ken, ["depends(api, auth)"])
    assert outs[0].status == "passed"
    assert [(c.source, c.excerpt) for c in outs[0].citations] == [
        ("ken:edge:api-depends->auth", "api -depends-> auth"),
        ("ken:node:api", "Public API gateway"),
        ("ken:node:auth", None),
    ]
    assert records == [
        KenQueryRecord(atom="depends(api, auth)", name="ken.related_by", args={"node": "api", "relation": "depends"},
                       result=["auth", "cache"], result_size=2)
    ]


def test_ken_unary_atom_is_supported_by_outgoing_edges() -> None:
    outs, _ = ken_evidence(make_ken(), ["status(db)", "hyp:status(entity:db)"])
    for out in outs:
        assert out.status == "passed"
        assert out.data["edges"] == [["db", "status", "degraded"]]
        assert ("ken:node:db", "Primary Postgres") in [(c.source, c.excerpt) for c in out.citations]


@pytest.mark.parametrize(
    "atom", ["path(api, disk, depends, 3)", "exists path(entity:api ->depends-> entity:disk within 3 hops)"]
)
def test_ken_path_cites_every_hop_and_matches_networkx(atom: str) -> None:
    outs, records = ken_evidence(make_ken(), [atom])
    assert outs[0].status == "passed"
    g = nx.DiGraph([(s, t) for s, r, t in EDGES if r == "depends"])
    cited = [c.source for c in outs[0].citations if c.source.startswith("ken:edge:")]
    assert len(cited) == nx.shortest_path_length(g, "api", "disk") == 3
    for u, _r, v in outs[0].data["edges"]:
        assert g.has_edge(u, v)
    assert cited == ["ken:edge:api-depends->auth", "ken:edge:auth-depends->db", "ken:edge:db-depends->disk"]
    assert [r.name for r in records] == ["ken.path"]


def test_ken_no_support_is_an_inconclusive_stub() -> None:
    outs, records = ken_evidence(
        make_ken(), ["down(db)", "down(nowhere)", "path(api, disk, depends, 2)", "depends(auth, cache)"]
    )
    assert [o.status for o in outs] == ["inconclusive"] * 4
    assert all(o.data["stub"] is True and o.citations == [] for o in outs)
    assert "node 'db' exists" in outs[0].detail
    assert "node 'nowhere' is not in Ken" in outs[1].detail
    assert [r.name for r in records] == ["ken.related_by", "ken.search"] * 2 + ["ken.path", "ken.search"] + [
        "ken.related_by", "ken.search"
    ]
    assert all(r.result_size == len(r.result) for r in records)


def test_ken_unreadable_atoms_ask_nothing() -> None:
    outs, records = ken_evidence(make_ken(), ["not an atom", "p(a, b, c)", "path(a, b, depends)", "p(a, )"])
    assert [o.status for o in outs] == ["inconclusive"] * 4
    assert all(o.data["stub"] is False for o in outs)
    assert records == []


def test_ken_budget_is_respected() -> None:
    atoms = [f"depends(api, x{i})" for i in range(10)] + ["depends(api, auth)"]
    outs, records = ken_evidence(make_ken(), atoms, query_budget=5)
    assert len(records) == 5
    assert outs[-1].status == "inconclusive" and "budget" in outs[-1].detail and outs[-1].data["stub"] is True
    outs_all, records_all = ken_evidence(make_ken(), ["depends(api, auth)"], query_budget=0)
    assert records_all == [] and outs_all[0].status == "inconclusive"


def test_ken_uses_only_the_safe_query_set() -> None:
    ken = make_ken()
    ken_evidence(ken, ["depends(api, auth)", "down(db)", "path(api, disk, depends, 3)", "status(db)", "x(y)"])
    assert ken.calls and set(ken.calls) <= {"search", "neighborhood", "path", "related_by"}


def test_ken_evidence_is_deterministic() -> None:
    atoms = ["depends(api, auth)", "down(db)", "path(api, disk, depends, 3)", "owned_by(api)"]
    a, ra = ken_evidence(make_ken(), atoms)
    b, rb = ken_evidence(make_ken(), atoms)
    assert dump(a) == dump(b)
    assert [r.model_dump() for r in ra] == [r.model_dump() for r in rb]


# ==== cross-backend agreement ================================================================
AGREE = "hyp leak, spill\nobservable wet\nobserve wet\nhard: wet iff (leak or spill)\nsoft: not spill weight 2\n" \
        "goal prove leak or spill"


def test_agreement_passes_when_backends_agree() -> None:
    out = agreement_outcome(cda.ground(AGREE), EngineOptions())
    assert (out.status, out.verifier, out.data["agree"]) == ("passed", "agreement", True)


def test_agreement_fails_naming_differences(monkeypatch: pytest.MonkeyPatch) -> None:
    real_run = agreement_module.run

    def lying_run(problem: Any, backend: str, options: EngineOptions) -> cda.SolveResult:
        result = real_run(problem, backend, options)
        if backend == "clingo":
            result.hypotheses = result.hypotheses[:1]
            result.seed = 99
        return result

    monkeypatch.setattr(agreement_module, "run", lying_run)
    out = agreement_outcome(cda.ground(AGREE), EngineOptions())
    assert out.status == "failed" and out.confidence_cap == 0.5
    assert "result.hypotheses: 3 items != 1 items" in out.detail
    assert "result.seed: 0 != 99" in out.detail
    assert out.data["difference_count"] >= 2


def test_agreement_skipped_when_a_backend_refuses() -> None:
    gp = cda.ground("metric a : USD\nmetric b : USD\nhyp big\nhard: big implies value(metric:a) + value(metric:b) >= 10")
    out = agreement_outcome(gp, EngineOptions())
    assert out.status == "skipped" and "refuses" in out.detail


def test_agreement_skipped_when_a_backend_ran_out_of_time(monkeypatch: pytest.MonkeyPatch) -> None:
    real_run = agreement_module.run

    def slow_run(problem: Any, backend: str, options: EngineOptions) -> cda.SolveResult:
        result = real_run(problem, backend, options)
        result.partial = backend == "clingo"
        return result

    monkeypatch.setattr(agreement_module, "run", slow_run)
    assert agreement_outcome(cda.ground(AGREE), EngineOptions()).status == "skipped"


def test_outcome_from_a_bare_report() -> None:
    out = outcome_from_report(AgreementReport(agree=False, differences=[f"d{i}" for i in range(5)]))
    assert out.detail == "z3 and clingo disagree: d0; d1; d2; and 2 more"
    assert json.loads(canonical_json(out.model_dump(mode="json")))["status"] == "failed"


# ==== every verifier: JSON-safe and byte-for-byte deterministic ==============================
def test_outcomes_are_json_safe_and_deterministic() -> None:
    def everything() -> str:
        outs = verify_units("metric latency : ms", ["value(metric:latency) <= 1.5 s", "value(metric:latency) <= 2 USD"])
        outs += verify_temporal({"a": 1, "b": 2}, ["before(event:a, event:b)", "within(event:a, 1 ms of event:b)"])
        outs += verify_arithmetic(["0.1 + 0.2 == 0.3", "2 ** 0.5 > 1.5", "1 / 0 = 0"])
        outs += ken_evidence(make_ken(), ["depends(api, auth)", "down(db)"])[0]
        outs.append(run_check("def check(claim):\n    return len(claim) > 3\n"))
        return dump(outs)

    first = everything()
    assert first == everything()
    json.loads(first)
