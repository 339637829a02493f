"""Tokens of Cedar policy and schema text, with their line and column.

One regular expression splits the text; strings keep their raw body so that a ``like`` pattern
can read ``\\*`` as a literal star while ordinary strings unescape it as an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cda.errors import DSLSyntaxError

__all__ = ["Token", "tokenize", "unescape"]

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<int>[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>==|!=|<=|>=|&&|\|\||::|[<>+\-*!.,;()\[\]{}@?=:])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "str", "int", "ident", "punct", "eof"
    text: str
    line: int
    column: int


def tokenize(text: str, filename: str) -> list[Token]:
    """All tokens of ``text``; an unknown character is a syntax error at its place."""
    out: list[Token] = []
    pos, line, line_start = 0, 1, 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            col = pos - line_start + 1
            raise DSLSyntaxError(
                f"unexpected character {text[pos]!r}",
                line=line,
                column=col,
                source_line=_line_of(text, line_start),
                filename=filename,
            )
        kind = m.lastgroup or "ws"
        chunk = m.group()
        if kind != "ws":
            out.append(Token(kind, chunk, line, pos - line_start + 1))
        nl = chunk.count("\n")
        if nl:
            line += nl
            line_start = pos + chunk.rindex("\n") + 1
        pos = m.end()
    out.append(Token("eof", "", line, pos - line_start + 1))
    return out


def _line_of(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]


_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "0": "\0", "'": "'", '"': '"'}


def unescape(body: str, *, pattern: bool = False) -> list[str | None]:
    """The characters of a string literal's body; in a pattern an unescaped ``*`` is ``None``
    (the wildcard) and ``\\*`` a literal star. Raises ``ValueError`` on a bad escape."""
    out: list[str | None] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        if c == "*" and pattern:
            out.append(None)
            i += 1
            continue
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise ValueError("a backslash ends the string")
        e = body[i + 1]
        if e in _SIMPLE:
            out.append(_SIMPLE[e])
            i += 2
        elif e == "*" and pattern:
            out.append("*")
            i += 2
        elif e == "x":
            h = body[i + 2 : i + 4]
            if len(h) != 2 or not all(ch in "0123456789abcdefABCDEF" for ch in h) or int(h, 16) > 0x7F:
                raise ValueError(f"bad escape \\x{h}")
            out.append(chr(int(h, 16)))
            i += 4
        elif e == "u":
            m = re.match(r"\{([0-9a-fA-F]{1,6})\}", body[i + 2 :])
            if m is None:
                raise ValueError("bad escape \\u")
            cp = int(m.group(1), 16)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise ValueError(f"bad escape \\u{{{m.group(1)}}}")
            out.append(chr(cp))
            i += 2 + m.end()
        else:
            raise ValueError(f"bad escape \\{e}")
    return out
