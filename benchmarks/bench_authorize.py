"""Cedar authorization at scale (issue 34): CDA's decisions per second against cedarpy (Cedar's
Rust evaluator) on policy sets of 100 and 1,000 policies, and on Cedar's fuzz corpus.

**Peer**: cedarpy, with the policies, entities and schema parsed once into its handles and the
requests answered by ``is_authorized_batch``; CDA with the policy set loaded and compiled once
(:class:`cda.policy.authorization.Authorizer`), one ``decide`` per request. Both sides answer the same
requests, and every answer (decision, determining policies, error or not) is compared.

**Families** (N random policies each, deterministic in N):

* *shared conditions*: ``bench_policy.synthetic`` over the handwritten ``sandbox_b`` schema and
  entities, the sets issue 34 measured: every policy is ``(principal, action == view, resource)``,
  so no scope prunes anything, and its 1-3 conditions are drawn from twelve templates (many
  policies test the same thing, as real sets do: ``context.authenticated``, an owner check);
* *distinct conditions*: every policy unscoped, with conditions whose constants are each
  policy's own (``principal.level > 417 && resource.size < 90213``): no scope prunes and only
  the attribute reads are shared, the case where neither the index nor the memo helps much;
* *scoped (RBAC)*: policies on one user, one group or one album each (``principal ==``, ``in``,
  ``is``, action lists) over a store of 1,000 users in 50 groups and 4,000 photos in 200 albums:
  the index leaves a handful of policies per request.

**Measure**: CPU time of this process (``time.process_time``: the machine is shared, and both
sides run in this one process, so the CPU each uses is what the ratio compares), the two sides
alternated ``--repeat`` times, the best of each; rate = requests / time.

Run ``python benchmarks/bench_authorize.py`` (a minute or two; ``--write`` rewrites its section of
docs/benchmarks.md). Data: ``$CDA_DATA`` or ``../shared/data`` (cedar/).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_policy import _version  # noqa: E402
from benchmarks.doc_section import load_average, machine, write_section  # noqa: E402
from cda.policy.authorization import Authorizer  # noqa: E402
from cda.policy.entities import read_entities, read_request  # noqa: E402
from cda.policy.parse import parse_policies  # noqa: E402

DATA = Path(os.environ.get("CDA_DATA") or ROOT.parent / "shared" / "data")
CEDAR = DATA / "cedar"
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_authorize:start -->", "<!-- bench_authorize:end -->"
REQUESTS = 400


def shared_family(n: int, rng: random.Random) -> tuple[str, list[dict[str, Any]], str | None, list[dict[str, Any]]]:
    """bench_policy's synthetic sets over sandbox_b (policies, entities, schema text, requests)."""
    from benchmarks.bench_policy import synthetic

    sb = CEDAR / "sample-data" / "sandbox_b"
    ents = json.loads((sb / "entities.json").read_text())
    users = [e["uid"]["id"] for e in ents if e["uid"]["type"] == "User"]
    photos = [e["uid"]["id"] for e in ents if e["uid"]["type"] == "Photo"]
    reqs = [{"principal": {"type": "User", "id": rng.choice(users)}, "action": {"type": "Action", "id": "view"},
             "resource": {"type": "Photo", "id": rng.choice(photos)},
             "context": {"authenticated": rng.random() < 0.5, "confidence_score": f"0.{rng.randint(0, 99):02d}",
                         "source_ip": "10.0.0.1"}} for _ in range(REQUESTS)]  # fmt: skip
    return synthetic(n, n), ents, (sb / "schema_exts.cedarschema").read_text(), reqs


def _store(rng: random.Random) -> tuple[list[dict[str, Any]], list[str], list[str], list[str], list[str]]:
    users = [f"u{i}" for i in range(1000)]
    groups = [f"g{i}" for i in range(50)]
    albums = [f"a{i}" for i in range(200)]
    photos = [f"p{i}" for i in range(4000)]

    def uid(t: str, i: str) -> dict[str, str]:
        return {"type": t, "id": i}

    ents: list[dict[str, Any]] = [
        {"uid": uid("User", u), "attrs": {"level": rng.randint(0, 1000), "dept": rng.choice(["eng", "sales", "ops"])},
         "parents": [uid("Group", g) for g in rng.sample(groups, 2)]} for u in users]  # fmt: skip
    ents += [{"uid": uid("Group", g), "attrs": {}, "parents": []} for g in groups]
    ents += [{"uid": uid("Album", a), "attrs": {}, "parents": []} for a in albums]
    ents += [{"uid": uid("Photo", p), "attrs": {"size": rng.randint(0, 100_000), "owner": {"__entity": uid("User", rng.choice(users))}},
              "parents": [uid("Album", rng.choice(albums))]} for p in photos]  # fmt: skip
    return ents, users, groups, albums, photos


def _requests(rng: random.Random, users: list[str], photos: list[str]) -> list[dict[str, Any]]:
    return [{"principal": {"type": "User", "id": rng.choice(users)},
             "action": {"type": "Action", "id": rng.choice(["view", "edit", "delete"])},
             "resource": {"type": "Photo", "id": rng.choice(photos)},
             "context": {"hour": rng.randint(0, 23), "mfa": rng.random() < 0.5}} for _ in range(REQUESTS)]  # fmt: skip


def distinct_family(n: int, rng: random.Random) -> tuple[str, list[dict[str, Any]], str | None, list[dict[str, Any]]]:
    """Unscoped policies whose conditions hold constants of their own."""
    ents, users, _, _, photos = _store(rng)
    pols = []
    for _ in range(n):
        if rng.random() < 0.05:  # a forbid for a narrow case: level and size and hour all near their ends
            cond = (f"principal.level > {rng.randint(990, 1000)} && resource.size < {rng.randint(0, 1000)} && "
                    f"context.hour >= {rng.randint(22, 23)}")  # fmt: skip
            pols.append(f"forbid(principal, action, resource) when {{ {cond} }};")
            continue
        conds = [f"principal.level > {rng.randint(0, 1000)}", f"resource.size < {rng.randint(0, 100_000)}",
                 f"context.hour >= {rng.randint(0, 23)}"]  # fmt: skip
        pols.append(f"permit(principal, action, resource) when {{ {' && '.join(rng.sample(conds, rng.randint(1, 3)))} }};")
    return "\n".join(pols), ents, None, _requests(rng, users, photos)


def scoped_family(n: int, rng: random.Random) -> tuple[str, list[dict[str, Any]], str | None, list[dict[str, Any]]]:
    """Role- and owner-based policies, each scoped to a user, a group or an album."""
    ents, users, groups, albums, photos = _store(rng)
    pols = []
    for _ in range(n):
        if rng.random() < 0.05:  # a forbid for one user: a suspended account
            pols.append(f'forbid(principal == User::"{rng.choice(users)}", action, resource);')
            continue
        eff = "permit"
        r = rng.random()
        principal = (f'principal == User::"{rng.choice(users)}"' if r < 0.4 else
                     f'principal in Group::"{rng.choice(groups)}"' if r < 0.8 else "principal is User")  # fmt: skip
        resource = f'resource in Album::"{rng.choice(albums)}"' if rng.random() < 0.7 else "resource"
        acts = rng.sample(["view", "edit", "delete"], rng.randint(1, 2))
        action = "action in [" + ", ".join(f'Action::"{a}"' for a in acts) + "]"
        cond = rng.choice(["", " when { context.mfa }", " when { resource.owner == principal }",
                           f" when {{ principal.level > {rng.randint(0, 1000)} }}"])  # fmt: skip
        pols.append(f"{eff}({principal}, {action}, {resource}){cond};")
    return "\n".join(pols), ents, None, _requests(rng, users, photos)


FAMILIES: dict[str, Callable[[int, random.Random], tuple[str, list[dict[str, Any]], str | None, list[dict[str, Any]]]]] = {
    "shared conditions (sandbox_b, issue 34's sets)": shared_family,
    "distinct conditions, unscoped": distinct_family,
    "scoped (RBAC: users, groups, albums)": scoped_family,
}


def _same(ours: Any, theirs: Any) -> bool:
    return bool(ours.decision == theirs.decision.value.lower() and sorted(ours.reason) == sorted(theirs.diagnostics.reasons)
                and bool(ours.errors) == bool(theirs.diagnostics.errors))  # fmt: skip


def measure(family: str, n: int, repeat: int) -> dict[str, Any]:
    import cedarpy

    text, ents, schema_text, raw = FAMILIES[family](n, random.Random(n))
    schema = None
    if schema_text is not None:
        from cda.policy.schema import read_schema_text

        schema = read_schema_text(schema_text, "schema")
    store = read_entities(ents, schema)
    reqs = [read_request(r, schema) for r in raw]
    t0 = time.process_time()
    auth = Authorizer(parse_policies(text, f"{n}.cedar"))
    compile_s = time.process_time() - t0
    cp_schema = cedarpy.Schema.from_str(schema_text) if schema_text is not None else None
    cp_pols = cedarpy.PolicySet.from_str(text)
    cp_ents = cedarpy.Entities.from_json_str(json.dumps(ents), schema=cp_schema)
    best_cda = best_cp = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        ours = [auth.decide(r, store) for r in reqs]
        best_cda = min(best_cda, time.process_time() - t0)
        t0 = time.process_time()
        theirs = cedarpy.is_authorized_batch(raw, cp_pols, cp_ents, cp_schema)
        best_cp = min(best_cp, time.process_time() - t0)
    agree = sum(_same(o, t) for o, t in zip(ours, theirs, strict=True))
    allowed = sum(o.decision == "allow" for o in ours)
    candidates = sum(len(auth.candidates(r, store)) for r in reqs) / len(reqs)
    return {"family": family, "n": n, "requests": len(reqs), "cda_s": best_cda, "cedarpy_s": best_cp, "agree": agree,
            "allowed": allowed, "compile_s": compile_s, "candidates": candidates}  # fmt: skip


def corpus_rate(repeat: int) -> dict[str, Any]:
    """bench_policy's corpus throughput (one policy per test), measured again here."""
    from benchmarks.bench_policy import throughput, unpack

    with tempfile.TemporaryDirectory() as tmp:
        return throughput(unpack(Path(tmp)), repeat)


def render(rows: list[dict[str, Any]], corpus: dict[str, Any] | None, load: tuple[str, str], seconds: float) -> str:
    lines = [
        START,
        "## Cedar authorization at scale (`benchmarks/bench_authorize.py`)",
        "",
        "Decisions per second of CDA (`Authorizer`: the policy set compiled once, scope index, shared "
        "subexpressions computed once per request) and of cedarpy (Cedar's Rust evaluator; handles parsed once, "
        f"`is_authorized_batch`) on the same {REQUESTS} requests per set, CPU time of the one process both run "
        "in, the two alternated and the best of each kept. Every answer is compared (decision, determining "
        "policies, error or not). Families: see the script's docstring.",
        "",
        "| policy set | N | CDA decisions/s | cedarpy decisions/s | CDA / cedarpy | target | agree | allowed | "
        "policies evaluated per request | compile (ms) |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = r["cedarpy_s"] / r["cda_s"]
        target = f"≥ 1× ({'met' if ratio >= 1 else 'missed'})" if r["n"] in (100, 1000) else ""
        lines.append(f"| {r['family']} | {r['n']:,} | {r['requests'] / r['cda_s']:,.0f} | "
                     f"{r['requests'] / r['cedarpy_s']:,.0f} | {ratio:.2f}× | {target} | {r['agree']}/{r['requests']} | "
                     f"{r['allowed']} | {r['candidates']:.1f} | {1000 * r['compile_s']:.1f} |")  # fmt: skip
    if corpus is not None:
        n = corpus["requests"]
        cratio = corpus["cedarpy_s"] / corpus["cda_s"]
        lines.append(f"| Cedar's corpus (1,000 tests, one policy each) | 1 | {n / corpus['cda_s']:,.0f} | "
                     f"{n / corpus['cedarpy_s']:,.0f} | {cratio:.2f}× | ≥ 5× ({'met' if cratio >= 5 else 'missed'}) | "
                     f"{corpus['agree_cedarpy']}/{n} | | | |")  # fmt: skip
    lines += [
        "",
        "*Policies evaluated per request* is how many policies' conditions the scope index left to evaluate "
        "(cedarpy, like Cedar, evaluates every policy). The corpus row is wall time of `bench_policy.py`'s "
        "throughput, measured in this run.",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}, Python {sys.version.split()[0]}, cedarpy "
        f"{_version('cedarpy')}, in {seconds:.0f} s; load average {load[0]} at the start and {load[1]} at the end "
        "(the machine is shared; the ratio is taken within the run, in CPU time).",
        "",
        "Reproduce: `pip install -e '.[test]' && python benchmarks/bench_authorize.py --write`.",
        END,
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--no-corpus", action="store_true", help="skip the corpus row")
    ap.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md")
    args = ap.parse_args()
    if not (CEDAR / "corpus-dev.tar.gz").exists():
        print(f"Cedar data not found at {CEDAR} (set CDA_DATA; see ../shared/data/README.md)", file=sys.stderr)
        return 2
    load0, t0 = load_average(), time.perf_counter()
    rows = []
    for family in FAMILIES:
        for n in args.sizes:
            rows.append(measure(family, n, args.repeat))
            r = rows[-1]
            print(f"{family} N={n}: CDA/cedarpy {r['cedarpy_s'] / r['cda_s']:.2f}x, agree {r['agree']}/{r['requests']}",
                  file=sys.stderr)  # fmt: skip
    corpus = None if args.no_corpus else corpus_rate(args.repeat)
    text = render(rows, corpus, (load0, load_average()), time.perf_counter() - t0)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
