"""DescribeAcls, CreateAcls and DeleteAcls on the ACL store the HTTP API and `tierlog acls`
use (cluster/kafka_acls.py has the codes and Kafka's filter rules). As in Kafka, listing
needs DESCRIBE on the cluster and changing needs ALTER; a binding tierlog cannot hold (a
host other than `*`, an operation such as IDEMPOTENT_WRITE) is refused with
INVALID_REQUEST and a message naming the field.
"""

from __future__ import annotations

from kio.schema.create_acls.v3.request import AclCreation, CreateAclsRequest
from kio.schema.create_acls.v3.response import AclCreationResult, CreateAclsResponse
from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
from kio.schema.delete_acls.v3.response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_acls.v3.response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kio.schema.errors import ErrorCode as KafkaError
from kio.static.primitive import i8

from cluster.kafka_acls import AclRefused, KafkaAcl, KafkaAclAdmin, KafkaAclFilter
from ingest.kafka.cluster_apis import NO_THROTTLE
from ingest.kafka.context import KafkaContext
from ingest.kafka.protocol import build, nested
from metadata.acl import CLUSTER_NAME


def _admin(ctx: KafkaContext) -> KafkaAclAdmin:
    return KafkaAclAdmin(ctx.services.security.keys)


def _denied(ctx: KafkaContext, operation: str) -> str | None:
    if ctx.allowed("cluster", CLUSTER_NAME, operation):
        return None
    return f"{ctx.principal} is not authorized to {operation} the cluster's ACLs"


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> KafkaAclFilter:
    return KafkaAclFilter(
        int(f.resource_type_filter),
        f.resource_name_filter,
        int(getattr(f, "pattern_type_filter", 3)),
        f.principal_filter,
        f.host_filter,
        int(f.operation),
        int(f.permission_type),
    )


async def handle_describe_acls(
    ctx: KafkaContext, request: DescribeAclsRequest, response_cls: type[DescribeAclsResponse]
) -> DescribeAclsResponse:
    denied = _denied(ctx, "describe")
    if denied is not None:
        return build(
            response_cls,
            throttle_time=NO_THROTTLE,
            error_code=KafkaError.cluster_authorization_failed,
            error_message=denied,
            resources=(),
        )
    found = await _admin(ctx).describe(_filter(request))
    by_resource: dict[tuple[int, str, int], list[KafkaAcl]] = {}
    for acl in found:
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        by_resource.setdefault(key, []).append(acl)
    resource_cls = nested(response_cls, DescribeAclsResource)
    acl_cls = nested(response_cls, AclDescription)
    resources = tuple(
        build(
            resource_cls,
            resource_type=i8(rtype),
            resource_name=name,
            pattern_type=i8(ptype),
            acls=tuple(
                build(
                    acl_cls,
                    principal=a.principal,
                    host=a.host,
                    operation=i8(a.operation),
                    permission_type=i8(a.permission),
                )
                for a in acls
            ),
        )
        for (rtype, name, ptype), acls in sorted(by_resource.items())
    )
    return build(
        response_cls,
        throttle_time=NO_THROTTLE,
        error_code=KafkaError.none,
        error_message=None,
        resources=resources,
    )


async def _create(ctx: KafkaContext, c: AclCreation) -> tuple[KafkaError, str | None]:
    acl = KafkaAcl(
        int(c.resource_type),
        c.resource_name,
        int(getattr(c, "resource_pattern_type", 3)),
        c.principal,
        c.host,
        int(c.operation),
        int(c.permission_type),
    )
    try:
        await _admin(ctx).create(acl)
    except AclRefused as exc:
        return KafkaError.invalid_request, str(exc)
    return KafkaError.none, None


async def handle_create_acls(
    ctx: KafkaContext, request: CreateAclsRequest, response_cls: type[CreateAclsResponse]
) -> CreateAclsResponse:
    denied = _denied(ctx, "alter")
    cls = nested(response_cls, AclCreationResult)
    results = []
    for creation in request.creations:
        error: KafkaError
        message: str | None
        if denied is not None:
            error, message = KafkaError.cluster_authorization_failed, denied
        else:
            error, message = await _create(ctx, creation)
        results.append(build(cls, error_code=error, error_message=message))
    return build(response_cls, throttle_time=NO_THROTTLE, results=tuple(results))


async def handle_delete_acls(
    ctx: KafkaContext, request: DeleteAclsRequest, response_cls: type[DeleteAclsResponse]
) -> DeleteAclsResponse:
    denied = _denied(ctx, "alter")
    result_cls = nested(response_cls, DeleteAclsFilterResult)
    match_cls = nested(response_cls, DeleteAclsMatchingAcl)
    results = []
    for f in request.filters:
        if denied is not None:
            results.append(
                build(
                    result_cls,
                    error_code=KafkaError.cluster_authorization_failed,
                    error_message=denied,
                    matching_acls=(),
                )
            )
            continue
        gone = await _admin(ctx).delete(_filter(f))
        matching = tuple(
            build(
                match_cls,
                error_code=KafkaError.none,
                error_message=None,
                resource_type=i8(a.resource_type),
                resource_name=a.resource_name,
                pattern_type=i8(a.pattern_type),
                principal=a.principal,
                host=a.host,
                operation=i8(a.operation),
                permission_type=i8(a.permission),
            )
            for a in gone
        )
        results.append(
            build(
                result_cls, error_code=KafkaError.none, error_message=None, matching_acls=matching
            )
        )
    return build(response_cls, throttle_time=NO_THROTTLE, filter_results=tuple(results))
