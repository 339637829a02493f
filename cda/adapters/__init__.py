"""Everything at the edge: the CLI, the SSE server, LLM providers, the event store; no solving logic."""
