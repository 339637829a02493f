"""``cda reflect approve ACTION --store receipts.sqlite --reviewer NAME``: issue a reflection
approval (the ``reflect.approve`` operation) — a token that lets ``NAME`` read the raw trace of
``ACTION`` (``reflect.trace`` on the ToolBus), and nothing else. The issue is itself a receipt
(``reflection.approve``) in that log. Prints the token (``--json``: one object).

Exit codes: 0 issued, 2 bad input (no such store, a name that is not one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from cda.errors import CDAError

__all__ = ["approve_options", "present_approve"]


def approve_options(p: Any, op: Any) -> dict[str, Any]:
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return {"metavars": {"action_id": "ACTION", "store": "DB", "reviewer": "NAME"}}


class _Stores:
    """The reflection store of a receipt log the command names, opened once and closed after."""

    def __init__(self) -> None:
        self.opened: list[Any] = []

    def reflection_at(self, path: str) -> Any:
        from cda.access import readable
        from cda.actions.receipts import ReceiptLog
        from cda.actions.reflection import ReflectionStore
        from cda.adapters.event_store import check_event_file
        from cda.keys.signing import local_signer

        db = readable(Path(path))
        if not db.is_file():
            raise CDAError(f"{path}: no such receipt log (cda run --out DIR and cda serve write DIR/receipts.sqlite)")
        check_event_file(db)  # CDA's own file: a foreign one is never modified
        log = ReceiptLog(db, signer=local_signer())  # vouched for by the local key, when there is one
        store = ReflectionStore(db, log)
        self.opened += [store, log]
        return store

    def close(self) -> None:
        for thing in self.opened:
            thing.close()


def present_approve(op: Any, args: Any, out: TextIO, err: TextIO, inp: TextIO | None = None) -> int:
    from cda.cli.call import LocalEnv, call_local
    from cda.cli.generate import params_of

    stores = _Stores()
    try:
        result = call_local(op, params_of(op, args), LocalEnv(reflection_at=stores.reflection_at))
    except CDAError as exc:
        err.write(exc.render() + "\n")
        return 2
    finally:
        stores.close()
    out.write(json.dumps(result.model_dump(mode="json")) + "\n" if args.json else result.approval + "\n")
    return 0
