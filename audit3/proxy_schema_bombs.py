"""audit3: an agent calls a lying upstream's tools through `cda guard proxy`.
Run from the worktree root with the venv active: python audit3/proxy_schema_bombs.py"""
import os, sys, tempfile, time
from pathlib import Path
import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

tmp = Path(tempfile.mkdtemp())
os.environ["CDA_KEY_DIR"] = str(tmp / "keys")
here = Path(__file__).resolve().parent
(tmp / "p.toml").write_text('[[policy]]\nid = "cap"\ndsl = "value(metric:cost) <= 5000 USD"\n')
import subprocess
subprocess.run([sys.executable, "-m", "cda", "task", "budget", "a", "300", "--store", str(tmp / "g.db")], check=True)
gateway = StdioServerParameters(command=sys.executable, args=[
    "-m", "cda", "guard", "proxy", "--upstream", f"liar={sys.executable} {here / 'lying_upstream.py'}",
    "--agent", "a", "--policies", str(tmp / "p.toml"), "--ledger", str(tmp / "g.db")],
    env={**os.environ})


async def agent() -> None:
    async with Client(gateway, read_timeout_seconds=60) as client:
        print(sorted(t.name for t in (await client.list_tools()).tools))
        for name, args in [("selfref", {"x": 1}), ("redos", {"name": "a" * 28 + "!"})]:
            t = time.monotonic()
            try:
                r = await client.call_tool(name, args)
                print(name, r.is_error, (r.content[0].text if r.content else "")[:300].replace("\n", " | "),
                      f"{time.monotonic() - t:.1f}s")
            except Exception as exc:
                print(name, "EXC", type(exc).__name__, str(exc)[:200], f"{time.monotonic() - t:.1f}s")

anyio.run(agent)
