"""Hash what you parsed; a job's key covers everything it reads (issue 35).

A file whose digest CDA pins or records is read once, and the digest and the parse come from the
same bytes. The tests flip such files by atomic renames (``os.replace``, as an attacker or an
editor saving would) while CDA loads them, for a bounded number of loads, and check every load:
the digest it reports must be the digest of the contents it acted on.

Oracles: each variant loaded alone while nothing flips (its digest, and what it decides); the
guardian's verdict on a production delete (strict variant forbids it, lax allows it); for jobs,
``cda solve`` on the same inputs.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cda.cli.main import main
from tests.timing import HANG

LOADS = 150  # loads per flipping file: bounded, whatever the machine's speed


@contextmanager
def flipping(path: Path, variants: list[bytes]) -> Iterator[list[int]]:
    """A thread replaces ``path`` with each variant in turn (write a temporary file, rename it over
    ``path``) until the block ends; yields a one-item list counting the flips."""
    stop, flips = threading.Event(), [0]

    def flip() -> None:
        while not stop.is_set():
            for index, data in enumerate(variants):
                temp = path.with_name(f".{path.name}.{index}")
                temp.write_bytes(data)
                os.replace(temp, path)
                flips[0] += 1

    thread = threading.Thread(target=flip, daemon=True)
    thread.start()
    try:
        yield flips
    finally:
        stop.set()
        thread.join(HANG)
    assert not thread.is_alive()


STRICT_CEDAR = b'permit(principal, action, resource);\nforbid(principal, action == Action::"db.delete", resource);\n'
LAX_CEDAR = b"permit(principal, action, resource);\n" + b"// lax\n" * 3


def _delete_allowed(store: object) -> bool:
    from cda.guardian.policies import judge
    from cda.guardian.proposal import read_action

    action = read_action({"action_id": "cleanup-1", "agent_id": "agent-7", "tool": {"name": "sql", "version": "1.0"},
                          "action_type": "db.delete", "resources": ["prod/users"], "cost_estimate": 0})
    return judge(store, action).violation is None  # type: ignore[arg-type]


def _check_loads(path: Path, variants: list[bytes], load: Callable[[], tuple[str, bool]]) -> None:
    """Each variant alone gives (digest, behaviour); under flips every load's pair is one of those."""
    expected = {}
    for data in variants:
        path.write_bytes(data)
        digest, behaviour = load()
        expected[digest] = behaviour
    assert len(expected) == len(variants) and len(set(expected.values())) == len(variants)
    seen: dict[str, int] = {}
    mismatches = []
    with flipping(path, variants) as flips:
        for _ in range(LOADS):
            try:
                digest, behaviour = load()
            except Exception as exc:  # noqa: BLE001 - a half-written file is not possible with renames
                raise AssertionError(f"a load failed under flips: {exc}") from exc
            seen[digest] = seen.get(digest, 0) + 1
            if expected.get(digest) != behaviour:
                mismatches.append((digest[:12], behaviour))
    assert mismatches == [], f"{len(mismatches)} of {LOADS} loads had one file's digest and another's contents"
    assert set(seen) == set(expected) and flips[0] > 0  # every variant was loaded: the flips interleaved


def test_a_cedar_file_flipped_while_the_guardian_loads_it_never_passes_the_other_files_pin(tmp_path: Path) -> None:
    from cda.guardian.policies import load_policy_store

    (tmp_path / "policies.toml").write_text('[[cedar]]\nid = "access"\npolicies = "rules.cedar"\n')

    def load() -> tuple[str, bool]:
        store = load_policy_store(tmp_path / "policies.toml")
        return store.digest, _delete_allowed(store)

    _check_loads(tmp_path / "rules.cedar", [STRICT_CEDAR, LAX_CEDAR], load)


def test_a_toml_policy_store_flipped_while_it_loads_keeps_digest_and_policies_together(tmp_path: Path) -> None:
    from cda.guardian.policies import load_policy_store

    strict = (b'[facts]\ndeletes = { action_type = ["db.delete"] }\n[[policy]]\nid = "no_delete"\n'
              b'dsl = "not deletes"\n')
    lax = b'[facts]\ndeletes = { action_type = ["db.delete"] }\n[[policy]]\nid = "no_delete"\ndsl = "true"\n'

    def load() -> tuple[str, bool]:
        store = load_policy_store(tmp_path / "policies.toml")
        return store.digest, _delete_allowed(store)

    _check_loads(tmp_path / "policies.toml", [strict, lax], load)


CLAIM = """ken "g.json"
hyp a
observable o
hard: a iff exists path(entity:api ->depends-> entity:db within 2 hops)
goal prove a
"""


def _graph(*links: tuple[str, str]) -> bytes:
    return json.dumps({"directed": True, "multigraph": True, "nodes": [{"id": n} for n in ("api", "auth", "db")],
                       "links": [{"source": s, "target": t, "relation": "depends"} for s, t in links]}).encode()


REACHES = _graph(("api", "auth"), ("auth", "db"))
STOPS = _graph(("api", "auth"))


def _cli(*args: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in args], out, err)
    return code, out.getvalue(), err.getvalue()


def _verdict(line: dict[str, object]) -> str:
    result = line["result"]
    assert isinstance(result, dict), line
    return str(result["verdicts"][0]["status"])


def test_a_jobs_key_covers_the_ken_graph_its_cda_file_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's case: after g.json loses the edge that made the claim hold, the re-run runs the
    job again (a new key) and says what ``cda solve`` now says."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "claim.cda").write_text(CLAIM)
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "solve"\nfile = "claim.cda"\n')
    for graph, ran in ((REACHES, "1 ran now, 0 were done before"), (REACHES, "0 ran now, 1 were done before"),
                       (STOPS, "1 ran now, 0 were done before")):
        (tmp_path / "g.json").write_bytes(graph)
        code, out, err = _cli("jobs", "run", "m.toml", "--workers", "1")
        assert ran in out, out + err
        (line,) = [json.loads(t) for t in (tmp_path / "m.results" / "results.jsonl").read_text().splitlines()]
        _, solved, _ = _cli("solve", "claim.cda", "--json")
        assert _verdict(line) == json.loads(solved)["verdicts"][0]["status"]
    assert _verdict(line) == "refuted"


def test_a_ken_graph_flipped_while_jobs_run_never_files_a_result_under_the_other_graphs_key(tmp_path: Path,
                                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The manifest is read (the key hashes g.json) and the job is run (its process parses
    g.json) while g.json flips: a result is kept only when what the job parsed is what its key
    hashed, and then its verdict is that graph's."""
    from cda.adapters.jobs.child import outcome_of
    from cda.adapters.jobs.manifest import read_manifest

    monkeypatch.chdir(tmp_path)
    (tmp_path / "claim.cda").write_text(CLAIM)
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "solve"\nfile = "claim.cda"\n')
    graph = str((tmp_path / "g.json").resolve())
    expected = {}
    for data, verdict in ((REACHES, "supported"), (STOPS, "refuted")):
        (tmp_path / "g.json").write_bytes(data)
        (spec,) = read_manifest(tmp_path / "m.toml").jobs
        expected[spec.inputs[graph]] = verdict
    kept, refused, hashed = 0, 0, set()
    with flipping(tmp_path / "g.json", [REACHES, STOPS]):
        for _ in range(LOADS // 3):
            (spec,) = read_manifest(tmp_path / "m.toml").jobs
            hashed.add(spec.inputs[graph])
            outcome = outcome_of(spec.wire())
            problem = spec.reads_problem(outcome["reads"])
            if problem is not None:
                assert "changed after the batch read it" in problem or "read twice" in problem, problem
                refused += 1
                continue
            kept += 1
            verdict = expected[spec.inputs[graph]]  # a refuted goal is a failed job (issue 27), its result kept
            assert outcome["status"] == ("ok" if verdict == "supported" else "failed"), outcome
            assert outcome["result"]["verdicts"][0]["status"] == verdict
    assert kept + refused == LOADS // 3 and hashed == set(expected)  # both graphs were keyed: the flips interleaved


def test_a_job_whose_process_read_a_file_its_key_does_not_cover_keeps_no_result(tmp_path: Path) -> None:
    from cda.adapters.jobs.manifest import read_manifest
    from cda.files import sha256_of

    (tmp_path / "claim.cda").write_text(CLAIM)
    (tmp_path / "g.json").write_bytes(REACHES)
    (tmp_path / "m.toml").write_text('[[job]]\nkind = "solve"\nfile = "claim.cda"\n')
    (spec,) = read_manifest(tmp_path / "m.toml").jobs
    assert sorted(Path(p).name for p in spec.inputs) == ["claim.cda", "g.json"]
    assert spec.reads_problem(dict(spec.inputs)) is None  # type: ignore[arg-type]
    other = str((tmp_path / "other.json").resolve())
    assert "does not cover" in (spec.reads_problem({**spec.inputs, other: sha256_of(b"{}")}) or "")  # type: ignore[dict-item]
