"""Topic administration: create, list, describe, alter configs, add partitions, delete."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.routing import Route

from cluster.http import auth
from cluster.http.responses import JSONResponse, field_int, json_object, only_fields
from ingest.service.topic_admin import NewTopic
from logformat.errors import ErrorCode, TierlogError

if TYPE_CHECKING:
    from ingest.service.services import Services

MAX_PARTITIONS = 10_000
ADMIN_BODY_LIMIT = 1024 * 1024


CREATE_FIELDS = ("name", "partitions", "replication_factor", "configs")


def _configs_arg(doc: dict[str, Any]) -> dict[str, Any]:
    configs = doc.get("configs", {})
    if not isinstance(configs, dict):
        raise TierlogError(ErrorCode.INVALID_CONFIG, '"configs" must be an object of name → value')
    return configs


def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def _described(services: Services, name: str, status_code: int = 200) -> JSONResponse:
    return JSONResponse(await services.describe.described(name), status_code=status_code)


async def create_topic(request: Request) -> JSONResponse:
    services = _services(request)
    cfg = services.config
    doc = await json_object(request, ADMIN_BODY_LIMIT)
    only_fields(doc, CREATE_FIELDS)
    name = doc.get("name")
    if not isinstance(name, str):
        raise TierlogError(ErrorCode.INVALID_TOPIC_EXCEPTION, '"name" must be a string')
    partitions = field_int(
        doc, "partitions", cfg.default_partitions, 1, MAX_PARTITIONS, ErrorCode.INVALID_PARTITIONS
    )
    rf = field_int(
        doc,
        "replication_factor",
        cfg.default_replication_factor,
        1,
        1000,
        ErrorCode.INVALID_REPLICATION_FACTOR,
    )
    new = NewTopic(name, partitions, rf, _configs_arg(doc))
    await services.admin.create(auth.principal(request), new)
    return await _described(services, name, status_code=201)


async def list_topics(request: Request) -> JSONResponse:
    metadata = _services(request).metadata
    await asyncio.to_thread(metadata.refresh)
    return JSONResponse(
        {
            "topics": [
                {
                    "name": v.info.name,
                    "partitions": v.info.partition_count,
                    "replication_factor": v.info.replication_factor,
                }
                for v in metadata.topics()
                if auth.permitted(request, "topic", v.info.name, "describe")  # no leaks
            ]
        }
    )


async def describe_topic(request: Request) -> JSONResponse:
    services, topic = _services(request), request.path_params["topic"]
    return JSONResponse(await services.describe.describe(auth.principal(request), topic))


async def alter_configs(request: Request) -> JSONResponse:
    """Body {"configs": {"name": value, "other": null}}: a value sets, null restores the default."""
    services, topic, who = _services(request), request.path_params["topic"], auth.principal(request)
    await services.admin.topic(who, topic, "alter")  # Kafka: ALTER_CONFIGS
    doc = await json_object(request, ADMIN_BODY_LIMIT)
    # {"retention.ms": ...} without the wrapper would otherwise be a silent no-op (K14).
    only_fields(doc, ("configs",), 'the body {"configs": {...}}', ErrorCode.INVALID_CONFIG)
    if "configs" not in doc:
        why = 'the body must be {"configs": {"name": value, "other": null}}'
        raise TierlogError(ErrorCode.INVALID_CONFIG, why)
    configs = _configs_arg(doc)
    to_set = {k: v for k, v in configs.items() if v is not None}
    to_delete = [k for k, v in configs.items() if v is None]
    await services.admin.alter_configs(who, topic, to_set, to_delete)
    return await _described(services, topic)


async def add_partitions(request: Request) -> JSONResponse:
    """Body {"partitions": N}: the new total, as Kafka's CreatePartitions takes it."""
    services, topic, who = _services(request), request.path_params["topic"], auth.principal(request)
    await services.admin.topic(who, topic, "alter")  # Kafka's CreatePartitions: ALTER
    doc = await json_object(request, ADMIN_BODY_LIMIT)
    only_fields(doc, ("partitions",), 'the body {"partitions": N}', ErrorCode.INVALID_PARTITIONS)
    total = field_int(doc, "partitions", None, 1, MAX_PARTITIONS, ErrorCode.INVALID_PARTITIONS)
    await services.admin.grow(who, topic, total)
    return await _described(services, topic)


async def delete_topic(request: Request) -> JSONResponse:
    services, topic = _services(request), request.path_params["topic"]
    info = await services.admin.delete(auth.principal(request), topic)
    return JSONResponse({"name": info.name, "id": info.id, "deleted": True})


routes = [
    Route("/topics", create_topic, methods=["POST"]),
    Route("/topics", list_topics, methods=["GET"]),
    Route("/topics/{topic}", describe_topic, methods=["GET"]),
    Route("/topics/{topic}", delete_topic, methods=["DELETE"]),
    Route("/topics/{topic}/configs", alter_configs, methods=["PATCH"]),
    Route("/topics/{topic}/partitions", add_partitions, methods=["POST"]),
]
