"""Server-side partition assignors (Kafka's range, roundrobin, sticky, cooperative-sticky).

Each module is a pure function of (members with subscriptions and holdings, partition counts)
→ target assignment; groups/coordinator.py runs the group's assignor inside the group's transaction.
"""

from __future__ import annotations

from groups.assignors import cooperative_sticky, roundrobin, sticky
from groups.assignors import range as range_assignor
from groups.assignors.base import AssignFn

ASSIGNORS: dict[str, AssignFn] = {
    range_assignor.NAME: range_assignor.assign,
    roundrobin.NAME: roundrobin.assign,
    sticky.NAME: sticky.assign,
    cooperative_sticky.NAME: cooperative_sticky.assign,
}
# KIP-848's default server assignor ("uniform") is sticky and hands over cooperatively.
DEFAULT_ASSIGNOR = cooperative_sticky.NAME
