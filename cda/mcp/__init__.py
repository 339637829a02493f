"""``cda mcp``: the Model Context Protocol server (``server``) and its clause sessions (``session``)."""
