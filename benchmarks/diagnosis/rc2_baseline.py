"""The baseline: every subset-minimal diagnosis of an mbd-mobs instance with PySAT's RC2 alone.

Written directly against PySAT, sharing nothing with CDA: the file is read here, the circuit's
hard clauses are copied once per observation (health variables shared, every other variable
renumbered per copy, the observation's literals as unit clauses), one soft unit clause per
health variable. RC2 returns a cheapest model (fewest broken gates); its set of broken gates D
is a minimal diagnosis, and the hard clause "one of D is healthy" blocks D and its supersets.
As the costs never decrease, every set found is subset-minimal, and the loop ends with all of
them (the "MaxSAT loop with superset blocking" of shared/HINTS.md).

Run as a script (``python rc2_baseline.py FILE.wcnf.gz``) it prints one JSON object with the
diagnoses (health variable numbers) and the time, reading and building included; the
benchmark runs it in a subprocess so that a timeout can stop it.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

from pysat.examples.rc2 import RC2
from pysat.formula import WCNF

CPU_S = 0.0  # the CPU seconds of the last all_minimal_diagnoses (the benchmark's budget is CPU time)


def read_instance(path: Path) -> tuple[int, list[list[int]], list[int], list[list[int]]]:
    """(number of variables, hard clauses, health variables, observations as literal lists)."""
    nvars = top = 0
    hard: list[list[int]] = []
    health: list[int] = []
    observations: list[list[int]] = []
    raw = path.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    for line in text.splitlines():
        t = line.split()
        if not t:
            continue
        if t[0] == "o" or (t[0] == "c" and len(t) > 1 and t[1] == "o"):
            observations.append([int(v) for v in t[1 if t[0] == "o" else 2 : -1]])
        elif t[0] == "p":
            nvars, top = int(t[2]), int(t[4])
        elif t[0] != "c":
            weight, lits = int(t[0]), [int(v) for v in t[1:-1]]
            if weight >= top:
                hard.append(lits)
            else:
                health.append(lits[0])
    return nvars, hard, health, observations


def all_minimal_diagnoses(path: Path) -> tuple[list[list[int]], float]:
    """Every subset-minimal diagnosis (health variables), and the seconds it took."""
    start = time.perf_counter()
    cpu_start = time.process_time()
    nvars, hard, health, observations = read_instance(path)
    shared = set(health)
    wcnf = WCNF()
    for k, obs in enumerate(observations):
        offset = k * nvars

        def lit(v: int, offset: int = offset) -> int:
            if abs(v) in shared:
                return v
            return v + offset if v > 0 else v - offset

        for clause in hard:
            wcnf.append([lit(v) for v in clause])
        for v in obs:
            wcnf.append([lit(v)])
    for h in health:
        wcnf.append([h], weight=1)
    found: list[list[int]] = []
    with RC2(wcnf) as rc2:
        while True:
            model = rc2.compute()
            if model is None:
                break
            broken = [h for h in health if model[h - 1] < 0]
            found.append(sorted(broken))
            if not broken:
                break
            rc2.add_clause(broken)  # one of them healthy: no superset of this diagnosis again
    global CPU_S
    CPU_S = time.process_time() - cpu_start
    return found, time.perf_counter() - start


if __name__ == "__main__":
    diagnoses, seconds = all_minimal_diagnoses(Path(sys.argv[1]))
    print(json.dumps({"diagnoses": diagnoses, "time_s": seconds, "cpu_s": CPU_S}))
