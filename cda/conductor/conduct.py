"""The request loop (docs/conductor.md, loop 1), and the trace it leaves.

1. log the utterance; 2. Translator-In -> obligations (validated), inserted with the user's
facts; 3. the plan loop for each active obligation, oldest first; 4. the verify loop over the
answers; 5. Translator-Out -> the reply; 6. log it. The request's ``stage`` in the IR database
says which step is next, so :meth:`Conductor.handle` on a request a killed conductor left
unfinished carries on from there (a tool run it cut short is marked ``interrupted`` and run
again). Nothing is kept in memory between steps.

>>> from cda.conductor.irdb import IRDatabase
>>> c = Conductor(IRDatabase(":memory:"))
>>> c.handle("compute (1 + 2) * 0.1; what is 2 ** -2").answer
'compute [calculator]: (1 + 2) * 0.1 = 3/10\\ncompute [calculator]: 2 ** -2 = 1/4'
"""

from __future__ import annotations

import json
import re
from typing import Any

from cda.conductor.irdb import IRDatabase, canonical, holder_id
from cda.conductor.plan import plan_obligation
from cda.conductor.registry import Registry, load_registry
from cda.conductor.tooling import ConductorError, Toolbox, ToolContext
from cda.conductor.tools import builtin_toolbox
from cda.conductor.translate import RuleTranslatorIn, TranslatorIn, render_answer
from cda.conductor.verify import resolving_run, verify_request
from cda.contracts.conductor import (
    META_TYPES,
    Obligation,
    ObligationsDoc,
    ObligationStatus,
    ToolRun,
    ToolRunStatus,
    Trace,
)

__all__ = ["Conductor", "render_tree"]


class Conductor:
    """The three loops over one IR database, one registry and one Translator-In."""

    def __init__(
        self,
        db: IRDatabase,
        registry: Registry | None = None,
        translator_in: TranslatorIn | None = None,
        context: ToolContext | None = None,
        toolbox: Toolbox | None = None,
        owner: str | None = None,
    ) -> None:
        self.db = db
        self.owner = owner  # the principal a shared database's requests are kept apart by
        self.registry = registry or load_registry(None, toolbox or builtin_toolbox())
        self.translator_in = translator_in or RuleTranslatorIn(self.registry.obligation_types())
        self.context = context or ToolContext()
        self._translated: dict[int, ObligationsDoc] = {}

    def handle(self, utterance: str, obligations: ObligationsDoc | None = None) -> Trace:
        """Answer ``utterance`` (or carry on with the unfinished request that asked it). With
        ``obligations`` the request is that document, already structured (Translator-In is not
        asked); ``utterance`` then only names it."""
        request_id = self.db.open_request(utterance, self.owner)
        if obligations is not None:
            self._translated[request_id] = obligations
        return self.resume(request_id)

    def answer(self, obligation_id: int, text: str, retract: tuple[int, ...] = ()) -> Trace:
        """Answer an open CLARIFY (or DISCOVER_OP, once a tool is registered) and carry its
        request on. What the answer does depends on what was asked (docs/conductor.md):

        * inputs a tool lacked or a precondition that failed: ``name=value; …`` (or the value
          alone when one input is wanted) — the obligation is planned again with them;
        * a clause no rule read: the answer is read as a request of its own, under the CLARIFY;
        * facts that contradict an answer: ``retract`` takes facts back (assertion ids), ``given
          …`` in the text adds facts, and the answer is verified again;
        * a ``once`` tool stopped mid-call: its outputs as a JSON object (the user's word on what
          it did), or anything else to leave the obligation failed, saying so;
        * DISCOVER_OP: the obligation is planned again (with the registry now given).
        """
        db = self.db
        o = db.obligation(obligation_id)
        db.check_owner(o.request_id, self.owner, f"no obligation {obligation_id}")
        if o.type not in ("clarify", "discover_op"):
            raise ConductorError(f"obligation {obligation_id} is {o.type}, not a CLARIFY or DISCOVER_OP: "
                                 "only a question is answered")
        if o.status is not ObligationStatus.ACTIVE:
            raise ConductorError(f"obligation {obligation_id} was answered already ({o.reason})")
        if len(text) > 10_000:
            raise ConductorError(f"an answer of {len(text)} characters (at most 10000)")
        if not text.strip() and not retract:
            raise ConductorError(f"an empty answer to obligation {obligation_id}: say what it asks, or --retract a fact")
        parent = db.obligation(o.parent_id) if o.parent_id is not None else None
        doc = self.translator_in(text) if text.strip() and (parent is None or parent.status is
                                                            ObligationStatus.RESOLVED) else None
        holder = holder_id()
        db.claim(o.request_id, holder)
        try:
            with db.transaction() as conn:
                source = db.add_source(conn, "user", None, f"the answer to obligation {o.id}")
                db.add_assertion(conn, o.request_id, o.id, "answer", text, source)
                for assertion_id in retract:
                    db.retract(conn, assertion_id, o.request_id, o.id)
                db.settle(conn, o, ObligationStatus.RESOLVED, f"answered: {text[:500]}")
                if parent is None or parent.status is ObligationStatus.RESOLVED:
                    for fact in doc.facts if doc is not None else []:
                        db.add_assertion(conn, o.request_id, None, "fact", fact, source)
                    if parent is not None:
                        db.supersede_verifications(conn, parent.id)
                    elif doc is not None:
                        for spec in doc.obligations:
                            db.add_obligation(conn, o.request_id, spec.type, spec.inputs, o.id)
                elif "unsure_run" in o.inputs:
                    self._unsure(conn, parent, int(o.inputs["unsure_run"]), text, source)
                elif o.type == "discover_op":
                    db.update_inputs(conn, parent, parent.inputs)
                else:
                    db.update_inputs(conn, parent, {**parent.inputs, **_given_inputs(text, o)})
                db.reopen(conn, o.request_id)
        finally:
            db.release(o.request_id, holder)
        return self.resume(o.request_id)

    def _unsure(self, conn: Any, parent: Obligation, run_id: int, text: str, source: int) -> None:
        db = self.db
        try:
            outputs = json.loads(text)
        except json.JSONDecodeError:
            outputs = None
        if isinstance(outputs, dict):
            canonical(outputs)
            run_id = db.add_run(conn, parent, "user", {"about_run": run_id}, ToolRunStatus.OK, outputs,
                                "the user's word on what the interrupted run did")
            for key in sorted(outputs):
                db.add_assertion(conn, parent.request_id, parent.id, key, outputs[key], source)
            db.settle(conn, parent, ObligationStatus.RESOLVED, "answered by the user's account of the run")
        else:
            reason = f"the user says run {run_id} did not give an answer: {text[:500]}"
            db.add_obligation(conn, parent.request_id, "justify", {"reason": reason}, parent.id)
            db.settle(conn, parent, ObligationStatus.FAILED, reason)

    def resume(self, request_id: int) -> Trace:
        db = self.db
        _, stage, _, _ = db.request(request_id)
        if stage == "answered":
            return self.trace(request_id)
        holder = holder_id()
        db.claim(request_id, holder)  # refused while another live conductor answers it
        try:
            self._steps(request_id)
        finally:
            db.release(request_id, holder)
        return self.trace(request_id)

    def _steps(self, request_id: int) -> None:
        db = self.db
        utterance, stage, _, _ = db.request(request_id)
        db.mark_interrupted(request_id)  # runs left 'started' by a conductor that is gone
        if stage == "new":
            given = self._translated.pop(request_id, None)
            doc = given if given is not None else self.translator_in(utterance)
            with db.transaction() as conn:
                source = db.add_source(conn, "user", None, f"request {request_id}: the user's words")
                for fact in doc.facts:
                    db.add_assertion(conn, request_id, None, "fact", fact, source)
                for spec in doc.obligations:
                    db.add_obligation(conn, request_id, spec.type, spec.inputs)
                db.event(conn, request_id, "translated", {
                    "obligations": len(doc.obligations), "facts": len(doc.facts), "unread": doc.unread,
                    "by": "obligations document" if given is not None else _translator_name(self.translator_in),
                    **({"receipt": receipt} if (receipt := getattr(self.translator_in, "last_receipt", None))
                       and given is None else {})})
                db.set_stage(conn, request_id, stage := "planning")
        if stage == "planning":
            while True:
                active = [o for o in db.obligations(request_id)
                          if o.status is ObligationStatus.ACTIVE and o.type not in META_TYPES]
                if not active:
                    break
                plan_obligation(active[0], self.registry, db, self.context)
            with db.transaction() as conn:
                db.set_stage(conn, request_id, stage := "verifying")
        if stage == "verifying":
            verify_request(request_id, self.registry, db, self.context)
            with db.transaction() as conn:
                db.set_stage(conn, request_id, stage := "replying")
        if stage == "replying":
            obligations = db.obligations(request_id)
            resolved_by: dict[int, ToolRun] = {}
            for o in obligations:
                run = resolving_run(db, o) if o.status is ObligationStatus.RESOLVED else None
                if run is not None:
                    resolved_by[o.id] = run
            failed = {v.obligation_id: v.detail for v in db.verifications(request_id) if not v.ok}
            answer, status = render_answer(obligations, resolved_by, failed)
            unread = [w for e in db.events(request_id) if e.kind == "translated" for w in e.body.get("unread", [])]
            if unread:
                answer += f"\n(words not read: {'; '.join(unread)})"
            db.finish(request_id, status, answer)

    def trace(self, request_id: int) -> Trace:
        """The request as the IR holds it, without times (the same bytes for the same run)."""
        db = self.db
        db.check_owner(request_id, self.owner)
        utterance, _, status, answer = db.request(request_id)
        return Trace.model_validate(dict(
            request_id=request_id, utterance=utterance, status=status or "unanswered", answer=answer or "",
            obligations=db.obligations(request_id),
            tool_runs=[r.model_copy(update={"duration_ms": None}) for r in db.runs(request_id=request_id)],
            assertions=db.assertions(request_id), verifications=db.verifications(request_id),
            events=db.events(request_id),
        ))


def _translator_name(translator: object) -> str:
    return str(getattr(translator, "name", type(translator).__name__))


_PAIR = re.compile(r"(?:^|[;\s])([A-Za-z_][A-Za-z0-9_]*)\s*=\s*")


def _given_inputs(text: str, clarify: Obligation) -> dict[str, Any]:
    """``name=value; name=value`` from an answer (values run to the next ``;``), or the whole
    text as the one input asked for."""
    pairs = {m[1]: None for m in _PAIR.finditer(text)}
    if pairs:
        out: dict[str, Any] = {}
        for part in (p for p in text.split(";") if p.strip()):
            name, eq, value = part.partition("=")
            if not eq or not name.strip().isidentifier():
                raise ConductorError(f"{part.strip()!r}: write name=value (several joined by ';')")
            out[name.strip()] = value.strip()
        return out
    wanted = [str(m) for m in clarify.inputs.get("missing") or []] or [str(m) for m in clarify.inputs.get(
        "inputs") or []]
    if len(wanted) != 1:
        raise ConductorError(f"say which input you give: name=value ({', '.join(wanted) or 'the tool names none'})")
    return {wanted[0]: text.strip()}


def render_tree(trace: Trace) -> str:
    """The obligations as a tree, each with its tool runs and its verification, then the reply."""
    children: dict[int | None, list[int]] = {}
    by_id = {o.id: o for o in trace.obligations}
    for o in trace.obligations:
        children.setdefault(o.parent_id, []).append(o.id)
    runs: dict[int, list[ToolRun]] = {}
    for r in trace.tool_runs:
        runs.setdefault(r.obligation_id, []).append(r)
    checks = {v.obligation_id: v for v in trace.verifications}
    lines = [f"request {trace.request_id}: {trace.utterance}"]

    def walk(oid: int, depth: int) -> None:
        o = by_id[oid]
        pad = "  " * depth
        inputs = ", ".join(f"{k}={v!r}" for k, v in sorted(o.inputs.items()))
        lines.append(f"{pad}├─ #{o.id} {o.type.upper() if o.type in META_TYPES else o.type}({inputs}) "
                     f"[{o.status.value}]")
        for r in runs.get(oid, []):
            lines.append(f"{pad}│   tool {r.tool}: {r.status.value}" + (f" — {r.detail}" if r.detail else ""))
        if oid in checks:
            v = checks[oid]
            lines.append(f"{pad}│   verify ({v.kind}): {'ok' if v.ok else 'FAILED'} — {v.detail}")
        for child in children.get(oid, []):
            walk(child, depth + 1)

    for root in children.get(None, []):
        walk(root, 1)
    lines.append(f"{trace.status}:")
    lines.extend(f"  {line}" for line in trace.answer.splitlines())
    return "\n".join(lines) + "\n"
