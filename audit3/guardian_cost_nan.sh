#!/bin/sh
# audit3: a guardian policy store whose [[tool]] cost is a TOML nan/inf (a traceback), or a cost
# string with 51 decimal places (accepted; a TOML number with 10 is refused). Run with the venv active.
set -u
T=$(mktemp -d); export CDA_KEY_DIR=$T/keys; cd "$T"
cda task budget a 300 --store g.db >/dev/null
echo '{"action_id":"x1","agent_id":"a","tool":{"name":"t","version":"1"},"action_type":"read","resources":["r/1"],"cost_estimate":"1","currency":"USD","parameters":{}}' > act.json
for v in nan inf '"0.1e-50"' '0.0000000001'; do
  printf '[[policy]]\nid = "cap"\ndsl = "value(metric:cost) <= 5000 USD"\n[[tool]]\nname = "t*"\ncost = %s\n' "$v" > p.toml
  echo "== cost = $v"; cda guard act.json --policies p.toml --ledger g.db 2>&1 | tail -2; echo "exit $?"
done
