"""The Ken graph of an Action: the inline graph of ``CDAInputs.ken``, or the one a caller loaded."""

from __future__ import annotations

from cda.contracts.action import CDAInputs
from cda.errors import KenError
from cda.ken.graph import KenGraph

__all__ = ["ken_from_inputs"]


def ken_from_inputs(inputs: CDAInputs, loaded: KenGraph | None) -> KenGraph | None:
    """Build the inline graph; a ``path`` must have been loaded by the caller (an adapter)."""
    source = inputs.ken
    if source is None:
        return loaded
    if source.path is not None:
        if loaded is None:
            raise KenError(f"ken: {source.path} must be loaded by the caller (cda run, cda.adapters.action_entry)")
        return loaded
    ken = KenGraph()
    for node in source.nodes:
        attrs = {k: v for k, v in (("label", node.label), ("text", node.text)) if v is not None}
        ken.add_node(node.id, **attrs)
    for edge in source.edges:
        ken.add_edge(edge.source, edge.relation, edge.target)
    return ken.merged(loaded) if loaded is not None else ken
