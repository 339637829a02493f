#!/bin/sh
# audit3: a user's `command` tool in `cda conduct` that prints 1.5 GB (peak memory of the
# conductor), and one whose child outlives `timeout_s`. Run with the venv active.
set -u
T=$(mktemp -d); export CDA_KEY_DIR=$T/keys; cd "$T"
cat > tools.toml <<'TOML'
[[tool]]
name = "big"
command = ["sh", "-c", "yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | head -c 1500000000"]
satisfies = ["big"]
inputs = ["x"]
timeout_s = 60
reliability = "high"
cost = "low"
latency_ms = 1

[[tool]]
name = "hang"
command = ["sh", "-c", "sleep 123 & sleep 124"]
satisfies = ["hang"]
inputs = ["x"]
timeout_s = 2
reliability = "high"
cost = "low"
latency_ms = 1
TOML
echo "== 1.5 GB of output: refused at 10 MB, but only after holding it all (Maximum resident set size)"
/usr/bin/time -v cda conduct "big x=1" --db ir1.sqlite --registry tools.toml 2>&1 | grep -E "tool big|Maximum resident"
echo "== a tool stopped after timeout_s: are its processes gone?"
cda conduct "hang x=1" --db ir2.sqlite --registry tools.toml | grep "tool hang"
sleep 1; pgrep -a -f "sleep 12[34]" || echo "none left (held)"
pkill -f "sleep 12[34]" 2>/dev/null; true
