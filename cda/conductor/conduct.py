"""The request loop (docs/conductor.md, loop 1), and the trace it leaves.

1. log the utterance; 2. Translator-In -> obligations (validated), inserted with the user's
facts; 3. the plan loop for each active obligation, oldest first; 4. the verify loop over the
answers; 5. Translator-Out -> the reply; 6. log it. The request's ``stage`` in the IR database
says which step is next, so :meth:`Conductor.handle` on a request a killed conductor left
unfinished carries on from there (a tool run it cut short is marked ``interrupted`` and run
again). Nothing is kept in memory between steps.

>>> from cda.conductor.irdb import IRDatabase, holder_id
>>> c = Conductor(IRDatabase(":memory:"))
>>> c.handle("compute (1 + 2) * 0.1; what is 2 ** -2").answer
'compute [calculator]: (1 + 2) * 0.1 = 3/10\\ncompute [calculator]: 2 ** -2 = 1/4'
"""

from __future__ import annotations

from cda.conductor.irdb import IRDatabase, holder_id
from cda.conductor.plan import plan_obligation
from cda.conductor.registry import Registry, load_registry
from cda.conductor.tooling import Toolbox, ToolContext
from cda.conductor.tools import builtin_toolbox
from cda.conductor.translate import RuleTranslatorIn, TranslatorIn, render_answer
from cda.conductor.verify import resolving_run, verify_request
from cda.contracts.conductor import META_TYPES, ObligationStatus, ToolRun, Trace

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
    ) -> None:
        self.db = db
        self.registry = registry or load_registry(None, toolbox or builtin_toolbox())
        self.translator_in = translator_in or RuleTranslatorIn()
        self.context = context or ToolContext()

    def handle(self, utterance: str) -> Trace:
        """Answer ``utterance`` (or carry on with the unfinished request that asked it)."""
        return self.resume(self.db.open_request(utterance))

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
            doc = self.translator_in(utterance)
            with db.transaction() as conn:
                source = db.add_source(conn, "user", None, f"request {request_id}: the user's words")
                for fact in doc.facts:
                    db.add_assertion(conn, request_id, None, "fact", fact, source)
                for spec in doc.obligations:
                    db.add_obligation(conn, request_id, spec.type, spec.inputs)
                db.event(conn, request_id, "translated",
                         {"obligations": len(doc.obligations), "facts": len(doc.facts)})
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
            db.finish(request_id, status, answer)

    def trace(self, request_id: int) -> Trace:
        """The request as the IR holds it, without times (the same bytes for the same run)."""
        db = self.db
        utterance, _, status, answer = db.request(request_id)
        return Trace.model_validate(dict(
            request_id=request_id, utterance=utterance, status=status or "unanswered", answer=answer or "",
            obligations=db.obligations(request_id),
            tool_runs=[r.model_copy(update={"duration_ms": None}) for r in db.runs(request_id=request_id)],
            assertions=db.assertions(request_id), verifications=db.verifications(request_id),
            events=db.events(request_id),
        ))


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
