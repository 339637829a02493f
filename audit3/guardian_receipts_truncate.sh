#!/bin/sh
# audit3: the guardian's receipt log (`cda guard --receipts`, also `cda guard proxy`'s and `cda mcp`'s
# gate.sqlite) has no signed head: deleting its newest receipts (a REJECT here) verifies intact.
set -u
T=$(mktemp -d); export CDA_KEY_DIR=$T/keys; cd "$T"
cda task budget a 300 --store g.db >/dev/null
printf '[facts]\ndeletes = { action_type = ["*delete*"] }\n[[policy]]\nid = "no_delete"\ndsl = "not deletes"\n' > p.toml
for t in read delete; do
  echo "{\"action_id\":\"$t\",\"agent_id\":\"a\",\"tool\":{\"name\":\"t\",\"version\":\"1\"},\"action_type\":\"$t\",\"resources\":[\"r/1\"],\"cost_estimate\":\"1\",\"currency\":\"USD\",\"parameters\":{}}" > $t.json
  cda guard $t.json --policies p.toml --ledger g.db --receipts r.sqlite | head -1
done
cda receipts verify r.sqlite; echo "exit $?"
python - <<'PY'
import sqlite3
c = sqlite3.connect("r.sqlite")
sql = c.execute("select sql from sqlite_master where name='receipts_no_delete'").fetchone()[0]
c.execute("drop trigger receipts_no_delete")
c.execute("delete from receipts where rowid = (select max(rowid) from receipts)")
c.execute(sql); c.commit()
PY
echo "== after deleting the REJECT's receipt:"
cda receipts verify r.sqlite; echo "exit $?"
