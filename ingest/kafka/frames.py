"""Reading a Kafka connection's request frames: size prefix, cap, budget, deadlines.

Before authentication (auth on, SASL not done) a frame may be at most
--kafka-preauth-max-frame-bytes (Kafka's SaslServerAuthenticator allows 512 KiB) and
reserves its size from the small pre-auth budget, never from the main in-flight budget; and
the whole conversation up to a successful SASL must end within --kafka-auth-timeout-ms, or
the connection is closed, whether it is idle, in the middle of a size prefix or of a frame.
After authentication, frames are bounded by --max-request-bytes and the main budget, a
connection may stay idle for Kafka's connections.max.idle.ms, and a frame once begun must
arrive within --request-body-timeout-ms (slowloris), as an HTTP body.
"""

from __future__ import annotations

import asyncio
import struct
from typing import TYPE_CHECKING

from ingest.kafka.budget import RequestBudget, Reservation
from ingest.kafka.conn_gate import REFUSED, Admission
from ingest.kafka.protocol import ProtocolError

if TYPE_CHECKING:
    from ingest.broker_config import BrokerConfig

IDLE_TIMEOUT_S = 600.0  # Kafka's connections.max.idle.ms
INFLIGHT_WAIT_S = 1.0  # as long as an HTTP request waits for in-flight room
_SIZE = struct.Struct(">i")


class ConnectionLimit(Exception):
    """A limit closed the connection (the message says which); not the client's protocol
    error, and not worth more than an info line."""


class FrameReader:
    """One connection's frames; `admission.preauth` says which limits apply."""

    def __init__(
        self,
        config: BrokerConfig,
        budget: RequestBudget,
        preauth_budget: RequestBudget,
        admission: Admission,
    ) -> None:
        self.config = config
        self.budget, self.preauth_budget = budget, preauth_budget
        self.admission = admission
        conn = config.kafka_conn
        self.auth_deadline = asyncio.get_running_loop().time() + conn.auth_timeout_ms / 1000

    def _until_auth_deadline(self) -> float:
        left = self.auth_deadline - asyncio.get_running_loop().time()
        if left <= 0:
            REFUSED.labels("auth_timeout").inc()
            ms = self.config.kafka_conn.auth_timeout_ms
            raise ConnectionLimit(f"no SASL authentication within {ms} ms")
        return left

    async def _read(self, reader: asyncio.StreamReader, n: int, timeout: float) -> bytes:
        preauth = self.admission.preauth
        if preauth:
            timeout = min(timeout, self._until_auth_deadline())
        try:
            # A timeout scope, not wait_for: a frame already buffered (pipelined requests)
            # is read without a task made for it (Python 3.11: 22 -> 5 us a read).
            async with asyncio.timeout(timeout):
                return await reader.readexactly(n)
        except TimeoutError:
            if preauth:
                self._until_auth_deadline()  # past it: say so
            raise

    def _cap(self, size: int) -> None:
        conn = self.config.kafka_conn
        preauth = self.admission.preauth
        limit = conn.preauth_max_frame_bytes if preauth else self.config.max_request_bytes
        if size <= 0:
            raise ProtocolError(f"request frame of {size} bytes")
        if size <= limit:
            return
        REFUSED.labels("preauth_frame_too_large" if preauth else "frame_too_large").inc()
        before = " before authentication" if preauth else ""
        raise ConnectionLimit(f"request frame of {size} bytes{before} (limit {limit})")

    async def next(self, reader: asyncio.StreamReader) -> tuple[bytes, Reservation]:
        """The next frame and the budget it holds until answered (the caller releases it)."""
        head = await self._read(reader, 4, IDLE_TIMEOUT_S)
        size: int = _SIZE.unpack(head)[0]
        self._cap(size)
        budget = self.preauth_budget if self.admission.preauth else self.budget
        held = await budget.acquire(size, INFLIGHT_WAIT_S)
        if held is None:
            REFUSED.labels("inflight_bytes").inc()
            raise ConnectionLimit(f"no room for {size} request bytes in flight")
        try:
            # Once a request has begun it must arrive in time (slowloris), like an HTTP body.
            frame = await self._read(reader, size, self.config.request_body_timeout_ms / 1000)
        except BaseException:
            held.release()
            raise
        return frame, held
