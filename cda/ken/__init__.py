"""Ken, the knowledge graph: typed nodes and edges, the safe query set (search, neighbourhood,
path, related_by), its index and its loaders (JSON, CSV, GraphML).

Ken sits below the encodings (the grounder reads it) and imports no solver.
"""
