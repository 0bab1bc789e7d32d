"""The Kafka listener: an asyncio-streams server on the broker's event loop.

A connection's requests are read ahead of their answers (clients pipeline them, up to
PIPELINED), served one after another in their own tasks (turns.py: produce lets the next
one start once its records are queued) and answered in order, as a Kafka broker does.
Frames are read by frames.py (before authentication: one at a time, small, from a budget of
their own, within a deadline; after: the broker's request size limit and in-flight budget),
and connections admitted by conn_gate.py; a frame that cannot be parsed or an
API we do not serve closes the connection (Kafka's own answer) once the answers before it
are sent. A version outside what ApiVersions offered is answered UNSUPPORTED_VERSION in that
version (error_response.py); ApiVersions itself always answers (KIP-511, as v0). No request
can end the broker: every failure stays inside its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import struct
from typing import TYPE_CHECKING, cast

from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.fetch.v12.request import FetchRequest
from kio.schema.fetch.v12.response import FetchResponse
from kio.static.protocol import RequestPayload, ResponsePayload

from ingest.kafka import (
    cluster_apis,
    fetch_api,
    request_bounds,
    sasl_apis,
    txn_apis,
)
from ingest.kafka.budget import RequestBudget
from ingest.kafka.client_limits import KafkaClientLimits
from ingest.kafka.conn_gate import INFLIGHT, ConnectionGate
from ingest.kafka.context import KafkaContext
from ingest.kafka.error_response import answer_unsupported
from ingest.kafka.frames import ConnectionLimit, FrameReader
from ingest.kafka.handlers import HANDLERS
from ingest.kafka.offload import offload
from ingest.kafka.protocol import (
    API_VERSIONS,
    BEFORE_AUTH,
    FETCH,
    SUPPORTED,
    ProtocolError,
    RequestHeader,
    decode_body,
    encode_response,
    peek_header,
    response_type,
    supported,
)

if TYPE_CHECKING:
    from cluster.kafka_groups import ClassicGroups
    from ingest.service.services import Services

log = logging.getLogger("tierlog.kafka")

PIPELINED = 32  # requests read ahead of their answers, per connection (after SASL)
_FLUSH_BYTES = 1 << 20  # answers buffered beyond this are flushed before the next one
_SIZE = struct.Struct(">i")
_INLINE_FRAME_BYTES = 64 * 1024  # requests parsed on the event loop below this
_CLEANUP_S = 5.0  # a closing connection waits this long for its requests to end
Answers = asyncio.Queue[asyncio.Task[bytes | None] | None]


class ListenerShared:
    """What a broker's Kafka listeners (plaintext and TLS) share: connection counts, the
    in-flight budgets, the cluster identity and client limits."""

    def __init__(self, services: Services) -> None:
        cfg = services.config
        self.gate = ConnectionGate(cfg.http_limits, cfg.kafka_conn.max_preauth_connections)
        self.budget = RequestBudget(cfg.max_inflight_bytes)
        self.preauth_budget = RequestBudget(cfg.kafka_conn.preauth_inflight_bytes)
        INFLIGHT.labels("main").set_function(lambda: self.budget.used)
        INFLIGHT.labels("preauth").set_function(lambda: self.preauth_budget.used)
        self.identity = services.identity
        self.limits = KafkaClientLimits(services.quotas, services.long_polls)


class KafkaListener:
    """One listener: `sasl` (SASL_PLAINTEXT / SASL_SSL, or PLAINTEXT with auth off) or not
    (SSL: TLS only, the client is User:ANONYMOUS to the ACLs, as Kafka's SSL listener without
    client certificates); `tls` when it speaks TLS."""

    def __init__(
        self,
        services: Services,
        host: str,
        port: int,
        advertised: tuple[str, int],
        groups: ClassicGroups | None = None,
        *,
        tls: ssl.SSLContext | None = None,
        sasl: bool = True,
        shared: ListenerShared | None = None,
    ) -> None:
        self.services = services
        self.groups = groups
        self.host, self.port, self.advertised = host, port, advertised
        self.tls, self.sasl = tls, sasl
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.shared = shared or ListenerShared(services)
        self.listener_shift = 0  # see KafkaContext.listener_shift
        self.budget = self.shared.budget
        self.identity = self.shared.identity
        self.limits = self.shared.limits

    @property
    def protocol(self) -> str:
        if self.tls is None:
            return "SASL_PLAINTEXT" if self.services.security.authorizer.enabled else "PLAINTEXT"
        return "SASL_SSL" if self.sasl else "SSL"

    async def start(self) -> None:
        txn_apis.coordinator_for_listener(self.services, self.groups)  # its sweeper runs here
        # A TLS handshake happens before a connection is admitted: it gets the auth deadline.
        handshake_s = self.services.config.kafka_conn.auth_timeout_ms / 1000
        self._server = await asyncio.start_server(
            self._connected,
            self.host,
            self.port,
            ssl=self.tls,
            ssl_handshake_timeout=handshake_s if self.tls else None,
        )
        log.info(
            "kafka listener started",
            extra={"host": self.host, "port": self.port, "protocol": self.protocol},
        )

    async def stop(self) -> None:
        await self.services.transactions.stop()
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(self._connections, timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        task = asyncio.current_task()
        preauth = self.sasl and self.services.security.authorizer.enabled
        admission = None if task is None else self.shared.gate.admit(address, preauth)
        if task is None or admission is None:
            writer.close()
            return
        self._connections.add(task)
        ctx = KafkaContext(self.services, self.advertised, self.groups, self.identity)
        ctx.client_gone = lambda: reader.at_eof() or writer.is_closing()
        ctx.peer = address
        ctx.listener_shift = self.listener_shift
        ctx.authenticated = not self.sasl  # SSL: the TLS handshake was all there is
        frames = FrameReader(
            self.services.config, self.budget, self.shared.preauth_budget, admission
        )
        try:
            await self._serve(ctx, frames, reader, writer)
        except ConnectionLimit as exc:
            log.info("kafka connection closed: %s", exc, extra={"peer": address})
        except sasl_apis.LoginFailed:
            pass  # audited where it failed (cluster/auth_throttle.py): one line per login
        except (ProtocolError, ValueError) as exc:
            log.warning("kafka connection closed: %s", exc, extra={"peer": address})
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass  # the client went away or went quiet
        except Exception:
            log.exception("kafka connection failed")
        except asyncio.CancelledError:
            pass  # the listener is stopping: the streams callback would log a cancelled task
        finally:
            self._connections.discard(task)
            admission.leave()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(
        self,
        ctx: KafkaContext,
        frames: FrameReader,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Requests are read ahead while earlier ones are answered (clients pipeline them);
        each runs in its own task, taking turns (turns.py), and answers go out in order."""
        answers: Answers = asyncio.Queue(PIPELINED)
        sender = asyncio.create_task(self._send(ctx, answers, writer))
        receiver = asyncio.create_task(self._receive(ctx, frames, reader, answers))
        try:
            done, _ = await asyncio.wait((sender, receiver), return_when=asyncio.FIRST_COMPLETED)
            if sender not in done:
                # No more requests (closing, end of stream, a bad frame): the ones read
                # before are still answered, then the receiver's reason is raised.
                await answers.put(None)
            await sender  # a request's protocol error: raised here
            if receiver.done():
                receiver.result()
        finally:
            await _cancel_all(receiver, sender, answers)

    async def _receive(
        self, ctx: KafkaContext, frames: FrameReader, reader: asyncio.StreamReader, answers: Answers
    ) -> None:
        while not ctx.closing:
            frame, held = await frames.next(reader)
            task = asyncio.create_task(self._request(ctx, frame))
            # Released when the task ends in any way, cancelled before it ever ran included.
            task.add_done_callback(lambda _t, held=held: held.release())  # type: ignore[misc]
            try:
                # A full queue stops the reading: TCP pushes back on the client.
                await answers.put(task)
            except BaseException:
                task.cancel()
                raise
            if frames.admission.preauth:
                # Before authentication one request at a time (as Kafka's authenticator):
                # the next frame's limits depend on how this one ends.
                await asyncio.wait((task,))
                if ctx.authenticated:
                    frames.admission.authenticated()

    async def _request(self, ctx: KafkaContext, frame: bytes) -> bytes | None:
        async with ctx.turns.turn():
            if ctx.closing:  # read ahead of a refused request or failed authentication
                return None
            try:
                return await self._respond(ctx, frame)
            except BaseException:
                ctx.closing = True  # the connection closes: what was read after never runs
                raise

    @staticmethod
    async def _send(ctx: KafkaContext, answers: Answers, writer: asyncio.StreamWriter) -> None:
        while (task := await answers.get()) is not None:
            response = await task
            if writer.transport.is_closing():  # the client is gone (uvloop raises on write)
                raise ConnectionResetError("the client closed the connection")
            if response is not None:
                writer.write(response)
            if answers.empty() or writer.transport.get_write_buffer_size() > _FLUSH_BYTES:
                await writer.drain()  # answers ready together leave in one go
            if ctx.closing:  # the last answer before the connection closes
                await writer.drain()
                return

    async def _respond(self, ctx: KafkaContext, frame: bytes) -> bytes | None:
        if ctx.raw_sasl:  # after a v0 SaslHandshake: the bare PLAIN token
            answer = await sasl_apis.raw_token(ctx, frame)
            if answer is None:
                raise sasl_apis.LoginFailed("SASL authentication failed")
            return _SIZE.pack(len(answer)) + answer
        return await self._answer(ctx, peek_header(frame), frame)

    async def _answer(self, ctx: KafkaContext, header: RequestHeader, frame: bytes) -> bytes | None:
        # Before authentication nothing but ApiVersions and SASL is even decoded.
        locked = self.services.security.authorizer.enabled and not ctx.authenticated
        if locked and header.api_key not in BEFORE_AUTH:
            raise ProtocolError(
                f"API key {header.api_key} before SASL authentication (auth is on: "
                "SASL with an API key first)"
            )
        if not supported(header.api_key, header.api_version):
            if header.api_key == API_VERSIONS:  # KIP-511: answer v0 with what we serve
                v0 = header._replace(api_version=0)
                v0_cls = cast(type[ApiVersionsResponse], response_type(v0))
                versions = cluster_apis.api_versions(v0_cls, KafkaError.unsupported_version)
                return encode_response(v0, versions)
            if header.api_key not in SUPPORTED:  # an API we do not serve at all: Kafka closes
                raise ProtocolError(
                    f"API key {header.api_key} is not served (client {header.client_id!r})"
                )
            log.info(
                "kafka request in an unsupported version",
                extra={"api_key": header.api_key, "api_version": header.api_version},
            )
            return answer_unsupported(header, frame)
        request = await _decoded(header, frame)
        bounds, answer_cls = self.services.config.data_limits, response_type(header)
        refused = await request_bounds.refusal(header.api_key, request, answer_cls, bounds)
        if refused is not None:  # more entries than one request may name: none is served
            return await _encoded(header, refused, big=True)
        await self.limits.wait_unmuted(ctx)  # a throttled connection's next request waits
        handler = HANDLERS[header.api_key]
        body: ResponsePayload | None
        if header.api_key == FETCH:  # the key says what the request and response are
            fetch = cast(FetchRequest, request)
            fetch_cls = cast(type[FetchResponse], response_type(header))
            body = await self.limits.fetch(fetch_api.handle_fetch, ctx, fetch, fetch_cls)
        else:
            body = await handler(ctx, request, response_type(header))
        body = await self.limits.charge(ctx, header, len(frame), body)
        return None if body is None else await _encoded(header, body, header.api_key == FETCH)


# Parsing a big frame and encoding a Fetch answer (its records' bytes) run in a worker
# thread: nothing a client sends may hold the event loop.
async def _decoded(header: RequestHeader, frame: bytes) -> RequestPayload:
    if len(frame) >= _INLINE_FRAME_BYTES:
        return await offload(decode_body, header, frame)
    return decode_body(header, frame)


async def _encoded(header: RequestHeader, body: ResponsePayload, big: bool) -> bytes:
    if big:
        return await offload(encode_response, header, body)
    return encode_response(header, body)


async def _cancel_all(
    receiver: asyncio.Task[None], sender: asyncio.Task[None], answers: Answers
) -> None:
    """End a connection's tasks and every request read ahead, and wait until they have ended,
    so each one's budget is back (their done callbacks) before the connection is gone. An
    outcome not raised already is only looked at: the first error is the one reported."""
    pending: list[asyncio.Task[None] | asyncio.Task[bytes | None]] = [receiver, sender]
    while not answers.empty():
        queued = answers.get_nowait()
        if queued is not None:
            pending.append(queued)
    for task in pending:
        task.add_done_callback(_seen)
        task.cancel()
    await asyncio.wait(pending, timeout=_CLEANUP_S)


def _seen(task: asyncio.Task[None] | asyncio.Task[bytes | None]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: no "Task exception was never retrieved" on the loop
