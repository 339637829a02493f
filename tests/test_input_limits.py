"""Inputs at the edges: huge literals, long Ken paths, empty input, reserved words.

Each was a traceback or a silent answer before (issue 12): an integer literal of more than
4,300 digits raised Python's ``ValueError`` from one reader and lark's ``VisitError`` from the
other; a weight of 1 followed by 309 zeros crashed z3's path with ``OverflowError``; a
300-character Ken path raised ``OSError``; ``domain D = {}`` and an empty file were answered
``sat``; docs/dsl.md's reserved words were not the grounder's. Now each is a ``CDAError``
subclass naming line and column, the same from both readers (tests/test_fastparse.py's
``same_as_lark``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import cda
from cda.encodings.ground import RESERVED, ground_problem
from cda.encodings.parse import parse_problem
from cda.errors import CDAError, DSLError, DSLSyntaxError, DSLTypeError, KenError
from cda.ken.loaders import load_ken
from tests.test_fastparse import same_as_lark

ROOT = Path(__file__).resolve().parent.parent
HUGE = "1" + "0" * 4400  # past Python's 4,300-digit limit on int(str)


def _refused(text: str, where: tuple[int, int], cls: type[DSLError] = DSLSyntaxError) -> DSLError:
    same_as_lark(text)  # both readers: the same tree or the same error
    with pytest.raises(cls) as info:
        cda.check(text)
    assert (info.value.line, info.value.column) == where, str(info.value)
    return info.value


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (f"metric m : s\nhard: value(metric:m) <= {HUGE}\n", (2, 26)),
        (f"metric m : s\nhard: value(metric:m) <= 0.{HUGE}\n", (2, 26)),
        (f"metric m : s\nhard: value(metric:m) <= 1e{HUGE}\n", (2, 26)),
        (f"hyp a\ngoal best_explanation top {HUGE}\n", (2, 27)),
        (f"hyp a, b\nhard: at_most({HUGE}, [a, b])\n", (2, 15)),
        (f"domain N = {{x, y}}\npred r(N, N)\nhard: exists path(x ->r-> y within {HUGE} hops)\n", (3, 36)),
        ("hyp a\nsoft: a weight 1" + "0" * 309 + "\n", (2, 16)),
        ("hyp a\nsoft: a weight 1" + "0" * 40 + "\n", (2, 16)),
    ],
    ids=["bound", "fraction", "exponent", "top", "cardinality", "hops", "weight-309-zeros", "weight-41-digits"],
)
def test_huge_literals_are_syntax_errors_at_the_number(text: str, where: tuple[int, int]) -> None:
    err = _refused(text, where)
    assert "out of range" in err.message
    assert len(err.message) < 200  # the number is abbreviated, not printed in full


def test_the_widest_literal_still_reads() -> None:
    # 40 digits and exponent 30 are read (exactly), one more is refused
    text = "hyp a\nsoft: a weight 1" + "0" * 39 + "\nsoft: not a weight 1e30\n"
    assert same_as_lark(text)
    r = cda.solve(text, backend="z3")
    assert r.hypotheses[0].assumed == ["a"]
    assert [h.cost for h in r.hypotheses] == [1e30, 1e39]


@pytest.mark.parametrize("backend", ["z3", "clingo"])
def test_a_huge_weight_from_python_is_a_clear_error(backend: str) -> None:
    for weight in (10**309, 10**5000, 1e300, float("inf")):
        with pytest.raises(DSLTypeError, match="weight must be a positive number") as info:
            cda.solve("hyp a", soft=[("a", weight)], backend=backend)
        assert info.value.filename == "soft#1"
    # the decimal a float prints as, exactly: 0.1 is 1/10, so 0.1 + 0.2 ties 0.3
    r = cda.solve("hyp a, b", hard=["a or b"], soft=[("not a", 0.1), ("not a", 0.2), ("not b", 0.3)], backend=backend)
    assert [h.assumed for h in r.hypotheses][:2] == [["a"], ["b"]]
    assert r.hypotheses[0].cost == r.hypotheses[1].cost


def test_a_ken_path_too_long_for_the_file_system(tmp_path: Path) -> None:
    name = "k" * 300 + ".json"
    text = f'hyp a\nken "{name}"\n'
    same_as_lark(text)
    with pytest.raises(DSLError) as info:
        cda.check(tmp_path / "p.cda" if (tmp_path / "p.cda").write_text(text) else text)
    assert (info.value.line, info.value.column) == (2, 5)
    assert "cannot read" in info.value.message and "too long" in info.value.message
    with pytest.raises(KenError, match="cannot read"):
        load_ken(tmp_path / name)


def test_an_empty_domain_is_a_type_error_at_its_name() -> None:
    err = _refused("domain D = {}\nhyp a\n", (1, 8), DSLTypeError)
    assert "domain D is empty" in err.message
    _refused("hyp a\ndomain Empty = {}\nhyp p(Empty)\n", (2, 8), DSLTypeError)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n   \n"])
def test_an_empty_problem_is_an_error(text: str) -> None:
    assert same_as_lark(text)
    with pytest.raises(DSLTypeError, match="the problem is empty") as info:
        cda.solve(text)
    assert (info.value.line, info.value.column) == (1, 1)
    with pytest.raises(DSLTypeError, match="the problem is empty"):
        cda.check(text)
    # clause strings from Python are a problem of their own
    assert cda.solve(text, hard=["true"]).status == "sat"


def test_an_empty_file_is_an_error_from_the_cli(tmp_path: Path) -> None:
    from io import StringIO

    from cda.cli.main import main

    path = tmp_path / "empty.cda"
    path.write_text("")
    out, err = StringIO(), StringIO()
    assert main(["solve", str(path)], stdout=out, stderr=err) == 2
    # not a "type error" (nothing in it is mistyped): the file, the fact, and what to write
    assert err.getvalue().startswith(f"{path}:1:1: error: the problem is empty: it has no statements")
    assert "Write at least one, e.g. 'hyp rain'" in err.getvalue() and out.getvalue() == ""


# ---- reserved words ------------------------------------------------------------------------------
def _documented_reserved() -> set[str]:
    docs = (ROOT / "docs" / "dsl.md").read_text(encoding="utf-8")
    paragraph = docs[docs.index("Reserved words") :].split("\n\n", 1)[0]
    listed = re.search(r"\): `([^`]*)`\.", paragraph.replace("\n", " "))
    assert listed is not None, paragraph
    return set(listed.group(1).split())


def test_the_documented_reserved_words_are_the_grounders() -> None:
    assert _documented_reserved() == set(RESERVED)
    # every keyword of the grammar is reserved but those the docs name as not reserved: all, use, and
    # the words that only follow `expect` (a metric named cost must stay possible)
    grammar = re.sub(r"//.*", "", (ROOT / "cda" / "encodings" / "grammar.lark").read_text(encoding="utf-8"))
    keywords = set(re.findall(r'"([a-z_]+)"', grammar))
    after_expect = {"status", "best", "cost", "in_every_core", "sat", "unsat", "unknown"}
    assert keywords - set(RESERVED) == {"all", "use"} | after_expect


@pytest.mark.parametrize("word", sorted(RESERVED))
def test_every_reserved_word_is_refused_as_a_name_by_both_readers(word: str) -> None:
    for text in (f"hyp {word}\n", f"domain {word} = {{x}}\n", f"domain D = {{{word}}}\n", f"metric {word} : s\n"):
        same_as_lark(text)
        outcomes = []
        for fast in (True, False):
            try:
                ground_problem(parse_problem(text, fast=fast))
                outcomes.append("accepted")
            except DSLError as err:
                outcomes.append(type(err).__name__)
        assert outcomes[0] == outcomes[1] != "accepted", (text, outcomes)


def test_the_words_left_free_are_accepted() -> None:
    for text in ("hyp use\n", "hyp all\n", "domain P = {x}\nhyp use(P)\nhard: use(provider:x)\n"):
        assert same_as_lark(text)
        assert isinstance(cda.check(text).abducibles, int)
    with pytest.raises(CDAError):
        cda.check("hyp hop\n")


def test_mistakes_inside_a_file_name_the_file_and_the_place(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 27: `goal best_explanation top 99999999999999999999`, a bad request file of `cda
    policy authorize` and a bad problem of `cda investigate start` were reported as `<input>`
    or with no place at all."""
    import io

    from cda.cli.main import main

    def err_of(*argv: str) -> tuple[int, str]:
        err = io.StringIO()
        return main(list(argv), stdout=io.StringIO(), stderr=err), err.getvalue()

    for goal, column in (("goal best_explanation top 99999999999999999999", 27),
                         ("goal minimal_explanations top 99999999999999999999", 31)):
        (tmp_path / "big.cda").write_text(f"hyp a\nhard: a\n{goal}\n")
        code, err = err_of("solve", str(tmp_path / "big.cda"))
        assert code == 2 and err.startswith(f"{tmp_path / 'big.cda'}:3:{column}: type error: top must be at most"), err
    cedar = Path(__file__).resolve().parent.parent / "examples" / "cedar"
    request = tmp_path / "request.json"
    for context, words in (('{"mfa": "yes", "hour": 10}', "context.mfa is not a Bool"),
                           ('{"mfa": true, "hour": 99999999999999999999999}', "request.context.hour")):
        request.write_text('{"principal": {"type": "User", "id": "ana"}, "action": {"type": "Action", "id": "read"}, '
                           f'"resource": {{"type": "Doc", "id": "plan"}}, "context": {context}}}')
        code, err = err_of("policy", "authorize", str(cedar / "old.cedar"), "--schema", str(cedar / "schema.cedarschema"),
                           "--entities", str(cedar / "entities.json"), "--request", str(request))
        assert code == 2 and str(request) in err and words in err and "<input>" not in err, err
    (tmp_path / "bad.cda").write_text("hyp a\nhard: a and\n")
    code, err = err_of("investigate", "start", str(tmp_path / "bad.cda"), "--db", str(tmp_path / "s.sqlite"))
    assert code == 2 and err.startswith(f"{tmp_path / 'bad.cda'}:2:12: syntax error"), err
