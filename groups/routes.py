"""HTTP routes of consumer groups (docs/design.md §5), mountable on a broker or a fetch node.

``group_routes`` takes everything it needs (the engine, the high-watermark and offset
lookups, a thread pool for the blocking repository calls), so any Starlette app can mount
the list it returns. Errors are answered here as Kafka-style JSON, whatever the host app's
exception handlers are.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse, error_response, json_object
from groups import requests
from groups.assignors import DEFAULT_ASSIGNOR
from groups.coordinator import Assigned, GroupCoordinator
from groups.deps import Blocking, HighWatermarks, OffsetResolver, RecordTimestamp, blocking
from groups.offsets import (
    OffsetRow,
    fresh_snapshot,
    offsets_with_lag,
    plan_reset,
    with_time_lag,
)
from groups.requests import OffsetEntry
from logformat.errors import ErrorCode, TierlogError
from metadata.configs import validate_topic_name
from metadata.groups import GroupRepo
from metadata.types import ConsumerGroupMember

BODY_LIMIT = 8 * 1024 * 1024
Endpoint = Callable[[Request], Awaitable[Response]]


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t is not None else None


def _assigned(a: Assigned, with_member: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "member_epoch": a.member_epoch,
        "heartbeat_interval_ms": a.heartbeat_interval_ms,
        "assignment": a.assignment,
    }
    return {"member_id": a.member_id, **doc} if with_member else doc


def _offset_row(r: OffsetRow) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "metadata": r.metadata,
        "committed_at": _iso(r.committed_at),
        "high_watermark": r.high_watermark,
        "lag": r.lag,
        "lag_ms": r.lag_ms,
    }


def _member(m: ConsumerGroupMember) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "member_epoch": m.member_epoch,
        "topics": list(m.topics),
        "assignor": m.assignor,
        "session_timeout_ms": m.session_timeout_ms,
        "joined_at": _iso(m.joined_at),
        "last_heartbeat_at": _iso(m.last_heartbeat_at),
        "assignment": m.assigned,  # what the member may consume now
        "target": m.target,  # where the group is heading
        "owned": m.owned,  # what the member last said it consumes
    }


def _kafka_errors(fn: Endpoint) -> Endpoint:
    @functools.wraps(fn)
    async def endpoint(request: Request) -> Response:
        try:
            return await fn(request)
        except TierlogError as exc:
            return error_response(exc)

    return endpoint


def _topic_filter(request: Request) -> tuple[str, ...] | None:
    names = request.query_params.getlist("topic")
    return tuple(sorted({validate_topic_name(n) for n in names})) if names else None


def _topics_allowed(request: Request, topics: Iterable[str], operation: str) -> None:
    for topic in sorted(set(topics)):
        auth.require(request, "topic", topic, operation)


def _visible(request: Request, rows: list[OffsetRow]) -> list[OffsetRow]:
    """Only the topics the caller may describe (Kafka's OffsetFetch filters the same way)."""
    return [r for r in rows if auth.permitted(request, "topic", r.topic, "describe")]


@dataclass(frozen=True, eq=False)
class GroupEndpoints:
    """The handlers of the /groups routes, over one coordinator."""

    coordinator: GroupCoordinator
    run: Blocking
    high_watermarks: HighWatermarks
    resolve_offset: OffsetResolver
    record_timestamp: RecordTimestamp | None = None

    @staticmethod
    def group_of(request: Request, operation: str) -> str:
        """The group's name, once the caller may take `operation` on it (checked first, so
        a denied caller learns nothing about the group)."""
        group = requests.group_name(request.path_params["group"])
        auth.require(request, "group", group, operation)
        return group

    async def list_groups(self, request: Request) -> Response:
        rows = await self.run(self.coordinator.repo.list)
        return JSONResponse(
            {
                "groups": [
                    {
                        "name": g.name,
                        "state": g.state if g.members else "empty",
                        "members": g.members,
                        "assignor": g.assignor,
                        "group_epoch": g.group_epoch,
                        "created_at": _iso(g.created_at),
                    }
                    for g in rows
                    if auth.permitted(request, "group", g.name, "describe")
                ]
            }
        )

    async def describe(self, request: Request) -> Response:
        group = self.group_of(request, "describe")
        snap = await fresh_snapshot(self.coordinator, self.run, group)
        if snap is None:
            raise TierlogError(ErrorCode.GROUP_ID_NOT_FOUND, f"no group {group!r}")
        offsets = _visible(
            request,
            await offsets_with_lag(self.coordinator, self.run, self.high_watermarks, group),
        )
        if self.record_timestamp is not None:
            offsets = await with_time_lag(offsets, self.record_timestamp)
        lags = [r.lag for r in offsets if r.lag is not None]
        ages = [r.lag_ms for r in offsets if r.lag_ms is not None]
        return JSONResponse(
            {
                "name": snap.group.name,
                "state": snap.group.state,
                "group_epoch": snap.group.group_epoch,
                "assignor": snap.group.assignor,
                "created_at": _iso(snap.group.created_at),
                "members": [_member(m) for m in snap.members],
                "offsets": [_offset_row(r) for r in offsets],
                "lag": sum(lags) if lags else None,
                "lag_ms": max(ages) if ages else None,  # the oldest unconsumed record's age
            }
        )

    async def join(self, request: Request) -> Response:
        group = self.group_of(request, "read")
        req = requests.join(await json_object(request, BODY_LIMIT))
        _topics_allowed(request, req.topics, "describe")
        return JSONResponse(_assigned(await self.run(self.coordinator.join, group, req), True))

    async def heartbeat(self, request: Request) -> Response:
        group = self.group_of(request, "read")
        member = requests.member_id(request.path_params["member"])
        req = requests.heartbeat(await json_object(request, BODY_LIMIT))
        _topics_allowed(request, req.topics or (), "describe")
        assigned = await self.run(self.coordinator.heartbeat, group, member, req)
        return JSONResponse(_assigned(assigned, False))

    async def leave(self, request: Request) -> Response:
        group = self.group_of(request, "read")
        member = requests.member_id(request.path_params["member"])
        await self.run(self.coordinator.leave, group, member)
        return JSONResponse({"member_id": member, "left": True})

    async def commit(self, request: Request) -> Response:
        group = self.group_of(request, "read")  # Kafka's OffsetCommit: READ group + READ topics
        req = requests.commit(await json_object(request, BODY_LIMIT))
        _topics_allowed(request, (e.topic for e in req.offsets), "read")
        done: tuple[OffsetEntry, ...] = await self.run(self.coordinator.commit, group, req)
        return JSONResponse({"offsets": [e._asdict() for e in done]})

    async def delete_group(self, request: Request) -> Response:
        group = self.group_of(request, "delete")  # Kafka's DeleteGroups
        await self.run(self.coordinator.delete, group)
        return JSONResponse({"deleted": group})

    async def get_offsets(self, request: Request) -> Response:
        group = self.group_of(request, "describe")  # Kafka's OffsetFetch
        rows = await offsets_with_lag(
            self.coordinator, self.run, self.high_watermarks, group, _topic_filter(request)
        )
        return JSONResponse({"offsets": [_offset_row(r) for r in _visible(request, rows)]})

    async def reset(self, request: Request) -> Response:
        group = self.group_of(request, "read")  # as Kafka's tool: OffsetCommit's ACLs
        req = requests.reset(await json_object(request, BODY_LIMIT))
        named = [e.topic for e in req.offsets] + [p.topic for p in req.scope or ()]
        _topics_allowed(request, [*named, *(req.topics or ())], "read")
        rows = await plan_reset(self.coordinator, self.run, self.resolve_offset, group, req)
        _topics_allowed(request, (r.topic for r in rows), "read")  # nothing written yet
        if not req.dry_run:
            entries = [OffsetEntry(r.topic, r.partition, r.offset, None) for r in rows]
            await self.run(self.coordinator.reset, group, entries)
        return JSONResponse({"offsets": [r._asdict() for r in rows], "dry_run": req.dry_run})


def group_routes(
    engine: Engine,
    high_watermarks: HighWatermarks,
    resolve_offset: OffsetResolver,
    executor: Executor | None = None,
    default_assignor: str = DEFAULT_ASSIGNOR,
    record_timestamp: RecordTimestamp | None = None,
) -> list[Route]:
    """The /groups routes. ``executor`` runs the blocking Postgres calls (default: asyncio's
    shared pool; a host should give groups their own so lock waits never starve it).
    ``record_timestamp`` gives describe its lag in time (without it, lag_ms is null)."""
    coordinator = GroupCoordinator(GroupRepo(engine), default_assignor)
    e = GroupEndpoints(
        coordinator, blocking(executor), high_watermarks, resolve_offset, record_timestamp
    )
    member = "/groups/{group}/members/{member}"
    return [
        Route("/groups", _kafka_errors(e.list_groups), methods=["GET"]),
        Route("/groups/{group}", _kafka_errors(e.describe), methods=["GET"]),
        Route("/groups/{group}", _kafka_errors(e.delete_group), methods=["DELETE"]),
        Route("/groups/{group}/members", _kafka_errors(e.join), methods=["POST"]),
        Route(member + "/heartbeat", _kafka_errors(e.heartbeat), methods=["POST"]),
        Route(member, _kafka_errors(e.leave), methods=["DELETE"]),
        Route("/groups/{group}/offsets", _kafka_errors(e.commit), methods=["POST"]),
        Route("/groups/{group}/offsets", _kafka_errors(e.get_offsets), methods=["GET"]),
        Route("/groups/{group}/offsets/reset", _kafka_errors(e.reset), methods=["POST"]),
    ]
