"""Translator-In (an utterance to obligations) and Translator-Out (the IR to a reply).

Both are pluggable. The default Translator-In is a small rule-based grammar for the obligation
types the conductor ships, one clause per obligation, clauses joined by ``;``, ``, then`` or ``and then``:

==========================================  =======================================
``compute (1 + 2) * 0.1`` (also calculate,   ``compute {expression}``
evaluate, what is)
``solve path/problem.cda``                  ``solve {problem}``
``prove path/claims.fol``                   ``prove {problem}``
``diagnose c17.bench with obs.txt``         ``diagnose {circuit, observations}``
``run path/inputs.json``                    ``run_action {inputs}``
``query data.sqlite: SELECT …``             ``query {database, sql}``
``look up db`` (also lookup, what is        ``lookup {entity}``
related to)
``given not up(db), slow(api)``             facts stated by the user
==========================================  =======================================

A clause the grammar does not read becomes a ``clarify`` obligation quoting it: the conductor
asks rather than guesses. An LLM may be configured instead (:class:`LLMTranslatorIn`); its
reply is validated against :class:`~cda.contracts.conductor.ObligationsDoc` and anything that
does not validate becomes an ``error`` obligation naming the problem — never a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import ValidationError

from cda.contracts.conductor import META_TYPES, Obligation, ObligationsDoc, ObligationSpec, ObligationStatus, ToolRun
from cda.contracts.locations import validation_problems

__all__ = ["LLMTranslatorIn", "RuleTranslatorIn", "TranslatorIn", "llm_prompt", "render_answer", "summarize"]

MAX_UTTERANCE = 10_000


class TranslatorIn(Protocol):
    def __call__(self, utterance: str) -> ObligationsDoc: ...


_SPLIT = re.compile(r"\s*(?:;|,\s*then\b|\band then\b)\s*", re.IGNORECASE)
"""Clauses are split on ``;``, ``, then`` and ``and then`` (a bare ``then`` may be SQL's), and
on ``and`` when a verb the grammar reads follows it (``solve x.cda and compute 2*3``)."""
_VERBS = r"(?:compute|calculate|evaluate|what is|solve|prove|diagnose|run|query|look\s*up|lookup|given)"
_AND_VERB = re.compile(rf"\s+and\s+(?={_VERBS}\b)", re.IGNORECASE)
_LEAD = re.compile(r"^(?:(?:please|kindly|now|also|can you|could you|would you)\b[\s,]*)+", re.I)
"""Politeness in front of a clause: skipped, and said to be skipped (``unread``)."""
_OBJECT = r"(?:(?:the\s+)?(?:problem|claims?|file|circuit|action|inputs?|formulas?)\s+(?:in|at|from|of)\s+|the\s+)?"
"""``solve the problem in x.cda``, ``prove the claims in x.fol``, ``run the action in i.json``."""
_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], ObligationSpec]]] = [
    (re.compile(r"^(?:compute|calculate|evaluate|what is)\s+(?P<e>.+?)\??$", re.I | re.S),
     lambda m: ObligationSpec(type="compute", inputs={"expression": m["e"].strip()})),
    (re.compile(rf"^solve\s+{_OBJECT}(?P<p>\S+)$", re.I),
     lambda m: ObligationSpec(type="solve", inputs={"problem": m["p"]})),
    (re.compile(rf"^prove\s+{_OBJECT}(?P<p>\S+)$", re.I),
     lambda m: ObligationSpec(type="prove", inputs={"problem": m["p"]})),
    (re.compile(rf"^diagnose\s+{_OBJECT}(?P<c>\S+)\s+(?:with|given|using)\s+(?:the\s+observations\s+in\s+)?(?P<o>\S+)$",
                re.I),
     lambda m: ObligationSpec(type="diagnose", inputs={"circuit": m["c"], "observations": m["o"]})),
    (re.compile(rf"^diagnose\s+{_OBJECT}(?P<c>\S+)$", re.I),
     lambda m: ObligationSpec(type="diagnose", inputs={"circuit": m["c"]})),
    (re.compile(rf"^run(?:\s+action)?\s+{_OBJECT}(?P<i>\S+)$", re.I),
     lambda m: ObligationSpec(type="run_action", inputs={"inputs": m["i"]})),
    (re.compile(r"^query\s+(?P<d>[^:\s]+)\s*:\s*(?P<q>.+)$", re.I | re.S),
     lambda m: ObligationSpec(type="query", inputs={"database": m["d"], "sql": m["q"].strip()})),
    (re.compile(r"^(?:look\s*up|what is related to)\s+(?P<e>[^\s?]+)\??$", re.I),
     lambda m: ObligationSpec(type="lookup", inputs={"entity": m["e"]})),
]
_GIVEN = re.compile(r"^given\s+(?P<f>.+)$", re.I | re.S)
_PAIR = re.compile(r"^(?P<k>[A-Za-z_][A-Za-z0-9_]*)=(?P<v>.*)$", re.S)


def _split_facts(text: str) -> list[str]:
    """``not up(db), slow(api)`` -> two facts (commas inside parentheses stay)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [f.strip() for f in out if f.strip()]


def _words_of(kind: str) -> str:
    """An obligation type as the words a user writes: ``page_oncall`` -> ``page oncall``."""
    return re.sub(r"[_.]+", " ", kind)


class RuleTranslatorIn:
    """The deterministic default: the grammar above, plus one rule per obligation type of the
    registry (``types``: type -> its inputs, :meth:`~cda.conductor.registry.Registry.obligation_types`):
    a clause that starts with the type's words (``page oncall``, ``page_oncall``) takes the rest
    as ``name=value`` words, or as values for the type's inputs in order (the last one takes
    what is left). Words it skipped (``please``) are listed in ``unread``."""

    name = "rules"

    def __init__(self, types: dict[str, list[str]] | None = None) -> None:
        self.types = dict(types or {})
        self._user = sorted(((_type_rule(t), t, inputs) for t, inputs in self.types.items()
                             if t not in _SHIPPED_TYPES), key=lambda r: -len(r[1]))

    def __call__(self, utterance: str) -> ObligationsDoc:
        text = utterance.strip()
        if not text:
            return _error_doc("the request is empty")
        if len(text) > MAX_UTTERANCE:
            return _error_doc(f"a request of {len(text)} characters (at most {MAX_UTTERANCE})")
        obligations: list[ObligationSpec] = []
        facts: list[str] = []
        unread: list[str] = []
        clauses = [c for part in _SPLIT.split(text) for c in _AND_VERB.split(part) if c.strip()]
        for clause in clauses:
            lead = _LEAD.match(clause)
            if lead and lead.end():
                unread.append(lead[0].strip(" ,"))
                clause = clause[lead.end():]
            given = _GIVEN.match(clause)
            if given:
                facts.extend(_split_facts(given["f"]))
                continue
            spec = self._read(clause.strip())
            obligations.append(spec or ObligationSpec(
                type="clarify", inputs={"reason": "no rule reads this request", "text": clause[:500]}))
        if not obligations:
            obligations.append(ObligationSpec(
                type="clarify", inputs={"reason": "facts were given but nothing was asked", "text": text[:500]}))
        try:
            return ObligationsDoc(obligations=obligations, facts=facts, unread=unread)
        except (ValidationError, ValueError) as exc:
            detail = validation_problems(exc) if isinstance(exc, ValidationError) else str(exc)
            return _error_doc(f"the request does not translate: {detail}")

    def _read(self, clause: str) -> ObligationSpec | None:
        for regex, kind, inputs in self._user:  # the user's own types first: theirs is the more specific word
            m = regex.match(clause)
            if m:
                return ObligationSpec(type=kind, inputs=_inputs_of((m["rest"] or "").strip(), inputs))
        for pattern, build in _RULES:
            m = pattern.match(clause)
            if m:
                return build(m)
        return None


def _type_rule(kind: str) -> re.Pattern[str]:
    """``page_oncall`` read as ``page oncall``, ``page_oncall`` or ``page.oncall``, then the rest."""
    words = r"[\s_.]+".join(re.escape(w) for w in _words_of(kind).split())
    return re.compile(r"^" + words + r"(?:\s+(?P<rest>.*))?$", re.I | re.S)


def _inputs_of(rest: str, names: list[str]) -> dict[str, Any]:
    """``service=api minutes=5`` by name, else the words in order for ``names`` (the last name
    takes the rest of the clause)."""
    words = rest.split()
    if words and all(_PAIR.match(w) for w in words):
        return {m["k"]: m["v"] for m in (_PAIR.match(w) for w in words) if m}
    if not words or not names:
        return {"text": rest} if rest and not names else {}
    head, tail = words[:len(names) - 1], words[len(names) - 1:]
    return dict(zip(names, [*head, *([" ".join(tail)] if tail else [])]))


def _error_doc(reason: str) -> ObligationsDoc:
    return ObligationsDoc(obligations=[ObligationSpec(type="error", inputs={"reason": reason[:2000]})])


LLM_PROMPT = (
    "Turn the user's request into obligations. Reply with one JSON object only, valid against this JSON "
    "Schema:\n{schema}\nThe obligation types you may use, each with the inputs its tools take:\n{types}\n"
    "- clarify {{reason, text}}: a part of the request you cannot read (never guess).\n"
    "facts: literals such as 'not up(db)' the user stated as true. Numbers meant exactly are written as "
    "text (\"0.1\"), never as JSON floats."
)

_SHIPPED_TYPES = {"compute": ["expression"], "solve": ["problem"], "prove": ["problem"],
                  "diagnose": ["circuit", "observations"], "run_action": ["inputs"], "query": ["database", "sql"],
                  "lookup": ["entity"]}


def llm_prompt(types: dict[str, list[str]]) -> str:
    """The system prompt: the obligations document's schema and the registry's types."""
    schema = json.dumps(ObligationsDoc.model_json_schema(), sort_keys=True, separators=(",", ":"))
    listed = "\n".join(f"- {t} {{{', '.join(inputs)}}}" for t, inputs in sorted(types.items()))
    return LLM_PROMPT.format(schema=schema, types=listed)


class LLMTranslatorIn:
    """Translator-In through a language model: ``complete(system, user) -> reply text``.

    The model is given the obligations document's JSON Schema and the registry's obligation types
    (``types``, the shipped seven when none are given). Its reply must validate against the schema
    and name only those types (or ``clarify``); a fenced ```json block is unwrapped. A reply that
    does not is sent back once with what was wrong; a second bad reply, or a provider's failure,
    falls back to the rule translator (``fallback``). What happened — each reply's SHA-256, the
    problem, who translated — is kept in :attr:`last_receipt`, which the conductor writes to the
    IR with the request (event ``translated``).
    """

    name = "llm"

    def __init__(self, complete: Callable[[str, str], str], types: dict[str, list[str]] | None = None,
                 fallback: TranslatorIn | None = None) -> None:
        self._complete = complete
        self.types = dict(types or _SHIPPED_TYPES)
        self.fallback = fallback if fallback is not None else RuleTranslatorIn(self.types)
        self.last_receipt: dict[str, Any] | None = None

    def __call__(self, utterance: str) -> ObligationsDoc:
        import hashlib

        system = llm_prompt(self.types)
        attempts: list[dict[str, Any]] = []
        user = utterance
        failed: str | None = None
        problem: str | None = None
        for _ in range(2):
            try:
                reply = self._complete(system, user)
            except Exception as exc:  # a provider's failure of any kind: the rules answer instead
                failed = f"the model translator failed: {exc}"[:500]  # no class names: a user reads it
                attempts.append({"problem": failed})
                break
            doc, problem = self._read(reply)
            attempts.append({"reply_sha256": hashlib.sha256(reply.encode("utf-8")).hexdigest(),
                             "reply": reply[:2000], **({"problem": problem} if problem else {})})
            if doc is not None:
                self.last_receipt = {"translator": "llm", "attempts": attempts}
                return doc
            user = (f"{utterance}\n\nYour previous reply was refused: {problem}. Reply again with one JSON object "
                    "valid against the schema, using only the listed obligation types.")
        self.last_receipt = {"translator": "rules (the model's replies were refused)", "attempts": attempts}
        if failed is None:
            failed = f"the model translator's replies were refused twice (the last: {problem})"[:500]
        doc = self.fallback(utterance)
        if all(o.type == "clarify" for o in doc.obligations):
            # the rules read nothing: the reason the user must see is the model's failure, not "no rule reads"
            return ObligationsDoc(obligations=[ObligationSpec(type="translation_failed", inputs={
                "reason": f"{failed}; the rule translator read nothing of the request either"})])
        # what the rules read is still answered, under the failure that says who read it
        failure = ObligationSpec(type="translation_failed", inputs={
            "reason": f"{failed}; the rule translator read the request instead"})
        return doc.model_copy(update={"obligations": [failure, *doc.obligations]})

    def _read(self, reply: str) -> tuple[ObligationsDoc | None, str | None]:
        body = reply.strip()
        fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.S)
        if fenced:
            body = fenced[1]
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            return None, f"the reply is not JSON ({exc.msg} at column {exc.colno})"
        try:
            doc = ObligationsDoc.model_validate(data)
        except ValidationError as exc:
            return None, f"the reply is not an obligations document: {validation_problems(exc)}"
        unknown = sorted({o.type for o in doc.obligations} - set(self.types) - {"clarify"})
        if unknown:
            return None, f"obligation type(s) {', '.join(unknown)} are not in the registry"
        return doc, None


# ---- Translator-Out
def summarize(obligation: Obligation, outputs: dict[str, Any]) -> str:
    """One line for a resolved obligation."""
    t, i = obligation.type, obligation.inputs
    if t == "compute":
        return f"{i.get('expression')} = {outputs.get('value')}"
    if t == "solve":
        best = outputs.get("hypotheses") or []
        parts = [f"{i.get('problem')}: {outputs.get('status')}"]
        if best:
            parts.append(_best_explanation(best, outputs.get("enumerated")))
        parts += [f"{v['goal']} {v['claim']}: {v['status']}" for v in outputs.get("verdicts", [])]
        if outputs.get("conflict"):
            parts.append("conflict: " + "; ".join(", ".join(c) for c in outputs["conflict"]))
        return "; ".join(parts)
    if t == "prove":
        return "; ".join(f"{v['claim']}: {v['status']}" for v in outputs.get("verdicts", [])) or "no claims"
    if t == "diagnose":
        found = outputs.get("diagnoses") or []
        return f"{len(found)} minimal diagnos{'is' if len(found) == 1 else 'es'}: " + (
            "; ".join("{" + ", ".join(d) + "}" for d in found) or "none")
    if t == "query":
        return f"{len(outputs.get('rows', []))} row(s): {json.dumps(outputs.get('rows', [])[:5])}"
    if t == "lookup":
        return (f"{i.get('entity')}: " + (", ".join(outputs.get("facts", [])) or "no facts")) if outputs.get(
            "found") else f"{i.get('entity')}: not in Ken"
    if t == "run_action":
        return f"action {outputs.get('action_id')}: {outputs.get('status')}; " + "; ".join(
            f"{v['claim']}: {v['status']}" for v in outputs.get("verdicts", []))
    return json.dumps(outputs, sort_keys=True)[:500]


def _best_explanation(ranked: list[dict[str, Any]], enumerated: int | None) -> str:
    """The cheapest hypothesis, or every one tied with it at the same exact cost: a tie is said,
    never broken silently by the listing order (and when every listed one ties and more were
    enumerated than listed, that more may tie).

    >>> _best_explanation([{"assumed": ["down(api)"], "cost": "1"}, {"assumed": ["down(auth)"], "cost": "1"},
    ...                    {"assumed": ["down(db)"], "cost": "2"}], 3)
    'best explanations, tied at cost 1: {down(api)}; {down(auth)}'
    >>> _best_explanation([{"assumed": [], "cost": "0"}, {"assumed": ["a"], "cost": "1"}], 2)
    'best explanation: (nothing assumed)'
    """
    tied = [h for h in ranked if h["cost"] == ranked[0]["cost"]]
    if len(tied) == 1:
        return "best explanation: " + (", ".join(tied[0]["assumed"]) or "(nothing assumed)")
    sets = "; ".join("{" + ", ".join(h["assumed"]) + "}" for h in tied)
    more = len(tied) == len(ranked) and enumerated is not None and enumerated > len(ranked)
    return f"best explanations, tied at cost {tied[0]['cost']}: {sets}" + (
        f" (and perhaps more: only the first {len(ranked)} are listed)" if more else "")


def _meta_line(o: Obligation) -> str:
    reason = o.inputs.get("reason", "")
    if o.type == "clarify":
        text = o.inputs.get("text")
        return f"CLARIFY: {reason}" + (f": {text!r}" if text else "")
    if o.type == "discover_op":
        return f"DISCOVER_OP: no tool satisfies {o.inputs.get('obligation_type')!r}; one must be registered"
    if o.type == "justify":
        return f"JUSTIFY(failure): {reason}"
    if o.type == "translation_failed":
        return f"TRANSLATION_FAILED: {reason}"
    return f"ERROR: {reason}"


def render_answer(
    obligations: list[Obligation], resolved_by: dict[int, ToolRun], failed_checks: dict[int, str]
) -> tuple[str, str]:
    """The reply and its status: ``answered`` (every obligation resolved and verified),
    ``uncertain`` (a verification failed: its answer is replaced by an uncertainty message),
    ``unanswered`` (something is still owed: a CLARIFY, DISCOVER_OP, JUSTIFY or ERROR),
    ``translation_failed`` (the model translator failed: whatever else holds, the request was not
    read as asked — first, since every other line stands on the rule translator's reading).

    One line per obligation in the order of the request, each followed by what it still owes."""
    children: dict[int | None, list[Obligation]] = {}
    for o in obligations:
        children.setdefault(o.parent_id, []).append(o)
    lines: list[str] = []
    owed = uncertain = untranslated = False

    def walk(o: Obligation) -> None:
        nonlocal owed, uncertain, untranslated
        if o.type in META_TYPES and o.status is not ObligationStatus.ACTIVE:
            pass  # a question answered: what it led to follows
        elif o.type in META_TYPES:
            lines.append(_meta_line(o))
            owed = True
            untranslated = untranslated or o.type == "translation_failed"
        elif o.id in failed_checks:
            lines.append(f"UNCERTAIN ({o.type}): the answer did not survive verification ({failed_checks[o.id]})")
            uncertain = True
        elif o.status is ObligationStatus.RESOLVED and o.id in resolved_by:
            run = resolved_by[o.id]
            lines.append(f"{o.type} [{run.tool}]: {summarize(o, run.outputs or {})}")
        for child in children.get(o.id, []):
            walk(child)

    for root in children.get(None, []):
        walk(root)
    status = ("translation_failed" if untranslated else "uncertain" if uncertain else "unanswered" if owed
              else "answered")
    return "\n".join(lines), status
