"""Consumer groups, KIP-848 style and stateless over HTTP (docs/design.md §1, §5): the server
computes each group's target assignment and reconciles members to it through heartbeats;
all state is in Postgres (metadata/groups.py), so any node answers any member.

- requests.py: request bodies → typed requests (4xx on bad input)
- reconcile.py: the reconciliation rules (pure)
- coordinator.py: join / heartbeat / leave / commit / expire / reset, one locked transaction each
- offsets.py: committed offsets with lag; planning admin resets
- routes.py: the HTTP routes; mount.py: routes + sweep + pools for a broker or a fetch node
- lookups.py: high watermarks and offset lookups from the cluster; sweeper.py: expiry sweep
"""
