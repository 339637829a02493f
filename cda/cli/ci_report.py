"""Reports of ``cda solve``/``cda check`` over several files, in the formats CI reads.

``--format text`` (the table, one block per file), ``json`` (one object; for one file the
result itself, as ``--json`` always printed), ``jsonl`` (one compact object per file, in the
order given) and ``junit`` (JUnit XML: one ``<testcase>`` per goal and per ``expect`` of each
file, so a CI server lists them like unit tests). A file that cannot be read or checked is an
error object in every JSON form — ``file``, ``line``, ``column``, ``kind``, ``message`` and the
``expected`` tokens — never a traceback and never an empty stdout.

The exit code of several files is the worst of theirs: bad input (2) over unknown (3) over a
failed goal (1) over success (0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cda.contracts.json_numbers import exact_dumps  # costs as their exact digits (docs/dsl.md)
from cda.errors import CDAError
from cda.terminal_text import for_terminal

__all__ = ["Case", "Outcome", "error_object", "worst_exit_code", "render_json", "render_jsonl", "render_junit",
           "FORMATS"]

FORMATS = ("text", "json", "jsonl", "junit")

_SEVERITY = {0: 0, 1: 1, 3: 2, 2: 3}  # 2 (bad input) is the worst, then 3 (unknown), then 1


@dataclass
class Case:
    """One JUnit test case: a goal, an expectation, or the file as a whole."""

    name: str
    failure: str | None = None  # what failed, one line (the message attribute)
    detail: str = ""  # the body of <failure>/<error>
    error: bool = False  # an error (bad input, unknown) rather than a failure


@dataclass
class Outcome:
    """What one file gave: its exit code and either its answer (``data``, ``text``) or ``error``."""

    file: str
    code: int
    data: dict[str, Any] | None = None
    text: str = ""
    error: dict[str, Any] | None = None
    seconds: float = 0.0
    cases: list[Case] = field(default_factory=list)


def error_object(exc: CDAError, file: str) -> dict[str, Any]:
    """The JSON object of an input mistake: where (``line``/``column`` are null when the mistake
    has no place, like a missing file), what kind, the message, and what the grammar expected.

    >>> from cda.errors import DSLSyntaxError
    >>> error_object(DSLSyntaxError("unexpected ')'", line=2, column=5, expected=("a name",)), "x.cda")["expected"]
    ['a name']
    """
    from cda.terminal_text import name_text

    found = exc.as_dict(file)
    named = found.get("file")
    if isinstance(named, str):  # a name that is not UTF-8, with its bytes escaped: JSON is text
        found["file"] = name_text(named)
    return found


def worst_exit_code(codes: Sequence[int]) -> int:
    """The exit code of several files: the worst of ``codes``.

    >>> worst_exit_code([0, 1, 3]), worst_exit_code([3, 2, 0]), worst_exit_code([])
    (3, 2, 0)
    """
    return max(codes, key=lambda c: _SEVERITY.get(c, 3), default=0)


def _entry(o: Outcome) -> dict[str, Any]:
    from cda.terminal_text import name_text

    entry: dict[str, Any] = {"file": name_text(o.file), "exit_code": o.code}
    if o.error is not None:
        entry["error"] = o.error
    else:
        entry["result"] = o.data
    return entry


def render_json(outcomes: Sequence[Outcome]) -> str:
    """One file: its result object (or its error object); several: ``{"exit_code", "files"}``."""
    if len(outcomes) == 1:
        only = outcomes[0]
        return exact_dumps(only.error if only.error is not None else only.data, indent=2, ensure_ascii=False) + "\n"
    whole = {"exit_code": worst_exit_code([o.code for o in outcomes]), "files": [_entry(o) for o in outcomes]}
    return exact_dumps(whole, indent=2, ensure_ascii=False) + "\n"


def render_jsonl(outcomes: Sequence[Outcome]) -> str:
    """One compact JSON object per file, one per line."""
    return "".join(exact_dumps(_entry(o), ensure_ascii=False, separators=(",", ":")) + "\n" for o in outcomes)


def render_junit(outcomes: Sequence[Outcome], suite: str) -> str:
    """JUnit XML: one ``<testsuite>`` (``suite``) with a ``<testcase>`` per case of every file
    (``classname`` is the file). The ``time`` attributes are the only bytes that vary between runs.

    XML 1.0 cannot hold most C0 controls even as character references, and ElementTree writes them
    raw (a report no CI parser reads): every text and attribute from the input passes
    :func:`~cda.terminal_text.for_terminal` first, which shows them as visible escapes (``\\x01``)."""
    cases = [(o, c) for o in outcomes for c in o.cases]
    failures = sum(1 for _, c in cases if c.failure is not None and not c.error)
    errors = sum(1 for _, c in cases if c.failure is not None and c.error)
    total = sum(o.seconds for o in outcomes)
    import xml.etree.ElementTree as ET  # here: only a JUnit report needs it (start-up, benchmarks/bench_prove.py)

    def xml(text: str, keep: str = "") -> str:
        return for_terminal(text, keep)

    root = ET.Element("testsuites")
    ts = ET.SubElement(root, "testsuite", name=xml(suite), tests=str(len(cases)), failures=str(failures),
                       errors=str(errors), skipped="0", time=f"{total:.3f}")
    for o in outcomes:
        share = o.seconds / max(1, len(o.cases))
        for c in o.cases:
            tc = ET.SubElement(ts, "testcase", classname=xml(o.file), name=xml(c.name), time=f"{share:.3f}")
            if c.failure is not None:
                tag = ET.SubElement(tc, "error" if c.error else "failure", message=xml(c.failure),
                                    type="error" if c.error else "failure")
                tag.text = xml(c.detail or c.failure, keep="\n\t")
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
