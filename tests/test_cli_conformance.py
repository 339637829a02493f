"""Every ``cda`` command keeps the CLI's promises (issue 27), checked across the command table.

The commands are found by walking argparse's subparsers of the parser ``cda`` really runs (the
console script's ``main``, found the way the shell finds it), so the test follows the table when
commands move or are generated from a registry. Each command needs an entry in :data:`CASES` — a
good invocation and its exit code, which of its arguments are files it reads or writes — and a
command without one fails the first test. For every command:

- **one exit-code table**: 0 answered, 1 a check failed, 2 bad input, 3 unknown or timeout (130
  interrupted, tested with the Ctrl-C work); no other code, never a traceback;
- **``--json`` on every command that answers**: one JSON document on stdout (JSON lines where the
  command streams), for an answer and for a mistake;
- **``-`` is standard input** wherever a text file is read: the same answer as from the file;
- **several files** where a command takes several (``solve``, ``check``, ``fmt``, ``prove``);
- **no file CDA did not create is modified**: each path argument given a foreign file (another
  program's text, or its SQLite database where CDA expects one), byte for byte the same after,
  an input refused with exit 2.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, ROOT

EXIT_TABLE = {0, 1, 2, 3}


# ---- the command table, as the installed `cda` has it ------------------------------------------


def _console_main() -> Callable[..., int]:
    """The function the ``cda`` console script runs."""
    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "cda"]
    return script.load()  # type: ignore[no-any-return]


class _Parser(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _the_parser(monkeypatch: pytest.MonkeyPatch, words: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """argparse's parser of ``cda WORDS --help``, caught as ``main`` asks it to parse (the CLI
    generates a command's arguments from its operation only when that command is chosen)."""

    def caught(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Parser(self)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", caught)
        patch.setattr(argparse.ArgumentParser, "parse_known_args", caught)
        try:
            _console_main()([*words, "--help"], stdout=io.StringIO(), stderr=io.StringIO())
        except _Parser as got:
            return got.parser
    raise AssertionError("cda's main did not parse its arguments with argparse")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, Any]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(subs[0].choices) if subs else {}


def _commands(patch: pytest.MonkeyPatch, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command at or below ``path``, each as the parser of ``cda PATH --help`` has it (the CLI
    builds only the parsers on the command line's way: a command's siblings are named only)."""
    node = _the_parser(patch, path)
    for word in path:
        node = _subcommands(node)[word]
    below = _subcommands(node)
    if not below:
        return {path: node}
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for name in below:
        found |= _commands(patch, (*path, name))
    return found


@pytest.fixture(scope="module")
def table() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command, each as the parser ``cda COMMAND …`` is parsed with (its arguments generated)."""
    patch = pytest.MonkeyPatch()
    try:
        return _commands(patch)
    finally:
        patch.undo()


# ---- the files a command is given ------------------------------------------------------------


@dataclass(frozen=True)
class F:
    """A file argument: ``name`` in the world; ``text``: a text file the command reads (``-``
    works for it); ``sqlite``: a store CDA keeps (a foreign SQLite file is the foreign file);
    ``writes``: the command writes it (a foreign file there must stay as it is)."""

    name: str
    text: bool = False
    sqlite: bool = False
    writes: bool = False
    folder: bool = False  # a folder read whole (a missing one is not a mistake: `schema --check` lists what is missing)


@dataclass
class Case:
    argv: list[str | F]
    code: int
    json: str | None = "object"  # "object", "lines", or None with the reason in `why`
    why: str = ""
    several: bool = False  # the command takes several files: the first F is given twice
    judged: str = ""  # an input that is itself judged: a foreign file there is an answer (exit 1), not bad input


def _run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = _console_main()(argv, stdout=out, stderr=err, stdin=io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


class World:
    """The folder the commands run in: example inputs, stores made by CDA, fresh copies."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.count = 0
        shutil.copytree(EXAMPLES, root / "examples")
        ex = root / "examples"
        (root / "ok.cda").write_text((EXAMPLES / "claim_check.cda").read_text().replace("goal prove deploy_broke_login\n", ""))
        (root / "messy.cda").write_text("hyp  a\nhard :a\n")  # not in the canonical layout
        (root / "good.fol").write_text("premise ∀x (Man(x) → Mortal(x))\npremise Man(socrates)\nclaim Mortal(socrates)\n")
        (root / "inputs.json").write_text((ex / "action" / "service_outage.json").read_text())
        shutil.copy(ex / "action" / "ken_services.json", root / "ken_services.json")
        (root / "checks.toml").write_text('[[job]]\nkind = "check"\nfile = "ok.cda"\n')
        (root / "folio.jsonl").write_text(json.dumps({
            "premises": ["All cats are pets.", "Tom is a cat."], "premises-FOL": ["∀x (Cat(x) → Pet(x))", "Cat(tom)"],
            "conclusion": "Tom is a pet.", "conclusion-FOL": "Pet(tom)", "label": "True"}) + "\n")
        self.files = {
            "ok.cda": root / "ok.cda", "messy.cda": root / "messy.cda", "good.fol": root / "good.fol", "c17.bench": ex / "c17.bench",
            "c17.obs": ex / "c17.obs", "inputs.json": root / "inputs.json", "checks.toml": root / "checks.toml",
            "folio.jsonl": root / "folio.jsonl", "old.cedar": ex / "cedar" / "old.cedar",
            "new.cedar": ex / "cedar" / "new.cedar", "schema": ex / "cedar" / "schema.cedarschema",
            "entities": ex / "cedar" / "entities.json", "request": ex / "cedar" / "request.json",
            "cedar-tests": ex / "cedar", "policies.toml": ex / "guardian" / "policies.toml",
            "launch.json": ex / "guardian" / "launch.json", "model.toml": ex / "guardian" / "marketing_launch.toml",
            "ken.json": root / "ken_services.json", "registry": ex / "conductor" / "two_tools.toml",
            "schemas": ROOT / "schemas", "report.json": ex / "report" / "draft.json",
        }
        # stores CDA made: a receipt log, a guardian file with a signer, pinned policies, a decision
        code, events, _ = _run(["run", str(self.files["inputs.json"]), "--out", str(root / "runs"), "--json"])
        assert code == 0
        self.action = json.loads(events.splitlines()[-1])["action_id"]
        self.files["receipts"] = root / "runs" / "receipts.sqlite"
        db = str(root / "guardian.db")
        assert _run(["task", "budget", "agent-7", "2000", "--store", db])[0] == 0
        code, _, err = _run(["task", "add-signer", "alice", "--store", db])
        assert code == 0, err
        assert _run(["task", "pin-policies", str(self.files["policies.toml"]), "--store", db, "--by", "alice"])[0] == 0
        code, decision, _ = _run(["guard", str(self.files["launch.json"]), "--policies", str(self.files["policies.toml"]),
                                  "--ledger", db, "--json"])
        assert code == 0
        (root / "decision.json").write_text(decision)
        assert _run(["task", "draft", str(self.files["launch.json"]), "--task-id", "t-1", "--out", str(root / "draft.json")])[0] == 0
        assert _run(["task", "sign", str(root / "draft.json"), "--store", db, "--signer", "alice", "--out",
                     str(root / "signed.json")])[0] == 0
        self.files |= {"guardian.db": root / "guardian.db", "decision.json": root / "decision.json",
                       "draft.json": root / "draft.json", "signed.json": root / "signed.json"}
        self.session = _run(["investigate", "start", str(self.files["ok.cda"]), "--db", str(root / "inv.sqlite")])[1].strip()
        self.files["inv.sqlite"] = root / "inv.sqlite"

    def path(self, f: F) -> Path:
        """Where ``f`` is for one run: a store a command changes is a fresh copy; an output, a new name."""
        self.count += 1
        if f.writes and f.name not in self.files:
            return self.root / "out" / f"{self.count}-{f.name}"
        source = self.files[f.name]
        if f.writes and source.is_file():
            copy = self.root / "copies" / f"{self.count}-{source.name}"
            copy.parent.mkdir(exist_ok=True)
            shutil.copy(source, copy)
            return copy
        return source

    def argv(self, case: Case, replace: dict[int, str] | None = None) -> list[str]:
        (self.root / "out").mkdir(exist_ok=True)
        replace = replace or {}
        return [replace[i] if i in replace else (str(self.path(a)) if isinstance(a, F) else a)
                for i, a in enumerate(case.argv)]


T = F  # a text file read


CASES: dict[tuple[str, ...], Case] = {
    ("solve",): Case(["solve", T("ok.cda", text=True)], 0, several=True),
    ("check",): Case(["check", T("ok.cda", text=True)], 0, several=True),
    ("fmt",): Case(["fmt", "--check", T("messy.cda", text=True)], 1, several=True),
    ("prove",): Case(["prove", T("good.fol", text=True)], 0, several=True),
    ("diagnose",): Case(["diagnose", T("c17.bench", text=True), "--observations", T("c17.obs", text=True)], 0),
    ("probe",): Case(["probe", T("c17.bench", text=True), "--observations", T("c17.obs", text=True)], 0),
    ("run",): Case(["run", T("inputs.json"), "--out", F("runs", writes=True)], 0, json="lines"),
    ("serve",): Case([], 0, json=None, why="a server: it runs until stopped (tests/test_service*.py)"),
    ("mcp",): Case([], 0, json=None, why="a server on stdio (tests/test_mcp.py)"),
    ("schema",): Case(["schema", "--check", F("schemas", folder=True)], 0),
    ("receipts", "verify"): Case(["receipts", "verify", F("receipts", sqlite=True)], 0),
    ("metrics",): Case(["metrics", F("receipts", sqlite=True)], 0),
    ("policy", "authorize"): Case(["policy", "authorize", T("old.cedar", text=True), "--schema", T("schema", text=True),
                                   "--entities", T("entities", text=True), "--request", T("request", text=True)], 0),
    ("policy", "test"): Case(["policy", "test", F("cedar-tests")], 2, why="the examples are no Cedar tests: exit 2"),
    ("policy", "analyze"): Case(["policy", "analyze", "implies", T("old.cedar", text=True), T("new.cedar"), "--schema",
                                 T("schema", text=True), "--entities", T("entities", text=True)], 0),
    ("task", "add-signer"): Case(["task", "add-signer", "bob", "--store", F("guardian.db", sqlite=True, writes=True), "--by",
                                  "alice"], 0),
    ("task", "pin-policies"): Case(["task", "pin-policies", T("policies.toml", text=True), "--store",
                                    F("guardian.db", sqlite=True, writes=True), "--by", "alice"], 0),
    ("task", "draft"): Case(["task", "draft", T("launch.json", text=True), "--task-id", "t-2"], 0),
    ("task", "anchor"): Case(["task", "anchor", "alice", "--store", F("guardian.db", sqlite=True, writes=True)], 1,
                             why="the world's file is anchored at its making: refused, exit 1"),
    ("task", "budget"): Case(["task", "budget", "agent-9", "10", "--store", F("guardian.db", sqlite=True, writes=True)], 0),
    ("task", "sign"): Case(["task", "sign", T("draft.json", text=True), "--store", F("guardian.db", sqlite=True),
                            "--signer", "alice"], 0),
    ("task", "verify"): Case(["task", "verify", T("signed.json", text=True), "--store", F("guardian.db", sqlite=True)], 0),
    ("task", "execute"): Case(["task", "execute", T("signed.json", text=True), "--store",
                               F("guardian.db", sqlite=True, writes=True), "--decision", T("decision.json", text=True)], 0),
    ("jobs", "run"): Case(["jobs", "run", T("checks.toml", text=True), "--out", F("jobs", writes=True)], 0),
    ("investigate", "start"): Case(["investigate", "start", T("ok.cda", text=True), "--db",
                                    F("inv.sqlite", sqlite=True, writes=True)], 0),
    ("investigate", "observe"): Case(["investigate", "observe", "SESSION", "rollback_fixed", "--db",
                                      F("inv.sqlite", sqlite=True, writes=True)], 0),
    ("investigate", "status"): Case(["investigate", "status", "SESSION", "--db", F("inv.sqlite", sqlite=True)], 0),
    ("investigate", "history"): Case(["investigate", "history", "SESSION", "--db", F("inv.sqlite", sqlite=True)], 0),
    ("investigate", "undo"): Case(["investigate", "undo", "SESSION", "--db", F("inv.sqlite", sqlite=True, writes=True)], 2,
                                  why="nothing to undo in a new session: exit 2"),
    ("investigate", "close"): Case(["investigate", "close", "SESSION", "--db", F("inv.sqlite", sqlite=True, writes=True)], 0),
    ("guard",): Case(["guard", T("launch.json", text=True), "--policies", T("policies.toml", text=True), "--ledger",
                      F("guardian.db", sqlite=True, writes=True), "--sim", T("model.toml", text=True)], 0,
                     judged="launch.json"),  # a malformed action is REJECT malformed_action (docs/guardian.md)
    ("conduct",): Case(["conduct", "compute 1 + 2", "--db", F("ir.sqlite", sqlite=True, writes=True), "--registry",
                        T("registry", text=True)], 0),
    ("reflect", "approve"): Case(["reflect", "approve", "ACTION", "--store", F("receipts", sqlite=True, writes=True),
                                  "--reviewer", "bob"], 0),
    ("investigate", "revise"): Case(["investigate", "revise", "SESSION", "soft weight 1: not rollback_fixed", "--db",
                                     F("inv.sqlite", sqlite=True, writes=True)], 0),
    ("investigate", "note"): Case(["investigate", "note", "SESSION", "0", "first look", "--db",
                                   F("inv.sqlite", sqlite=True, writes=True)], 0),
    ("investigate", "share"): Case(["investigate", "share", "SESSION", "bob", "--db",
                                    F("inv.sqlite", sqlite=True, writes=True)], 0),
    ("check-report",): Case(["check-report", T("report.json", text=True), "--observations", "api p99 latency at 900 ms"],
                            1, why="no Ken given: the draft is held to ABSTAIN, exit 1"),
    ("guard escalations",): Case(["guard", "escalations", "--ledger", F("guardian.db", sqlite=True)], 0),
    ("guard export",): Case(["guard", "export", "--ledger", F("guardian.db", sqlite=True), "--format", "jsonl"], 0),
    ("guard resolve",): Case(["guard", "resolve", "esc-1", "--approve", "--ledger",
                                F("guardian.db", sqlite=True, writes=True), "--by", "alice", "--reason", "ok"], 1,
                               why="no escalation esc-1 in this guardian file: refused, exit 1"),
    ("guard proxy",): Case([], 0, json=None, why="an MCP gateway on stdio or HTTP: it runs until stopped "
                             "(tests/test_guard_proxy.py)"),
    ("completion",): Case(["completion", "bash"], 0, json=None, why="prints a shell script, not an answer"),
    ("bench", "folio"): Case(["bench", "folio", T("folio.jsonl", text=True)], 0),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("world")
    with pytest.MonkeyPatch.context() as patch:  # the keys of this world, never ~/.config/cda
        patch.setenv("CDA_KEY_DIR", str(root / "keys"))
        yield World(root)


@pytest.fixture(autouse=True)
def _world_keys(_private_key_dir: None, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The world's signer keys (its guardian file registered them) for every command here."""
    monkeypatch.setenv("CDA_KEY_DIR", str(world.root / "keys"))


def _resolve(world: World, argv: list[str]) -> list[str]:
    return [world.session if a == "SESSION" else world.action if a == "ACTION" else a for a in argv]


# ---- the tests ---------------------------------------------------------------------------------


def test_every_command_of_the_table_has_a_case(table: dict[tuple[str, ...], argparse.ArgumentParser]) -> None:
    assert sorted(table) == sorted(CASES), "a command was added or removed: give it a case in CASES"


def _answering() -> list[tuple[str, ...]]:
    return [path for path, case in CASES.items() if case.argv]


@pytest.mark.parametrize("path", _answering(), ids=" ".join)
def test_exit_code_json_and_no_traceback(path: tuple[str, ...], world: World,
                                         table: dict[tuple[str, ...], argparse.ArgumentParser]) -> None:
    case = CASES[path]
    code, out, err = _run(_resolve(world, world.argv(case)))
    assert code == case.code and code in EXIT_TABLE, (code, out, err)
    assert "Traceback" not in out + err
    options = {o for a in table[path]._actions for o in a.option_strings}
    if case.json is None:
        assert case.why, f"{' '.join(path)}: a command that does not answer says why"
        return
    assert "--json" in options, f"cda {' '.join(path)} answers but has no --json"
    code, out, err = _run(_resolve(world, world.argv(case)) + ["--json"])
    assert code in EXIT_TABLE and "Traceback" not in out + err
    docs = [json.loads(line) for line in out.splitlines() if line.strip()] if case.json == "lines" else [json.loads(out)]
    assert docs, f"cda {' '.join(path)} --json printed nothing"
    # a mistake with --json is JSON too: a missing input file
    missing = [str(world.root / "no-such-file") if isinstance(a, F) and not a.writes and not a.folder else a
               for a in case.argv]
    if missing != case.argv:
        code, out, err = _run(_resolve(world, [str(a) for a in missing]) + ["--json"])
        assert code == 2 and "Traceback" not in out + err, (code, out, err)
        if case.json == "object":
            json.loads(out)


def _stdin_cases() -> list[tuple[tuple[str, ...], int]]:
    return [(path, i) for path, case in CASES.items() for i, a in enumerate(case.argv) if isinstance(a, F) and a.text]


@pytest.mark.parametrize(("path", "index"), _stdin_cases(), ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v))
def test_a_text_file_can_be_standard_input(path: tuple[str, ...], index: int, world: World,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(world.root)  # what a file read from standard input names is relative to here
    case = CASES[path]
    f = case.argv[index]
    assert isinstance(f, F)
    source = world.files[f.name]
    by_file = _run(_resolve(world, world.argv(case, {index: str(source)})))
    by_stdin = _run(_resolve(world, world.argv(case, {index: "-"})), stdin=source.read_text(encoding="utf-8"))
    assert by_stdin[0] == by_file[0] == case.code, (by_stdin, by_file)

    def same(text: str) -> str:  # the file's name, a store or output made for the run, and times aside
        text = text.replace(str(source), "-").replace("<stdin>", "-").replace(f"store {source.name} as", "store - as")
        text = re.sub(r"\d+(\.\d+)? (s|ms)\b", "T", re.sub(r'"(time_s|median_ms|seconds)": [0-9.e-]+', "T", text))
        text = re.sub(r"\d{4}-\d\d-\d\dT[0-9:.]+(\+00:00|Z)?", "WHEN", text)  # a time it was made
        text = re.sub(r"[0-9a-f]{64,}", "SIGNATURE", text)  # a signature over that time
        for word in sorted({w for w in text.split() if str(world.root) in w}, key=len, reverse=True):
            text = text.replace(word, "PATH")
        return text

    if path not in {("investigate", "start"), ("task", "execute")}:  # a new session id, a store used once
        assert same(by_stdin[1]) == same(by_file[1])


@pytest.mark.parametrize("path", [p for p, c in CASES.items() if c.several], ids=" ".join)
def test_several_files_in_one_call(path: tuple[str, ...], world: World) -> None:
    case = CASES[path]
    index = next(i for i, a in enumerate(case.argv) if isinstance(a, F))
    argv = world.argv(case)
    code, out, _ = _run(argv[:index + 1] + [argv[index]] + argv[index + 1:] + ["--json"])
    assert code == case.code
    files = json.loads(out)["files"]
    if path == ("fmt",):
        assert [f["formatted"] for f in files] == [False, False]
    else:
        assert [f["exit_code"] for f in files] == [case.code, case.code]


def _foreign_cases() -> list[tuple[tuple[str, ...], int, str]]:
    return [(path, i, kind) for path, case in CASES.items() for i, a in enumerate(case.argv) if isinstance(a, F)
            for kind in (("text", "sqlite", "folder") if a.sqlite or a.writes else ("text",))]


def _foreign(folder: Path, kind: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "text":
        path = folder / "theirs.txt"
        path.write_text("another program's notes\n")
    elif kind == "sqlite":
        path = folder / "theirs.sqlite"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE mail (id INTEGER PRIMARY KEY, body TEXT)")
            conn.execute("INSERT INTO mail (body) VALUES ('hello')")
        conn.close()
    else:
        path = folder / "theirs"
        path.mkdir()
        (path / "results.jsonl").write_text("not CDA's\n")
        (path / "receipts.sqlite").write_text("not CDA's\n")
    return path


def _digest(path: Path) -> dict[str, str]:
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.is_file()}


@pytest.mark.parametrize(("path", "index", "kind"), _foreign_cases(),
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v))
def test_a_foreign_file_in_any_path_argument_is_left_as_it_was(path: tuple[str, ...], index: int, kind: str,
                                                               world: World, tmp_path: Path) -> None:
    case = CASES[path]
    f = case.argv[index]
    assert isinstance(f, F)
    theirs = _foreign(tmp_path / "theirs", kind)
    before = _digest(theirs)
    code, out, err = _run(_resolve(world, world.argv(case, {index: str(theirs)})))
    assert "Traceback" not in out + err and code in EXIT_TABLE, (code, out, err)
    assert _digest(theirs) == before, f"cda {' '.join(path)} modified a file it did not create ({kind} at {f.name})"
    assert theirs.exists()
    if not f.writes:  # an input CDA cannot read is bad input (or, judged, an answer: REJECT)
        assert code == (1 if f.name == case.judged else 2), (code, out, err)


def test_cda_jobs_keeps_the_same_table() -> None:
    """A batch exits with the worst of its jobs' codes, each from the same table (tests/test_jobs.py
    runs batches that give 0, 1 and 3; a bad manifest is 2)."""
    from cda.cli.jobs import EXIT_OF_STATUS

    assert set(EXIT_OF_STATUS.values()) <= EXIT_TABLE
    assert EXIT_OF_STATUS["ok"] == 0 and EXIT_OF_STATUS["failed"] == 1 and EXIT_OF_STATUS["timeout"] == 3
    code, out, err = _run(["jobs", "run", "/no/such/manifest.toml", "--json"])
    assert code == 2 and json.loads(out)["message"].startswith("/no/such/manifest.toml")
