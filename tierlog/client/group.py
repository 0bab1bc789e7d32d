"""A consumer's membership of a group: KIP-848's protocol over HTTP (docs/design.md §5 "Groups").

The server computes assignments; the member joins, then heartbeats every
heartbeat_interval_ms with the partitions it owns, and each answer names the partitions it
should own now. The consumer's poll() reconciles the two (release revoked partitions, take
new ones) and the next heartbeat reports the result, which lets the server hand released
partitions to their new owners. Heartbeats run on the I/O loop, so they go on while the
application processes records. Fenced (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or silent past
the session timeout, the member has lost its partitions and must join again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from tierlog.client.config import ConsumerConfig
from tierlog.client.errors import ApiError, CommitFailedError
from tierlog.client.http import AsyncHttp
from tierlog.client.types import OffsetAndMetadata, TopicPartition

log = logging.getLogger("tierlog.client.group")

Assignment = frozenset[TopicPartition]


def group_path(group_id: str) -> str:
    return "/groups/" + quote(group_id, safe="")


def parse_assignment(doc: Any) -> Assignment:
    """{"topic": [partitions]} (or a list of {"topic", "partitions"}) as TopicPartitions."""
    if isinstance(doc, list):
        doc = {d["topic"]: d.get("partitions", []) for d in doc}
    if not isinstance(doc, dict):
        return frozenset()
    return frozenset(TopicPartition(t, int(p)) for t, ps in doc.items() for p in ps)


def encode_assignment(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


def encode_offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[dict[str, Any]]:
    return [
        {"topic": tp.topic, "partition": tp.partition, "offset": om.offset, "metadata": om.metadata}
        for tp, om in sorted(offsets.items())
    ]


class GroupMember:
    def __init__(self, http: AsyncHttp, group_id: str, config: ConsumerConfig) -> None:
        self.http = http
        self.group_id = group_id
        self.config = config
        self.member_id: str | None = None
        self.member_epoch = -1
        self.interval_s = config.heartbeat_interval_ms / 1000
        # Written by the I/O loop, read by poll(): whole immutable values, swapped at once.
        self.assignment: Assignment | None = None  # what the server wants this member to own
        self.lost: ApiError | None = None  # set when fenced or timed out: poll() reacts
        # Written by poll(), read by heartbeats.
        self.owned: Assignment = frozenset()
        self.last_poll = time.monotonic()
        self.new_topics: tuple[str, ...] | None = None  # a subscription change to announce
        self._rejoin_id: str | None = None  # fenced: rejoin under this id at epoch 0
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._commit_lock: asyncio.Lock | None = None  # made on the loop

    @property
    def joined(self) -> bool:
        return self.member_id is not None

    def _deadline(self) -> float:
        return time.monotonic() + self.config.request_timeout_ms / 1000

    def _member_path(self, member_id: str) -> str:
        return f"{group_path(self.group_id)}/members/{quote(member_id, safe='')}"

    async def join(self, topics: Iterable[str]) -> None:
        """Become a member: after a fence, under the old id at epoch 0 (KIP-848), owning
        nothing; otherwise (or if that id is gone too) as a new member."""
        names = list(topics)
        rejoin_id, self._rejoin_id = self._rejoin_id, None
        if rejoin_id is not None:
            body = {"member_epoch": 0, "owned": {}, "topics": names}
            try:
                doc = await self.http.call_any(
                    "POST",
                    self._member_path(rejoin_id) + "/heartbeat",
                    body=body,
                    deadline=self._deadline(),
                    idempotent=True,
                )
                self._adopt(rejoin_id, doc)
                return
            except ApiError as exc:
                if not exc.fenced_member:
                    self._rejoin_id = rejoin_id  # try again on the next poll
                    raise
        body = {"topics": names, "session_timeout_ms": self.config.session_timeout_ms}
        if self.config.group_assignor:
            body["assignor"] = self.config.group_assignor
        doc = await self.http.call_any(
            "POST", group_path(self.group_id) + "/members", body=body, deadline=self._deadline()
        )
        self._adopt(str(doc["member_id"]), doc)

    def _adopt(self, member_id: str, doc: dict[str, Any]) -> None:
        self.member_id = member_id
        self.member_epoch = int(doc.get("member_epoch", 0))
        if doc.get("heartbeat_interval_ms"):
            self.interval_s = int(doc["heartbeat_interval_ms"]) / 1000
        self.assignment = parse_assignment(doc.get("assignment"))
        self.owned = frozenset()
        self.lost = None
        self.new_topics = None
        self.last_poll = time.monotonic()
        log.info(
            "joined group %s as %s (epoch %d)", self.group_id, self.member_id, self.member_epoch
        )
        self._wake = asyncio.Event()
        self._task = asyncio.ensure_future(self._heartbeats(member_id))

    def wake(self) -> None:
        """Heartbeat now (after a reconciliation, so the server learns of it at once)."""
        if self._wake is not None:
            self._wake.set()

    async def _heartbeats(self, member_id: str) -> None:
        last_ok = time.monotonic()
        session_s = self.config.session_timeout_ms / 1000
        assert self._wake is not None
        while self.member_id == member_id:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            self._wake.clear()
            if self.member_id != member_id:
                return
            idle = time.monotonic() - self.last_poll
            if idle * 1000 > self.config.max_poll_interval_ms:
                log.warning("poll() not called for %.0fs: leaving group %s", idle, self.group_id)
                await self.leave()
                self.lost = ApiError("UNKNOWN_MEMBER_ID", "left: max_poll_interval_ms passed")
                return
            body: dict[str, Any] = {
                "member_epoch": self.member_epoch,
                "owned": encode_assignment(self.owned),
            }
            topics = self.new_topics
            if topics is not None:
                body["topics"] = list(topics)
            path = self._member_path(member_id) + "/heartbeat"
            try:
                # Retry no longer than the session lasts: past it, the member is gone anyway.
                deadline = min(self._deadline(), last_ok + max(session_s, self.interval_s))
                doc = await self.http.call_any(
                    "POST", path, body=body, deadline=deadline, idempotent=True
                )
            except ApiError as exc:
                if exc.fenced_member or time.monotonic() - last_ok > session_s:
                    log.warning("lost membership of group %s: %s", self.group_id, exc)
                    self._fence(member_id, exc)
                    return
                log.debug("heartbeat failed, retrying: %s", exc)
                continue
            last_ok = time.monotonic()
            if self.member_id != member_id:
                return
            if topics is not None and self.new_topics == topics:
                self.new_topics = None  # the group knows
            self.member_epoch = int(doc.get("member_epoch", self.member_epoch))
            if doc.get("assignment") is not None:  # null: unchanged
                self.assignment = parse_assignment(doc["assignment"])
            if doc.get("heartbeat_interval_ms"):
                self.interval_s = int(doc["heartbeat_interval_ms"]) / 1000

    def _fence(self, member_id: str, exc: ApiError) -> None:
        if self.member_id == member_id:
            self.member_id = None
            self.assignment = None
            # Still a member, at a newer epoch: rejoin under the same id (KIP-848).
            self._rejoin_id = member_id if exc.name == "FENCED_MEMBER_EPOCH" else None
            self.lost = exc

    async def leave(self) -> None:
        member_id, self.member_id = self.member_id, None
        self.assignment = None
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        member_id = member_id or self._rejoin_id
        self._rejoin_id = None
        if member_id is None:
            return
        path = self._member_path(member_id)
        try:
            deadline = time.monotonic() + min(5.0, self.config.request_timeout_ms / 1000)
            await self.http.call_any("DELETE", path, deadline=deadline, idempotent=True)
        except ApiError as exc:  # the session timeout removes it anyway
            log.info("leaving group %s: %s", self.group_id, exc)

    # --- offsets ---
    async def commit(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], as_member: bool = True
    ) -> None:
        """Commit at the current member epoch; `as_member=False` (manual assignment):
        outside membership, which the group accepts only while it has no members."""
        if not offsets:
            return
        if as_member and self.member_id is None:
            raise CommitFailedError(
                f"not a member of group {self.group_id} (it is joining again): "
                "the partitions may belong to another member now"
            )
        # One commit at a time, in the order made: concurrent HTTP requests could land out of
        # order and an older async commit overwrite a newer one.
        if self._commit_lock is None:
            self._commit_lock = asyncio.Lock()
        async with self._commit_lock:
            await self._commit(offsets)

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        for _ in range(2):
            epoch = self.member_epoch
            body = {
                "member_id": self.member_id or "",
                "member_epoch": epoch if self.member_id else -1,
                "offsets": encode_offsets(offsets),
            }
            try:
                await self.http.call_any(
                    "POST",
                    group_path(self.group_id) + "/offsets",
                    body=body,
                    deadline=self._deadline(),
                    idempotent=True,
                )
                return
            except ApiError as exc:
                if not exc.fenced_member:
                    raise
                if self.member_id and self.member_epoch != epoch:
                    continue  # a heartbeat moved the epoch on meanwhile: commit with it
                raise CommitFailedError(f"commit rejected by group {self.group_id}: {exc}") from exc

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        try:
            doc = await self.http.call_any(
                "GET", group_path(self.group_id) + "/offsets", deadline=self._deadline()
            )
        except ApiError as exc:
            if exc.name != "GROUP_ID_NOT_FOUND":
                raise
            doc = None  # a group that never committed
        found = {
            TopicPartition(o["topic"], int(o["partition"])): OffsetAndMetadata(
                int(o["offset"]), o.get("metadata") or ""
            )
            for o in (doc or {}).get("offsets", [])
            if o.get("offset") is not None
        }
        return {tp: found.get(tp) for tp in partitions}
