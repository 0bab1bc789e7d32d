"""Maximum bipartite matching, for pairing the branches of two combined JSON Schemas
(oneOf/anyOf: schemaformat/jsonschema_diff.py), as Confluent's checker pairs them."""

from __future__ import annotations

from typing import Any


def maximum_matching(edges: dict[int, dict[int, Any]]) -> dict[int, int]:
    """Maximum bipartite matching (augmenting paths): update index → original index."""
    matched: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in matched or augment(matched[j], seen):
                matched[j] = i
                return True
        return False

    for i in edges:
        augment(i, set())
    return matched
