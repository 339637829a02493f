"""The conductor (docs/conductor.md): a thin policy engine that turns a request into obligations, picks
tools by set inclusion and a fixed order (reliability > cost > latency > name), checks
postconditions right after each run, escalates (next candidate -> CLARIFY -> DISCOVER_OP ->
JUSTIFY(failure)), and verifies before replying — all state in an IR database, no LLM scoring.

A client of the engine like any other (docs/conductor.md). ``cda conduct`` is its command.
"""
