"""What each command imports, asserted in a fresh interpreter (not how long it takes).

A command pays at start-up for every module it imports: ``import cda`` used to load the Action
runner, sympy, pint (and its registry, twice), networkx and numpy, so ``cda --help`` took over a
second where ``clingo`` starts in a tenth. ``cda/__init__`` now resolves its public names on
first use and each subcommand imports its own module when it runs; these tests keep it so.
``benchmarks/bench_startup.py`` measures the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import EXAMPLES, ROOT, SHARED_DATA

#: loaded by the Action path, circuit diagnosis, units or FOL, never by a plain check or solve
HEAVY = ("sympy", "pint", "numpy", "networkx", "cryptography", "cda.actions.runner", "cda.verifiers.arithmetic")
SOLVERS = ("z3", "clingo")

_DRIVER = textwrap.dedent(
    """
    import contextlib, io, json, sys
    argv = json.loads(sys.argv[1])
    code = None
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if argv and argv[0] == "--python":
            exec(argv[1])
        else:
            from cda.cli.main import main  # what the `cda` console script runs
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
    print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
    """
)


def loaded(*argv: str) -> tuple[object, set[str]]:
    """The exit code and the top-level and ``cda.*`` modules a fresh interpreter holds after
    running ``cda ARGV`` (or, with ``--python CODE``, after running CODE)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(list(argv))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    mods: set[str] = set()
    for name in report["modules"]:
        mods.add(name)
        mods.add(name.split(".")[0])
    return report["code"], mods


def test_help_imports_no_solver_and_no_pydantic() -> None:
    code, mods = loaded("--help")
    assert code == 0
    assert "cda.cli.main" in mods
    unwanted = {*HEAVY, *SOLVERS, "pydantic", "lark", "cda.api", "cda.contracts.result", "cda.contracts.action"}
    assert not unwanted & mods, sorted(unwanted & mods)


def test_import_cda_loads_nothing_heavy() -> None:
    _, mods = loaded("--python", "import cda")
    unwanted = {*HEAVY, *SOLVERS, "pydantic", "lark", "cda.api"}
    assert not unwanted & mods, sorted(unwanted & mods)
    # cda.terminal_text: the bottom layer cda.errors renders with (standard library only)
    assert {m for m in mods if m.startswith("cda.")} <= {"cda.errors", "cda.lazy", "cda.terminal_text"}


def test_check_loads_the_parser_only() -> None:
    code, mods = loaded("check", str(EXAMPLES / "service_outage.cda"))
    assert code == 0
    assert "cda.encodings.ground" in mods  # it did check the file
    unwanted = {*HEAVY, *SOLVERS, "lark", "cda.solver.engine", "cda.contracts.action"}
    assert not unwanted & mods, sorted(unwanted & mods)


def test_a_syntax_error_loads_lark_for_its_message(tmp_path: pytest.TempPathFactory) -> None:
    """The positive control for lark: what the fast reader cannot vouch for, lark reads."""
    src = tmp_path / "broken.cda"  # type: ignore[operator]
    src.write_text("hyp a\nhard: a and\n")
    code, mods = loaded("check", str(src))
    assert code != 0
    assert "lark" in mods and "cda.encodings.lark_reader" in mods


def test_solve_json_loads_no_action_runner_units_or_sympy() -> None:
    code, mods = loaded("solve", str(EXAMPLES / "service_outage.cda"), "--json")
    assert code == 1  # an inconclusive prove goal: the answer was computed
    assert "cda.solver.engine" in mods
    # auto picks clingo for this Boolean problem: z3 is neither the backend nor MARCO's map solver here
    # nor numpy (the re-check and the pricing count with Python ints as bitsets), nor lark (the
    # fast reader read the file)
    # nor what only some problems need: the theory-program parser of clingo, the conflict
    # analysis (the example is consistent), the search of `goal minimal_explanations`
    unwanted = {
        "sympy", "pint", "networkx", "numpy", "lark", "cda.encodings.lark_reader", "z3", "cda.actions.runner",
        "cda.verifiers", "cda.contracts.action", "clingo.ast", "cda.solver.conflicts", "cda.solver.minimal",
    }
    assert not unwanted & mods, sorted(unwanted & mods)
    _, on_z3 = loaded("solve", str(EXAMPLES / "service_outage.cda"), "--json", "--backend", "z3")
    assert "z3" in on_z3 and "clingo" not in on_z3


def test_the_minimal_explanations_goal_loads_its_search() -> None:
    """The positive control for the goal-specific modules."""
    code, mods = loaded("solve", str(EXAMPLES / "pump_diagnosis.cda"), "--json")
    assert code in (0, 1)
    assert "cda.solver.minimal" in mods


def test_a_file_with_units_loads_pint(tmp_path: pytest.TempPathFactory) -> None:
    """The positive control: the probe sees an import when the file needs it."""
    src = tmp_path / "units.cda"  # type: ignore[operator]
    src.write_text("metric w : mg\nhard: value(metric:w) = 45359237 mg\ngoal prove value(metric:w) >= 100 g\n")
    code, mods = loaded("check", str(src))
    assert code == 0
    assert "pint" in mods


def test_diagnose_help_and_prove_do_not_load_the_action_runner() -> None:
    for argv in (("diagnose", "--help"), ("prove", str(EXAMPLES / "syllogism.fol"), "--json")):
        _, mods = loaded(*argv)
        assert not {"cda.actions.runner", "sympy", "pint"} & mods, (argv, sorted(mods & set(HEAVY)))


def test_prove_on_an_open_domain_loads_z3_only_and_no_solve_engine() -> None:
    """``cda prove`` over an open domain asks z3 alone: no clingo, no lark (its own reader), no IR
    or encoding scheme (grounding is for declared domains and cross-checks), no solve engine and
    none of the solve result's models (issue 34: its start-up against the floor)."""
    code, mods = loaded("prove", str(EXAMPLES / "syllogism.fol"))
    assert code == 1 and "z3" in mods  # exit 1: one of its claims is inconclusive
    unwanted = {"clingo", "lark", "cda.encodings.ir", "cda.encodings.scheme", "cda.solver.engine",
                "cda.contracts.result", "cda.fol.to_ir", *HEAVY}
    assert not unwanted & mods, sorted(unwanted & mods)


def test_only_the_command_line_of_the_process_freezes_the_collector() -> None:
    """``main(argv)`` in a process that goes on (a test, a host program) leaves its collector as
    it was; the process's own command (no ``argv``) ends by moving everything out of the
    collector's way (cda.gcpause.before_exit), which its exit then does not walk."""
    code = (
        "import gc, io, contextlib, sys\n"
        "from cda.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    main(['prove', {str(EXAMPLES / 'syllogism.fol')!r}])\n"
        "    inside = gc.get_freeze_count()\n"
        f"    sys.argv = ['cda', 'prove', {str(EXAMPLES / 'syllogism.fol')!r}]\n"
        "    main()\n"
        "print(inside, gc.get_freeze_count() > 0, out.getvalue().count('SUPPORTED'))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "True", "2"]


def test_diagnose_loads_no_numpy() -> None:
    """``cda diagnose`` re-checks and ranks with Python ints as bitsets; numpy is for probing's
    likelihoods only (it was imported with the probe report's model, 30% of the command's CPU). Nor
    does it load the probing loop: the ``probe`` operation's result model is in
    ``cda.diagnosis.reports``."""
    instance = sorted((SHARED_DATA / "mbd-mobs" / "c17").glob("*.wcnf.gz"))[0]
    code, mods = loaded("diagnose", str(instance), "--json")
    assert code == 0
    assert "cda.diagnosis.wcnf_import" in mods and "clingo" in mods  # it did diagnose
    assert not {"numpy", "sympy", "pint", "networkx", "cda.actions.runner"} & mods, sorted(mods & set(HEAVY))
    assert "cda.diagnosis.probe" not in mods and "cda.diagnosis.reports" in mods


def test_diagnose_builds_only_its_parameters_and_its_report() -> None:
    """Pydantic's model builds are most of a command's start-up (docs/architecture.md,
    "Start-up"): ``cda diagnose`` builds the two models it validates and prints; the engine's
    result, the probe reports and the other operations' parameters stay unbuilt."""
    instance = sorted((SHARED_DATA / "mbd-mobs" / "c17").glob("*.wcnf.gz"))[0]
    code = textwrap.dedent(
        f"""
        import contextlib, io, json
        from cda.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["diagnose", {str(instance)!r}, "--json"]) == 0
        from cda.contracts.result import SolveResult, Hypothesis, CheckReport
        from cda.diagnosis.diagnose import DiagnosisReport
        from cda.diagnosis.reports import ProbeOption, ProbeReport
        from cda.operations.diagnosis import DiagnoseParams, ProbeParams
        models = [SolveResult, Hypothesis, CheckReport, DiagnosisReport, ProbeOption, ProbeReport, DiagnoseParams,
                  ProbeParams]
        print(json.dumps({{m.__name__: m.__pydantic_complete__ for m in models}}))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"SolveResult": False, "Hypothesis": False, "CheckReport": False,
                                 "DiagnosisReport": True, "ProbeOption": False, "ProbeReport": False,
                                 "DiagnoseParams": True, "ProbeParams": False}


def test_public_names_resolve_lazily_and_once() -> None:
    import cda
    from cda import SolveResult, solve
    from cda.contracts import SolveResult as FromContracts
    from cda.contracts.result import SolveResult as FromHome

    assert SolveResult is FromContracts is FromHome
    assert solve("hyp a\nhard: a").hypotheses[0].assumed == ["a"]
    for name in cda.__all__:
        assert getattr(cda, name) is not None
        assert name in dir(cda)
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        cda.nonesuch  # noqa: B018


def test_each_pint_registry_is_built_once() -> None:
    """The encoder's exact registry and the units verifier's float one (kept apart on purpose:
    exact mode cannot parse ``J``) are each built once per process, on first use."""
    from cda.encodings.units import registry
    from cda.verifiers.units_check import exact_registry

    assert registry() is registry()
    assert exact_registry() is exact_registry()
    assert exact_registry() is not registry()


def test_ken_built_from_facts_is_networkx_only_when_asked() -> None:
    """Ken's own storage answers like networkx, and ``.graph`` turns it into a live networkx view."""
    from cda.ken.graph import KenGraph

    ken = KenGraph()
    ken.add_edge("api", "depends", "auth")
    ken.add_edge("auth", "depends", "db")
    ken.add_edge("api", "calls", "auth")
    ken.add_node("db", label="Primary database")
    assert ken.path("api", "db", relation="depends") == ["api", "auth", "db"]
    assert ken.related_by("api", "calls") == ["auth"] and ken.search("primary") == ["db"]
    twin = ken.merged(KenGraph())  # shares the storage until written
    view = ken.graph
    assert type(view).__name__ == "MultiDiGraph" and view.frozen
    assert sorted(view.edges(keys=True)) == [("api", "auth", "calls"), ("api", "auth", "depends"), ("auth", "db", "depends")]
    ken.add_edge("db", "depends", "disk")  # a copy on write: the twin shares the old storage
    assert ken.path("api", "disk", relation="depends") == ["api", "auth", "db", "disk"]
    assert twin.path("api", "disk", relation="depends") is None and len(twin) == 3
    assert KenGraph(twin.graph).has_relation("calls")


def test_an_action_without_numbers_or_units_loads_neither_sympy_nor_pint(tmp_path: pytest.TempPathFactory) -> None:
    code, mods = loaded("run", str(EXAMPLES / "action" / "service_outage.json"), "--out", str(tmp_path))
    assert code == 0
    assert "cda.actions.runner" in mods and "cda.verifiers.arithmetic" in mods  # the verifiers did run
    assert not {"sympy", "pint"} & mods, sorted({"sympy", "pint"} & mods)
