"""Reading the files users hand to CDA: once, into bytes, with one clear error for every way it fails.

*Hash what you parsed.* Every user file CDA parses is read by :func:`read_bytes`, once, and what is
parsed is those bytes: a digest CDA pins or records (a job's key, a policy store's digest) is
taken over the same bytes (:func:`sha256_of`), never over a second read that a file swapped in
between would make differ. :func:`recording` lists, for a piece of work, every file it read and
the SHA-256 of the bytes it parsed (a job's process reports them, and its result counts only if
they are those its key names).

>>> import tempfile
>>> path = Path(tempfile.mkdtemp()) / "a.cda"
>>> _ = path.write_text("hyp a")
>>> with recording() as reads:
...     text = read_text(path)
>>> reads == {str(path.resolve()): sha256_of(b"hyp a")}
True
"""

from __future__ import annotations

import codecs
import contextvars
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from cda.access import readable
from cda.errors import AccessDenied, CDAError, DSLError

__all__ = ["CHANGED", "DATA_MAX_BYTES", "DATA_MAX_ENV", "KEY_DIR_ENV", "STDIN", "TEXT_MAX_BYTES", "data_max_bytes",
           "decode_text", "is_stdin", "create_file", "key_dir", "open_regular", "parse_json", "parse_toml", "too_large", "read_bytes", "read_json",
           "read_text", "recording", "replace_file", "sha256_of",
           "standard_input", "text_stream", "TextStream"]

TEXT_MAX_BYTES = 1_000_000
"""The most bytes CDA reads from a file of text it parses whole (DSL, ``.fol``, Cedar policies): the
same number as the characters inline text may have (``MAX_TEXT``, cda.operations.params), since
parsing holds about 190 times the text in memory (docs/dsl.md, "Size and time limits")."""

DATA_MAX_BYTES = 256 * 1024 * 1024
"""The most bytes CDA reads from a data file (a Ken graph, a ``.bench`` circuit, observations, a
``.wcnf`` once decompressed, Cedar entities, a jobs manifest) unless :data:`DATA_MAX_ENV` sets
another: larger, as these are read by loaders that hold far less per byte than a parser of text
(docs/dsl.md, "Size and time limits")."""

DATA_MAX_ENV = "CDA_MAX_DATA_BYTES"
"""The environment variable that sets the data-file cap (a whole number of bytes, 1 to 2**40)."""


def data_max_bytes() -> int:
    """The data-file cap in force: :data:`DATA_MAX_ENV` when set (checked: a whole number from 1
    to 2**40, else a ``CDAError``), else :data:`DATA_MAX_BYTES`."""
    configured = os.environ.get(DATA_MAX_ENV)
    if configured is None:
        return DATA_MAX_BYTES
    text = configured.strip()
    if not text.isdigit() or not 1 <= int(text) <= 1 << 40:
        raise CDAError(f"{DATA_MAX_ENV}={configured[:40]!r}: not a whole number of bytes from 1 to {1 << 40:,}")
    return int(text)

STDIN = "-"
"""The name that stands for standard input wherever the ``cda`` command reads a text file."""


class _Stdin:
    """Standard input as one file: read once, then the same text to every reader of ``-``."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.text: str | None = None

    def read(self) -> str:
        if self.text is None:
            try:
                self.text = self.stream.read(data_max_bytes() + 1)  # characters: never more than a file may hold
            except UnicodeDecodeError as exc:
                raise CDAError(f"cannot read standard input: not UTF-8 text (byte {exc.start})") from None
            except OSError as exc:  # closed, or not readable here
                raise CDAError(f"cannot read standard input ({exc.strerror or exc})") from None
            self.text = self.text.removeprefix("\ufeff")
        return self.text


_STDIN: contextvars.ContextVar[_Stdin | None] = contextvars.ContextVar("cda_stdin", default=None)


@contextmanager
def standard_input(stream: TextIO) -> Iterator[None]:
    """While open, the path ``-`` is ``stream`` for :func:`read_text` (the ``cda`` command opens
    it around each command); elsewhere ``-`` is a file of that name, as for any library."""
    token = _STDIN.set(_Stdin(stream))
    try:
        yield
    finally:
        _STDIN.reset(token)


def is_stdin(path: Path | str) -> bool:
    """Whether ``path`` is ``-`` while a command reads standard input as a file."""
    return str(path) == STDIN and _STDIN.get() is not None


CHANGED = "changed"
"""What :func:`recording` holds for a file read twice with different bytes."""

_READS: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("cda_file_reads", default=None)


def sha256_of(data: bytes) -> str:
    """The SHA-256 (hex) of bytes read: what a pinned or recorded digest of a file is."""
    return hashlib.sha256(data).hexdigest()


@contextmanager
def recording() -> Iterator[dict[str, str]]:
    """Within it, every :func:`read_bytes` notes its file (resolved path) and the SHA-256 of what
    it read (:data:`CHANGED` when one file was read twice and differed); yields that mapping."""
    reads: dict[str, str] = {}
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def _size(n: int) -> str:
    """``n`` bytes as a reader says it: ``1,048,576 bytes``."""
    return f"{n:,} bytes"


def too_large(where: Path | str, size: int | None, limit: int, what: str = "file") -> CDAError:
    """The error for input past its cap: it names the input, its size (when known) and the cap."""
    found = f"{_size(size)}; the limit is" if size is not None else "more than the limit of"
    return CDAError(f"cannot read {where}: the {what} is too large ({found} {_size(limit)}; docs/dsl.md, "
                    "Size and time limits)")


@contextmanager
def open_regular(path: Path) -> Iterator[Any]:
    """The regular file at ``path`` open for reading (binary), checked on the opened file: a FIFO,
    a device or a socket is refused ("not a regular file") instead of read, which would block
    forever or never end; a folder is refused too. Opened with ``O_NONBLOCK`` so that opening a
    FIFO with no writer does not block before the check can refuse it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise CDAError(f"cannot read {path}: a folder, not a file") from None
    except OSError as exc:
        raise CDAError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise CDAError(f"cannot read {path}: a folder, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise CDAError(f"cannot read {path}: not a regular file (a FIFO, device or socket is not read)")
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def read_bytes(path: Path, *, limit: int | None = None) -> bytes:
    """The bytes of the file at ``path``, read once (noted by :func:`recording` when one is in
    force); a missing or unreadable file, a folder, anything but a regular file (a FIFO would block
    the call forever) or a file over ``limit`` bytes (:data:`TEXT_MAX_BYTES` for text parsed whole,
    :func:`data_max_bytes` by default) is a ``CDAError``; one the current call may not read
    (:mod:`cda.access`) is :class:`~cda.errors.AccessDenied`, before anything is opened.
    Inside :func:`standard_input`, ``-`` is standard input (read once).

    The size is checked twice: on the opened file (``fstat``, before a byte is read) and by
    reading at most ``limit + 1`` bytes, so a file that grows while it is read is refused too."""
    if limit is None:
        limit = data_max_bytes()
    if is_stdin(path):
        stdin = _STDIN.get()
        assert stdin is not None
        data = stdin.read().encode("utf-8")
        if len(data) > limit:
            raise too_large("standard input", len(data), limit, "input")
        return data
    checked = readable(path)  # cda.access: a file the current call may not read is refused before it is opened
    with open_regular(checked) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise too_large(path, size, limit)
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise CDAError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise too_large(path, None, limit)
    _note(path, sha256_of(data))
    return data


def _note(path: Path, digest: str) -> None:
    reads = _READS.get()
    if reads is not None:
        name = str(path.resolve())
        reads[name] = digest if reads.get(name, digest) == digest else CHANGED


class TextStream:
    """A user's file read once, a chunk at a time, as UTF-8 text (a byte-order mark dropped, as
    :func:`decode_text` drops it): the bytes are hashed as they go by, and when the whole file
    has been read :func:`recording` notes it as :func:`read_bytes` would. For a reader that
    must not hold a large file's bytes at once (Ken's loaders of a million-edge graph)."""

    def __init__(self, fh: Any, limit: int = DATA_MAX_BYTES, where: Path | str = "the file") -> None:
        self._fh = fh
        self._left = limit
        self._limit = limit
        self._where = where
        self._hash = hashlib.sha256()
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.done = False

    def read(self, size: int) -> str:
        """About ``size`` bytes' worth of text; "" only at the end of the file (a
        ``UnicodeDecodeError`` for bytes that are not UTF-8)."""
        while True:
            data = self._fh.read(size)
            self._left -= len(data)
            if self._left < 0:  # the file grew past the cap while it was read
                raise too_large(self._where, None, self._limit)
            self._hash.update(data)
            if not data:
                self.done = True
                return str(self._decoder.decode(b"", final=True))
            text = str(self._decoder.decode(data))
            if text:
                return text


@contextmanager
def text_stream(path: Path, *, limit: int | None = None) -> Iterator[TextStream]:
    """The file at ``path`` as a :class:`TextStream`; a missing or unreadable file, anything but a
    regular file, or one over ``limit`` bytes (checked before and while it is read) is a ``CDAError``.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "g.json"
    >>> _ = path.write_bytes(b'\\xef\\xbb\\xbf{"nodes": []}')
    >>> with recording() as reads, text_stream(path) as stream:
    ...     parts = [stream.read(4), stream.read(100), stream.read(100)]
    >>> parts, reads == {str(path.resolve()): sha256_of(path.read_bytes())}
    (['{', '"nodes": []}', ''], True)
    """
    limit = data_max_bytes() if limit is None else limit
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise too_large(path, size, limit)
        stream = TextStream(fh, limit, path)
        yield stream
        if stream.done:
            _note(path, stream._hash.hexdigest())


def decode_text(data: bytes, path: Path | str) -> str:
    """``data`` (a file's bytes) as UTF-8 text, a byte-order mark some editors write first dropped;
    bytes that are not UTF-8 are a ``CDAError`` naming the file and the byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CDAError(f"cannot read {path}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x})") from None


def read_text(path: Path, *, limit: int | None = None) -> str:
    """The file's text as UTF-8 (:func:`read_bytes`, then :func:`decode_text`); a missing,
    unreadable or non-UTF-8 file is a ``CDAError``. Inside :func:`standard_input`, ``-`` is
    standard input.

    >>> read_text(Path("/no/such/file.cda"))
    Traceback (most recent call last):
    cda.errors.CDAError: cannot read /no/such/file.cda: No such file or directory
    >>> import io
    >>> with standard_input(io.StringIO("hyp a")):
    ...     read_text(Path("-")), read_text(Path("-"))
    ('hyp a', 'hyp a')
    """
    if is_stdin(path):
        return read_bytes(path, limit=limit).decode("utf-8")
    return decode_text(read_bytes(path, limit=limit), path)


def parse_json(text: str, where: str, error: type[CDAError] = CDAError, *, line: int | None = None,
               parse_float: Callable[[str], Any] | None = None) -> Any:
    """``text`` decoded as JSON; every way the decoder fails (bad syntax, nesting deeper than
    Python's recursion limit, a number too long to convert) is an ``error`` naming ``where`` (a
    file name) and, for syntax, line:column (``line`` says which line of the file a one-line
    ``text`` is, as in a JSON-lines file). ``parse_float`` reads a number with a fraction or an
    exponent from its digits (as ``json.loads``'s; an Action's soft weight is read exactly).

    >>> parse_json('[' * 100000 + ']' * 100000, "deep.json")
    Traceback (most recent call last):
    cda.errors.CDAError: deep.json: not valid JSON: nested too deeply to read
    >>> parse_json('{"a": }', "x.json")
    Traceback (most recent call last):
    cda.errors.CDAError: x.json:1:7: not valid JSON: Expecting value
    """
    try:
        return json.loads(text, parse_float=parse_float)
    except json.JSONDecodeError as exc:
        if issubclass(error, DSLError):  # located as a compiler does: FILE:LINE:COL: error: …
            raise error(f"not valid JSON: {exc.msg}", filename=where, line=exc.lineno if line is None else line,
                        column=exc.colno) from None
        at = f"{exc.lineno}:{exc.colno}" if line is None else f"{line}:{exc.colno}"
        raise error(f"{where}:{at}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        at = "" if line is None else f":{line}"
        raise error(f"{where}{at}: not valid JSON: nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer longer than Python's digit limit
        at = "" if line is None else f":{line}"
        raise error(f"{where}{at}: not valid JSON: {exc}") from None


def parse_toml(text: str, parse_float: Callable[[str], Any] = float) -> dict[str, Any]:
    """``text`` decoded as TOML, as :func:`tomllib.loads` does, except that nesting deeper than
    Python's recursion limit is a :class:`tomllib.TOMLDecodeError` too (it was a RecursionError
    traceback at every TOML door: a registry, a policy store, a jobs manifest, a causal model),
    so each caller's own "not valid TOML" message covers it.

    >>> parse_toml("x = " + "[" * 100000 + "]" * 100000)
    Traceback (most recent call last):
    tomllib.TOMLDecodeError: nested too deeply to read
    """
    import tomllib

    try:
        return tomllib.loads(text, parse_float=parse_float)
    except RecursionError:
        raise tomllib.TOMLDecodeError("nested too deeply to read") from None


def read_json(path: Path, error: type[CDAError] = CDAError, *, limit: int | None = None) -> Any:
    """The JSON value in the file at ``path`` (read as :func:`read_text` does); any failure is an
    ``error`` naming the file."""
    try:
        text = read_text(path, limit=limit)
    except AccessDenied:
        raise
    except CDAError as exc:
        raise error(str(exc)) from None
    return parse_json(text, str(path), error)


def _temporary_beside(path: Path, data: bytes, durable: bool = False) -> Path:
    """``data`` in a new file beside ``path`` with a random name, made with ``O_EXCL|O_NOFOLLOW``
    (never an existing file, never through a link planted at the name); ``durable``: on disk
    (``fsync``) before it is renamed, for a file whose loss after a crash would matter."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def replace_file(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Write ``data`` as the file ``path`` whole or not at all: into a new temporary file beside it,
    renamed over the name (a reader sees the old file or the new one; a symbolic link at ``path``
    is replaced, never written through). For files CDA made itself; an ``OSError`` as it comes."""
    temp = _temporary_beside(path, data, durable)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def create_file(path: Path, data: bytes, what: str = "file") -> None:
    """Write ``data`` as the new file ``path``, whole or not at all; a ``CDAError`` when anything
    is there already (a file, a link, even a dangling one), which is left as it was: CDA never
    modifies a file it did not create. The temporary file is linked to the name (``link`` fails
    on an existing name, as ``O_EXCL`` does), so no other writer can slip in between."""
    try:
        temp = _temporary_beside(path, data)
    except OSError as exc:
        raise CDAError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        os.link(temp, path)
    except FileExistsError:
        raise CDAError(f"{path}: a {what} of that name exists; CDA never overwrites a file it did not create "
                       "(remove it, or give another name)") from None
    except OSError as exc:
        raise CDAError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        temp.unlink(missing_ok=True)


KEY_DIR_ENV = "CDA_KEY_DIR"
"""The environment variable naming the folder of CDA's signing key."""


def key_dir() -> Path:
    """Where CDA's signing key lives: ``$CDA_KEY_DIR``, else ``~/.config/cda``. Here, at the
    bottom layer, because two parts need it: the signer (:mod:`cda.keys.signing`) and the
    sandbox, which hides this folder from every check (:mod:`cda.verifiers.sandbox`)."""
    configured = os.environ.get(KEY_DIR_ENV)
    return Path(configured) if configured else Path.home() / ".config" / "cda"
