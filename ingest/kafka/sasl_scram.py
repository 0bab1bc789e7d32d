"""SASL/SCRAM-SHA-256 and -512 on the Kafka listener (RFC 5802/7677, Kafka's KIP-84).

Two SaslAuthenticate round trips: client-first -> server-first (salt, iterations, nonce),
client-final (proof) -> server-final (the server's signature). The username is the API key's
id, the password the API key; the broker holds only the salted credential that
`tierlog users scram` (or PUT /security/keys/{id}/scram) stored (metadata/scram.py).
scramp does the cryptography; this module fetches the credential off the event loop, takes
the failed-login turns and audits failures (cluster/auth_throttle.py).
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Protocol

from scramp import ScramException, ScramMechanism

from cluster.auth_throttle import Attempt
from metadata.scram import MECHANISMS, ScramCredential

if TYPE_CHECKING:
    from ingest.service.services import Services


class KafkaContext(Protocol):
    """What an exchange reads of its connection (ingest/kafka/context.py's KafkaContext,
    described here: the context holds the exchange, so importing it would be a cycle)."""

    @property
    def peer(self) -> str: ...
    @property
    def services(self) -> Services: ...


FAILED = (
    "authentication failed: the SCRAM username must be an API key's id with a SCRAM "
    "credential set (`tierlog users scram`), the password the API key"
)


class ScramFailed(Exception):
    """The exchange failed; the message is what the client is told."""


def _username(client_first: str) -> str:
    """The saslname of a client-first message (`n,,n=NAME,r=NONCE`), decoded."""
    _, _, bare = client_first.partition(",,")
    for part in bare.split(","):
        if part.startswith("n="):
            return part[2:].replace("=2C", ",").replace("=3D", "=")
    raise ScramFailed("a SCRAM client-first message without a username")


class ScramExchange:
    def __init__(self, mechanism: str) -> None:
        assert mechanism in MECHANISMS
        self.name = mechanism
        self.key_id: str | None = None
        self._credential: ScramCredential | None = None
        # A server nonce as long as Kafka's own (~26 characters), of URL-safe characters.
        self._server_nonce = secrets.token_urlsafe(18)
        self._server = ScramMechanism(mechanism).make_server(
            self._auth_info, s_nonce=self._server_nonce
        )

    def _auth_info(self, _username: str) -> tuple[bytes, bytes, bytes, int]:
        c = self._credential
        if c is None:
            raise ScramException("unknown user")
        return c.salt, c.stored_key, c.server_key, c.iterations

    def _attempt(self, ctx: KafkaContext) -> Attempt:
        return Attempt("kafka", ctx.peer, self.key_id, self.name)

    async def step(self, ctx: KafkaContext, token: bytes) -> tuple[bytes, str | None]:
        """The answer to the client's next message and, once the exchange is complete, the
        principal (None before). Raises ScramFailed, audited, when it fails."""
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise self._failed(ctx, "a SCRAM message that is not UTF-8") from None
        if self.key_id is None:
            return await self._first(ctx, message), None
        self._accept_repeated_client_nonce(message)
        try:
            self._server.set_client_final(message)
        except ScramException as exc:
            raise self._failed(ctx, f"wrong SCRAM proof ({exc})") from None
        credential = self._credential
        assert credential is not None
        return self._server.get_server_final().encode(), credential.principal

    def _accept_repeated_client_nonce(self, client_final: str) -> None:
        """Older librdkafka (Debian's kcat) sends back its client nonce followed by the whole
        nonce of the server-first message (itself client + server part). That still holds
        the server's fresh nonce, so the final message is checked against what it sent; the
        proof is checked as usual."""
        server = self._server
        sent = str(server.nonce)
        client_nonce = sent[: len(sent) - len(self._server_nonce)]
        for part in client_final.split(","):
            if part == f"r={client_nonce}{sent}":
                server.nonce = type(server.nonce)(part[2:])

    async def _first(self, ctx: KafkaContext, message: str) -> bytes:
        try:
            self.key_id = _username(message)
        except ScramFailed as exc:
            self.key_id = ""
            raise self._failed(ctx, str(exc)) from None
        security = ctx.services.security
        await security.authorizer.throttle.turn(self._attempt(ctx))
        find = security.scram.find
        self._credential = await asyncio.to_thread(find, self.key_id, self.name)
        if self._credential is None:
            raise self._failed(ctx, "no SCRAM credential for this key id (or key revoked)")
        try:
            self._server.set_client_first(message)
            first: str = self._server.get_server_first()
            return first.encode()
        except ScramException as exc:
            raise self._failed(ctx, f"bad SCRAM client-first message: {exc}") from None

    def _failed(self, ctx: KafkaContext, why: str) -> ScramFailed:
        ctx.services.security.authorizer.throttle.failed(self._attempt(ctx), why)
        return ScramFailed(FAILED)
