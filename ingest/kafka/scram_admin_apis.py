"""DescribeUserScramCredentials: which SCRAM mechanisms each user (an API key's id, the SCRAM
username) has credentials for, from the store the SASL/SCRAM login reads (metadata/scram.py).
DESCRIBE on the cluster, as in Kafka. AlterUserScramCredentials sets or removes them from a
client's salted password (ingest/service/scram_admin.py has the rules); ALTER on the cluster."""

from __future__ import annotations

import asyncio

from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
)
from kio.schema.alter_user_scram_credentials.v0.response import (
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kio.schema.describe_user_scram_credentials.v0.request import (
    DescribeUserScramCredentialsRequest,
)
from kio.schema.describe_user_scram_credentials.v0.response import (
    CredentialInfo,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.primitive import i8, i32

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from ingest.service.scram_admin import ScramDeletion, ScramUpsert
from metadata.acl import CLUSTER_NAME

MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}  # Kafka's ScramMechanism ids
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


async def handle_describe_user_scram_credentials(
    ctx: KafkaContext,
    request: DescribeUserScramCredentialsRequest,
    response_cls: type[DescribeUserScramCredentialsResponse],
) -> DescribeUserScramCredentialsResponse:
    fields: dict[str, object] = {"throttle_time": NO_THROTTLE, "results": ()}
    result_cls = nested(response_cls, DescribeUserScramCredentialsResult)
    if not ctx.allowed("cluster", CLUSTER_NAME, "describe"):
        # As Kafka's error response: the error on top and on every user named.
        message = f"{ctx.principal} may not describe the cluster's SCRAM credentials"
        denied = KafkaError.cluster_authorization_failed
        fields.update(error_code=denied, error_message=message)
        fields["results"] = tuple(
            build(
                result_cls,
                user=u.name,
                error_code=denied,
                error_message=message,
                credential_infos=(),
            )
            for u in request.users or ()
        )
        return build(response_cls, **fields)
    known = await asyncio.to_thread(ctx.services.security.scram.described)
    wanted = sorted(known) if request.users is None else [u.name for u in request.users]
    info_cls = nested(response_cls, CredentialInfo)
    results = []
    for user in wanted:
        infos = tuple(
            build(info_cls, mechanism=i8(MECHANISM_CODES[m]), iterations=i32(n))
            for m, n in known.get(user, [])
            if m in MECHANISM_CODES
        )
        error = KafkaError.none if infos else KafkaError.resource_not_found
        missing: str | None = None if infos else f"no SCRAM credential for user {user!r}"
        results.append(
            build(
                result_cls,
                user=user,
                error_code=error,
                error_message=missing,
                credential_infos=infos,
            )
        )
    fields.update(error_code=KafkaError.none, error_message=None, results=tuple(results))
    return build(response_cls, **fields)


def _mechanism(code: int) -> str:
    return MECHANISM_NAMES.get(code, f"mechanism {code}")  # unknown: the service refuses it


async def handle_alter_user_scram_credentials(
    ctx: KafkaContext,
    request: AlterUserScramCredentialsRequest,
    response_cls: type[AlterUserScramCredentialsResponse],
) -> AlterUserScramCredentialsResponse:
    result_cls = nested(response_cls, AlterUserScramCredentialsResult)
    names = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    if not ctx.allowed("cluster", CLUSTER_NAME, "alter"):
        message = f"{ctx.principal} may not alter the cluster's SCRAM credentials"
        denied = tuple(
            build(
                result_cls,
                user=n,
                error_code=KafkaError.cluster_authorization_failed,
                error_message=message,
            )
            for n in dict.fromkeys(names)
        )
        return build(response_cls, throttle_time=NO_THROTTLE, results=denied)
    deletions = [ScramDeletion(d.name, _mechanism(int(d.mechanism))) for d in request.deletions]
    upsertions = [
        ScramUpsert(
            u.name, _mechanism(int(u.mechanism)), int(u.iterations), u.salt, u.salted_password
        )
        for u in request.upsertions
    ]
    outcome = await asyncio.to_thread(ctx.services.scram_admin.alter, deletions, upsertions)
    results = tuple(
        build(
            result_cls,
            user=user,
            error_code=KafkaError.none if error is None else kafka_error(error),
            error_message=None if error is None else error.message,
        )
        for user, error in outcome.items()
    )
    return build(response_cls, throttle_time=NO_THROTTLE, results=results)
