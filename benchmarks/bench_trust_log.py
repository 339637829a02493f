"""Trust benchmark, the log half: signing and verifying a 10,000-receipt log (issue 13).

``bench_signing()`` builds a receipt log of ``n`` receipts (one attempt: ``action.start``,
solver receipts shaped like a run's, ``action.end``), signs its head with Ed25519 as
``cda run`` does (the key in a temporary ``$CDA_KEY_DIR``), and times ``cda receipts verify``'s
whole check (:func:`cda.actions.audit.audit_file`: schema, chain, attempts, signature), the
median of several runs. Target: verify at least 50,000 receipts per second.

The sandbox half (isolation cost) lives in ``benchmarks/bench_trust.py``; this file writes its
own section of docs/benchmarks.md. Run ``python benchmarks/bench_trust_log.py`` (a few
seconds) or ``--quick`` (prints only).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_section, when run as a file
from doc_section import machine, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_trust_log:start -->", "<!-- bench_trust_log:end -->"
TARGET_PER_S = 50_000


def _receipts(n: int) -> list[Any]:
    from cda.contracts.receipt import Receipt

    body = [Receipt(action_id="cda-bench", seq=i, kind="solver", name="z3.check",
                    inputs_hash=hashlib.sha256(f"inputs {i}".encode()).hexdigest(), seed="hmac-v1:bench",
                    caps={"beam": 64, "wall_s": -1}, result={"status": "sat", "hypotheses": 3, "complete": True},
                    attempt=1) for i in range(1, n - 1)]
    start = Receipt(action_id="cda-bench", seq=0, kind="action", name="action.start", inputs_hash="0" * 64,
                    result={"attempt": 1}, attempt=1)
    end = Receipt(action_id="cda-bench", seq=n - 1, kind="action", name="action.end", inputs_hash="0" * 64,
                  result={"status": "completed", "events": 0, "events_head": "0" * 64}, attempt=1)
    return [start, *body, end]


def bench_signing(n: int = 10_000, repeats: int = 5) -> dict[str, Any]:
    """Append, sign and verify an ``n``-receipt log; times in seconds, rates per second."""
    from cda.actions.audit import audit_file
    from cda.actions.receipts import ReceiptLog
    from cda.keys.signing import head_path, load_signer, write_head

    with tempfile.TemporaryDirectory(prefix="cda-bench-trust-") as tmp:
        folder = Path(tmp)
        signer = load_signer(folder / "keys")
        db = folder / "receipts.sqlite"
        receipts = _receipts(n)
        t0 = time.perf_counter()
        with ReceiptLog(db) as log:
            log.append_many(receipts)
            t1 = time.perf_counter()
            head, count = log.tip()
            doc = signer.sign_head(head, count, "cda-bench", 1, "end")
            write_head(head_path(db), doc)
            t2 = time.perf_counter()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            report = audit_file(db, trusted_key=signer.public_key)
            times.append(time.perf_counter() - t)
            if not report.ok or report.entries != n:
                raise SystemExit(f"the benchmark log did not verify: {report.problems[:3]}")
        verify_s = statistics.median(times)
        return {"receipts": n, "append_s": t1 - t0, "sign_s": t2 - t1, "verify_s": verify_s,
                "verify_per_s": n / verify_s, "verify_min_s": min(times), "repeats": repeats,
                "file_bytes": db.stat().st_size}


def render(result: dict[str, Any], elapsed_s: float, load: tuple[float, float]) -> str:
    met = "met" if result["verify_per_s"] >= TARGET_PER_S else "missed"
    return "\n".join([
        START,
        "## Trust: signing and verifying the receipt log (`benchmarks/bench_trust_log.py`)",
        "",
        f"A log of {result['receipts']:,} receipts (one attempt: `action.start`, solver receipts shaped like a run's, "
        "`action.end`), its head signed with Ed25519 as `cda run` signs it, then checked as `cda receipts verify` "
        "checks it (`cda.actions.audit.audit_file`: the schema object by object, the hash chain with every receipt "
        "parsed, the attempts, the signature and the signed head's place in the chain). Verify time is the median "
        f"of {result['repeats']} runs.",
        "",
        "| step | time | rate | target |",
        "|---|---:|---:|---:|",
        f"| append (one transaction) | {result['append_s'] * 1000:.0f} ms | "
        f"{result['receipts'] / result['append_s']:,.0f} receipts/s | |",
        f"| sign the head (Ed25519, write `.head.json`) | {result['sign_s'] * 1000:.2f} ms | | |",
        f"| verify (whole file) | {result['verify_s'] * 1000:.0f} ms (best {result['verify_min_s'] * 1000:.0f}) | "
        f"{result['verify_per_s']:,.0f} receipts/s | ≥ {TARGET_PER_S:,} receipts/s ({met}) |",
        "",
        f"The file is {result['file_bytes'] / 1024:.0f} KiB. Most of the verify time is parsing each receipt's JSON "
        "into its model (which is how a changed field is named) and one SHA-256 per entry; the signature itself "
        "is one Ed25519 check.",
        "",
        f"Measured on Python {platform.python_version()}, {machine()}, on {time.strftime('%Y-%m-%d')}, in "
        f"{elapsed_s:.0f} s; load average {load[0]:.1f} at the start and {load[1]:.1f} at the end (eight "
        "engineers shared the 2 cores while this was measured: absolute times move with the load).",
        "",
        "Reproduce: `pip install -e . && python benchmarks/bench_trust_log.py --write` (rewrites this section).",
        END,
    ])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Sign and verify a 10,000-receipt log.")
    ap.add_argument("--receipts", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="print only; do not rewrite docs/benchmarks.md")
    ap.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md (else print only)")
    ap.add_argument("--doc", type=Path, default=DOC)
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    started = time.perf_counter()
    result = bench_signing(args.receipts)
    text = render(result, time.perf_counter() - started, (load0, os.getloadavg()[0]))
    print(text)
    if args.write:
        write_section(args.doc, START, END, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
