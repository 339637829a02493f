"""Everything at the edge: CLI, Ken file loaders, and (later) transports, storage and jobs."""
