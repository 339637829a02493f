"""``cda policy authorize | test | analyze`` answer as they did before the commands were generated
from the operation registry (docs/policy.md): the same exit code, the same stdout byte for byte,
the same stderr for every mistake CDA reports itself, and for a usage error (argparse's, whose
usage lines follow the generated arguments' order) the same error line.

``tests/golden/policy_cli/cases.json`` holds each command line and what the hand-written parser
printed for it (captured on main at 86f3184, before the change; every answer there is
deterministic: analyses print no time). ``{EX}`` is ``examples/cedar``, ``{TMP}`` a folder of
broken inputs made here, ``{DATA}`` Cedar's integration tests in the outside data.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from cda.cli.main import main
from tests.conftest import DATA, ROOT

CASES: list[dict[str, Any]] = json.loads((ROOT / "tests" / "golden" / "policy_cli" / "cases.json").read_text("utf-8"))
CEDAR_TESTS = DATA / "cedar" / "tests"


def _broken_inputs(tmp: Path) -> None:
    """The broken inputs the cases name under ``{TMP}``, as the capture made them."""
    (tmp / "empty").mkdir()
    (tmp / "bad.json").write_text("{not json")
    (tmp / "badjson").mkdir()
    (tmp / "badjson" / "t.json").write_text("{not json")
    (tmp / "bad-links.json").write_text('[{"template_id": "review", "link_id": "x", "args": {"?principal": '
                                        '"Team::\\"eng\\"", "?resource": "Doc::\\"memo\\""}}]')


@pytest.mark.parametrize("case", CASES, ids=lambda c: " ".join(c["argv"][1:4]) + f" #{CASES.index(c)}")
def test_policy_command_answers_as_before(case: dict[str, Any], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if any("{DATA}" in a for a in case["argv"]) and not CEDAR_TESTS.is_dir():
        pytest.skip("needs ../shared/data/cedar/tests (Cedar's handwritten integration tests)")
    _broken_inputs(tmp_path)
    monkeypatch.chdir(ROOT)  # the cases name examples/cedar relatively, as docs/policy.md does
    subst = {"{EX}": "examples/cedar", "{DATA}": str(CEDAR_TESTS), "{TMP}": str(tmp_path)}

    def real(text: str) -> str:
        for k, v in subst.items():
            text = text.replace(k, v)
        return text

    out, err = io.StringIO(), io.StringIO()
    code = main([real(a) for a in case["argv"]], stdout=out, stderr=err)
    assert code == case["code"], (code, out.getvalue(), err.getvalue())
    assert out.getvalue() == real(case["out"])
    if case["err"].startswith("usage:"):  # argparse's usage lines: the error line is the promise
        assert err.getvalue().startswith("usage:")
        assert err.getvalue().splitlines()[-1] == real(case["err"]).splitlines()[-1]
    else:
        assert err.getvalue() == real(case["err"])


def test_each_policy_subcommand_is_its_operation_s_cli_door() -> None:
    """``cda policy …`` is generated from the registry: one command per operation at the CLI door,
    no parser of its own (the module shows results only)."""
    import cda.cli.policy
    from cda.cli.commands import OPERATION_COMMANDS
    from cda.operations import Door, for_door

    commands = {words: c.operation for words, c in OPERATION_COMMANDS.items() if words[0] == "policy"}
    ops = {op.cli: op.name for op in for_door(Door.CLI) if op.name.startswith("policy.")}
    assert commands == ops == {("policy", "authorize"): "policy.authorize", ("policy", "test"): "policy.test",
                               ("policy", "analyze"): "policy.analyze"}
    assert not hasattr(cda.cli.policy, "add_policy_parser") and not hasattr(cda.cli.policy, "main_policy")
    out = io.StringIO()
    assert main(["completion", "bash"], stdout=out, stderr=io.StringIO()) == 0
    assert "policy) echo 'authorize test analyze'" in out.getvalue()


@pytest.mark.skipif(not CEDAR_TESTS.is_dir(), reason="needs ../shared/data/cedar/tests (Cedar's integration tests)")
def test_cda_policy_test_takes_one_test_file_as_its_job_does(tmp_path: Path) -> None:
    """One operation, one meaning: the CLI takes a single test file, as a ``cedar-test`` job does,
    with the same summary (a job's file is a file: a manifest refuses a folder)."""
    first = sorted(CEDAR_TESTS.rglob("*.json"))[0]
    out = io.StringIO()
    assert main(["policy", "test", str(first), "--json"], stdout=out, stderr=io.StringIO()) == 0
    one = json.loads(out.getvalue())
    assert one["total"] == one["agreed"] > 0 and {r["file"] for r in one["results"]} == {str(first)}
    manifest = tmp_path / "m.toml"
    manifest.write_text(f'[[job]]\nkind = "cedar-test"\nfile = "{first}"\n', encoding="utf-8")
    err = io.StringIO()
    assert main(["jobs", "run", str(manifest)], stdout=io.StringIO(), stderr=err) == 0, err.getvalue()
    (line,) = (tmp_path / "m.results" / "results.jsonl").read_text("utf-8").splitlines()
    assert json.loads(line)["result"] == one


def test_a_policy_analysis_job_takes_the_cli_s_options_with_the_same_checks(tmp_path: Path) -> None:
    """``--explain``, ``--repair``, ``--backend`` and ``--timeout`` are parameters of
    ``policy.analyze`` now: a job asks them too, and a bad one is refused by the same check."""
    cedar = ROOT / "examples" / "cedar"
    manifest = tmp_path / "m.toml"
    job = ('[[job]]\nkind = "policy-analysis"\nfile = "{c}/old.cedar"\n'
           'params = {{ analysis = "implies", other = "{c}/new.cedar", schema = "{c}/schema.cedarschema", {extra} }}\n')
    manifest.write_text(job.format(c=cedar, extra="explain = true, timeout = 30"), encoding="utf-8")
    assert main(["jobs", "run", str(manifest)], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    (line,) = (tmp_path / "m.results" / "results.jsonl").read_text("utf-8").splitlines()
    (env,) = json.loads(line)["result"]["environments"]
    assert env["status"] == "holds" and env["stands_on"] == ["A:policy0", "A:policy1", "B:policy0", "B:policy2"]
    for bad, named in (('timeout = -1', "timeout"), ('backend = "cvc5"', "backend"), ('repair = "yes"', "repair")):
        manifest.write_text(job.format(c=cedar, extra=bad), encoding="utf-8")
        err = io.StringIO()
        assert main(["jobs", "run", str(manifest)], stdout=io.StringIO(), stderr=err) == 2
        assert f"params.{named}" in err.getvalue() and "Traceback" not in err.getvalue(), err.getvalue()
