"""The hand-written FOL reader against the lark reader it stands in front of: the same tree,
positions included, on every FOLIO formula, the shipped examples and random formulas; and on
text that is not a formula, either the same tree or a hand-over to lark (never a different
answer, never an error of its own)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from cda.errors import DSLSyntaxError
from cda.fol.fastparse import MAX_LEVELS, Fallback, read_formula
from cda.fol.lark_reader import read_with_lark
from cda.fol.parse import parse_formula
from cda.fol.syntax import Formula

ROOT = Path(__file__).resolve().parent.parent
FOLIO = Path(os.environ.get("CDA_DATA") or ROOT.parent / "shared" / "data") / "folio" / "folio-v0.0-validation-dev.jsonl"


def _lark(text: str) -> Formula:
    return read_with_lark(text, text, None, 1, 1)


def _read_alike(text: str) -> bool:
    """``text`` read alike by both readers (True), or refused by lark and handed over by the fast
    one (False)."""
    try:
        _lark(text)
    except DSLSyntaxError:
        with pytest.raises(Fallback):  # what lark refuses, the fast reader never reads
            read_formula(text)
        return False
    return _agree(text)


def _agree(text: str) -> bool:
    """True when the fast reader read ``text`` (and built lark's tree); False when it handed over."""
    try:
        fast = read_formula(text)
    except Fallback:
        return False
    assert fast == _lark(text), text
    return True


@pytest.mark.skipif(not FOLIO.exists(), reason=f"FOLIO data not found at {FOLIO} (see ../shared/data/README.md)")
def test_every_folio_formula_is_read_as_lark_reads_it() -> None:
    read = 0
    for line in FOLIO.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        for text in [*row["premises-FOL"], row["conclusion-FOL"]]:
            read += _read_alike(text)
    assert read >= 550  # every well-formed one (FOLIO's dev subset has ~560 formulas)


_ATOMS = ["P(x)", "Q(x, y)", "R(a)", "Love(x, mary)", "f(x) = g(y, a)", "x != a", "p", "GrowthCompanies’Stocks(y42.3b)", "⊤",
          "false", "forallx", "Cat(tom)"]  # fmt: skip
_BINARY = ["∧", "&", "&&", "∨", "|", "||", "→", "->", "=>", "⇒", "↔", "<->", "⟷", "⇔", "<=>", "⊕", "^", "⊻"]
_QUANT = ["∀x", "∃y", "forall x", "exists z", "∀x y", "∀x, y", "∃x.", "∀x:", "∀x y z1"]


def _random_formula(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if depth == 0 or r < 0.25:
        return rng.choice(_ATOMS)
    if r < 0.45:
        return f"{rng.choice(['¬', '~', '!'])}{_random_formula(rng, depth - 1)}"
    if r < 0.6:
        return f"{rng.choice(_QUANT)} {_random_formula(rng, depth - 1)}"
    if r < 0.75:
        return f"({_random_formula(rng, depth - 1)})"
    ws = rng.choice([" ", "", "\n  ", "\t"])
    return f"{_random_formula(rng, depth - 1)}{ws}{rng.choice(_BINARY)}{ws}{_random_formula(rng, depth - 1)}"


def test_random_formulas_are_read_as_lark_reads_them() -> None:
    rng = random.Random(34)
    read = 0
    for _ in range(1500):
        text = " " * rng.randint(0, 3) + _random_formula(rng, rng.randint(1, 6))
        read += _read_alike(text)
    assert read >= 1200


def test_broken_text_is_handed_to_lark_or_read_alike() -> None:
    """Random cuts and insertions in formulas: wherever lark errs the fast reader hands over."""
    rng = random.Random(7)
    junk = ["(", ")", ",", "∀", "¬", "∧", "=", ".", ":", "x", "P(", "- ", "#", "\u00a0", "¬¬", "))"]
    for _ in range(1500):
        text = _random_formula(rng, 4)
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(junk) + text[at + rng.randint(0, 2):]
        _read_alike(text)


def test_deep_nesting_is_left_to_lark_which_refuses_it_by_name() -> None:
    shallow = "¬" * (MAX_LEVELS - 1) + "P(a)"
    assert _agree(shallow)
    deep = "¬" * 500 + "P(a)"
    with pytest.raises(Fallback):
        read_formula(deep)
    with pytest.raises(DSLSyntaxError, match="nested too deeply"):
        parse_formula(deep)


def test_a_syntax_error_still_names_what_lark_expected() -> None:
    with pytest.raises(DSLSyntaxError, match=r"1:7: syntax error: unexpected end of input; expected a name"):
        parse_formula("P(a) ∧ ")
