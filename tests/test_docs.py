"""Every command and snippet of README.md and docs/*.md runs as written, and prints what the page
shows (issue 27: pages whose commands did not run, whose files were not shipped, whose walk left
files in the repository).

Each page is one test. Its fenced blocks are read in order, by their info string, in a scratch
copy of the repository (``examples/``, ``schemas/``, ``benchmarks/``…; ``../shared/data`` links to
the data sets when they are here), so a new command on a page is run without anyone listing it:

- ``console``: ``$ command`` lines (``\\`` continues one), each followed by what it prints
  (stdout and stderr), compared line by line; ``…`` (or ``...``) alone on a line stands for any
  lines, inside a line for any text, and two blanks or more for any run of blanks (a table's
  columns follow the width of their numbers); an id the page shows alone on a line (``be8c42f23a024548``)
  stands for the one the run printed, in the commands and outputs after it.
- ``sh``: each command runs and must exit 0 (a comment that is exactly ``# exit N``, at its end,
  says otherwise); a block with indented lines (a ``case``, an ``if``) runs as one script.
- ``python``: runs as a script of its own; ``pycon``: ``>>>`` examples, run by doctest in the
  test's process (``...`` elides), the page's examples sharing one namespace.
- ``LANG file=PATH``: a file. A path the repository has: the block shows it whole and must equal
  it. Otherwise the reader is asked to make it: it is written before the page's commands run.
- ``usage``: a command's synopsis, not run. Any other block is text; one that holds a ``$ `` or
  ``>>> `` prompt, or a line starting with ``cda ``, must say which of these it is.

An HTML comment right above a block steers it: ``<!-- doc-test: skip: REASON -->`` (a reason is
required: what the test cannot do, and where else it is checked), ``<!-- doc-test: serve -->``
(a real ``cda serve`` on a free port while the block runs; the page's ``8765`` is that port),
``<!-- doc-test: needs-data -->`` (it reads ``../shared/data``: run when the data sets are there).

After the page: no file of the copy was changed, and every new file is one git ignores (under
``runs/``, a cache) or one the page asked for.
"""

from __future__ import annotations

import contextlib
import doctest
import hashlib
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import DATA, ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"console", "sh", "python", "pycon"}
_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
_DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*(?P<what>[a-z]+)\s*(?::\s*(?P<why>.*?))?\s*-->")
_COPY_IGNORE = shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.egg-info", ".pytest_cache", ".mypy_cache",
                                      ".ruff_cache", ".hypothesis", "runs", "tests")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    attrs: dict[str, str]
    body: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, with their info string and the directives above them."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in _FENCE.finditer(text):
        info = m["info"].split()
        indent = len(m["indent"])
        body = "".join(line[indent:] for line in m["body"].splitlines(keepends=True))
        before = text[:m.start()].rstrip("\n").splitlines()
        directives: dict[str, str] = {}
        while before and _DIRECTIVE.fullmatch(before[-1].strip()):
            d = _DIRECTIVE.fullmatch(before.pop().strip())
            assert d is not None
            directives[d["what"]] = d["why"] or ""
        attrs = dict(word.split("=", 1) for word in info[1:] if "=" in word)
        found.append(Block(page, text[:m.start()].count("\n") + 1, info[0] if info else "", attrs, body, directives))
    return found


# ---- running ------------------------------------------------------------------------------------


def _scratch(tmp: Path) -> Path:
    """A copy of the repository to walk the page in, ``../shared/data`` beside it when there is data."""
    work = tmp / "clone"
    shutil.copytree(ROOT, work, ignore=_COPY_IGNORE, symlinks=True)
    if DATA.is_dir():
        (tmp / "shared").mkdir()
        (tmp / "shared" / "data").symlink_to(DATA)
    return work


def _checksums(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def _is_plain_cda(command: str) -> list[str] | None:
    """The arguments of ``command`` when it is one ``cda`` call with no shell syntax (run in-process)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return None
    if not words or words[0] != "cda" or any(w in {"|", "||", "&", "&&", ";", ">", ">>", "<", "(", ")"} or "$" in w
                                             or "`" in w or "*" in w for w in words):
        return None
    return words[1:]


class Walk:
    """The state of one page's walk: its folder, environment, bound ids and the server it started."""

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work, self.env = work, env
        self.ids: dict[str, str] = {}
        self.declared: set[str] = set()

    def bind(self, text: str) -> str:
        for shown, actual in self.ids.items():
            text = text.replace(shown, actual)
        return text

    def command(self, command: str) -> tuple[int, str]:
        """Run one command of the page: its exit status and what it printed (stdout, then stderr)."""
        args = _is_plain_cda(command)
        if args is not None:
            from cda.cli.main import main

            out, err = io.StringIO(), io.StringIO()
            code = main(args, stdout=out, stderr=err, stdin=io.StringIO(""))
            return code, out.getvalue() + err.getvalue()
        proc = subprocess.run(["bash", "-c", command], cwd=self.work, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=600)
        return proc.returncode, proc.stdout


def _pattern(shown: str) -> re.Pattern[str]:
    """``shown`` as a regex: ``…``/``...`` alone on a line is any lines, inside a line any text."""
    parts = []
    for line in shown.rstrip("\n").split("\n"):
        if line.strip() in ("…", "..."):
            parts.append(r"(?:[^\n]*\n)*?")
            continue
        pieces = re.split(r"…|\.\.\.", line.rstrip())
        # a run of blanks matches any run of blanks: a column's width follows its numbers
        parts.append(".*?".join(r"[ \t]+".join(re.escape(w) for w in re.split(r"[ \t]{2,}", p)) for p in pieces)
                     + r"[ \t]*\n")
    return re.compile("".join(parts), re.S)


def _same(shown: str, actual: str) -> bool:
    return _pattern(shown).fullmatch(actual.rstrip("\n") + "\n") is not None


_ID = re.compile(r"[0-9a-f]{12,64}")


def _console(walk: Walk, block: Block) -> None:
    lines = block.body.splitlines()
    i = 0
    while i < len(lines):
        assert lines[i].startswith("$ "), f"{block.where}: line {i + 1} is output with no command above it"
        command = lines[i][2:]
        while command.endswith("\\"):
            i += 1
            command = command[:-1] + " " + lines[i].strip()
        i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        expected = walk.bind("\n".join(shown))
        code, actual = walk.command(walk.bind(command))
        assert "Traceback" not in actual, f"{block.where}: $ {command}\n{actual}"
        if _ID.fullmatch(expected.strip()) and _ID.fullmatch(actual.strip()) and expected.strip() != actual.strip():
            walk.ids[expected.strip()] = actual.strip()  # an id the run chose: the page's stands for it
            continue
        assert _same(expected, actual), f"{block.where}: $ {command}\n--- the page shows\n{expected}\n--- it printed\n{actual}"


def _sh(walk: Walk, block: Block) -> None:
    """Each command must exit 0 (or the ``# exit N`` at its end); a block with indented lines is
    one script (a ``case`` or ``if``), run whole, whose own exit status counts."""
    if any(line[:1].isspace() for line in block.body.splitlines() if line.strip()):
        code, actual = walk.command(walk.bind(block.body))
        assert "Traceback" not in actual and code == 0, f"{block.where}: the script exits {code}\n{actual}"
        return
    logical = []
    for raw in block.body.splitlines():
        if logical and logical[-1].endswith("\\"):
            logical[-1] = logical[-1][:-1] + " " + raw.strip()
        elif raw.strip() and not raw.lstrip().startswith("#"):
            logical.append(raw)
    for command in logical:
        want = re.search(r"#\s*exit\s+(\d+)\s*$", command)
        code, actual = walk.command(walk.bind(command))
        assert "Traceback" not in actual, f"{block.where}: {command}\n{actual}"
        assert code == (int(want[1]) if want else 0), f"{block.where}: {command}\nexit {code}\n{actual}"


def _python(walk: Walk, block: Block) -> None:
    """The snippet as a script of its own, in its own interpreter (what it registers or patches
    stays there)."""
    script = walk.work.parent / "snippets" / f"line_{block.line}.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text(walk.bind(block.body), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], cwd=walk.work, env=walk.env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, f"{block.where}: the snippet failed (exit {proc.returncode})\n{proc.stdout}"


def _pycon(walk: Walk, block: Block, namespace: dict[str, object]) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(walk.bind(block.body), namespace, block.where, str(block.page), block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    runner.run(test, out=report.write, clear_globs=False)
    assert runner.failures == 0, report.getvalue()


@contextlib.contextmanager
def _served(walk: Walk) -> Iterator[str]:
    """A real ``cda serve`` on a free port (what the page's ``8765`` stands for)."""
    (walk.work / "runs").mkdir(exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "cda", "serve", "runs/receipts.sqlite", "--port", "0"],
                            cwd=walk.work, env={**walk.env, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"http://[0-9.]+:([0-9]+)/", line)
    try:
        assert match is not None, f"cda serve did not start: {line!r}"
        yield match[1]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def _file(walk: Walk, block: Block) -> None:
    path = block.attrs["file"]
    shipped = ROOT / path
    if shipped.is_file():
        assert block.body == shipped.read_text(encoding="utf-8"), f"{block.where}: not the shipped {path}, whole"
        return
    target = walk.work / path
    assert not target.exists(), f"{block.where}: {path} would overwrite a file of the repository"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(block.body, encoding="utf-8")
    walk.declared.add(path)


def walk_page(page: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run ``page``'s blocks; returns what was skipped and why."""
    work = _scratch(tmp)
    env = {**os.environ, "CDA_KEY_DIR": str(tmp / "keys"), "HOME": str(tmp / "home"), "NO_COLOR": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"}
    for name in ("CDA_KEY_DIR", "HOME", "NO_COLOR", "PATH"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.chdir(work)
    (tmp / "home").mkdir()
    before = _checksums(work)
    walk = Walk(work, env)
    namespace: dict[str, object] = {"__name__": "__main__"}
    skipped = []
    page_blocks = blocks(page)
    for block in page_blocks:  # the files first: a page may name its manifest after showing the command
        if "file" in block.attrs and "skip" not in block.directives:
            _file(walk, block)
    for block in page_blocks:
        if "skip" in block.directives:
            assert block.directives["skip"], f"{block.where}: a skipped block says why"
            skipped.append(f"{block.where}: {block.directives['skip']}")
            continue
        if "file" in block.attrs:
            continue
        if "needs-data" in block.directives and not DATA.is_dir():
            skipped.append(f"{block.where}: the data sets are absent ({DATA}; README.md, Test data)")
            continue
        if block.lang not in RUN:
            loose = [line for line in block.body.splitlines() if line.startswith(("$ ", ">>> ", "cda "))]
            assert block.lang == "usage" or not loose, (
                f"{block.where}: a ```{block.lang} block with commands ({loose[0]!r}): label it console, sh, "
                "pycon or python (run), or usage (a synopsis)")
            continue
        with contextlib.ExitStack() as stack:
            if "serve" in block.directives:
                port = stack.enter_context(_served(walk))
                walk.ids["8765"] = port
            if block.lang == "console":
                _console(walk, block)
            elif block.lang == "sh":
                _sh(walk, block)
            elif block.lang == "python":
                _python(walk, block)
            else:
                _pycon(walk, block, namespace)
            walk.ids.pop("8765", None)
    after = _checksums(work)
    changed = sorted(p for p in before if after.get(p) != before[p])
    assert not changed, f"{page.name}: its commands changed files of the repository: {changed}"
    new = sorted(p for p in after if p not in before and p not in walk.declared)
    left = sorted(set(new) - _ignored(new))
    assert not left, f"{page.name}: its commands left files that git would show (write them under runs/): {left}"
    return skipped


def _ignored(paths: list[str]) -> set[str]:
    """The paths the repository's .gitignore ignores (``runs/``, caches)."""
    if not paths:
        return set()
    proc = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT, input="\n".join(paths),
                          capture_output=True, text=True)
    return set(proc.stdout.splitlines())


#: the longest walks (97 s and 51 s of a 60-minute run at load 13): .ci/run's slow step runs them
SLOW_PAGES = {"testing.md", "investigate.md"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW_PAGES else p
                                  for p in PAGES], ids=[p.name for p in PAGES])
def test_every_command_and_snippet_of_the_page_runs_as_written(page: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    skipped = walk_page(page, tmp_path, monkeypatch)
    runnable = [b for b in blocks(page) if b.lang in RUN]
    assert len(skipped) < max(1, len(runnable)) or not runnable, f"{page.name}: every block is skipped: {skipped}"


def test_the_reader_is_told_how_to_label_a_block() -> None:
    """The rules above hold for a page written today: a new page's commands are found by their
    prompt, and a ```sh block with no directive runs."""
    found = [b.lang for page in PAGES for b in blocks(page)]
    assert found.count("console") >= 10 and found.count("pycon") >= 3 and found.count("sh") >= 4, found


def test_readme_ci_and_the_loaded_suite_run_one_test_command() -> None:
    """README command 2's test run is what .ci/run's first step and benchmarks/loaded_suite.py
    run, word for word: the command the lead times is the one a user types (issue 27)."""
    from tests.conftest import benchmark_module

    command = " ".join(benchmark_module("loaded_suite").TEST_COMMAND)
    assert "-n auto" in command  # every core (pytest-xdist)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"pip install -e '.[test]' && {command}\n```" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f"pip install -q -e '.[test]' && {command}\n" in ci
