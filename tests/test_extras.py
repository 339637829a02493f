"""What a plain ``pip install -e .`` (README command 1) gives: the commands the README runs on
it work without any extra, and a command or function that needs an extra says which one
(``pip install 'cda[service]'``…) instead of a ``ModuleNotFoundError`` from deep inside.

The extras' modules are hidden from a child interpreter by a meta-path hook, so the test runs
in the suite's environment (which has every extra) as it would on a base install.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the top-level modules the extras of pyproject.toml bring (service, mcp, dask, otel, guardian)
EXTRA_MODULES = ("starlette", "uvicorn", "websockets", "anyio", "mcp", "dask", "distributed", "opentelemetry",
                 "jsonschema", "httpx", "httpx_sse")

_HIDE = f"""
import sys
from importlib.abc import MetaPathFinder

class Hide(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {EXTRA_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (hidden: a base install)", name=name)
        return None

sys.meta_path.insert(0, Hide())
"""


def _base_install(code: str, cwd: Path, env_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "CDA_KEY_DIR": str(env_dir / "keys"), "HOME": str(env_dir), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", _HIDE + code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_readme_command_1_runs_on_the_base_install_and_serve_names_its_extra(tmp_path: Path) -> None:
    run = _base_install(
        "from cda.cli.main import main\n"
        f"code = main(['run', {str(ROOT / 'examples/action/service_outage.json')!r}, '--out', 'runs'])\n"
        "assert code == 0, code\n"
        "import io; err = io.StringIO()\n"
        "print('SERVE', main(['serve', 'runs/receipts.sqlite', '--port', '0'], stderr=err), err.getvalue())\n",
        tmp_path, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr and (tmp_path / "runs" / "receipts.sqlite").is_file()
    serve = run.stdout[run.stdout.index("SERVE"):]
    assert serve.startswith("SERVE 2 cda: error: cda serve needs the 'service' extra"), serve
    assert "pip install 'cda[service]'" in serve and "pip install -e '.[service]'" in serve


def test_registering_a_guardian_tool_names_the_guardian_extra(tmp_path: Path) -> None:
    run = _base_install(
        "from cda.errors import MissingExtra\n"
        "from cda.guardian.gate import ToolRegistry\n"
        "try:\n"
        "    ToolRegistry().register('sql', '1.0', {'type': 'object'}, lambda args: None)\n"
        "except MissingExtra as exc:\n"
        "    print(exc)\n",
        tmp_path, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "needs the 'guardian' extra (jsonschema is not installed): pip install 'cda[guardian]'" in run.stdout


def test_the_readme_says_which_extra_each_command_beyond_the_base_install_needs() -> None:
    """The README's paragraph that tells users to `cda serve` names the extra to install first."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    serve = readme.index("cda serve runs/receipts.sqlite")
    assert "[service]" in readme[serve - 300:serve + 300], readme[serve - 300:serve + 300]
    guardian = (ROOT / "docs" / "guardian.md").read_text(encoding="utf-8")
    register = guardian.index("registry.register(")
    assert "cda[guardian]" in guardian[:register], "docs/guardian.md names the extra before registering a tool"
