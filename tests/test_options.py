"""Every numeric option and JSON field checked in one place (:mod:`cda.contracts.limits`).

Each defect a new user met has a test here: a huge ``--timeout`` or ``budgets.wall`` answered
PARTIAL on clingo, ``"wall": Infinity`` crashed the seed, ``--port -1`` and ``--out FILE`` were
tracebacks, ``cda probe`` took a negative seed and a zero ``--max-size``, and a fixed number of
tries capped ``--vectors``. A walk over every subcommand's numeric options feeds each the values
that must be refused.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
from pathlib import Path

import pytest

import cda
from cda.actions.seeds import derive
from cda.adapters.action_entry import InputsError, load_inputs, run_inputs
from cda.cli.main import _parser, main
from cda.contracts import limits
from cda.contracts.action import Budgets, CDAInputs
from cda.diagnosis.bench_import import read_bench
from cda.diagnosis.probe import failing_vectors, simulate_probing
from cda.errors import CDAError, OptionError
from cda.solver.engine import EngineOptions
from tests.conftest import DATA

C17 = DATA / "iscas85" / "c17.bench"
TRIVIAL = "hyp a\nhyp b\nhard: a or b\ngoal prove a or b\n"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# ---- the checkers -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("check", "value", "words"),
    [
        (lambda v: limits.seconds("t", v), math.nan, "0 or more (inf for no limit), not nan"),
        (lambda v: limits.seconds("t", v), -1, "not -1"),
        (lambda v: limits.seconds("t", v, positive=True), 0, "more than 0"),
        (lambda v: limits.seconds("t", v, unlimited=False), math.inf, "at most 1000000, not inf"),
        (lambda v: limits.seconds("t", v), "5", "not '5'"),
        (lambda v: limits.seconds("t", v), True, "not True"),
        (lambda v: limits.seed("s", v), -1, "from 0 to 4294967295"),
        (lambda v: limits.seed("s", v), 2**32, "not 4294967296"),
        (lambda v: limits.seed("s", v), 3.0, "not 3.0"),
        (lambda v: limits.count("n", v), 0, "from 1 to 2147483647, not 0"),
        (lambda v: limits.count("n", 10**v), 5000, "of about 5001 digits"),
        (lambda v: limits.port("p", v), 65536, "from 0 to 65535, not 65536"),
        (lambda v: limits.probability("q", v), 0.0, "strictly between 0 and 1"),
        (lambda v: limits.vectors("v", v), limits.MAX_VECTORS + 1, "from 1 to 100000"),
    ],
)
def test_checkers_refuse_with_the_name_the_value_and_the_range(check, value, words: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OptionError) as info:
        check(value)
    assert words in str(info.value)


def test_checkers_accept_the_edges() -> None:
    assert limits.seconds("t", math.inf) == math.inf
    assert limits.seconds("t", 1e300) == 1e300
    assert limits.seconds("t", 0) == 0
    assert limits.seed("s", 0) == 0 and limits.seed("s", 2**32 - 1) == 2**32 - 1
    assert limits.port("p", 0) == 0 and limits.port("p", 65535) == 65535
    assert limits.count("n", 2**31 - 1) == 2**31 - 1
    assert limits.vectors("v", limits.MAX_VECTORS) == limits.MAX_VECTORS


def test_engine_options_use_the_same_checks() -> None:
    with pytest.raises(OptionError, match="timeout must be a number of seconds"):
        EngineOptions(timeout=math.nan)
    with pytest.raises(OptionError, match="max_explanation_size must be a whole number from 1"):
        EngineOptions(max_explanation_size=0)
    with pytest.raises(OptionError, match="top must be a whole number from 1 to 2147483647"):
        EngineOptions(top=2**40)


# ---- every numeric option of every command ------------------------------------------------------
def _numeric_options() -> list[tuple[list[str], argparse.Action]]:
    """(the words that select the subcommand, the option) for every option that takes a number."""
    found: list[tuple[list[str], argparse.Action]] = []

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif action.option_strings and action.type is not None and action.type is not Path:
                found.append((path, action))

    walk(_parser(), [])
    return found


NUMERIC = _numeric_options()


def test_every_numeric_option_goes_through_the_checkers() -> None:
    """No ``type=int``/``type=float`` is left: each numeric option is checked by cda.contracts.limits."""
    names = {(" ".join(path), a.option_strings[-1]) for path, a in NUMERIC}
    assert ("solve", "--timeout") in names and ("serve", "--port") in names and ("bench folio", "--timeout") in names
    assert ("probe", "--seed") in names and ("probe", "--max-size") in names and ("prove", "--timeout") in names
    plain = [(path, a.option_strings[-1]) for path, a in NUMERIC if a.type in (int, float)]
    assert plain == []


@pytest.mark.parametrize(("path", "action"), NUMERIC, ids=[f"{' '.join(p)} {a.option_strings[-1]}" for p, a in NUMERIC])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e400", "9" * 30, "9" * 5000, "12abc", ""], ids=lambda v: v if len(v) <= 30 else f"{len(v)} digits")
def test_bad_numbers_exit_2_with_a_message(
    path: list[str], action: argparse.Action, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    option = action.option_strings[-1]
    timeout = option == "--timeout"
    if timeout and value in ("inf", "1e400", "9" * 30, "9" * 5000):
        assert math.isinf(action.type(value)) or action.type(value) > 0  # type: ignore[misc]
        return  # a huge budget is a long one (inf: no limit), checked below on clingo
    code, out, err = run(*path, f"{option}={value}", "file")
    assert (code, out) == (2, "")
    assert f"argument {option}: {option} must be" in err or f"{option}: a number of 5000 digits is out of range" in err
    assert "Traceback" not in err and capsys.readouterr() == ("", "")  # nothing past main's own streams


@pytest.mark.skipif(not C17.exists(), reason="needs ../shared/data/iscas85/c17.bench")
def test_probe_library_refuses_what_the_cli_refuses() -> None:
    code, _, err = run("probe", str(C17), "--inject", "10", "--seed", "0")
    assert code == 0, err
    # the operation refuses what the CLI refuses, with the parameter's own name, at every door
    from pydantic import ValidationError

    from cda.operations import LOCAL_USER, Door, invoke

    for params, message in (({"max_size": 0}, "max_size must be a whole number from 1"),
                            ({"prior": 1.0}, "prior must be a probability strictly between 0 and 1")):
        with pytest.raises(ValidationError, match=message):
            invoke("probe", {"path": str(C17), **params}, principal=LOCAL_USER, door=Door.CLI)
    with pytest.raises(ValidationError, match="seed must be a whole number from 0"):
        invoke("diagnose", {"path": str(C17), "seed": -1}, principal=LOCAL_USER, door=Door.CLI)


# ---- huge budgets are long waits, not timeouts -----------------------------------------------
@pytest.mark.parametrize("timeout", ["1e10", "1e18", "1e300", "inf"])
def test_a_huge_timeout_on_clingo_is_not_partial(tmp_path: Path, timeout: str) -> None:
    f = tmp_path / "t.cda"
    f.write_text(TRIVIAL)
    for _ in range(3):  # clingo's overflowed wait returned at once: PARTIAL every time
        code, out, err = run("solve", str(f), "--backend", "clingo", "--timeout", timeout, "--json")
        result = json.loads(out)
        assert (result["status"], result["partial"], code) == ("sat", False, 0), err


def test_a_huge_timeout_in_the_api_is_not_partial(backend: str) -> None:
    r = cda.solve(TRIVIAL, backend=backend, timeout=1e10)
    assert r.status == "sat" and not r.partial and r.verdicts[0].status == "supported"


def test_z3_timeout_never_wraps_round() -> None:
    """z3 reads its timeout as an unsigned 32-bit count of milliseconds: 2**32 + 50 ms would be
    50 ms. The deadline is 2**32 ms + 1,000 s away, so that the time the test takes to reach the
    call (69 ms once, at load 13) cannot bring it under the cap: wrapped it would read 1,000 s."""
    from cda.solver.backend import Deadline
    from cda.solver.z3_backend import Z3Backend

    problem = cda.ground(TRIVIAL)
    backend = Z3Backend(problem, seed=0, deadline=Deadline((2**32 + 1_000_000) / 1000), weights={})
    seen: list[object] = []

    class Target:
        def set(self, key: str, value: object) -> None:
            seen.append((key, value))

    backend._timeout(Target())  # type: ignore[arg-type]
    assert seen and seen[0][0] == "timeout" and seen[0][1] == 2**32 - 1  # type: ignore[index]


def _inputs(tmp_path: Path, budgets: str, backend: str = "clingo") -> Path:
    f = tmp_path / "inputs.json"
    dsl = json.dumps("hyp a\nhyp b\nhard: a or b\n")
    f.write_text(f'{{"dsl": {dsl}, "backend": "{backend}", "budgets": {budgets}}}')
    return f


@pytest.mark.parametrize("wall", ["1e10", "1e300", "Infinity"])
def test_a_huge_or_infinite_wall_budget_completes(tmp_path: Path, wall: str) -> None:
    inputs = load_inputs(_inputs(tmp_path, f'{{"wall": {wall}}}'))
    assert inputs.budgets.wall == (None if wall == "Infinity" else float(wall))
    run_ = run_inputs(inputs)
    assert run_.outputs.status == "completed", run_.outputs.caveats


def test_infinity_means_no_limit_and_seeds_like_null() -> None:
    """``"wall": Infinity`` is stored as null: the seed (canonical JSON) cannot hold an infinity."""
    a = CDAInputs.model_validate({"dsl": "hyp a", "budgets": {"wall": math.inf}})
    b = CDAInputs.model_validate({"dsl": "hyp a"})
    assert a.budgets.wall is None
    assert derive("cda", a.model_dump(mode="json")) == derive("cda", b.model_dump(mode="json"))


@pytest.mark.parametrize(
    ("budgets", "words"),
    [
        ('{"wall": NaN}', "budgets.wall must be a number of seconds, more than 0"),
        ('{"wall": -Infinity}', "not -inf"),
        ('{"wall": 0}', "not 0"),
        ('{"wall": "5"}', "not '5'"),
        ('{"tokens": 0}', "budgets.tokens must be a whole number from 1"),
    ],
)
def test_bad_budgets_are_named(tmp_path: Path, budgets: str, words: str) -> None:
    with pytest.raises(InputsError, match="budgets") as info:
        load_inputs(_inputs(tmp_path, budgets))
    assert words in str(info.value)
    code, _, err = run("run", str(_inputs(tmp_path, budgets)))
    assert code == 2 and words in err


def test_function_and_llm_limits_stay_finite() -> None:
    src = "def check(claim):\n    return True\n"
    for bad in (math.inf, 601):  # a function check's time has a bound of its own (the sandbox's)
        with pytest.raises(ValueError, match=f"functions\\[\\].timeout_s must be .* at most 600, not {bad}"):
            CDAInputs.model_validate({"dsl": "hyp a", "functions": [{"name": "f", "source": src, "timeout_s": bad}]})
    with pytest.raises(ValueError, match="functions\\[\\].memory_mb must be a whole number from 32 to 4096, not 4097"):
        CDAInputs.model_validate({"dsl": "hyp a", "functions": [{"name": "f", "source": src, "memory_mb": 4097}]})
    with pytest.raises(ValueError, match="isolation"):
        CDAInputs.model_validate({"dsl": "hyp a", "functions": [{"name": "f", "source": src, "isolation": "none"}]})
    with pytest.raises(ValueError, match="functions\\[\\].memory_mb must be a whole number from 32"):
        CDAInputs.model_validate({"dsl": "hyp a", "functions": [{"name": "f", "source": src, "memory_mb": 1}]})
    with pytest.raises(ValueError, match="llm.timeout_s must be"):
        CDAInputs.model_validate({"dsl": "hyp a", "llm": {"timeout_s": math.nan}})
    assert Budgets(wall=2.5).wall == 2.5


# ---- cda serve, cda run ------------------------------------------------------------------------
@pytest.mark.parametrize("port", ["-1", "70000"])
def test_serve_refuses_a_port_out_of_range(tmp_path: Path, port: str) -> None:
    db = tmp_path / "receipts.sqlite"
    db.write_bytes(b"")
    code, out, err = run("serve", str(db), "--port", port)
    assert (code, out) == (2, "")
    assert f"--port must be a whole number from 0 to 65535, not {port}" in err and "Traceback" not in err


def test_run_out_that_is_a_file_is_bad_input(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, "{}")
    afile = tmp_path / "afile"
    afile.write_text("mine")
    code, _, err = run("run", str(inputs), "--out", str(afile))
    assert code == 2 and "--out" in err and "a file of that name exists" in err
    assert afile.read_text() == "mine"
    code, _, err = run("run", str(inputs), "--out", str(afile / "sub"))
    assert code == 2 and "cannot create the folder" in err


# ---- cda probe --vectors ------------------------------------------------------------------------
@pytest.mark.skipif(not C17.exists(), reason="needs ../shared/data/iscas85/c17.bench")
def test_many_vectors_are_drawn_past_the_tries_for_the_first() -> None:
    """``tries`` bounds the search for a failing first vector only: 20 vectors are 20 with 5 tries
    (c17 has 32 distinct vectors: that many at most, each once, see tests/test_probe_budgets.py)."""
    from cda.diagnosis.bench_import import circuit_of

    netlist = read_bench(C17)
    circuit = circuit_of(netlist)
    vectors = failing_vectors(circuit, netlist.outputs, ["10"], 20, random.Random(0), tries=5)
    assert len(vectors) == 20
    good, bad = circuit.evaluate({i: vectors[0][i] for i in circuit.inputs}), vectors[0]
    assert any(good[o] != bad[o] for o in netlist.outputs)
    for v in vectors[:50]:  # every vector reads the faulty circuit's outputs
        assert all(circuit.evaluate({i: v[i] for i in circuit.inputs}, ["10"])[o] == v[o] for o in netlist.outputs)


@pytest.mark.skipif(not C17.exists(), reason="needs ../shared/data/iscas85/c17.bench")
def test_probe_with_more_vectors_than_tries_finds_the_fault() -> None:
    from cda.diagnosis.bench_import import load_bench
    from cda.encodings.ir import MinimalGoal

    inst = load_bench(read_bench(C17), [{}], MinimalGoal(), str(C17))
    result = simulate_probing(inst, ["10"], vectors=10_001)  # c17 has 32 distinct vectors: all of them
    assert result.vectors == 32 and result.resolved and result.final == [["10"]]


@pytest.mark.skipif(not C17.exists(), reason="needs ../shared/data/iscas85/c17.bench")
def test_diagnose_mode_top_k_is_a_count() -> None:
    code, out, err = run("diagnose", str(C17), "--observations", str(C17), "--mode", "top", str(2**40))
    assert (code, out) == (2, "") and "--mode top K must be a whole number from 1 to 2147483647" in err


@pytest.mark.parametrize(("raw", "words"), [("9" * 5000, "not a number of 5000 digits"), ("2147483648", "not 2147483648")])
def test_abstain_thresholds_from_the_environment_are_counts(raw: str, words: str) -> None:
    from cda.contracts.abstain import AbstainConfigError, AbstainThresholds

    with pytest.raises(AbstainConfigError, match="CDA_MIN_REQUIRED_NODES must be a whole number from 0 to 2147483647") as info:
        AbstainThresholds.from_env({"CDA_MIN_REQUIRED_NODES": raw})
    assert words in str(info.value)
    assert AbstainThresholds.from_env({"CDA_MIN_REQUIRED_NODES": "2147483647"}).min_required_nodes == 2**31 - 1


def test_a_whole_number_of_seconds_past_the_float_range_is_no_limit(backend: str) -> None:
    """``timeout=10**400`` was an OverflowError (int too large to convert to float) in Deadline."""
    assert EngineOptions(timeout=10**400).timeout == math.inf
    assert cda.solve(TRIVIAL, backend=backend, timeout=10**400).status == "sat"
    assert CDAInputs.model_validate({"dsl": "hyp a", "budgets": {"wall": 10**400}}).budgets.wall is None
    with pytest.raises(OptionError, match="not a whole number of about 401 digits"):
        limits.seconds("t", -(10**400))


def test_diagnose_library_checks_k_like_the_cli() -> None:
    from cda.diagnosis.diagnose import diagnose

    with pytest.raises(OptionError, match="--mode top K must be a whole number from 1 to 2147483647, not 0"):
        diagnose(C17, C17, mode="top", k=0)
    with pytest.raises(OptionError, match="not 1099511627776"):
        diagnose(C17, C17, mode="top", k=2**40)


def test_cross_check_halves_a_checked_timeout() -> None:
    """``timeout / 2`` of 10**400 was an OverflowError; NaN was reported as the halved value."""
    from cda.api import solve_cross_checked

    assert solve_cross_checked(TRIVIAL, timeout=10**400).status == "sat"
    with pytest.raises(OptionError, match="timeout must be a number of seconds, 0 or more \\(inf for no limit\\), not -4"):
        solve_cross_checked(TRIVIAL, timeout=-4)


@pytest.mark.parametrize("top", [True, 2.0, "3", 0, 2**31])
def test_goals_top_is_a_count_as_on_the_command_line(top: object) -> None:
    """``true`` was read as 1 and ``2.0``/``"3"`` as counts; the CLI's --top refuses all three."""
    with pytest.raises(ValueError, match="goals.top must be a whole number from 1 to 2147483647"):
        CDAInputs.model_validate({"dsl": "hyp a", "goals": {"top": top}})


def test_prove_and_diagnose_take_a_whole_number_of_seconds_past_the_float_range(tmp_path: Path) -> None:
    """``prove(..., timeout=10**400)`` and ``diagnose(..., timeout=10**400)`` raised OverflowError
    (the raw value reached a Deadline, and a subtraction); it means no limit, as for ``solve``."""
    from cda.diagnosis.diagnose import diagnose
    from cda.fol.prove import prove

    assert prove(["∀x (Cat(x) → Animal(x))", "Cat(tom)"], "Animal(tom)", timeout=10**400).status == "supported"
    bench = tmp_path / "and.bench"
    bench.write_text("INPUT(a)\nINPUT(b)\nOUTPUT(z)\nz = AND(a, b)\n")
    obs = tmp_path / "and.obs"
    obs.write_text("a=1 b=1 z=0\n")
    report = diagnose(bench, obs, timeout=10**400)
    assert report.complete and not report.timed_out and report.diagnoses == [["z"]]
    with pytest.raises(CDAError, match="unknown diagnosis mode"):
        diagnose(bench, obs, mode="bogus")  # type: ignore[arg-type]
