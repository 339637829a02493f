"""audit3: DSL text sent through `cda mcp` (any door that receives DSL text: ToolBus, MCP, investigate
observe/revise) is scanned by the gate for `ken "…"` lines before anything runs; a run of digits
before `ken` sends that scan's regex `(?:keyword|[0-9]+)*` into exponential backtracking.
Run from the worktree root with the venv active: python audit3/gate_ken_scan_redos.py [DIGITS]"""
import json
import os
import subprocess
import sys
import tempfile
import time

digits = int(sys.argv[1]) if len(sys.argv) > 1 else 26
env = {**os.environ, "CDA_KEY_DIR": tempfile.mkdtemp()}
p = subprocess.Popen([sys.executable, "-m", "cda", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def send(message: dict) -> None:
    p.stdin.write(json.dumps(message) + "\n")
    p.stdin.flush()


send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {},
      "clientInfo": {"name": "audit3", "version": "1"}}})
p.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
for n in (10, digits):
    dsl = "hyp a\nobservable o\nobserve o\nhard: o iff a\n" + "0" * n + "zken\n"
    t = time.monotonic()
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "check", "arguments": {"dsl": dsl}}})
    answer = p.stdout.readline()
    print(f"{n} digits: {time.monotonic() - t:.1f} s: {answer[:160]}")
p.stdin.close()
p.wait(timeout=60)
