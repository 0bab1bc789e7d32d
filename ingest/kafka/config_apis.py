"""DescribeConfigs and IncrementalAlterConfigs: topic configs (metadata/configs.py, already
under Kafka's names) and this broker's settings under the Kafka names they map to.

Topic configs are altered through the same repository call as HTTP's PATCH
/topics/{topic}/configs, so they are validated exactly alike; broker settings are command-
line flags, read-only here. ACLs as HTTP: DESCRIBE/ALTER on the topic, or on the cluster
for a broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.schema.incremental_alter_configs.v1.request import (
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.incremental_alter_configs.v1.response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, kafka_error, nested
from logformat.errors import ErrorCode, TierlogError
from metadata.acl import CLUSTER_NAME

if TYPE_CHECKING:
    from ingest.service.topic_admin import TopicAdmin
from metadata.configs import SPECS, effective_configs

TOPIC, BROKER = 2, 4  # Kafka's ConfigResource.Type
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # AlterConfigOp.OpType
# ConfigSource and ConfigType as Kafka numbers them.
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
_TYPES = {
    "cleanup.policy": LIST,
    "compression.type": STRING,
    "message.timestamp.type": STRING,
    "min.cleanable.dirty.ratio": DOUBLE,
    "remote.storage.enable": BOOLEAN,
    "unclean.leader.election.enable": BOOLEAN,
    "max.message.bytes": INT,
    "min.insync.replicas": INT,
    "segment.bytes": INT,
}


def _bad_request(message: str) -> TierlogError:
    return TierlogError(ErrorCode.INVALID_REQUEST, message)


def _broker_configs(ctx: KafkaContext) -> dict[str, tuple[str, int, str]]:
    """name -> (value, type, documentation) of the broker settings Kafka has a name for."""
    cfg = ctx.services.config
    limits = cfg.http_limits
    host, port = ctx.advertised
    listen = cfg.kafka_listen or ctx.advertised
    return {
        "broker.id": (str(cfg.broker_id), INT, "--broker-id"),
        "advertised.listeners": (f"PLAINTEXT://{host}:{port}", STRING, "--kafka-advertised"),
        "listeners": (f"PLAINTEXT://{listen[0]}:{listen[1]}", STRING, "--kafka-listen"),
        "log.dirs": (str(cfg.data_dir), STRING, "--data-dir"),
        "num.partitions": (str(cfg.default_partitions), INT, "default partitions of a topic"),
        "default.replication.factor": (
            str(cfg.default_replication_factor),
            INT,
            "default replication factor of a topic",
        ),
        "socket.request.max.bytes": (str(cfg.max_request_bytes), INT, "largest request"),
        "queued.max.request.bytes": (
            str(cfg.max_inflight_bytes),
            LONG,
            "request bytes in flight before reads pause",
        ),
        "replica.lag.time.max.ms": (str(cfg.replica_lag_ms), LONG, "ISR lag bound"),
        "max.connections": (str(limits.max_connections), INT, "--max-connections"),
        "max.connections.per.ip": (
            str(limits.max_connections_per_address),
            INT,
            "--max-connections-per-address",
        ),
    }


def _entries(
    response_cls: type[DescribeConfigsResponse],
    request: DescribeConfigsRequest,
    resource: DescribeConfigsResource,
    rows: list[tuple[str, str, int, int, str]],
) -> tuple[DescribeConfigsResourceResult, ...]:
    """(name, value, source, type, doc) rows as the version's config entries, filtered by
    the names asked for (None: all)."""
    cls = nested(response_cls, DescribeConfigsResourceResult)
    keys = resource.configuration_keys
    docs = getattr(request, "include_documentation", False)
    return tuple(
        build(
            cls,
            name=name,
            value=value,
            read_only=source == STATIC_BROKER_CONFIG,
            is_default=source == DEFAULT_CONFIG,
            config_source=source,
            is_sensitive=False,
            synonyms=(),
            config_type=kind,
            documentation=doc if docs else None,
        )
        for name, value, source, kind, doc in rows
        if keys is None or name in keys
    )


async def _describe(
    ctx: KafkaContext, resource: DescribeConfigsResource
) -> list[tuple[str, str, int, int, str]]:
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        overrides = (await ctx.services.admin.topic(ctx.principal, name, "describe")).info.configs
        return [
            (
                key,
                value,
                DYNAMIC_TOPIC_CONFIG if key in overrides else DEFAULT_CONFIG,
                _TYPES.get(key, LONG),
                SPECS[key].doc,
            )
            for key, value in effective_configs(overrides).items()
        ]
    if resource.resource_type == BROKER:
        ctx.require("cluster", CLUSTER_NAME, "describe")
        _this_broker(ctx, name)
        return [
            (key, value, STATIC_BROKER_CONFIG, kind, doc)
            for key, (value, kind, doc) in sorted(_broker_configs(ctx).items())
        ]
    raise _bad_request(
        f"resource type {resource.resource_type} is not supported: topics (2) and brokers (4)"
    )


def _this_broker(ctx: KafkaContext, name: str) -> None:
    """Kafka's rule: a broker resource names this broker, or is empty (the default)."""
    me = ctx.services.config.broker_id
    if name not in ("", str(me)):
        raise _bad_request(f'unexpected broker id {name!r}: this is broker {me} (or use "")')


async def handle_describe_configs(
    ctx: KafkaContext, request: DescribeConfigsRequest, response_cls: type[DescribeConfigsResponse]
) -> DescribeConfigsResponse:
    result_cls = nested(response_cls, DescribeConfigsResult)
    results = []
    for resource in request.resources:
        fields: dict[str, object] = {
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
        }
        try:
            rows = await _describe(ctx, resource)
        except TierlogError as exc:
            fields.update(error_code=kafka_error(exc), error_message=exc.message, configs=())
        else:
            configs = _entries(response_cls, request, resource, rows)
            fields.update(error_code=KafkaError.none, error_message=None, configs=configs)
        results.append(build(result_cls, **fields))
    return build(response_cls, throttle_time=NO_THROTTLE, results=tuple(results))


def _list_op(current: str, value: str, op: int) -> str:
    have = [v for v in current.split(",") if v]
    items = [v.strip() for v in value.split(",") if v.strip()]
    if op == APPEND:
        return ",".join(have + [v for v in items if v not in have])
    return ",".join(v for v in have if v not in items)


def _changes(
    overrides: dict[str, str], resource: AlterConfigsResource
) -> tuple[dict[str, str], list[str]]:
    """(to set, to delete) from the resource's operations, checked as Kafka checks them."""
    to_set: dict[str, str] = {}
    to_delete: list[str] = []
    names = [c.name for c in resource.configs]
    effective = effective_configs(overrides)
    for c in resource.configs:
        if names.count(c.name) > 1:
            raise _bad_request(f"config {c.name!r} appears more than once")
        if c.config_operation == DELETE:
            to_delete.append(c.name)
            continue
        if c.config_operation not in (SET, APPEND, SUBTRACT):
            raise _bad_request(f"config operation {c.config_operation} is not one of 0-3")
        if c.value is None:
            raise _bad_request(f"config {c.name!r}: a null value is only for DELETE")
        if c.config_operation == SET:
            to_set[c.name] = c.value
        elif _TYPES.get(c.name) != LIST:
            raise TierlogError(
                ErrorCode.INVALID_CONFIG,
                f"config {c.name!r} is not a list: APPEND and SUBTRACT apply to list configs",
            )
        else:
            to_set[c.name] = _list_op(effective[c.name], c.value, c.config_operation)
    return to_set, to_delete


async def _alter(
    ctx: KafkaContext, admin: TopicAdmin, resource: AlterConfigsResource, validate_only: bool
) -> None:
    name = resource.resource_name
    if resource.resource_type == BROKER:
        ctx.require("cluster", CLUSTER_NAME, "alter")
        _this_broker(ctx, name)
        raise _bad_request("broker configs are command-line settings; they cannot be altered")
    if resource.resource_type != TOPIC:
        raise _bad_request(f"resource type {resource.resource_type} is not supported: topics (2)")
    info = (await admin.topic(ctx.principal, name, "alter")).info  # as HTTP's PATCH
    to_set, to_delete = _changes(dict(info.configs), resource)
    await admin.alter_configs(ctx.principal, name, to_set, to_delete, validate_only)


async def handle_incremental_alter_configs(
    ctx: KafkaContext,
    request: IncrementalAlterConfigsRequest,
    response_cls: type[IncrementalAlterConfigsResponse],
) -> IncrementalAlterConfigsResponse:
    result_cls = nested(response_cls, AlterConfigsResourceResponse)
    results = []
    async with ctx.services.admin.batch() as admin:  # one refresh for the whole request
        for resource in request.resources:
            try:
                await _alter(ctx, admin, resource, request.validate_only)
            except TierlogError as exc:
                error, message = kafka_error(exc), exc.message
            else:
                error, message = KafkaError.none, ""
            results.append(
                build(
                    result_cls,
                    error_code=error,
                    error_message=message or None,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
            )
    return build(response_cls, throttle_time=NO_THROTTLE, responses=tuple(results))
