"""Batch jobs: ``cda jobs run MANIFEST.toml`` on a local process pool or a Dask cluster.

The pipeline reads off the modules: ``manifest`` (TOML in, checked jobs with their keys out)
→ ``kinds`` (the registry: kind name → a function of the job's parameters) → ``isolate``
(one job in its own process, with its time limit and memory cap; ``child`` is that process)
→ ``runners`` (local pool, Dask) → ``store`` (SQLite, WAL, one row per finished job) →
``batch`` (skip the finished, record, receipts, the JSONL) → ``cli``. See docs/jobs.md.
"""
