"""The artifacts of an Action: the boundary summary, the plan bundle and the evidence bundle (docs/actions.md, "Receipts, artifacts, reflection").

Artifact ids are content addresses (``<kind>:<first 16 hex digits of SHA-256>``), so the same
run gives the same ids and a changed artifact gets a new one. With no folder the ids are still
computed and nothing is written (a quick in-process run).

The **boundary summary** is the only text a client reads: decisions (each with the caveats that
lowered it), key citations, residual uncertainty and next tests, capped at
:data:`SUMMARY_MAX_CHARS` characters; it never contains raw traces, models or solver output
beyond the decisions.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cda.contracts.action import ActionVerdict, CDAInputs, NextTestSuggestion
from cda.contracts.json_numbers import exact_text
from cda.contracts.metrics import CitationCoverage
from cda.contracts.receipt import canonical_json, sha256_hex
from cda.contracts.refs import SpanRef
from cda.contracts.result import SolveResult
from cda.errors import CDAError
from cda.files import replace_file

__all__ = ["MANIFEST", "SUMMARY_MAX_CHARS", "ArtifactFolderError", "ArtifactWriter", "boundary_summary", "content_id"]

SUMMARY_MAX_CHARS = 2400
_TRUNCATED = "\n… (summary truncated to its fixed size; the plan bundle has the rest)\n"


def content_id(kind: str, content: str) -> str:
    """``kind:`` and the first 16 hex digits of the content's SHA-256."""
    return f"{kind}:{sha256_hex(content)[:16]}"


def _line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def boundary_summary(
    action_id: str,
    inputs: CDAInputs,
    result: SolveResult,
    verdicts: Sequence[ActionVerdict],
    next_tests: Sequence[NextTestSuggestion],
    caveats: Sequence[str],
    *,
    abstain: Any | None = None,
    citations: Sequence[SpanRef] = (),
    support: CitationCoverage | None = None,
    report: Any | None = None,
) -> str:
    """The boundary summary as Markdown, at most SUMMARY_MAX_CHARS characters.

    ``support`` (the run's citation coverage) adds a *Support* section, last: how many supported
    claims carry a citation, then the first :data:`SUPPORT_LISTED` that do not (on the solver
    alone, or on nothing), so that coverage below spec §10's 95% names the claims that pull it
    down. Being last and capped, it can only be the part the size cap cuts, never Residual
    uncertainty or Next tests.
    """
    out = [f"# CDA boundary summary: {action_id}", ""]
    if inputs.problem.strip():
        out += [f"Problem: {_line(inputs.problem, 300)}", ""]
    if abstain is not None:
        out += ["## Abstained", "", f"- {_line(str(getattr(abstain, 'summary', abstain)), 300)}"]
        out += [f"- missing: {_line(m, 200)}" for m in list(getattr(abstain, "missing_knowledge", []))[:5]]
        action = getattr(abstain, "action", None)
        if action is not None:
            out.append(f"- next step: {action.next_step} (augment with: "
                       f"{', '.join(action.suggested_ckg_augment_inputs)})")
        out += ["- no explanation is offered as a conclusion", ""]
    out += ["## Decisions", ""]
    if not verdicts:
        out.append("- none: no claim was settled")
    for v in verdicts:
        how = "not decided: no confidence" if v.confidence is None else f"confidence {v.confidence:.2f}, {v.band}"
        out.append(f"- {v.status.upper()} {_line(v.claim, 100)} ({how})")
        # what lowered this verdict (a function check that timed out, a disagreeing backend, an
        # LLM judgement): a reader of the summary must see why, not only the JSON outputs
        out += [f"  - lowered: {_line(c, 200)}" for c in v.caveats]
    out.append("")
    if result.hypotheses:
        out += ["## Best explanations", ""]
        for h in result.hypotheses:
            assumed = ", ".join(h.assumed) or "(nothing assumed)"
            out.append(f"- {h.id}: {_line(assumed, 120)} (posterior {h.posterior:.3f}, cost {exact_text(h.exact_cost())})")
        if not result.enumeration_complete:
            out.append(f"- enumeration capped at {result.hypotheses_enumerated} hypotheses: posteriors are estimates")
        out.append("")
    if result.conflict is not None:
        out += ["## Conflicting evidence", ""]
        out += [f"- {', '.join(core)}" for core in result.conflict.cores[:5]]
        out.append("")
    if citations:
        out += ["## Key evidence", ""]
        out += [f"- {c.source}" + (f": {_line(c.excerpt, 100)}" if c.excerpt else "") for c in citations[:5]]
        out.append("")
    out += ["## Residual uncertainty", ""]
    inconclusive = [v for v in verdicts if v.status == "inconclusive"]
    undecided = [v for v in verdicts if v.status == "unknown"]
    if not caveats and not inconclusive and not undecided:
        out.append("- none recorded")
    out += [f"- {_line(c, 200)}" for c in caveats]
    out += [f"- {_line(v.claim, 100)} remains open" for v in inconclusive]
    out += [f"- {_line(v.claim, 100)} was not decided (the budget cut it off)" for v in undecided]
    out.append("")
    if next_tests:
        out += ["## Next tests", ""]
        for t in next_tests[:5]:
            power = "" if t.expected_discriminative_power is None else f" ({t.expected_discriminative_power:.3f} bits)"
            out.append(f"- {_line(t.question, 120)}{power}")
        out.append("")
    if report is not None:
        out += _epistemic(report)  # after the sections a reader needs first: the cap cuts it before them
    if support is not None and support.coverage.denominator:
        out += _support(support)  # last, and capped: it never crowds out the sections above
    text = "\n".join(out)
    if len(text) > SUMMARY_MAX_CHARS:
        text = text[: SUMMARY_MAX_CHARS - len(_TRUNCATED)] + _TRUNCATED
    return text


SUPPORT_LISTED = 5
"""The most uncited supported claims the Support section names (the outputs' metrics list all)."""

REPORT_LISTED = 5
"""The most items of each kind the Epistemic report section lists (``outputs.epistemic_report`` has all)."""


def _epistemic(report: Any) -> list[str]:
    """The abstain gate's report, by how each part is known (docs/actions.md, Abstention): the
    observations quoted, the Ken facts with their nodes, the hypotheses marked unverified unless a
    verdict supports them, the conclusion with its coverage-capped confidence, Ken's fixes."""
    out = ["## Epistemic report", ""]
    out += [f"- observed: \"{_line(o.text, 150)}\"" for o in report.observations[:REPORT_LISTED]]
    out += [f"- Ken: {_line(f.text, 120)} [{', '.join(f.nodes[:5])}]" for f in report.ken_facts[:REPORT_LISTED]]
    for h in report.hypotheses[:REPORT_LISTED]:
        known = "verified" if h.verified else "unverified"
        out.append(f"- hypothesis {h.id} ({known}): {_line(h.text, 120)} (confidence {h.confidence:.2f}, {h.band})")
    c = report.conclusion
    out.append(f"- conclusion: {_line(c.root_cause, 120)} (confidence {c.confidence:.2f}, {c.band}; "
               f"{'verified' if c.verified else 'unverified'}, capped by Ken coverage)")
    for f in report.relevant_fixes[:REPORT_LISTED]:
        out.append(f"- historical fix (Ken): {f.node} {'/'.join(f.relations)} {', '.join(f.targets)}")
    out.append("")
    return out


def _support(support: CitationCoverage) -> list[str]:
    """The Support section: the coverage count, then at most :data:`SUPPORT_LISTED` uncited
    supported claims and what they stand on (the cited ones are the Decisions above)."""
    ratio = support.coverage
    out = ["## Support", "", f"- citation coverage: {ratio.numerator} of {ratio.denominator} supported claim(s) "
           "carry a citation (input observation or Ken evidence)"]
    for u in support.uncited[:SUPPORT_LISTED]:
        if u.stands_on == "solver":
            why = f" (clauses {_line(', '.join(u.justification), 80)})" if u.justification else ""
            out.append(f"- on the solver alone, no citation: {_line(u.claim, 100)}{why}")
        else:
            out.append(f"- on nothing recorded, no citation: {_line(u.claim, 100)}")
    if len(support.uncited) > SUPPORT_LISTED:
        out.append(f"- … and {len(support.uncited) - SUPPORT_LISTED} more uncited (outputs.metrics.citations.uncited)")
    out.append("")
    return out


def _dump(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


MANIFEST = ".cda-artifacts.json"
"""The file in an action's artifact folder that lists what CDA wrote there (relative path and the
SHA-256 of the bytes written): how a later run recognises the folder as its own."""

_MANIFEST_KIND = "cda-artifacts"

_HEX = frozenset("0123456789abcdef")


def _temporary_of(name: str) -> str | None:
    """The name whose temporary file ``name`` is (``.NAME.<16 hex digits>.tmp``, as
    :func:`cda.files.replace_file` makes it), or None."""
    if not (name.startswith(".") and name.endswith(".tmp")):
        return None
    stem, _, digits = name[1:-4].rpartition(".")
    return stem if stem and len(digits) == 16 and set(digits) <= _HEX else None


def _manifest_temporary(name: str) -> bool:
    """Whether ``name`` is a temporary file of the manifest (a write of it a crash cut off)."""
    return _temporary_of(name) == MANIFEST


class ArtifactFolderError(CDAError):
    """An action's artifact folder holds something CDA did not write (docs/actions.md, "Receipts,
    artifacts, reflection"): nothing is written to it."""


def _sha256_file(path: Path) -> str | None:
    """The SHA-256 of the regular file at ``path``, read without following a link (None: it is
    not a regular file, or cannot be read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        digest = hashlib.sha256()
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


class ArtifactWriter:
    """Writes an action's artifacts under ``folder`` (or only computes their ids when None).

    CDA never modifies a file it did not create (docs/actions.md): the folder is made by this
    writer, or is one it made before (its :data:`MANIFEST` lists every file in it, each still with
    the bytes CDA wrote), or is empty; anything else (a file CDA did not write, one changed since,
    a symbolic link, a FIFO) is an :class:`ArtifactFolderError` raised when the writer is made,
    before anything is written. Each file is written to a new temporary file in its folder and
    renamed over the name, so a link planted at the name is replaced, never written through,
    and a reader never sees half a file; a run killed while writing leaves a folder the next run
    takes back (the manifest lists what it is about to write first: :meth:`_write`)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._written: dict[str, str] = {}
        if folder is not None:
            self._written = self._claim(folder)

    @staticmethod
    def _refuse(folder: Path, why: str) -> ArtifactFolderError:
        return ArtifactFolderError(f"{folder}: {why}; CDA never modifies files it did not create (remove it, or "
                                   "give another --out folder)")

    def _claim(self, folder: Path) -> dict[str, str]:
        """The manifest of ``folder`` once checked to hold only what CDA wrote (made when missing)."""
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.mkdir(folder)
            return {}  # new: nothing in it
        except FileExistsError:
            pass  # checked below
        except OSError as exc:
            raise ArtifactFolderError(f"cannot make {folder}: {exc.strerror or exc}") from None
        try:
            info = os.lstat(folder)
        except OSError as exc:
            raise ArtifactFolderError(f"cannot read {folder}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(info.st_mode):
            raise self._refuse(folder, "a symbolic link where the action's artifact folder goes")
        if not stat.S_ISDIR(info.st_mode):
            raise self._refuse(folder, "a file where the action's artifact folder goes")
        written, pending = self._manifest(folder)
        held: dict[str, str] = {}
        unfinished: list[Path] = []
        for root, dirs, files in os.walk(folder):  # os.walk never follows a link to a folder
            for name in sorted(dirs + files):
                path = Path(root) / name
                relative = path.relative_to(folder).as_posix()
                mode = os.lstat(path).st_mode
                if stat.S_ISDIR(mode):
                    continue
                if relative == MANIFEST:
                    continue
                if not stat.S_ISREG(mode):
                    raise self._refuse(folder, f"{relative} is not a regular file CDA wrote (a link, FIFO or device)")
                temporary = _temporary_of(name)
                if temporary is not None and relative not in written and relative not in pending:
                    meant = (path.parent / temporary).relative_to(folder).as_posix()
                    if meant == MANIFEST or meant in pending:
                        unfinished.append(path)  # a write a crash cut off: the temporary file of a name CDA was writing
                        continue
                if relative not in written and relative not in pending:
                    raise self._refuse(folder, f"{relative} was not written by CDA")
                digest = _sha256_file(path)
                if digest is None or digest not in (written.get(relative), pending.get(relative)):
                    raise self._refuse(folder, f"{relative} was changed since CDA wrote it")
                held[relative] = digest
        for path in unfinished:  # only once the whole folder is known to be CDA's
            try:
                path.unlink()
            except OSError as exc:
                raise ArtifactFolderError(f"cannot remove {path}: {exc.strerror or exc}") from None
        return held

    def _manifest(self, folder: Path) -> tuple[dict[str, str], dict[str, str]]:
        """What the folder's manifest lists: the files written, and those being written when it was
        last written (``pending``: each name with the SHA-256 of the bytes CDA was about to write;
        empty once a write finished). Both empty for an empty folder without a manifest."""
        path = folder / MANIFEST
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            if any(not _manifest_temporary(entry.name) for entry in folder.iterdir()):
                raise self._refuse(folder, "a folder CDA did not make (it has no " + MANIFEST + ")") from None
            return {}, {}  # empty, or a first manifest's write a crash cut off (removed by the claim)
        except OSError:
            raise self._refuse(folder, f"{MANIFEST} is not a file CDA wrote") from None
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise self._refuse(folder, f"{MANIFEST} is not a regular file")
            raw = fh.read(1 << 20)
        try:
            doc = json.loads(raw)
            files = doc["files"] if doc.get("kind") == _MANIFEST_KIND else None
            pending = doc.get("pending", {})
        except (ValueError, TypeError, AttributeError, KeyError):
            files = pending = None
        for listing in (files, pending):
            if not isinstance(listing, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in listing.items()):
                raise self._refuse(folder, f"{MANIFEST} is not one CDA wrote")
        assert isinstance(files, dict) and isinstance(pending, dict)
        return dict(files), dict(pending)

    def _replace(self, path: Path, data: bytes) -> None:
        """``data`` into a new temporary file beside ``path`` (``O_EXCL|O_NOFOLLOW``), then renamed
        over ``path``: a link at ``path`` is replaced, never followed."""
        assert self.folder is not None
        where = self.folder
        for part in path.relative_to(self.folder).parts[:-1]:
            where = where / part
            try:
                os.mkdir(where)
            except FileExistsError:
                if not stat.S_ISDIR(os.lstat(where).st_mode):
                    raise self._refuse(where, "not a folder CDA made") from None
        replace_file(path, data)

    def write_file(self, relative: str, text: str) -> None:
        """Write ``text`` as the file ``relative`` in the folder, listed as CDA's (the signed
        receipts head a run adds to ``cda_plan`` after the bundle)."""
        self._write({relative: text})

    def _write(self, files: dict[str, str]) -> None:
        """Write ``files`` (relative name → text) and list them in the manifest.

        The manifest is written first with the files as ``pending`` (each with the SHA-256 of the
        bytes about to be written), then the files, then the manifest without ``pending``. A run
        killed anywhere in between leaves a folder the next run still recognises as CDA's: each
        pending file holds its old bytes, its new bytes or nothing, and a temporary file beside a
        pending name is that write cut off (removed by the next run); see :meth:`_claim`."""
        if self.folder is None:
            return
        blobs = {relative: text.encode("utf-8") for relative, text in files.items()}
        pending = {relative: hashlib.sha256(data).hexdigest() for relative, data in blobs.items()}
        self._list(pending)
        for relative, data in blobs.items():
            try:
                self._replace(self.folder / relative, data)
            except OSError as exc:
                raise ArtifactFolderError(f"cannot write {self.folder / relative}: {exc.strerror or exc}") from None
            self._written[relative] = pending[relative]
        self._list()

    def _list(self, pending: dict[str, str] | None = None) -> None:
        """Rewrite the manifest: every file this folder holds from CDA, with its SHA-256, and the
        files about to be written (``pending``), if any."""
        if self.folder is None:
            return
        manifest: dict[str, Any] = {"kind": _MANIFEST_KIND, "files": dict(sorted(self._written.items()))}
        if pending:
            manifest["pending"] = dict(sorted(pending.items()))
        try:
            replace_file(self.folder / MANIFEST, _dump(manifest).encode("utf-8"))
        except OSError as exc:
            raise ArtifactFolderError(f"cannot write {self.folder / MANIFEST}: {exc.strerror or exc}") from None

    def write_summary(self, text: str) -> str:
        self._write({"summary.md": text})
        return content_id("summary", text)

    def write_plan_bundle(
        self,
        *,
        hypotheses: list[dict[str, Any]],
        constraints: dict[str, Any],
        plan_graph: dict[str, Any],
        verifiers: list[dict[str, Any]],
        receipts: list[dict[str, Any]],
        context: dict[str, Any] | None = None,
    ) -> str:
        """The ``cda_plan`` bundle: hypotheses, constraints, plan graph, verifiers, receipts/, and the
        context pack (``context_pack.json``: the context the action adopted, spec §4 step 5 — the
        DisplayPlan's ``context_pack`` chip opens it)."""
        files = {
            "hypotheses.json": _dump(hypotheses),
            "constraints.json": _dump(constraints),
            "plan_graph.json": _dump(plan_graph),
            "verifiers.json": _dump(verifiers),
        }
        if context is not None:
            files["context_pack.json"] = _dump(context)
        for r in receipts:
            files[f"receipts/{r['seq']:04d}.json"] = _dump(r)
        self._write({f"cda_plan/{name}": text for name, text in files.items()})
        return content_id("cda_plan", canonical_json({k: sha256_hex(v) for k, v in files.items()}))

    def write_evidence_bundle(self, citations: list[SpanRef], stubs: list[dict[str, Any]],
                              unverified: list[dict[str, Any]] | None = None) -> str:
        """Citations with their excerpts, receipt stubs for evidence that could not be had, and
        the claims a required verifier failed closed on (``unverified_claims``: claim, reason)."""
        body = {"citations": [c.model_dump(mode="json") for c in citations], "missing_evidence": stubs,
                "unverified_claims": unverified or []}
        text = _dump(body)
        self._write({"evidence.json": text})
        return content_id("evidence", text)
