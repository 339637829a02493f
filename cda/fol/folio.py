"""``cda bench folio FILE.jsonl``: prove every FOLIO example from its gold logic.

Each line of a FOLIO file holds ``premises-FOL`` (a list of formulas), ``conclusion-FOL`` and a
gold ``label`` (True / False / Uncertain). True means the premises entail the conclusion
(*supported*), False that they entail its negation (*refuted*), Uncertain neither.

Every example gets one outcome:

* ``correct`` — the engine's answer is the gold label;
* ``malformed gold logic`` — a premise or the conclusion does not parse or type-check (the
  reason is the error, with its position), or a defect of the example itself (a premise count
  that differs between text and logic) comes with a wrong answer;
* ``gold label not entailed`` — the gold logic is well formed but does not give the gold label,
  and the engine's answer is certified: a counter-world re-checked by the independent
  evaluator, or a proof that a second backend (clingo over the Herbrand universe) confirms;
* ``inconsistent gold premises`` — the premises contradict each other;
* ``unknown`` — the solver could not decide in time (no answer is given);
* ``wrong`` — a miss with no certificate: an engine error.

The first four are defects of the data, counted apart from engine errors.

Every example is scored twice: under the standard reading (constants may denote one object) and
under the unique-names reading (distinct constants denote distinct objects, ``cda prove
--unique-names``); the report gives the second reading's score beside the first and lists the
examples whose answer it changes. Only a problem with equality can change: without ``=``, any
world can be pulled apart so its constants name distinct copies of their elements.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from cda.contracts.deadline import current_token
from cda.contracts.fol import ProofResult
from cda.errors import CDAError, DSLError
from cda.files import parse_json, read_text
from cda.fol.parse import build_problem
from cda.fol.prove import checked_timeout, prove

__all__ = ["ExampleResult", "BenchReport", "run_bench", "run_example", "render_report", "LABELS"]

LABELS = ("True", "False", "Uncertain")
_STATUS_LABEL = {"supported": "True", "refuted": "False"}
GOLD_DEFECTS = ("malformed gold logic", "gold label not entailed", "inconsistent gold premises")


@dataclass
class ExampleResult:
    index: int
    gold: str
    predicted: str | None
    correct: bool
    outcome: str
    reason: str
    defects: list[str] = field(default_factory=list)
    fragment: str | None = None
    premises_used: list[str] = field(default_factory=list)
    cross_check: str | None = None
    seconds: float = 0.0


@dataclass
class ReadingChange:
    """An example whose answer differs between the two readings."""

    index: int
    gold: str
    standard: str | None
    unique_names: str | None
    outcome: str  # the outcome under the unique-names reading


@dataclass
class UniqueNamesScore:
    """The unique-names reading beside the standard one."""

    correct: int
    accuracy: float
    outcomes: dict[str, int]
    changed: list[ReadingChange]


@dataclass
class BenchReport:
    path: str
    total: int
    correct: int
    accuracy: float
    outcomes: dict[str, int]
    gold_defects: int
    engine_errors: int
    accuracy_on_sound_gold: float
    confusion: dict[str, dict[str, int]]
    median_ms: float
    results: list[ExampleResult]
    unique_names: UniqueNamesScore
    interrupted: str | None = None  # a Ctrl-C stopped it: the scores are over the examples done ("total")
    examples: int = 0  # the examples in the file

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for r in data["results"]:
            r["seconds"] = round(r["seconds"], 4)
        data["median_ms"] = round(self.median_ms, 2)
        return data


def _describe_world(result: ProofResult, holds: bool) -> str:
    for w in result.worlds:
        if w.claim_holds == holds:
            atoms = ", ".join(w.true_atoms[:8]) + (", …" if len(w.true_atoms) > 8 else "")
            aliases = "".join(f", {c} = {e}" for c, e in w.aliases.items())
            return f"domain {{{', '.join(w.domain)}}}{aliases}, true: {atoms or '(nothing)'}"
    return ""


def _not_entailed(gold: str, predicted: str, result: ProofResult) -> str:
    if gold == "True":
        what = "the premises do not entail the conclusion"
    elif gold == "False":
        what = "the premises do not entail the negation of the conclusion"
    else:
        what = "the premises " + ("entail the conclusion" if predicted == "True" else "entail its negation")
    if predicted == "Uncertain":
        side = gold == "False"  # gold False needs no world where the conclusion holds, and vice versa
        evidence = f"counter-world (re-checked): {_describe_world(result, side)}"
    else:
        evidence = f"proof from {', '.join(result.premises_used) or 'no premises'}"
    return f"gold label {gold} but {what}; {evidence}"


def run_example(
    index: int, row: dict[str, Any], timeout: float = 10.0, cross_check: bool = True, *, unique_names: bool = False
) -> ExampleResult:
    """Prove one FOLIO example and classify the outcome against its gold label.

    With ``cross_check`` (the default) an answer that differs from the gold label counts as a
    gold defect only when it is certified; without it, only a re-checked world certifies."""
    gold = str(row.get("label"))
    defects: list[str] = []
    nl = row.get("premises")
    fol = row.get("premises-FOL")
    if gold not in LABELS:
        return ExampleResult(index, gold, None, False, "malformed gold logic",
                             f"label {gold!r}: a gold label is True, False or Uncertain")
    if not isinstance(fol, list) or not isinstance(row.get("conclusion-FOL"), str):
        return ExampleResult(index, gold, None, False, "malformed gold logic", "missing premises-FOL or conclusion-FOL")
    if isinstance(nl, list) and len(nl) != len(fol):
        defects.append(f"premise count mismatch: {len(nl)} premises in the text, {len(fol)} in the gold logic")
    start = time.perf_counter()
    try:
        problem = build_problem([str(p) for p in fol], [str(row["conclusion-FOL"])])
    except DSLError as exc:
        rendered = exc.render()
        return ExampleResult(
            index, gold, None, False, "malformed gold logic", rendered, defects + [rendered.splitlines()[0]],
            seconds=time.perf_counter() - start,
        )
    try:
        result = prove(problem, None, timeout, cross_check=cross_check, unique_names=unique_names)
    except CDAError as exc:  # an engine error (e.g. an evaluator disagreement): never a guess
        return ExampleResult(
            index, gold, None, False, "wrong", f"engine error: {exc}", defects, seconds=time.perf_counter() - start
        )
    done = ExampleResult(
        index, gold, None, False, "", "", defects, fragment=result.fragment, premises_used=result.premises_used,
        cross_check=result.cross_check, seconds=time.perf_counter() - start,
    )
    if result.conflict is not None:
        reason = f"the gold premises contradict each other (minimal conflict: {', '.join(result.conflict)})"
        return replace(done, outcome="inconsistent gold premises", reason=reason)
    if result.unknown:
        return replace(done, outcome="unknown", reason=result.reason)
    if result.cross_check == "disagree":
        clash = "; ".join(n for n in result.notes if n.startswith("BACKENDS DISAGREE"))
        return replace(done, outcome="wrong", reason=f"engine error: {clash}")
    predicted = _STATUS_LABEL.get(result.status, "Uncertain")
    done.predicted = predicted
    if predicted == gold:
        used = f" (from {', '.join(result.premises_used)})" if result.premises_used else ""
        return replace(done, correct=True, outcome="correct", reason=result.reason + used)
    if defects:
        return replace(done, outcome="malformed gold logic", reason="; ".join(defects) + f"; answered {predicted}")
    if len(result.worlds) == 2 or result.cross_check == "agree":  # re-checked worlds, or two backends
        return replace(done, outcome="gold label not entailed", reason=_not_entailed(gold, predicted, result))
    why = f"answered {predicted}, gold {gold}, and no second backend confirms the answer ({result.cross_check})"
    return replace(done, outcome="wrong", reason=why)


def read_examples(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(index, example)`` for every non-blank line; ``index`` is the 0-based line number."""
    lines = read_text(path).splitlines()
    rows = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        row = parse_json(line, str(path), line=index + 1)
        if not isinstance(row, dict):
            raise CDAError(f"{path}:{index + 1}: not a JSON object")
        rows.append((index, row))
    return rows


def run_bench(path: Path | str, timeout: float = 10.0, cross_check: bool = True) -> BenchReport:
    """Run every example of a FOLIO ``.jsonl`` file (``index`` is the 0-based line number)."""
    path = Path(path)
    checked_timeout(timeout)
    rows = read_examples(path)
    if not rows:
        raise CDAError(f"{path}: no FOLIO examples to score (the file is empty or holds only blank lines)")
    token = current_token()  # a Ctrl-C (cda.cli.interrupts): score what was done, no example answered "interrupted"

    results: list[ExampleResult] = []
    unique: list[ExampleResult] = []  # the unique-names reading of the same examples
    for i, row in rows:
        try:
            standard = run_example(i, row, timeout, cross_check)
            distinct = run_example(i, row, timeout, cross_check, unique_names=True)
        except Exception:  # noqa: BLE001 - a stop while the example's formulas were read: raised
            if token is not None and token.cancelled:  # there (out of time), it ends the run like one in a
                break  # solver call; any other error goes on up
            raise
        if token is not None and token.cancelled:  # stopped during it: no answer, not a miss
            break
        results.append(standard)
        unique.append(distinct)
    if not results:
        raise CDAError(f"{path}: interrupted before the first example was scored")
    outcomes = _outcomes(results)
    changed = [
        ReadingChange(a.index, a.gold, a.predicted, b.predicted, b.outcome)
        for a, b in zip(results, unique)
        if a.predicted != b.predicted
    ]
    unique_outcomes = _outcomes(unique)
    unique_score = UniqueNamesScore(
        unique_outcomes["correct"], round(unique_outcomes["correct"] / len(unique), 4), unique_outcomes, changed
    )
    correct = outcomes["correct"]
    gold_defects = sum(outcomes[k] for k in GOLD_DEFECTS)
    sound = len(results) - gold_defects
    columns = [*LABELS, "none"]
    confusion = {g: {p: 0 for p in columns} for g in LABELS}
    for r in results:
        if r.gold in confusion:
            confusion[r.gold][r.predicted or "none"] += 1
    times = [r.seconds * 1000 for r in results]
    return BenchReport(
        path=str(path), total=len(results), correct=correct,
        accuracy=round(correct / len(results), 4) if results else 0.0,
        outcomes=outcomes, gold_defects=gold_defects, engine_errors=outcomes["unknown"] + outcomes["wrong"],
        accuracy_on_sound_gold=round(correct / sound, 4) if sound else 0.0,
        confusion=confusion, median_ms=statistics.median(times) if times else 0.0, results=results,
        unique_names=unique_score, examples=len(rows),
        interrupted=token.reason if token is not None and token.cancelled else None,
    )


def _outcomes(results: list[ExampleResult]) -> dict[str, int]:
    counts = Counter(r.outcome for r in results)
    return {k: counts.get(k, 0) for k in ("correct", *GOLD_DEFECTS, "unknown", "wrong")}


def render_report(report: BenchReport) -> str:
    """The text the CLI prints: accuracy, the confusion matrix, then every miss with its reason."""
    out = [f"INTERRUPTED ({report.interrupted}): scored the first {report.total} of {report.examples} examples"] \
        if report.interrupted else []
    out += [
        f"FOLIO {report.path}: {report.correct}/{report.total} correct ({report.accuracy:.1%}), "
        f"median {report.median_ms:.0f} ms per example",
        f"gold defects: {report.gold_defects}; engine errors (unknown or wrong): {report.engine_errors}; "
        f"accuracy where the gold logic gives its label: {report.accuracy_on_sound_gold:.1%}",
        "",
        "confusion (rows gold, columns predicted):",
        f"  {'':<10}" + "".join(f"{c:>11}" for c in [*LABELS, "none"]),
    ]
    for gold, row in report.confusion.items():
        out.append(f"  {gold:<10}" + "".join(f"{row[c]:>11}" for c in [*LABELS, "none"]))
    out.append("")
    out.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in report.outcomes.items()))
    una = report.unique_names
    out.append(
        f"unique-names reading (distinct constants denote distinct objects): {una.correct}/{report.total} correct "
        f"({una.accuracy:.1%}); answers changed: {len(una.changed) or 'none'}"
    )
    for c in una.changed:
        out.append(
            f"  #{c.index} gold {c.gold}: standard {c.standard or '—'}, unique names {c.unique_names or '—'} [{c.outcome}]"
        )
    misses = [r for r in report.results if not r.correct]
    if misses:
        out.append("")
        out.append("misses:")
        for r in misses:
            first, *rest = r.reason.splitlines()
            out.append(f"  #{r.index} gold {r.gold}, predicted {r.predicted or '—'} [{r.outcome}]: {first}")
            out.extend(f"      {line}" for line in rest)
    warned = [r for r in report.results if r.correct and r.defects]
    if warned:
        out.append("")
        out.append("answered correctly despite a defect:")
        for r in warned:
            out.append(f"  #{r.index}: {'; '.join(r.defects)}")
    return "\n".join(out) + "\n"
