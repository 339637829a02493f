"""Cedar policies through CDA (issue 16): decisions per second against cedarpy, agreement and the
importable share per construct, and analysis time per property against policy size.

**Data**: Cedar's handwritten integration tests (74 requests) and ``corpus-dev.tar.gz`` (1,000
fuzz-generated tests, 8,000 requests) from ``../shared/data/cedar``; the tarball is unpacked into
a temporary folder and removed afterwards.

**Measured**

* *agreement*: every request CDA imports answered by ``cda.policy`` and compared with Cedar's
  expected decision, determining policies and errors; the *importable share* per construct is
  the share of tests whose policies use the construct (found by a pattern on the policy text)
  that CDA imports;
* *decisions per second*: the same 8,000 requests answered by CDA (``decide`` on a loaded policy
  set) and by cedarpy (Cedar's Rust evaluator behind Python; policies, entities and schema
  parsed once into cedarpy's handles, then ``is_authorized_batch`` per test), best of
  ``--repeat`` runs, in CPU time (the machine is shared); also the whole per-test time including
  reading the files;
* *analyses*: for ``--analyses`` tests of the corpus (every k-th, a deterministic sample), on the
  first environment of the schema: ``always-allows``, ``always-denies`` and ``never-errors`` of
  the set, and ``implies``, ``equivalent``, ``disjoint`` and ``no-new-access`` between the set
  and the set without its last policy (a typical edit); time per property against the number
  of policies (median, p95, max), refusals by construct, and each counterexample re-checked
  with cedarpy.

Run ``python benchmarks/bench_policy.py`` (about a minute; ``--write`` rewrites this script's
section of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tarfile
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.doc_section import machine, write_section  # noqa: E402
from cda.errors import CDAError  # noqa: E402
from cda.policy.analyze import PROPERTIES, analyze, environments  # noqa: E402
from cda.policy.authorization import PolicySet, load_policy_set  # noqa: E402
from cda.policy.cedar_tests import run_test_dir, summarize  # noqa: E402
from cda.policy.entities import read_request  # noqa: E402

CEDAR = Path(os.environ.get("CDA_DATA") or ROOT.parent / "shared" / "data") / "cedar"
DOC = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench_policy:start -->", "<!-- bench_policy:end -->"

CONSTRUCTS = {
    "when/unless": r"\b(when|unless)\s*\{",
    "has": r"\bhas\b",
    "like": r"\blike\b",
    "is": r"\bis\b",
    "in (hierarchy)": r"\bin\b",
    "if-then-else": r"\bif\b",
    "sets (contains…)": r"\.(contains|containsAll|containsAny|isEmpty)\(",
    "records": r"\{\s*[A-Za-z_\"]+\s*:",
    "arithmetic": r"[0-9a-z_)]\s*[+*]\s*[-0-9a-z(]",
    "ip": r"\bip\(",
    "decimal": r"\bdecimal\(",
    "datetime/duration": r"\b(datetime|duration)\(",
    "tags (getTag/hasTag)": r"\.(getTag|hasTag)\(",
    "annotations": r"^\s*@",
}


def unpack(tmp: Path) -> Path:
    with tarfile.open(CEDAR / "corpus-dev.tar.gz") as tar:
        tar.extractall(tmp, filter="data")
    return tmp / "corpus-tests"


def agreement(corpus: Path) -> dict[str, Any]:
    hand = summarize(run_test_dir(CEDAR / "tests"))
    results = run_test_dir(corpus)
    corp = summarize(results)
    per_test: dict[str, bool] = {}
    for r in results:
        per_test[r.file] = per_test.get(r.file, True) and r.imported
    share: dict[str, list[int]] = {}
    for f, imported in per_test.items():
        text = json.loads(Path(f).read_text())["policies"]
        pol = (corpus.parent / text).read_text()
        for name, pat in CONSTRUCTS.items():
            if re.search(pat, pol, re.M):
                s = share.setdefault(name, [0, 0])
                s[0] += 1
                s[1] += imported
    return {"hand": hand, "corpus": corp, "tests": len(per_test), "share": share}


def throughput(corpus: Path, repeat: int) -> dict[str, Any]:
    import cedarpy

    tests = []
    for f in sorted(corpus.glob("*.json")):
        if f.name.endswith(".entities.json"):
            continue
        data = json.loads(f.read_text())
        base = corpus.parent
        ps = load_policy_set(base / data["policies"], base / data["schema"], base / data["entities"])
        reqs = [read_request(r, ps.schema) for r in data["requests"]]
        raw = [{k: r[k] for k in ("principal", "action", "resource", "context")} for r in data["requests"]]
        cp = (
            cedarpy.PolicySet.from_str((base / data["policies"]).read_text()),
            cedarpy.Entities.from_json_str((base / data["entities"]).read_text()),
            cedarpy.Schema.from_str((base / data["schema"]).read_text()),
        )
        tests.append((f, data, ps, reqs, raw, cp))
    n = sum(len(t[3]) for t in tests)
    best_cda = best_cp = best_cda_full = float("inf")
    agree_cp = 0
    for _ in range(repeat):
        t0 = time.process_time()
        for _f, _d, ps, reqs, _raw, _cp in tests:
            for r in reqs:
                ps.decide(r)
        best_cda = min(best_cda, time.process_time() - t0)
        t0 = time.process_time()
        answers = []
        for _f, _d, _ps, _reqs, raw, (cps, ents, sch) in tests:
            answers.append(cedarpy.is_authorized_batch(raw, cps, ents, sch))
        best_cp = min(best_cp, time.process_time() - t0)
        t0 = time.process_time()
        for _f, data, *_ in tests:
            base = corpus.parent
            ps = load_policy_set(base / data["policies"], base / data["schema"], base / data["entities"])
            for r in data["requests"]:
                ps.decide(read_request(r, ps.schema))
        best_cda_full = min(best_cda_full, time.process_time() - t0)
    for (_f, _d, ps, reqs, _raw, _cp), theirs in zip(tests, answers, strict=True):
        for r, a in zip(reqs, theirs, strict=True):
            ours = ps.decide(r)
            same = ours.decision == a.decision.value.lower() and sorted(ours.reason) == sorted(
                a.diagnostics.reasons) and bool(ours.errors) == bool(a.diagnostics.errors)  # fmt: skip
            agree_cp += same
    return {"requests": n, "cda_s": best_cda, "cedarpy_s": best_cp, "cda_full_s": best_cda_full, "agree_cedarpy": agree_cp}


def analyses(corpus: Path, count: int, timeout: float) -> dict[str, Any]:
    import cedarpy

    files = sorted(f for f in corpus.glob("*.json") if not f.name.endswith(".entities.json"))
    step = max(1, len(files) // count)
    sample = files[::step][:count]
    times: dict[str, list[tuple[int, float]]] = defaultdict(list)
    refused: dict[str, int] = defaultdict(int)
    failed = held = confirmed = unconfirmed = 0
    for f in sample:
        data = json.loads(f.read_text())
        base = corpus.parent
        ptext = (base / data["policies"]).read_text()
        ps = load_policy_set(base / data["policies"], base / data["schema"], base / data["entities"])
        assert ps.schema is not None
        envs = environments(ps.schema)
        if not envs:
            refused["no environment in the schema"] += len(PROPERTIES)
            continue
        env = envs[0]
        smaller = PolicySet(ps.policies[:-1], ps.schema, ps.entities)
        for prop, arity in PROPERTIES.items():
            sets = [ps] if arity == 1 else [ps, smaller]
            try:
                res = analyze(prop, sets, env, timeout=timeout)
            except CDAError as e:
                m = re.search(r"unsupported: (.*?) cannot be encoded|clingo|unknown", str(e))
                refused[(m.group(1) if m and m.group(1) else str(e).split(": ")[-1])[:60]] += 1
                continue
            times[prop].append((len(ps.policies), res.seconds))
            if res.holds:
                held += 1
                continue
            failed += 1
            cex = res.counterexample
            assert cex is not None
            ents = (base / data["entities"]).read_text()
            sch = (base / data["schema"]).read_text()
            texts = [ptext] if arity == 1 else [ptext, _without_last(ps)]
            ans = [cedarpy.is_authorized(cex, t, ents, sch) for t in texts]
            ok = _confirms(prop, ans)
            confirmed += ok
            unconfirmed += not ok
    return {"sample": len(sample), "times": times, "refused": dict(refused), "failed": failed, "held": held,
            "confirmed": confirmed, "unconfirmed": unconfirmed}  # fmt: skip


#: conditions of the synthetic policy sets (the handwritten sandbox_b schema and entities)
_CONDS = [
    "context.authenticated",
    "resource.private",
    "principal.jobLevel > {c}",
    "principal.jobLevel + {c} < {d}",
    'principal.department == "Sales"',
    'principal.department like "*Eng*"',
    'principal in UserGroup::"alice_friends"',
    'principal in UserGroup::"AVTeam"',
    'resource in Album::"alice_vacation"',
    'resource in Account::"{acct}"',
    "resource has account && resource.account.owner == principal",
    'context.confidence_score.greaterThan(decimal("0.{c}5"))',
]


def synthetic(n: int, seed: int) -> str:
    """``n`` random permit/forbid policies over sandbox_b (deterministic in ``seed``)."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(n):
        eff = "forbid" if rng.random() < 0.15 else "permit"
        conds = []
        for _ in range(rng.randint(2 if eff == "forbid" else 1, 3)):
            c = rng.choice(_CONDS).format(c=rng.randint(1, 8), d=rng.randint(3, 9), acct=rng.choice(["alice", "ahmad"]))
            conds.append(f"!({c})" if rng.random() < 0.3 else c)
        out.append(f'{eff}(principal, action == Action::"view", resource) when {{ {" && ".join(conds)} }};')
    return "\n".join(out)


def scaling(sizes: list[int], timeout: float) -> list[tuple[int, str, float, bool]]:
    """Each property on synthetic sets of each size (binary properties: the set against the same
    set with its last policy replaced, an edit)."""
    from cda.policy.analyze import Environment
    from cda.policy.parse import parse_policies
    from cda.policy.values import EntityUID

    sb = CEDAR / "sample-data" / "sandbox_b"
    base = load_policy_set(CEDAR / "tests" / "decimal" / "policies_1.cedar", sb / "schema_exts.cedarschema",
                           sb / "entities.json")  # fmt: skip
    env = Environment("User", EntityUID("Action", "view"), "Photo")
    rows = []
    for n in sizes:
        text = synthetic(n, n)
        edited = "\n".join(text.split("\n")[:-1] + [synthetic(1, n + 10**6)])
        a = PolicySet(parse_policies(text, f"synthetic-{n}.cedar"), base.schema, base.entities)
        b = PolicySet(parse_policies(edited, f"synthetic-{n}-edited.cedar"), base.schema, base.entities)
        for prop, arity in PROPERTIES.items():
            res = analyze(prop, [a] if arity == 1 else [a, b], env, timeout=timeout)
            rows.append((n, prop, res.seconds, res.holds))
    return rows


def handwritten_analyses(timeout: float) -> dict[str, Any]:
    """Every environment of every handwritten test's schema, the three one-set properties."""
    times: list[float] = []
    refused: dict[str, int] = defaultdict(int)
    for f in sorted((CEDAR / "tests").rglob("*.json")):
        data = json.loads(f.read_text())
        ps = load_policy_set(CEDAR / data["policies"], CEDAR / data["schema"], CEDAR / data["entities"])
        assert ps.schema is not None
        for env in environments(ps.schema):
            for prop in ("always-allows", "always-denies", "never-errors"):
                try:
                    times.append(analyze(prop, [ps], env, timeout=timeout).seconds)
                except CDAError as e:
                    refused[str(e).split(": ")[-1][:60]] += 1
    return {"runs": len(times), "median": statistics.median(times) if times else 0.0,
            "max": max(times, default=0.0), "refused": dict(refused)}  # fmt: skip


def _without_last(ps: PolicySet) -> str:
    """The policy text without its last policy, cut at the last policy's first line (its
    annotations included), so that cedarpy reads the same smaller set."""
    last = ps.policies[-1]
    text = Path(last.filename).read_text()
    lines = text.split("\n")
    start = last.pos[0] - 1
    while start > 0 and lines[start - 1].lstrip().startswith("@"):
        start -= 1
    return "\n".join(lines[:start])


def _confirms(prop: str, ans: list[Any]) -> bool:
    d = [a.decision.value.lower() for a in ans]
    if prop == "always-allows":
        return d[0] != "allow"
    if prop == "always-denies":
        return d[0] == "allow"
    if prop == "never-errors":
        return bool(ans[0].diagnostics.errors)
    return {
        "implies": d[0] == "allow" and d[1] != "allow",
        "equivalent": d[0] != d[1],
        "disjoint": d[0] == "allow" and d[1] == "allow",
        "no-new-access": d[1] == "allow" and d[0] != "allow",
    }[prop]


def _ms(seconds: float) -> str:
    ms = 1000 * seconds
    return f"{ms:.1f} ms" if ms < 10 else f"{ms:.0f} ms"


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def render(
    ag: dict[str, Any], tp: dict[str, Any], an: dict[str, Any], sc: list[tuple[int, str, float, bool]], hw: dict[str, Any]
) -> str:
    import cedarpy  # noqa: F401
    import z3

    hand, corp = ag["hand"], ag["corpus"]
    n = tp["requests"]
    cda_rate, cp_rate = n / tp["cda_s"], n / tp["cedarpy_s"]
    lines = [
        START,
        "## Cedar policies: decisions, agreement, analyses (`benchmarks/bench_policy.py`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()} shared by 8 engineers working at once (times are "
        f"noisy, ratios less so), Python {platform.python_version()}, z3 {z3.get_version_string()}, cedarpy "
        f"{_version('cedarpy')}. Data: Cedar's handwritten integration tests and `corpus-dev.tar.gz` "
        f"({ag['tests']} fuzz tests).",
        "",
        "| measure | result | target |",
        "|---|---|---|",
        f"| handwritten requests agreeing (decision, reason, errors) | {hand['agreed']}/{hand['imported']} imported, "
        f"{hand['imported']}/{hand['total']} importable | 100% |",
        f"| corpus requests agreeing | {corp['agreed']}/{corp['imported']} imported "
        f"({100 * corp['agreed'] / max(1, corp['imported']):.1f}%) | 100% |",
        f"| corpus requests importable | {corp['imported']}/{corp['total']} "
        f"({100 * corp['imported'] / corp['total']:.1f}%) | ≥ 90% |",
        f"| decisions/s, CDA (`decide`, policies loaded) | {cda_rate:,.0f} | — |",
        f"| decisions/s, cedarpy (`is_authorized_batch`, handles parsed once) | {cp_rate:,.0f} | — |",
        f"| CDA / cedarpy | {cda_rate / cp_rate:.2f}× | reported, not a target |",
        f"| CDA per test including reading policies, schema and entities | {n / tp['cda_full_s']:,.0f} decisions/s | — |",
        f"| CDA agreeing with cedarpy on the same requests (decision, reason, error or not) | "
        f"{tp['agree_cedarpy']}/{n} | 100% |",
        "",
        "Importable share per construct (tests of the corpus whose policies use it):",
        "",
        "| construct | tests | imported |",
        "|---|---|---|",
    ]
    for name, (total, imported) in sorted(ag["share"].items(), key=lambda kv: -kv[1][0]):
        lines.append(f"| {name} | {total} | {imported} ({100 * imported / total:.0f}%) |")
    lines += [
        "",
        f"Analyses on {an['sample']} corpus tests (every k-th file; the first environment of each schema; every "
        "corpus test holds one policy, so the binary properties compare it with the empty set), z3:",
        "",
        "| property | runs | median | p95 | max |",
        "|---|---|---|---|---|",
    ]
    all_times: list[float] = []
    for prop in PROPERTIES:
        ts = an["times"].get(prop, [])
        if not ts:
            continue
        secs = [t for _, t in ts]
        all_times += secs
        lines.append(f"| {prop} | {len(ts)} | {_ms(statistics.median(secs))} | {_ms(_pct(secs, 0.95))} | "
                     f"{_ms(max(secs))} |")  # fmt: skip
    lines += [
        "",
        f"- Median over all analyses: {_ms(statistics.median(all_times))} (target < 1 s). Verdicts: "
        f"{an['held']} hold, {an['failed']} fail with a counterexample; cedarpy confirms {an['confirmed']} of "
        f"{an['failed']} counterexamples ({an['unconfirmed']} not confirmed).",
        "- Refused by name (analyses not run): "
        + (", ".join(f"{k}: {v}" for k, v in sorted(an["refused"].items())) or "none")
        + ".",
        f"- Handwritten tests, every environment of their schemas × always-allows/always-denies/never-errors: "
        f"{hw['runs']} analyses run, median {_ms(hw['median'])}, max {_ms(hw['max'])}; refused: "
        + (", ".join(f"{k}: {v}" for k, v in sorted(hw["refused"].items())) or "none")
        + ".",
        "",
        "Time against policy-set size: synthetic sets of N random policies over the handwritten `sandbox_b` "
        "schema and entities (environment (User, view, Photo): 4 × 4 pairs; conditions on context Booleans and "
        "decimals, attributes, hierarchy, `like`, arithmetic); binary properties compare the set with the same "
        "set after one edit (its last policy replaced):",
        "",
        "| N policies | " + " | ".join(PROPERTIES) + " |",
        "|---|" + "---|" * len(PROPERTIES),
    ]
    for n in sorted({r[0] for r in sc}):
        cells = []
        for prop in PROPERTIES:
            [(secs, holds)] = [(t, h) for k, p, t, h in sc if k == n and p == prop]
            cells.append(f"{_ms(secs)} ({'holds' if holds else 'fails'})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "- Decisions: CDA evaluates in Python and cedarpy in Rust, so CDA was not expected to win. It does here "
        "because a cedarpy call pays for crossing into Rust (each request and answer converted through JSON, "
        "Cedar's request built and validated against the schema) while the corpus's policies are tiny (one "
        "each) and cheap to evaluate; CDA's `decide` works on objects already loaded. Counting the reading of "
        "the files (policies, schema, entities, requests) per test, CDA's rate is the third line. The ratio is "
        "what we measured, not a claim that Python outruns Cedar's evaluator on large policy sets.",
        "- Batch throughput (1 and 2 workers, process pool and Dask) is the `jobs` part (docs/jobs.md).",
        END,
    ]
    return "\n".join(lines)


def _version(pkg: str) -> str:
    from importlib.metadata import version

    return version(pkg)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--analyses", type=int, default=100, help="corpus tests to analyse (a deterministic sample)")
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100, 1000], help="synthetic policy-set sizes")
    ap.add_argument("--write", action="store_true", help="rewrite this script's section of docs/benchmarks.md")
    args = ap.parse_args()
    if not (CEDAR / "corpus-dev.tar.gz").exists():
        print(f"Cedar data not found at {CEDAR} (see ../shared/data/README.md)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(dir=ROOT / "benchmarks") as tmp:
        corpus = unpack(Path(tmp))
        ag = agreement(corpus)
        tp = throughput(corpus, args.repeat)
        an = analyses(corpus, args.analyses, args.timeout)
    sc = scaling(args.sizes, args.timeout)
    hw = handwritten_analyses(args.timeout)
    text = render(ag, tp, an, sc, hw)
    print(text)
    if args.write:
        write_section(DOC, START, END, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
