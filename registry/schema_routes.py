"""Confluent's schema and subject endpoints: /schemas/..., /subjects/..."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from metadata.registry_store import StoredSchema, StoredVersion
from registry import deletes
from registry.bodies import schema_request
from registry.http import Context, auth_enabled, body, endpoint, may, require
from registry.id_answers import IdAnswers, schema_fields
from registry.media import registry_json
from registry.params import flag, schema_id, subject_name, version_number


def version_body(version: StoredVersion, stored: StoredSchema) -> dict[str, Any]:
    return {
        "subject": version.subject,
        "version": version.version,
        "id": stored.id,
        **schema_fields(stored),
    }


def raw_schema(stored: StoredSchema) -> Response:
    """The schema itself (GET .../schema): JSON types as JSON, Protobuf as its text."""
    if stored.schema_type == "PROTOBUF":
        return Response(stored.text, media_type="text/plain")
    return Response(stored.text.encode(), media_type="application/vnd.schemaregistry.v1+json")


class SchemaEndpoints:
    def __init__(self, ctx: Context, answers: IdAnswers) -> None:
        self.ctx = ctx
        self.reg = ctx.registry
        self.answers = answers

    async def root(self, _request: Request) -> Response:
        return registry_json({})

    async def types(self, _request: Request) -> Response:
        return registry_json(sorted(self.reg.kinds))

    async def _by_id(self, request: Request) -> StoredSchema:
        sid = schema_id(request.path_params["id"])
        stored = await self.answers.schema(sid)
        if auth_enabled(request):
            uses = await self.ctx.run(self.reg.store.uses_of, sid, True)
            if not any(may(request, u.subject, "read") for u in uses):
                require(request, uses[0].subject if uses else str(sid), "read")
        return stored

    async def by_id(self, request: Request) -> Response:
        if not auth_enabled(request):  # the hot path of every consumer: one dict lookup
            return await self.answers.answer(schema_id(request.path_params["id"]))
        return registry_json(schema_fields(await self._by_id(request)))

    async def by_id_schema(self, request: Request) -> Response:
        return raw_schema(await self._by_id(request))

    async def _uses(self, request: Request) -> list[StoredVersion]:
        stored = await self._by_id(request)
        uses = await self.ctx.run(
            self.reg.store.uses_of, stored.id, flag(request.query_params.get("deleted"))
        )
        return [u for u in uses if may(request, u.subject, "read")]

    async def id_subjects(self, request: Request) -> Response:
        return registry_json(sorted({u.subject for u in await self._uses(request)}))

    async def id_versions(self, request: Request) -> Response:
        uses = await self._uses(request)
        return registry_json([{"subject": u.subject, "version": u.version} for u in uses])

    async def subjects(self, request: Request) -> Response:
        q = request.query_params
        found = await self.ctx.run(
            self.reg.store.subjects, flag(q.get("deleted")), q.get("subjectPrefix", "")
        )
        return registry_json([s for s in found if may(request, s, "read")])

    async def versions(self, request: Request) -> Response:
        subject = subject_name(request.path_params["subject"])
        require(request, subject, "read")
        found = await self.ctx.run(
            self.reg.versions, subject, flag(request.query_params.get("deleted"))
        )
        return registry_json([v.version for v in found])

    async def _version(self, request: Request) -> tuple[StoredVersion, StoredSchema]:
        subject = subject_name(request.path_params["subject"])
        number = version_number(request.path_params["version"])
        require(request, subject, "read")
        deleted = flag(request.query_params.get("deleted"))
        version = await self.ctx.run(self.reg.version, subject, number, deleted)
        return version, await self.answers.schema(version.schema_id)

    async def get_version(self, request: Request) -> Response:
        return registry_json(version_body(*await self._version(request)))

    async def get_version_schema(self, request: Request) -> Response:
        return raw_schema((await self._version(request))[1])

    async def referenced_by(self, request: Request) -> Response:
        version, _ = await self._version(request)
        ids = await self.ctx.run(self.reg.store.referenced_by, version.subject, version.version)
        return registry_json(ids)

    async def register(self, request: Request) -> Response:
        subject = subject_name(request.path_params["subject"])
        require(request, subject, "write")
        req = schema_request(await body(request), tuple(self.reg.kinds))
        normalize = flag(request.query_params.get("normalize"))
        done = await self.ctx.run(self.reg.register, subject, req, normalize)
        return registry_json({"id": done.schema_id, "version": done.version})

    async def lookup(self, request: Request) -> Response:
        subject = subject_name(request.path_params["subject"])
        require(request, subject, "read")
        req = schema_request(await body(request), tuple(self.reg.kinds))
        q = request.query_params
        cand = await self.ctx.run(self.reg.candidate, req, flag(q.get("normalize")))
        version = await self.ctx.run(self.reg.lookup, subject, cand, flag(q.get("deleted")))
        return registry_json(version_body(version, await self.answers.schema(version.schema_id)))

    async def delete_subject(self, request: Request) -> Response:
        subject = subject_name(request.path_params["subject"])
        require(request, subject, "alter")
        permanent = flag(request.query_params.get("permanent"))
        numbers = await self.ctx.run(deletes.delete_subject, self.reg, subject, permanent)
        if permanent:
            self.answers.forget()
        return registry_json(numbers)

    async def delete_version(self, request: Request) -> Response:
        subject = subject_name(request.path_params["subject"])
        number = version_number(request.path_params["version"])
        require(request, subject, "alter")
        permanent = flag(request.query_params.get("permanent"))
        done = await self.ctx.run(deletes.delete_version, self.reg, subject, number, permanent)
        if permanent:
            self.answers.forget()
        return Response(orjson.dumps(done), media_type="application/vnd.schemaregistry.v1+json")


def schema_routes(ctx: Context, answers: IdAnswers) -> list[Route]:
    version_path = "/subjects/{subject}/versions/{version}"
    e = SchemaEndpoints(ctx, answers)
    return [
        Route("/", endpoint(e.root), methods=["GET"]),
        Route("/schemas/types", endpoint(e.types), methods=["GET"]),
        Route("/schemas/ids/{id}", endpoint(e.by_id), methods=["GET"]),
        Route("/schemas/ids/{id}/schema", endpoint(e.by_id_schema), methods=["GET"]),
        Route("/schemas/ids/{id}/subjects", endpoint(e.id_subjects), methods=["GET"]),
        Route("/schemas/ids/{id}/versions", endpoint(e.id_versions), methods=["GET"]),
        Route("/subjects", endpoint(e.subjects), methods=["GET"]),
        Route("/subjects/{subject}", endpoint(e.lookup), methods=["POST"]),
        Route("/subjects/{subject}", endpoint(e.delete_subject), methods=["DELETE"]),
        Route("/subjects/{subject}/versions", endpoint(e.versions), methods=["GET"]),
        Route("/subjects/{subject}/versions", endpoint(e.register), methods=["POST"]),
        Route(version_path, endpoint(e.get_version), methods=["GET"]),
        Route(version_path, endpoint(e.delete_version), methods=["DELETE"]),
        Route(version_path + "/schema", endpoint(e.get_version_schema), methods=["GET"]),
        Route(version_path + "/referencedby", endpoint(e.referenced_by), methods=["GET"]),
    ]
