"""``cda guard ACTION.json --policies P --ledger L [--sim MODEL] [--json]``: the guardian's gate
on one proposed action, from the command line (docs/guardian.md).

Exit status: 0 APPROVE, 1 REJECT, 4 ESCALATE (a malformed action is a decision: REJECT
``malformed_action``, exit 1); 2 when the command cannot decide (a missing or unreadable file, a
bad policy store, a bad option), with one clear line on stderr and never a traceback.

Each decision is recorded in the guardian file given as ``--ledger`` (its ``decisions`` table,
with the action's agent, task id, cost and currency): ``cda task execute`` accepts only the latest
decision the guardian recorded there for the action, made under the policy store the file pins.
With ``--sim``, each simulation that ran is also stored as the seed's CAUSAL_HYPOTHESIS (the
``causal_hypothesis`` table, id ``hyp-<sim_id>``).

This module is imported when ``cda`` builds its parser, so it imports nothing heavy at the top.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

__all__ = ["add_guard_parser", "main_guard"]

EXIT_BAD_INPUT = 2


def add_guard_parser(sub: Any, seed: Callable[[str], Any], count: Callable[[str], Callable[[str], Any]]) -> None:
    """Add ``cda guard`` to the subcommands ``sub`` (``seed``/``count`` are cli.py's checked option types)."""
    g = sub.add_parser("guard", help="the guardian: APPROVE / REJECT / ESCALATE one proposed action (docs/guardian.md)")
    g.add_argument("action", help="the proposed action (JSON); - reads standard input")
    g.add_argument("--policies", type=Path, required=True, help="the policy store (TOML)")
    g.add_argument("--ledger", type=Path, required=True, help="the guardian's SQLite file holding the CFO ledger")
    g.add_argument("--sim", type=Path, default=None, help="a causal model (TOML or JSON, docs/causal.md) to simulate the action with")
    g.add_argument("--samples", type=count("--samples"), default=1000, help="Monte Carlo samples of --sim (default 1000)")
    g.add_argument("--seed", type=seed, default=0, help="seed of the simulation (the same seed, the same decision)")
    g.add_argument("--receipts", type=Path, default=None, help="append the decision's receipt to this receipt log")
    g.add_argument("--json", action="store_true", help="print the decision record as one JSON object")


def _render(record: Any) -> str:
    """The decision in a few lines: the decision and reason, then the details that say why."""
    out = [f"{record.decision.value} {record.reason}"]
    details = record.details
    if record.reason == "malformed_action":
        out.append(f"  at {details['path']}: {details['message']}")
    elif "facts" in details:
        if details.get("problem"):
            out.append(f"  {details['problem']}")
        for fact in details["facts"]:
            out.append(f"  fact {fact['fact']} = {fact['value']}  ({', '.join(fact['paths'])})")
    else:
        money = {"cost", "remaining"}
        for key in ("cost", "remaining", "risk", "threshold", "sim_id", "soft_score", "soft_violated", "error"):
            value = details.get(key)
            if value is not None and value != []:
                shown = ", ".join(value) if isinstance(value, list) else value
                out.append(f"  {key}: {shown}{' ' + details['currency'] if key in money else ''}")
    out.append(f"  receipt: {record.receipt}")
    return "\n".join(out) + "\n"


def main_guard(args: argparse.Namespace, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    """Run ``cda guard`` with parsed ``args``; returns the exit status."""
    from cda.errors import CDAError

    try:
        return _guard(args, out, inp)
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return EXIT_BAD_INPUT


class _Recording:
    """A simulator that keeps its last prediction, so the command can store the simulation the
    gate ran as a CAUSAL_HYPOTHESIS without running it twice."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last: Any = None

    def simulate(self, action: Any, *, seed: int) -> Any:
        self.last = self.inner.simulate(action, seed=seed)
        return self.last


def _guard(args: argparse.Namespace, out: TextIO, inp: TextIO | None) -> int:
    from cda.errors import CDAError
    from cda.guardian.decide import evaluate
    from cda.guardian.decision import exit_code
    from cda.guardian.policies import load_policy_store
    from cda.guardian.proposal import ProposedAction, read_action

    if args.action == "-":
        raw: str | bytes = (inp or sys.stdin).read()
    else:
        try:
            raw = Path(args.action).read_bytes()
        except OSError as exc:
            raise CDAError(f"cannot read {args.action}: {exc.strerror}") from None
    store = load_policy_store(args.policies)
    if args.ledger.is_dir():
        raise CDAError(f"cannot use {args.ledger}: it is a directory, not the guardian's SQLite file")
    if not args.ledger.is_file():
        raise CDAError(f"cannot read {args.ledger}: No such file (the ledger is the guardian's SQLite file; "
                       f"`cda task budget AGENT AMOUNT --store {args.ledger}` creates it with a budget)")  # fmt: skip
    simulator = None
    if args.sim is not None:
        from cda.guardian.simulation import load_simulator

        if not args.sim.is_file():
            raise CDAError(f"cannot read {args.sim}: {'it is a directory' if args.sim.is_dir() else 'No such file'}")
        simulator = _Recording(load_simulator(args.sim, samples=args.samples))
    from cda.guardian.ledger import Ledger

    action = read_action(raw)
    ledger = Ledger.open(args.ledger)
    receipts = None
    try:
        if args.receipts is not None:
            from cda.actions.receipts import ReceiptLog

            receipts = ReceiptLog(args.receipts)
        record = evaluate(action, store, simulator, ledger, seed=args.seed, receipts=receipts)
        proposed = action if isinstance(action, ProposedAction) else None
        ledger.store.record_decision(record, proposed)  # what `cda task execute` checks a decision against
        if simulator is not None and simulator.last is not None and proposed is not None and record.sim_id:
            _record_hypothesis(ledger.store, proposed, simulator.last)
    finally:
        ledger.close()
        if receipts is not None:
            receipts.close()
    out.write(record.model_dump_json() + "\n" if args.json else _render(record))
    return exit_code(record.decision)


def _record_hypothesis(store: Any, action: Any, prediction: Any) -> None:
    """Store the simulation as the seed's CAUSAL_HYPOTHESIS (once per simulation id)."""
    from cda.guardian.causal import CausalHypothesis

    hypothesis = CausalHypothesis.from_prediction(prediction, agent_id=action.agent_id, created_at=store.clock(),
                                                  description=(action.description or action.action_type)[:1024])
    if store.hypothesis(hypothesis.hypothesis_id) is None:
        store.record_hypothesis(hypothesis.hypothesis_id, hypothesis.agent_id, hypothesis.description,
                                hypothesis.inputs, hypothesis.prediction, hypothesis.risk_score, hypothesis.state)
