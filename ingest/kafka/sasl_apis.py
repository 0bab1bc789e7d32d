"""SaslHandshake and SaslAuthenticate: SASL/PLAIN and SCRAM-SHA-256/512 with tierlog's API
keys (KIP-152 framing; SCRAM in sasl_scram.py).

The username is the key's id (the hex part after `tlk_`), the password the whole API key, as
`tierlog users create` prints it; the key's principal is then checked by the same ACLs as
HTTP. SCRAM needs the key's SCRAM credential stored first (`tierlog users scram`). With
auth on, nothing but ApiVersions and these two is served before authentication succeeds,
and a failed authentication closes the connection after its answer (as Kafka does). With
auth off, PLAIN passes any credentials and the connection stays User:ANONYMOUS, like HTTP.
"""

from __future__ import annotations

from datetime import timedelta

from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from cluster.auth_throttle import Attempt
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build
from ingest.kafka.sasl_scram import ScramExchange, ScramFailed
from logformat.errors import TierlogError
from metadata.api_keys import parse_key
from metadata.scram import MECHANISMS as SCRAM_MECHANISMS

PLAIN = "PLAIN"
OFFERED = (PLAIN, *SCRAM_MECHANISMS)


async def handle_sasl_handshake(
    ctx: KafkaContext, request: SaslHandshakeRequest, response_cls: type[SaslHandshakeResponse]
) -> SaslHandshakeResponse:
    ok = request.mechanism in OFFERED and not ctx.sasl_started
    if ok:
        ctx.sasl_started = True
        if request.mechanism != PLAIN:
            ctx.scram = ScramExchange(request.mechanism)
        # v0 (what older librdkafka, such as Debian's kcat, requires to see offered): the
        # next frames are bare SASL tokens, without a Kafka request header (raw_token()).
        ctx.raw_sasl = type(request).__version__ == 0
    error = KafkaError.none if ok else KafkaError.unsupported_sasl_mechanism
    if ctx.sasl_started and not ok:
        error = KafkaError.illegal_sasl_state
    return build(response_cls, error_code=error, mechanisms=OFFERED)


def _plain(token: bytes) -> tuple[str, str] | None:
    """(username, password) of a PLAIN message: [authzid] NUL authcid NUL passwd (RFC 4616)."""
    parts = token.split(b"\0")
    if len(parts) != 3:
        return None
    try:
        return parts[1].decode(), parts[2].decode()
    except UnicodeDecodeError:
        return None


class LoginFailed(Exception):
    """A v0 handshake's bare token failed: the connection closes without an answer (the
    failure has had its one audit line already)."""


async def _principal(ctx: KafkaContext, token: bytes) -> str | None:
    """The PLAIN token's principal, or None; throttled and audited (cluster/auth_throttle.py),
    and raising AuthThrottled when the caller's turn is too far off."""
    user, password = _plain(token) or ("", "")
    parsed = parse_key(password)
    key_id = user or (parsed.key_id if parsed else None)
    attempt = Attempt("kafka", ctx.peer, key_id, PLAIN)
    authorizer = ctx.services.security.authorizer
    if parsed is None or user not in (parsed.key_id, ""):
        await authorizer.throttle.turn(attempt, token)
        why = "the username is not the API key's id"
        if parsed is None:
            why = "not a PLAIN token of a key id and its API key"
        authorizer.throttle.failed(attempt, why, token)
        return None
    return await authorizer.login(password, attempt)


async def _scram_step(ctx: KafkaContext, token: bytes) -> bytes:
    """The next SCRAM answer; the connection authenticated after the last one."""
    assert ctx.scram is not None
    answer, principal = await ctx.scram.step(ctx, token)
    if principal is not None:
        ctx.principal, ctx.authenticated, ctx.scram = principal, True, None
    return answer


async def raw_token(ctx: KafkaContext, token: bytes) -> bytes | None:
    """A v0 handshake's bare token: the bare answer (empty for PLAIN), the connection
    authenticated once the mechanism is done; None: failed (the connection closes without
    an answer)."""
    if ctx.scram is not None:
        try:
            answer = await _scram_step(ctx, token)
        except (ScramFailed, TierlogError):
            return None
        ctx.raw_sasl = not ctx.authenticated
        return answer
    ctx.raw_sasl = False
    if not ctx.services.security.authorizer.enabled:
        ctx.authenticated = True
        return b""
    try:
        principal = await _principal(ctx, token)
    except TierlogError:
        return None
    if principal is None:
        return None
    ctx.principal, ctx.authenticated = principal, True
    return b""


async def handle_sasl_authenticate(
    ctx: KafkaContext,
    request: SaslAuthenticateRequest,
    response_cls: type[SaslAuthenticateResponse],
) -> SaslAuthenticateResponse:
    def answer(
        error: KafkaError, message: str | None = None, auth: bytes = b""
    ) -> SaslAuthenticateResponse:
        return build(
            response_cls,
            error_code=error,
            error_message=message,
            auth_bytes=auth,
            session_lifetime=timedelta(0),
        )

    if not ctx.sasl_started or ctx.authenticated:
        ctx.closing = True
        return answer(KafkaError.illegal_sasl_state, "SaslHandshake comes first, once")
    if ctx.scram is not None:
        try:
            return answer(KafkaError.none, auth=await _scram_step(ctx, request.auth_bytes))
        except ScramFailed as exc:
            ctx.closing = True
            return answer(KafkaError.sasl_authentication_failed, str(exc))
        except TierlogError as exc:  # throttled, or the credential store cannot be read
            ctx.closing = True
            return answer(KafkaError.sasl_authentication_failed, exc.message)
    if not ctx.services.security.authorizer.enabled:
        ctx.authenticated = True
        return answer(KafkaError.none)
    try:
        principal = await _principal(ctx, request.auth_bytes)
    except TierlogError as exc:  # the key store cannot be read now: retriable, no verdict
        ctx.closing = True
        return answer(KafkaError.sasl_authentication_failed, exc.message)
    if principal is None:
        ctx.closing = True
        return answer(
            KafkaError.sasl_authentication_failed,
            "authentication failed: the username must be the API key's id and the password "
            "the API key; the key may be unknown or revoked",
        )
    ctx.principal, ctx.authenticated = principal, True
    return answer(KafkaError.none)
