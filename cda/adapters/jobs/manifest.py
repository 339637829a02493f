"""Read a jobs manifest (TOML) into checked :class:`JobSpec` s, each with its job key.

The format (docs/jobs.md)::

    [defaults]              # optional: limits for every job
    timeout_s = 60          # wall-clock seconds per job; the job's process is killed after it
    memory_mb = 2048        # address-space cap of the job's process (RLIMIT_AS)

    [[job]]
    kind = "solve"          # a registered kind (cda.adapters.jobs.kinds.KINDS)
    file = "claim.cda"      # relative to the manifest, inside its folder
    name = "claim"          # optional, unique; default "<kind> <file>" (+ " (job N)" if repeated)
    timeout_s = 10          # optional: overrides [defaults]
    params = { backend = "z3", top = 3 }

Every field is checked and an unknown key is refused; a mistake is a :class:`ManifestError`
naming the manifest, the line (TOML's own syntax errors carry line and column; for a field the
line of its ``[[job]]`` table or of the key, found in the text) and the field.

The **job key** is the SHA-256 of the canonical JSON of the kind, the checked parameters and
the SHA-256 of the bytes of every input file: the main file, the file parameters, and the files
the main file names (a ``.cda`` file's ``ken "…"`` graphs, a Cedar test's policies, schema and
entities), each read once here (:func:`cda.files.read_bytes`), the named ones found by parsing
the very bytes that were hashed. It names a job's work, so a finished job is skipped on a re-run
however the manifest was reordered or renamed, and an edited input file makes a new job.

The job's process notes every file it reads and the hash of what it parsed
(:func:`cda.files.recording`); its result counts only if those are exactly the files and
contents its key covers (:meth:`JobSpec.reads_problem`): a file edited while the batch ran, or
read without being covered, fails the job instead of filing a result under a key for other
content.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cda.adapters.jobs.kinds import KINDS
from cda.contracts import limits
from cda.contracts.receipt import canonical_json
from cda.errors import CDAError, OptionError
from cda.files import CHANGED, parse_toml, read_bytes, sha256_of

__all__ = ["JobSpec", "Manifest", "ManifestError", "read_manifest", "DEFAULT_TIMEOUT_S", "DEFAULT_MEMORY_MB"]

DEFAULT_TIMEOUT_S = 600.0
DEFAULT_MEMORY_MB = 4096
MAX_MEMORY_MB = 1 << 20  # 1 TiB
MIN_MEMORY_MB = 64  # below this not even the interpreter starts
MAX_JOBS = 100_000
MAX_MANIFEST_BYTES = 16 << 20

_TOP_KEYS = {"defaults", "job"}
_LIMIT_KEYS = {"timeout_s", "memory_mb"}
_JOB_KEYS = {"kind", "file", "name", "params"} | _LIMIT_KEYS


class ManifestError(CDAError, ValueError):
    """The manifest cannot be run: not TOML, an unknown key, a field out of range, a missing file."""


@dataclass(frozen=True)
class JobSpec:
    """One job as the runners need it: picklable, no open files."""

    index: int
    name: str
    kind: str
    file: str | None
    params: dict[str, Any]
    timeout_s: float
    memory_mb: int
    key: str
    base: str  # the manifest's folder: the job's process runs there
    #: every file the key covers, by resolved path: the SHA-256 of the bytes read (None: unreadable)
    inputs: dict[str, str | None] = field(default_factory=dict)

    def wire(self) -> dict[str, Any]:
        """What the job's process reads (JSON)."""
        return {"kind": self.kind, "file": self.file, "params": self.params, "memory_mb": self.memory_mb,
                "base": self.base}

    def reads_problem(self, reads: dict[str, str]) -> str | None:
        """Why the files the job's process read (resolved path -> SHA-256 of what it parsed) are
        not those its key covers (None: they are)."""
        for path, digest in sorted(reads.items()):
            if path not in self.inputs:
                return f"the job read {path}, which its key does not cover: its result is not kept"
            if digest != self.inputs[path]:
                how = "was read twice with different contents" if digest == CHANGED else "changed"
                return (f"{path} {how} after the batch read it for the job's key (the result would be filed "
                        f"under the key of other contents): run the batch again")
        return None


@dataclass(frozen=True)
class Manifest:
    path: Path
    jobs: list[JobSpec]


class _Where:
    """Lines of the manifest's text, to say where a field is (tomllib keeps no positions)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        squeezed = ["".join(line.split()) for line in self.lines]
        self.job_lines = [i + 1 for i, line in enumerate(squeezed) if line.startswith("[[job]]")]
        self.defaults_line = next((i + 1 for i, line in enumerate(squeezed) if line.startswith("[defaults]")), None)

    def error(self, message: str, table_line: int | None = None, key: str | None = None) -> ManifestError:
        line = table_line
        if table_line is not None and key is not None:
            end = next((n for n in self.job_lines if n > table_line), len(self.lines) + 1)
            line = next((n for n in range(table_line, end) if _sets(self.lines[n - 1], key)), table_line)
        at = f":{line}" if line is not None else ""
        return ManifestError(f"{self.path}{at}: {message}")

    def job_line(self, index: int) -> int | None:
        return self.job_lines[index] if index < len(self.job_lines) else None


def _sets(line: str, key: str) -> bool:
    """Whether a TOML line assigns ``key``: ``key = …``, ``params.key = …`` or inside ``{ key = … }``.

    >>> _sets('params = { top = 0, seed = 1 }', "seed"), _sets("timeout_s = 5", "timeout")
    (True, False)
    """
    for piece in line.replace("{", ",").split(","):
        name, eq, _ = piece.partition("=")
        name = name.strip().strip("\"'")
        if eq and (name == key or name.removeprefix("params.").strip() == key):
            return True
    return False


def _limits(table: dict[str, Any], where: str, fallback: tuple[float, int]) -> tuple[float, int]:
    timeout, memory = fallback
    if "timeout_s" in table:
        timeout = limits.seconds(f"{where}timeout_s", table["timeout_s"], unlimited=False, positive=True)
    if "memory_mb" in table:
        memory = limits.whole(f"{where}memory_mb", table["memory_mb"], low=MIN_MEMORY_MB, high=MAX_MEMORY_MB)
    return timeout, memory


def _outside(base: Path, name: Path, *, named: bool = False) -> str | None:
    """Why ``name`` (relative to ``base``, or absolute) is not a file a job may read: outside the
    manifest's folder once links are resolved; None when it is inside. The one check of every file
    a job reads: its ``file``, its file parameters, and the files its file names (a ``.cda``
    file's ``ken`` graphs, a Cedar test's policies, schema and entities: ``named``, found by a path that is
    not the manifest's own words). Raises ``OSError`` or
    ``RuntimeError`` for a name the file system refuses or a loop of links."""
    target = base / name
    if target.resolve().is_relative_to(base.resolve()):
        return None
    if Path(os.path.abspath(target)).is_relative_to(os.path.abspath(base)):
        how = "through a link" if named else "through '..' or a link"
    elif named:
        how = "it leads out of the folder"
    else:
        how = "an absolute path" if name.is_absolute() else "through '..' or a link"
    return f"outside the manifest's folder {base.resolve()} ({how}); a job reads only files inside it"


def _read_input(base: Path, name: str, what: str) -> bytes:
    """An input file's bytes, read once (their hash goes into the key; the named files are found in them).

    The file must be inside the manifest's folder once links are resolved: a manifest is shared
    and run by others, and a job's error may quote a line of what it read (clipped), so a path
    that is absolute or leads out (``..``, a link) is refused before anything runs."""
    path = base / name
    try:
        outside = _outside(base, Path(name))
        found, folder = path.exists(), path.is_dir()
    except (OSError, RuntimeError) as exc:  # a name the file system refuses, a loop of links
        raise OptionError(f"{what} {name!r}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    if outside is not None:
        raise OptionError(f"{what} {name!r}: {outside}")
    if folder:
        raise OptionError(f"{what} {name!r}: a folder, not a file")
    if not found:
        raise OptionError(f"{what} {name!r}: no such file (relative to the manifest's folder)")
    try:
        return read_bytes(path)
    except CDAError as exc:
        raise OptionError(f"{what} {name!r}: {exc}") from None


def read_manifest(path: Path) -> Manifest:
    """Read and check the manifest at ``path``; every job's input files are read (for the key)."""
    try:
        data = read_bytes(path)  # `-` is standard input: its jobs' files are relative to the folder it runs in
    except CDAError as exc:
        raise ManifestError(f"{path}: cannot read the manifest ({str(exc).removeprefix(f'cannot read {path}: ')})") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"{path}: the manifest is larger than {MAX_MANIFEST_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
        doc = parse_toml(text)
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:  # its message ends "(at line L, column C)"
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None
    where = _Where(path, text)
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise where.error(f"unknown top-level key {unknown[0]!r} (expected [defaults] and [[job]] tables)")
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict):
        raise where.error("'defaults' must be a table: [defaults]")
    bad = sorted(set(defaults) - _LIMIT_KEYS)
    if bad:
        raise where.error(f"[defaults]: unknown key {bad[0]!r} (expected timeout_s, memory_mb)", where.defaults_line, bad[0])
    try:
        fallback = _limits(defaults, "[defaults] ", (DEFAULT_TIMEOUT_S, DEFAULT_MEMORY_MB))
    except OptionError as exc:  # at the key's own line, not the table's
        raise where.error(str(exc), where.defaults_line, "timeout_s" if "timeout_s" in str(exc) else "memory_mb") from None
    tables = doc.get("job", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise where.error("'job' must be an array of tables: [[job]]")
    if not tables:
        raise where.error("no jobs: add [[job]] tables")
    if len(tables) > MAX_JOBS:
        raise where.error(f"{len(tables)} jobs: at most {MAX_JOBS} in one manifest")
    base = path.parent
    jobs: list[JobSpec] = []
    names: dict[str, int] = {}
    keys: dict[str, int] = {}
    for i, table in enumerate(tables):
        line = where.job_line(i)
        spec = _job(i, table, base, fallback, where, line)
        if spec.name in names and "name" not in table:  # a default name repeats: the job's number tells them apart
            spec = replace(spec, name=f"{spec.name} (job {i + 1})")
        if spec.name in names:
            raise where.error(f"job {i + 1}: the name {spec.name!r} is taken by job {names[spec.name] + 1}", line, "name")
        if spec.key in keys:
            raise where.error(f"job {i + 1} repeats job {keys[spec.key] + 1} (same kind, parameters and files)", line)
        names[spec.name], keys[spec.key] = i, i
        jobs.append(spec)
    return Manifest(path, jobs)


def _job(i: int, table: dict[str, Any], base: Path, fallback: tuple[float, int], where: _Where,
         line: int | None) -> JobSpec:
    label = f"job {i + 1}"
    bad = sorted(set(table) - _JOB_KEYS)
    if bad:
        raise where.error(f"{label}: unknown key {bad[0]!r} (expected {', '.join(sorted(_JOB_KEYS))})", line, bad[0])
    kind_name = table.get("kind")
    if kind_name is None:
        raise where.error(f"{label}: missing 'kind' ({', '.join(sorted(KINDS))})", line)
    if not isinstance(kind_name, str) or kind_name not in KINDS:
        raise where.error(f"{label}: unknown kind {kind_name!r} (one of {', '.join(sorted(KINDS))})", line, "kind")
    kind = KINDS[kind_name]
    try:
        timeout, memory = _limits(table, f"{label}: ", fallback)
    except OptionError as exc:
        raise where.error(str(exc), line, "timeout_s" if "timeout_s" in str(exc) else "memory_mb") from None
    digests: dict[str, str | None] = {}
    inputs: dict[str, str | None] = {}
    file = table.get("file")
    if kind.needs_file:
        if file is None:
            raise where.error(f"{label}: missing 'file' (a {kind_name} job reads one)", line)
        if not isinstance(file, str) or not file:
            raise where.error(f"{label}: 'file' must be a path (a string), not {file!r}", line, "file")
        try:
            data = _read_input(base, file, f"{label}: file")
        except OptionError as exc:
            raise where.error(str(exc), line, "file") from None
        digests["file"] = inputs[str((base / file).resolve())] = sha256_of(data)
        if kind.inputs is not None:  # the files the main file names, found in the bytes just hashed
            for what, named in sorted(kind.inputs(base / file, data).items()):
                try:
                    outside = _outside(base, Path(os.path.abspath(named)), named=True)  # named: base joined already
                except (OSError, RuntimeError):  # a name the file system refuses, a loop of links: keyed as absent
                    outside = None
                if outside is not None:  # held to the folder as `file` is: the job's file is the manifest's too
                    raise where.error(f"{label}: file {file!r} names {what!r}: {outside}", line, "file")
                try:
                    digest: str | None = sha256_of(read_bytes(named))
                except (CDAError, OSError):
                    digest = None  # keyed as absent: the job reports it
                digests[f"file:{what}"] = inputs[str(named.resolve())] = digest
    elif file is not None:
        raise where.error(f"{label}: a {kind_name} job takes no 'file'", line, "file")
    raw = table.get("params", {})
    if not isinstance(raw, dict):
        raise where.error(f"{label}: 'params' must be a table, not {raw!r}", line, "params")
    params: dict[str, Any] = {}
    for name in sorted(raw):
        if name not in kind.params:
            allowed = ", ".join(sorted(kind.params)) or "none"
            raise where.error(f"{label}: a {kind_name} job has no parameter {name!r} (its parameters: {allowed})",
                              line, name)
        try:
            params[name] = kind.params[name](f"{label}: params.{name}", raw[name])
            if name in kind.paths:
                data = _read_input(base, params[name], f"{label}: params.{name}")
                digests[name] = inputs[str((base / params[name]).resolve())] = sha256_of(data)
        except OptionError as exc:
            raise where.error(str(exc), line, name) from None
    absent = sorted(kind.required - set(params))
    if absent:
        raise where.error(f"{label}: a {kind_name} job needs params.{absent[0]}", line, "params")
    mistake = kind.check(params) if kind.check is not None else None
    if mistake is not None:
        raise where.error(f"{label}: {mistake[1]}", line, mistake[0])
    display = table.get("name", f"{kind_name} {file}" if file is not None else f"{kind_name} #{i + 1}")
    if not isinstance(display, str) or not display or len(display) > 200:
        raise where.error(f"{label}: 'name' must be a non-empty string of at most 200 characters", line, "name")
    key = hashlib.sha256(canonical_json({"kind": kind_name, "params": params, "files": digests}).encode()).hexdigest()
    return JobSpec(index=i, name=display, kind=kind_name, file=file, params=params, timeout_s=timeout,
                   memory_mb=memory, key=key, base=str(base.resolve()), inputs=inputs)
