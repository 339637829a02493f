"""``cda schema [--check] FOLDER``: write the JSON schemas of the contracts, or check them.

Exit codes follow the CLI: 0 the folder is (now) current, 1 ``--check`` found stale, missing or
extra files (listed on stderr, one per line, so CI shows what to regenerate), 2 the folder
could not be read or written.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from cda.contracts.schema import schema_diff, write_schemas
from cda.errors import CDAError

__all__ = ["main_schema"]

EXIT_OK, EXIT_STALE, EXIT_BAD_INPUT = 0, 1, 2


def main_schema(folder: Path, check: bool = False, out: TextIO | None = None, err: TextIO | None = None,
                as_json: bool = False) -> int:
    """Write (or with ``check``, compare) one ``<Name>.schema.json`` per contract in ``folder``;
    ``as_json``: one object, ``{"folder", "check", "current", "problems": {file: stale|missing|extra},
    "written"}``."""
    stream, errors = out or sys.stdout, err or sys.stderr
    if not as_json:  # the folder's name is the user's text: shown with its controls escaped
        from cda.cli.terminal import escaped

        stream, errors = escaped(stream), escaped(errors)
    try:
        if check:
            if folder.exists() and not folder.is_dir():  # a missing folder: every schema is missing (exit 1)
                print(f"cda: error: {folder}: not a folder", file=errors)
                return EXIT_BAD_INPUT
            problems = schema_diff(folder)
            if as_json:
                stream.write(json.dumps({"folder": str(folder), "check": True, "current": not problems,
                                         "problems": dict(sorted(problems.items())), "written": 0}) + "\n")
                return EXIT_STALE if problems else EXIT_OK
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
    except CDAError as exc:  # a file there CDA did not write: refused, nothing written
        print(f"cda: error: {exc}", file=errors)
        return EXIT_BAD_INPUT
    if as_json:
        stream.write(json.dumps({"folder": str(folder), "check": False, "current": True, "problems": {},
                                 "written": len(paths)}) + "\n")
    else:
        print(f"wrote {len(paths)} schemas to {folder}", file=stream)
    return EXIT_OK
