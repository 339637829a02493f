#!/bin/sh
# audit3: entity stores Cedar refuses (a duplicate uid, a cycle) and a deep hierarchy, through
# `cda policy authorize`; cedarpy (Cedar's own evaluator) is the oracle. Run with the venv active.
set -u
T=$(mktemp -d); export CDA_KEY_DIR=$T/keys; cd "$T"
python - <<'PY'
import json
base = [
  {"uid": {"type": "G", "id": "eng"}, "attrs": {}, "parents": []},
  {"uid": {"type": "G", "id": "ana"}, "attrs": {}, "parents": [{"type": "G", "id": "eng"}]},
  {"uid": {"type": "Doc", "id": "memo"}, "attrs": {}, "parents": []},
]
dup = base + [{"uid": {"type": "G", "id": "ana"}, "attrs": {}, "parents": []}]
json.dump(dup, open("dup.json", "w")); json.dump(list(reversed(dup)), open("dup_rev.json", "w"))
cyc = [{"uid": {"type": "G", "id": "a"}, "attrs": {}, "parents": [{"type": "G", "id": "b"}]},
       {"uid": {"type": "G", "id": "b"}, "attrs": {}, "parents": [{"type": "G", "id": "a"}]},
       {"uid": {"type": "Doc", "id": "memo"}, "attrs": {}, "parents": []}]
json.dump(cyc, open("cycle.json", "w"))
N = 2000
chain = [{"uid": {"type": "G", "id": str(i)}, "attrs": {}, "parents": [{"type": "G", "id": str(i + 1)}] if i + 1 < N else []}
         for i in range(N)] + [{"uid": {"type": "Doc", "id": "memo"}, "attrs": {}, "parents": []}]
json.dump(chain, open("chain.json", "w"))
open("eng.cedar", "w").write('permit (principal in G::"eng", action, resource);\n')
open("b.cedar", "w").write('permit (principal in G::"b", action, resource);\n')
open("top.cedar", "w").write(f'permit (principal in G::"{N - 1}", action, resource);\n')
for name, who in (("ana", "ana"), ("a", "a"), ("zero", "0")):
    json.dump({"principal": {"type": "G", "id": who}, "action": {"type": "Action", "id": "read"},
               "resource": {"type": "Doc", "id": "memo"}, "context": {}}, open(f"req_{name}.json", "w"))
PY
echo "== a duplicate uid: Cedar refuses the store; CDA's answer depends on the order"
cda policy authorize eng.cedar --entities dup.json --request req_ana.json; echo "exit $?"
cda policy authorize eng.cedar --entities dup_rev.json --request req_ana.json; echo "exit $?"
echo "== a cycle a in b, b in a: Cedar refuses the store"
cda policy authorize b.cedar --entities cycle.json --request req_a.json; echo "exit $?"
echo "== a chain of 2000 groups: Cedar answers ALLOW"
cda policy authorize top.cedar --entities chain.json --request req_zero.json 2>&1 | tail -2; echo "exit $?"
