"""FOLIO with gold logic: accuracy and time per example, written into docs/benchmarks.md.

    python benchmarks/bench_folio.py [FILE.jsonl] [--write]

Runs every example of the FOLIO dev file (default ``../shared/data/folio/folio-v0.0-validation-dev.jsonl``)
twice: once with z3 alone (the time a user of ``cda.fol.prove.prove`` sees) and once as
``cda bench folio`` does, with the clingo cross-check. The section between the markers
``<!-- bench_folio:start -->`` and ``<!-- bench_folio:end -->`` of docs/benchmarks.md is replaced
(created if missing); the rest of the file belongs to other benchmarks and is left alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
from collections import Counter
from datetime import date
from pathlib import Path

import clingo
import z3

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cda.fol.folio import LABELS, BenchReport, run_bench  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_section, when run as a file
from doc_section import write_section  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "data" / "folio" / "folio-v0.0-validation-dev.jsonl"
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_folio:start -->", "<!-- bench_folio:end -->"

PUBLISHED = [
    ("Logic-LM, GPT-4 (Pan et al., 2023)", "natural language, translated by the model", "78.9%"),
    ("LINC, GPT-4 (Olausson et al., 2023)", "natural language, translated by the model", "72.5%"),
    ("a prover on the gold logic (as reported with those results)", "gold FOL", "≈ 89%"),
]


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms median, {max(values):.0f} ms max"


def section(solo: BenchReport, checked: BenchReport) -> str:
    """The markdown section, markers included."""
    r = checked
    solo_ms = [x.seconds * 1000 for x in solo.results]
    checked_ms = [x.seconds * 1000 for x in checked.results]
    defects = [x for x in r.results if x.outcome in ("malformed gold logic", "gold label not entailed", "inconsistent gold premises")]
    warned = [x for x in r.results if x.correct and x.defects]
    sound = r.total - r.gold_defects
    lines = [
        START,
        "## FOLIO v0.0 validation, gold logic (`benchmarks/bench_folio.py`)",
        "",
        f"Measured {date.today().isoformat()} on {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"z3 {z3.get_version_string()}, clingo {clingo.__version__}; file `{Path(r.path).name}` "
        f"({r.total} examples, a subset by story of the FOLIO v0.0 validation set).",
        "",
        "| system | reads | accuracy |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {reads} | {acc} (published, FOLIO v0.0 validation) |" for name, reads, acc in PUBLISHED]
    lines.append(f"| **CDA** `fol_prove` | gold FOL | **{r.accuracy:.1%}** ({r.correct}/{r.total}) on the dev subset |")
    lines += [
        "",
        f"- Examples whose gold logic gives the gold label: {sound}; answered correctly: "
        f"{r.correct} ({r.accuracy_on_sound_gold:.1%}). Engine errors: {r.engine_errors} "
        f"(unknown {r.outcomes['unknown']}, wrong {r.outcomes['wrong']}).",
        f"- Gold defects (misses explained by the data, each certified): {r.gold_defects}"
        + (": " + "; ".join(f"#{x.index} {x.outcome} — {x.reason.splitlines()[0].split(';')[0]}" for x in defects) if defects else "")
        + ".",
    ]
    if warned:
        lines.append(
            f"- Answered correctly despite a defect of the example: {', '.join(f'#{x.index}' for x in warned)} "
            f"({warned[0].defects[0]})."
        )
    una = r.unique_names
    changed = "; ".join(
        f"#{c.index} gold {c.gold}: {c.standard or '—'} → {c.unique_names or '—'}" for c in una.changed
    )
    lines.append(
        f"- Unique-names reading (`cda prove --unique-names`: distinct constants denote distinct objects): "
        f"{una.correct}/{r.total} correct ({una.accuracy:.1%}); answers it changes: {changed or 'none'} "
        "(only a problem with equality can change: without `=`, constants can always name distinct copies)."
    )
    lines += [
        f"- Time per example (parse, check, two entailment checks, minimal premise set, worlds): "
        f"z3 alone {_ms(solo_ms)}; with the clingo cross-check (Herbrand grounding) {_ms(checked_ms)}.",
        f"- Fragments: {', '.join(f'{k} {v}' for k, v in sorted(Counter(str(x.fragment) for x in r.results).items()))}.",
        "",
        "Confusion (rows gold, columns predicted):",
        "",
        "| gold \\ predicted | " + " | ".join([*LABELS, "none"]) + " |",
        "|---|" + "---|" * (len(LABELS) + 1),
    ]
    for gold, row in r.confusion.items():
        lines.append(f"| {gold} | " + " | ".join(str(row[c]) for c in [*LABELS, "none"]) + " |")
    lines += [
        "",
        "The published systems translate the English themselves, so their errors include translation; "
        "CDA reads the gold logic, so its misses are the engine's or the data's. The published figures "
        "are for the whole validation set, ours for the dev subset: compare with care.",
        END,
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md (else print only)")
    args = parser.parse_args(argv)
    if not args.file.exists():
        print(f"FOLIO data not found at {args.file} (see ../shared/data/README.md)", file=sys.stderr)
        return 2
    run_bench(args.file, cross_check=False)  # warm-up: imports, grammar, z3 and clingo start-up
    solo = run_bench(args.file, cross_check=False)
    checked = run_bench(args.file, cross_check=True)
    text = section(solo, checked)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
        print(f"\nwritten to {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
