"""``cda schema [--check] FOLDER``: write the JSON schemas of the contracts, or check them.

Exit codes follow the CLI: 0 the folder is (now) current, 1 ``--check`` found stale, missing or
extra files (listed on stderr, one per line, so CI shows what to regenerate), 2 the folder
could not be read or written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from cda.contracts.schema import schema_diff, write_schemas

__all__ = ["main_schema"]

EXIT_OK, EXIT_STALE, EXIT_BAD_INPUT = 0, 1, 2


def main_schema(folder: Path, check: bool = False, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Write (or with ``check``, compare) one ``<Name>.schema.json`` per contract in ``folder``."""
    stream, errors = out or sys.stdout, err or sys.stderr
    try:
        if check:
            problems = schema_diff(folder)
            if problems:
                for name, what in problems.items():
                    print(f"{what}: {folder / name}", file=errors)
                print(f"cda: {len(problems)} schema file(s) out of date; run 'cda schema {folder}'", file=errors)
                return EXIT_STALE
            print(f"{folder}: schemas are current", file=stream)
            return EXIT_OK
        paths = write_schemas(folder)
    except OSError as exc:
        print(f"cda: error: {folder}: {exc.strerror or exc}", file=errors)
        return EXIT_BAD_INPUT
    print(f"wrote {len(paths)} schemas to {folder}", file=stream)
    return EXIT_OK
