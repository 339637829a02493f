"""``cda bench folio FILE.jsonl``: the FOLIO benchmark (first-order examples with gold logic,
:mod:`cda.fol.folio`) from the command line.

Exit codes: 0 when every miss is a gold defect, 1 when the engine missed (unknown or wrong),
2 when the file cannot be read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from cda.errors import CDAError
from cda.fol.folio import render_report, run_bench

__all__ = ["main_bench"]


def main_bench(
    path: Path | str, as_json: bool = False, out: TextIO | None = None, timeout: float = 10.0, *, err: TextIO | None = None
) -> int:
    """Run the benchmark and print it; exit 0 when every miss is a gold defect, 1 when the
    engine missed (unknown or wrong), 2 when the file cannot be read."""
    stream = out or sys.stdout
    try:
        report = run_bench(path, timeout)
    except CDAError as exc:
        print(exc.render(), file=err or sys.stderr)
        return 2
    if as_json:
        stream.write(json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        stream.write(render_report(report))
    return 0 if report.engine_errors == 0 else 1
