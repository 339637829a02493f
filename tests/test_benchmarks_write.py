"""A benchmark script rewrites its section of docs/benchmarks.md only when asked (``--write``):
``python benchmarks/bench_startup.py`` rewrote the tracked page on every run (issue 27).

Checked on the source: every call of ``write_section`` in ``benchmarks/`` sits under an ``if``
that reads ``args.write`` (or a ``write`` flag set from it), and each such script has the option.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT


def _guarded(tree: ast.AST, call: ast.Call, parents: dict[ast.AST, ast.AST]) -> bool:
    node: ast.AST | None = call
    while node is not None:
        node = parents.get(node)
        if isinstance(node, ast.If) and any(
                (isinstance(n, ast.Attribute) and n.attr == "write") or (isinstance(n, ast.Name) and n.id == "write")
                for n in ast.walk(node.test)):
            return True
    return False


def test_every_benchmark_writes_the_page_only_with_write() -> None:
    scripts = sorted((ROOT / "benchmarks").rglob("*.py"))
    writers = []
    for script in scripts:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "write_section"]
        if not calls:
            continue
        writers.append(script.name)
        text = script.read_text(encoding="utf-8")
        assert '"--write"' in text, f"{script.relative_to(ROOT)} has no --write option"
        for call in calls:
            assert _guarded(tree, call, parents), f"{script.relative_to(ROOT)}:{call.lineno}: writes without --write"
    assert len(writers) >= 15, writers  # the scripts moved: look again


def test_the_pages_reproduce_lines_name_write() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    lines = [line for line in page.splitlines() if line.startswith("Reproduce:") and "rewrites this section" in line]
    assert lines and all("--write" in line for line in lines), [line for line in lines if "--write" not in line]
    assert Path(ROOT / "benchmarks" / "doc_section.py").is_file()
