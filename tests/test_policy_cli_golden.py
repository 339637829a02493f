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
