"""One error hierarchy for CDA.

Every error that a user can cause descends from :class:`CDAError`, and each also inherits
the builtin that fits (``ValueError``, ``TimeoutError``), so callers can catch either.
Third-party errors (lark, pint, z3, clingo) are translated where they enter.
"""

from __future__ import annotations

from cda.terminal_text import for_terminal

__all__ = [
    "innermost",
    "CDAError",
    "DSLError",
    "DSLSyntaxError",
    "DSLTypeError",
    "EmptyProblem",
    "UnitError",
    "OptionError",
    "ProblemError",
    "SigningError",
    "BackendUnsupported",
    "BackendUnavailable",
    "BudgetExceeded",
    "EvaluatorDisagreement",
    "KenError",
    "MissingExtra",
    "AccessDenied",
    "cut_quotes",
]


class CDAError(Exception):
    """Root of every error CDA raises on purpose."""

    def render(self) -> str:
        """How the CLI prints it; mistakes located in DSL text print like a compiler. What the
        message quotes from an input is shown with its control characters escaped
        (:func:`~cda.terminal_text.for_terminal`)."""
        return for_terminal(f"cda: error: {self}")

    def as_dict(self, file: str | None = None) -> dict[str, object]:
        """The mistake as the JSON object ``--json`` prints on stdout: ``file``, ``line``,
        ``column`` (null when it has no place), ``kind``, ``message``, ``expected`` tokens."""
        return {"file": file, "line": None, "column": None, "kind": "error", "message": str(self), "expected": []}


ECHO_WIDTH = 80
"""The most characters of the offending line an error echoes on each side of the caret: a
2 MB line is shown as the part around the spot, with ``…`` where it was cut."""


def _clipped(line: str, at: int) -> tuple[str, int]:
    """``line`` cut to :data:`ECHO_WIDTH` characters either side of index ``at``, and where ``at``
    is in what is kept (the caret goes under the same character).

    >>> _clipped("x" * 1000 + "!" + "y" * 1000, 1000)[0][78:86]
    'xxx!yyyy'
    >>> line, at = _clipped("x" * 1000 + "!" + "y" * 1000, 1000); line[at], len(line)
    ('!', 162)
    """
    at = max(0, min(at, len(line)))
    start, end = max(0, at - ECHO_WIDTH), min(len(line), at + ECHO_WIDTH)
    head = "…" if start > 0 else ""
    tail = "…" if end < len(line) else ""
    return head + line[start:end] + tail, at - start + len(head)


QUOTE_WIDTH = 60
"""The most characters of a quoted token a DSL error's message keeps: a 20,000-character name
in ``unexpected '…'`` is shown as its first :data:`QUOTE_WIDTH`, ``…`` and its length."""


def cut_quotes(message: str) -> str:
    """``message`` with each quoted part (``'…'``) longer than twice :data:`QUOTE_WIDTH` cut to its
    start, ``…`` and how long it was; line, column and what was expected are elsewhere, exact.
    Every door shows the message so cut: the CLI's text, ``--json``, the ToolBus and MCP.

    >>> cut_quotes("unexpected '" + "x" * 20000 + "'; expected a name")[-53:]
    "xxx…' (a token of 20,000 characters); expected a name"
    >>> cut_quotes("unexpected 'b'; expected ')'")
    "unexpected 'b'; expected ')'"
    """
    if len(message) <= 2 * QUOTE_WIDTH + 2:  # nothing quoted can be too long
        return message
    parts = message.split("'")
    out = parts[0]
    for k in range(1, len(parts), 2):
        inner = parts[k]
        if k + 1 >= len(parts):  # an opening quote never closed: left as it is
            out += "'" + inner
            break
        note = ""
        if len(inner) > 2 * QUOTE_WIDTH:
            inner, note = inner[:QUOTE_WIDTH] + "…", f" (a token of {len(inner):,} characters)"
        out += "'" + inner + "'" + note + parts[k + 1]
    return out


class DSLError(CDAError, ValueError):
    """A mistake in DSL text, located at ``line``/``column`` (1-based) when known."""

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        source_line: str | None = None,
        filename: str | None = None,
        expected: tuple[str, ...] = (),
    ) -> None:
        self.message = cut_quotes(message)  # a long token quoted is cut to its start and length
        self.expected = expected  # what the grammar accepted at the spot, in words (syntax errors)
        self.line = line
        self.column = column
        self.source_line = source_line
        self.filename = filename
        super().__init__(self.render())

    @property
    def kind(self) -> str:
        return "error"

    def render(self) -> str:
        """The message as a compiler prints it: ``file:line:col: error: msg`` plus a caret."""
        where = self.filename or "<input>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        text = for_terminal(f"{where}: {self.kind}: {self.message}")
        if self.source_line is not None and self.column is not None:
            line, at = _clipped(self.source_line.rstrip("\n"), self.column - 1)
            # the quoted line with its controls escaped (a newline too: it is one line); the lead is
            # built from the escaped part before the spot, tabs kept, so the caret lands under it
            shown, before = for_terminal(line, keep="\t"), for_terminal(line[:at], keep="\t")
            lead = "".join("\t" if c == "\t" else " " for c in before)
            text += "\n    " + shown + "\n    " + lead + "^"
        return text

    def as_dict(self, file: str | None = None) -> dict[str, object]:
        return {"file": self.filename or file, "line": self.line, "column": self.column, "kind": self.kind,
                "message": self.message, "expected": list(self.expected)}

    def with_filename(self, filename: str) -> DSLError:
        self.filename = filename
        self.args = (self.render(),)
        return self

    def in_file(self, filename: str) -> DSLError:
        """This error as one of the file ``filename`` the user gave, when it names no file yet: a
        message that begins with the name (``e.json[3].uid: …``, as a JSON reader locates its
        values) loses it to the prefix (``e.json: error: [3].uid: …``), never ``<input>``."""
        if self.filename is None:
            rest = self.message.removeprefix(filename)
            self.message = rest.removeprefix(": ") if rest != self.message else self.message
            self.with_filename(filename)
        return self


class DSLSyntaxError(DSLError):
    """The text does not follow the grammar; says what was expected at the spot."""

    @property
    def kind(self) -> str:
        return "syntax error"


class DSLTypeError(DSLError):
    """Well-formed text that means nothing: unknown name, wrong arity, value outside its domain."""

    @property
    def kind(self) -> str:
        return "type error"


class EmptyProblem(DSLTypeError):
    """A problem with no statement at all (docs/dsl.md, "Empty input"). Nothing in it is mistyped,
    so it is said as a plain ``error``, with what to write; it stays a :class:`DSLTypeError` for
    callers that catch that (an answer to nothing is refused where meanings are checked)."""

    @property
    def kind(self) -> str:
        return "error"


class UnitError(DSLTypeError):
    """Two quantities whose units cannot be compared; the message names both units."""

    @property
    def kind(self) -> str:
        return "unit error"


class OptionError(CDAError, ValueError):
    """An option of a run outside what it can be: a negative timeout, a seed no solver takes."""


class ProblemError(CDAError, ValueError):
    """A problem built with :mod:`cda.ir` that the engine cannot take: a name used twice, an atom
    or numeric variable no declaration names, a weight that is not an exact positive number."""


class SigningError(CDAError, ValueError):
    """The signing key cannot be made or read, or a signed head file is not one."""


class BackendUnsupported(CDAError, ValueError):
    """A backend cannot encode a construct; names the construct and a backend that can."""


class BackendUnavailable(CDAError, RuntimeError):
    """A backend's library is not installed."""


class MissingExtra(CDAError, ImportError):
    """A command or function needs an optional part of CDA (an extra of ``pyproject.toml``) that
    is not installed; the message names the extra and the ``pip install`` that adds it."""


class BudgetExceeded(CDAError, TimeoutError):
    """A time or size budget ran out before an answer was complete."""


class EvaluatorDisagreement(CDAError, AssertionError):
    """A solver returned a model that the independent evaluator rejects: a bug, never output."""


class KenError(CDAError, ValueError):
    """A knowledge-graph file could not be read, or a query broke the safe query set."""


class AccessDenied(CDAError, PermissionError):
    """A call reached for something its caller may not have: a file outside the allowed roots, user
    code, network egress above the cap, an approval it cannot give (docs/service.md, "Who may do
    what"). The message says what was refused and never whether a named file exists."""

    def __init__(self, message: str, *, need: str = "files", path: list[str | int] | None = None,
                 file: str | None = None) -> None:
        super().__init__(message)
        self.need = need
        self.path = path or []
        self.file = file  # the file refused, as the reader was given it (a door names it, not another input)

    def as_dict(self, file: str | None = None) -> dict[str, object]:
        return {**super().as_dict(file), "file": self.file or file}


def innermost(exc: BaseException) -> BaseException:
    """The one failure inside exception groups that each hold one: what anyio's task groups
    (the MCP SDK's sessions) wrap on the way out, so a message names it, never "unhandled errors
    in a TaskGroup"."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
