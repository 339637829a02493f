"""Text from inputs made safe to print on a terminal: the one function every human-facing line
built from user text passes through (docs/architecture.md, "What CDA prints").

A file, a job's name, a note written by a remote ToolBus caller may hold bytes a terminal obeys:
ESC starts a sequence that sets the window title or clears the screen, CR overwrites the line,
a C1 control (U+0080–U+009F) is a one-character ESC on some terminals, and the bidi overrides
(U+202A–U+202E, U+2066–U+2069, "Trojan Source") reorder what the reader sees; a lone surrogate
(a file name that was not UTF-8) cannot even be encoded for the screen, and U+FFFE/U+FFFF are no
characters. :func:`for_terminal` shows each of them as a Python-style escape (``\\x1b``,
``\\u202e``) and keeps only the layout characters the caller names (newline and tab by default).
What it leaves is also text XML 1.0 can hold, so the JUnit report uses the same function
(:mod:`cda.cli.ci_report`). The escape is per character, so the escaped text of a prefix is a
prefix of the escaped text: a caret under an escaped line is put under the same character by
escaping the part before it (:mod:`cda.errors`).

JSON output needs none of this (``json.dumps`` escapes every C0 control); text output always gets
it, on a terminal or not, so a log read later with ``cat`` or ``less -R`` is as safe as the screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # ``re`` loads on the first escape, not with ``import cda`` (cda.errors imports this module)
    import re

__all__ = ["UNSAFE", "for_terminal", "name_text"]

_BIDI = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))

UNSAFE: frozenset[str] = frozenset(
    chr(c) for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI, *range(0xD800, 0xE000), 0xFFFE, 0xFFFF))
"""Every character :func:`for_terminal` shows escaped unless the caller keeps it."""


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_FINDERS: dict[str, re.Pattern[str]] = {}


def _finder(keep: str) -> re.Pattern[str]:
    """The characters of :data:`UNSAFE` not in ``keep``, as one character class. A regular expression
    because its scan runs in C: a megabyte report with nothing to escape takes ~30 ms this way and
    ~400 ms through ``str.translate`` with a table of multi-character replacements."""
    finder = _FINDERS.get(keep)
    if finder is None:
        import re

        members = "".join(f"\\u{ord(c):04x}" for c in sorted(UNSAFE) if c not in keep)
        finder = _FINDERS[keep] = re.compile(f"[{members}]")
    return finder


def _shown(match: re.Match[str]) -> str:
    return _escape(match.group())


def for_terminal(text: str, keep: str = "\n\t") -> str:
    """``text`` with every character of :data:`UNSAFE` not in ``keep`` shown as an escape.

    >>> for_terminal("ok\\x1b]0;PWNED\\x07\\x1b[2J")
    'ok\\\\x1b]0;PWNED\\\\x07\\\\x1b[2J'
    >>> for_terminal("a\\tb\\r\\nc\\u202ed\\x9b"), for_terminal("a\\tb\\n", keep="\\t")
    ('a\\tb\\\\x0d\\nc\\\\u202ed\\\\x9b', 'a\\tb\\\\x0a')
    >>> for_terminal("x\\udcff.cda")  # the name of a file whose name is not UTF-8
    'x\\\\udcff.cda'
    """
    return _finder(keep).sub(_shown, text)


def name_text(name: str) -> str:
    r"""A file name as text, for JSON and messages: a name that is not UTF-8 (its bytes read by
    Python as surrogate escapes, as ``sys.argv`` and ``os.listdir`` give them) with each such
    byte shown as ``\xNN``, any other lone surrogate as ``\udNNN``; a UTF-8 name as it is.

    >>> name_text("bad\udcff.cda"), name_text("ok.cda")
    ('bad\\xff.cda', 'ok.cda')
    """
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no byte stands for (a JSON string's "\ud800")
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
