"""Revisions: sub-actions (spec §4) from the server's local providers, bind ⇒ lock, update_available.

An action may name sub-actions (``subactions``: a research, sandbox or default ability and a
source); the server asks its provider (``cda serve --providers DIR``) for the output. Each
distinct output of a sub-action is a *revision* with a stream of its own (``<base>.r<n>``: one
``context_delta`` with the text). An action that *binds* a revision locks it; when a newer
revision appears (:meth:`Revisions.refresh`), every action that bound an older one is offered it
(``update_available``, a receipt; once the action has ended, an ``action_update_available`` event
on its own stream with a receipt of its own: :meth:`Revisions.tell`), and accepting it starts a *structure revision* of that action
(:meth:`~cda.service.actions.ActionManager.accept_update`). Owners, sources, revisions and the
consumers that bound them are kept in :class:`~cda.service.state.ServiceState`, so all of this
holds across restarts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from cda.actions.bindings import BoundOutput, lock_of, update_available
from cda.adapters.auth import Principal
from cda.contracts.action import CDAInputs
from cda.contracts.events import ActionCheckpoint, ActionCompleted, ActionStarted
from cda.contracts.receipt import sha256_hex
from cda.contracts.refs import ArtifactRef
from cda.service.attempts import Attempts
from cda.service.event_reads import read_stream
from cda.service.live import EdgeError, LiveAction, json_object
from cda.service.protocol import RefreshResult, SubActionSpec
from cda.service.providers import Provider, ProviderError
from cda.service.state import Consumer, ServiceState

__all__ = ["Revisions"]


class Revisions:
    """The sub-actions of the server's actions and their revisions."""

    def __init__(self, attempts: Attempts, state: ServiceState, providers: dict[str, Provider]) -> None:
        self.attempts = attempts
        self.state = state
        self.providers = providers
        self.lock = threading.Lock()  # one revision of a base made at a time

    def spawn(self, spec: SubActionSpec, index: int, who: Principal, scope: str) -> BoundOutput:
        """The current revision of ``spec``'s output (``scope``: what makes ``who``'s bases their own)."""
        provider = self.providers.get(spec.ability)
        where: list[str | int] = ["params", "subactions", index, "source"]
        if provider is None:
            raise EdgeError("forbidden", f"this server has no provider for {spec.ability!r} sub-actions "
                            "(cda serve --providers DIR)", ["params", "subactions", index, "ability"])
        try:
            text = provider.produce(spec.source)
        except ProviderError as exc:
            raise EdgeError("invalid_params", str(exc), where) from None
        base = f"{spec.ability}-{sha256_hex(scope + spec.source)[:12]}"
        self.state.own(base, who)
        self.state.put_source(base, spec.ability, spec.source)
        with self.lock:
            return self._revision(base, spec.ability, text)[0]

    def _revision(self, base: str, ability: str, text: str) -> tuple[BoundOutput, bool]:
        """The revision of ``base`` holding ``text``: an existing one, or a new one with its stream."""
        digest = sha256_hex(text)
        revision = 1
        while True:
            rev_id = f"{base}.r{revision}"
            known = self.state.revision(rev_id) or self._legacy_revision(base, ability, revision)
            if known is None:
                break
            if sha256_hex(known.artifact.text or "") == digest:
                return known, False
            revision += 1
        out = BoundOutput(base, ability, revision, ArtifactRef(artifact_id=f"{base}:output", text=text))  # type: ignore[arg-type]
        self.state.put_revision(out)
        stream = LiveAction(rev_id, Principal("server", "internal"), CDAInputs(problem=f"{ability} sub-action"))
        attempts = self.attempts
        stream.attempt = attempts.begin(rev_id, "subaction.revision", {"base": base, "revision": revision},
                                        {"sha256": digest})
        attempts.record(stream, ActionStarted(action_id=rev_id, seq=0, ability=ability, inputs_hash=sha256_hex(base)))
        offered_to = []
        for consumer in self.state.consumers_of(base):
            held = self.state.consumer(consumer)
            if held is not None and update_available([lock_of(b) for b in held.bound], out):
                offered_to.append(consumer)
        attempts.record(stream, ActionCheckpoint(action_id=rev_id, seq=0, kind="context_delta", payload={
            "artifact_id": out.artifact.artifact_id, "revision": revision, "sha256": digest, "text": text,
            **({"update_available": {"consumers": offered_to}} if offered_to else {})}))
        for consumer in offered_to:
            self.state.offer(consumer, rev_id)
            attempts.receipt(consumer, "bind.update_available", {"sub_action": rev_id}, {"sha256": digest})
        attempts.record(stream, ActionCompleted(action_id=rev_id, seq=0))
        attempts.close(stream, "completed")
        for consumer in offered_to:
            self.tell(consumer)
        return out, True

    def tell(self, consumer: str) -> None:
        """Put every revision offered to ``consumer`` on its own stream, once it has ended: an
        ``action_update_available`` event after its terminal event, receipted on its own
        (:meth:`~cda.service.attempts.Attempts.offer_update`; one already told is not told again)."""
        for rev_id in self.state.offers(consumer):
            offered = self.state.revision(rev_id)
            if offered is not None:
                self.attempts.offer_update(consumer, rev_id, offered.revision, sha256_hex(offered.artifact.text or ""),
                                           offered.artifact.artifact_id)

    def _legacy_revision(self, base: str, ability: str, revision: int) -> BoundOutput | None:
        """A revision a server before the state file streamed (its text is in its stream), recorded now."""
        stored = read_stream(self.attempts.db, f"{base}.r{revision}", None)
        if not stored:
            return None
        payload = json_object(stored[1].data).get("payload", {}) if len(stored) > 1 else {}
        out = BoundOutput(base, ability, revision,  # type: ignore[arg-type]
                          ArtifactRef(artifact_id=f"{base}:output", text=str(payload.get("text", ""))))
        self.state.put_revision(out)
        return out

    def _legacy_source(self, base: str) -> tuple[str, str] | None:
        """The provider and source of a sub-action a server before the state file spawned (that
        server kept them in memory; its stream ``<base>.r1`` is in the file): the base is the
        ability and the first 12 hex digits of the source name's SHA-256, matched against the
        sources the provider lists now
        (:meth:`~cda.service.providers.FolderProvider.sources`), and recorded."""
        ability, _, digest = base.rpartition("-")
        listing = getattr(self.providers.get(ability), "sources", None)
        if listing is None or not read_stream(self.attempts.db, f"{base}.r1", None, 1):
            return None
        for source in listing():
            if sha256_hex(source)[:12] == digest:
                self.state.put_source(base, ability, source)
                return ability, source
        return None

    def refresh(self, who: Principal, action_id: str, visible: Callable[[Principal, str], bool]) -> RefreshResult:
        """Ask the provider again; new content is a new revision (update_available to its consumers)."""
        base = action_id.rsplit(".r", 1)[0]
        known = self.state.source(base) or self._legacy_source(base)
        if known is None or not visible(who, base):
            raise EdgeError("not_found", f"no sub-action {action_id} on this server", ["params", "action_id"])
        ability, source = known
        try:
            text = self.providers[ability].produce(source)
        except (KeyError, ProviderError) as exc:
            message = str(exc) if isinstance(exc, ProviderError) else f"this server has no {ability!r} provider now"
            raise EdgeError("conflict", message, ["params", "action_id"]) from None
        with self.lock:
            out, new = self._revision(base, ability, text)
        if not new:
            raise EdgeError("conflict", f"{action_id}: the provider's output is unchanged (no new revision)",
                            ["params", "action_id"])
        rev_id = f"{base}.r{out.revision}"
        return RefreshResult(action_id=rev_id, revision=out.revision, sha256=sha256_hex(text),
                             updates_for=[c for c in self.state.consumers_of(base)
                                          if rev_id in self.state.offers(c) and visible(who, c)])

    def offered(self, held: Consumer, action_id: str, update: str) -> list[BoundOutput]:
        """What a structure revision of ``held`` binds when it accepts ``update``: its bound
        outputs with the newer revision in place (a ``conflict`` when ``update`` is none of them)."""
        offered = self.state.revision(update)
        if offered is None or not update_available([lock_of(b) for b in held.bound], offered):
            raise EdgeError("conflict", f"{update} is not a newer revision of anything {action_id} bound",
                            ["params", "update"])
        return [offered if b.action_id == offered.action_id else b for b in held.bound]

    def file_consumer(self, run: LiveAction, outputs: Any) -> None:
        """Remember that ``run`` bound its outputs (``accept_update``, ``update_available``), also
        after a restart; and offer it what is already newer than what it locked: a revision made
        while it waited or ran found no consumer to offer itself to (a consumer is filed when it ends)."""
        self.state.put_consumer(run.action_id, run.inputs, outputs.revision, outputs.plan_bundle_id, run.bound)
        for b in run.bound:
            self.state.put_revision(b)
        offered = set(self.state.offers(run.action_id))
        locks = [lock_of(b) for b in run.bound]
        for b in run.bound:
            revision = b.revision + 1
            while (newer := self.state.revision(f"{b.action_id}.r{revision}")) is not None:
                rev_id = f"{b.action_id}.r{revision}"
                if rev_id not in offered and update_available(locks, newer):
                    self.state.offer(run.action_id, rev_id)
                    self.attempts.receipt(run.action_id, "bind.update_available", {"sub_action": rev_id},
                                          {"sha256": sha256_hex(newer.artifact.text or "")})
                revision += 1
