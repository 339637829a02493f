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

__all__ = ["LLMTranslatorIn", "RuleTranslatorIn", "TranslatorIn", "render_answer", "summarize"]

MAX_UTTERANCE = 10_000


class TranslatorIn(Protocol):
    def __call__(self, utterance: str) -> ObligationsDoc: ...


_SPLIT = re.compile(r"\s*(?:;|,\s*then\b|\band then\b)\s*", re.IGNORECASE)
"""Clauses are split on ``;``, ``, then`` and ``and then`` (a bare ``then`` may be SQL's)."""
_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], ObligationSpec]]] = [
    (re.compile(r"^(?:compute|calculate|evaluate|what is)\s+(?P<e>.+?)\??$", re.I | re.S),
     lambda m: ObligationSpec(type="compute", inputs={"expression": m["e"].strip()})),
    (re.compile(r"^solve\s+(?P<p>\S+)$", re.I),
     lambda m: ObligationSpec(type="solve", inputs={"problem": m["p"]})),
    (re.compile(r"^prove\s+(?P<p>\S+)$", re.I),
     lambda m: ObligationSpec(type="prove", inputs={"problem": m["p"]})),
    (re.compile(r"^diagnose\s+(?P<c>\S+)\s+(?:with|given|using)\s+(?P<o>\S+)$", re.I),
     lambda m: ObligationSpec(type="diagnose", inputs={"circuit": m["c"], "observations": m["o"]})),
    (re.compile(r"^diagnose\s+(?P<c>\S+)$", re.I),
     lambda m: ObligationSpec(type="diagnose", inputs={"circuit": m["c"]})),
    (re.compile(r"^run(?:\s+action)?\s+(?P<i>\S+)$", re.I),
     lambda m: ObligationSpec(type="run_action", inputs={"inputs": m["i"]})),
    (re.compile(r"^query\s+(?P<d>[^:\s]+)\s*:\s*(?P<q>.+)$", re.I | re.S),
     lambda m: ObligationSpec(type="query", inputs={"database": m["d"], "sql": m["q"].strip()})),
    (re.compile(r"^(?:look\s*up|what is related to)\s+(?P<e>[^\s?]+)\??$", re.I),
     lambda m: ObligationSpec(type="lookup", inputs={"entity": m["e"]})),
]
_GIVEN = re.compile(r"^given\s+(?P<f>.+)$", re.I | re.S)


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


class RuleTranslatorIn:
    """The deterministic default: the grammar above, nothing else."""

    def __call__(self, utterance: str) -> ObligationsDoc:
        text = utterance.strip()
        if not text:
            return _error_doc("the request is empty")
        if len(text) > MAX_UTTERANCE:
            return _error_doc(f"a request of {len(text)} characters (at most {MAX_UTTERANCE})")
        obligations: list[ObligationSpec] = []
        facts: list[str] = []
        for clause in (c for c in _SPLIT.split(text) if c.strip()):
            given = _GIVEN.match(clause)
            if given:
                facts.extend(_split_facts(given["f"]))
                continue
            for pattern, build in _RULES:
                m = pattern.match(clause)
                if m:
                    obligations.append(build(m))
                    break
            else:
                obligations.append(ObligationSpec(
                    type="clarify", inputs={"reason": "no rule reads this request", "text": clause[:500]}))
        if not obligations:
            obligations.append(ObligationSpec(
                type="clarify", inputs={"reason": "facts were given but nothing was asked", "text": text[:500]}))
        try:
            return ObligationsDoc(obligations=obligations, facts=facts)
        except ValidationError as exc:
            return _error_doc(f"the request does not translate: {validation_problems(exc)}")


def _error_doc(reason: str) -> ObligationsDoc:
    return ObligationsDoc(obligations=[ObligationSpec(type="error", inputs={"reason": reason[:2000]})])


LLM_PROMPT = (
    "Turn the user's request into obligations. Reply with one JSON object only: "
    '{"obligations": [{"type": T, "inputs": {...}}], "facts": [...]}. Types and their inputs: '
    "compute {expression}, solve {problem}, prove {problem}, diagnose {circuit, observations}, "
    "run_action {inputs}, query {database, sql}, lookup {entity}; clarify {reason, text} when the "
    "request cannot be read. facts: literals such as 'not up(db)' the user stated."
)


class LLMTranslatorIn:
    """Translator-In through a language model: ``complete(system, user) -> reply text``.

    The reply must be exactly an :class:`ObligationsDoc` (a fenced ```json block is unwrapped);
    a provider error, text that is not JSON, or JSON that does not validate becomes one ``error``
    obligation that names the problem.
    """

    def __init__(self, complete: Callable[[str, str], str]) -> None:
        self._complete = complete

    def __call__(self, utterance: str) -> ObligationsDoc:
        try:
            reply = self._complete(LLM_PROMPT, utterance)
        except Exception as exc:  # a provider's failure of any kind is an error obligation
            return _error_doc(f"the translator failed: {type(exc).__name__}: {exc}")
        body = reply.strip()
        fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.S)
        if fenced:
            body = fenced[1]
        try:
            data = json.loads(body)
        except json.JSONDecodeError as exc:
            return _error_doc(f"the translator's reply is not JSON ({exc.msg} at column {exc.colno})")
        try:
            return ObligationsDoc.model_validate(data)
        except ValidationError as exc:
            return _error_doc(f"the translator's reply is not an obligations document: {validation_problems(exc)}")


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
    return f"ERROR: {reason}"


def render_answer(
    obligations: list[Obligation], resolved_by: dict[int, ToolRun], failed_checks: dict[int, str]
) -> tuple[str, str]:
    """The reply and its status: ``answered`` (every obligation resolved and verified),
    ``uncertain`` (a verification failed: its answer is replaced by an uncertainty message),
    ``unanswered`` (something is still owed: a CLARIFY, DISCOVER_OP, JUSTIFY or ERROR).

    One line per obligation in the order of the request, each followed by what it still owes."""
    children: dict[int | None, list[Obligation]] = {}
    for o in obligations:
        children.setdefault(o.parent_id, []).append(o)
    lines: list[str] = []
    owed = uncertain = False

    def walk(o: Obligation) -> None:
        nonlocal owed, uncertain
        if o.type in META_TYPES:
            lines.append(_meta_line(o))
            owed = True
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
    return "\n".join(lines), "uncertain" if uncertain else "unanswered" if owed else "answered"
