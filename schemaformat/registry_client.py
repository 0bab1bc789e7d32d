"""A small synchronous client of a Confluent-compatible Schema Registry (tierlog's, under
`http://<broker>/schema-registry`): what `tierlog schemas`, `tierlog consume --value-format`
and the console need. Schemas by id are cached (an id names one schema forever), with the
schemas they reference fetched and parsed with them, so decoding a topic costs one request
per schema, not per record.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from http_transport.trust import trust
from schemaformat.base import InvalidSchema, ParsedSchema, SchemaKind
from schemaformat.kinds import kinds
from schemaformat.wire import Decoded, decode, unframe

V1 = "application/vnd.schemaregistry.v1+json"
MAX_REFERENCE_DEPTH = 32
MAX_CACHED = 10_000


class RegistryError(Exception):
    """An answer other than success: Confluent's `error_code` (40401, 409, 42201, ...) and
    message, or a network failure (error_code 0)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(f"{message} (HTTP {status}, error code {error_code})")
        self.status = status
        self.error_code = error_code
        self.message = message


def subject_path(subject: str) -> str:
    return quote(subject, safe="")


class RegistryClient:
    def __init__(
        self, base_url: str, api_key: str = "", verify: str | bool = True, timeout_s: float = 10.0
    ) -> None:
        headers = {"Accept": V1, "Content-Type": V1}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, verify=trust(verify), timeout=timeout_s
        )
        self._kinds: Mapping[str, SchemaKind] = kinds()
        self._schemas: dict[int, ParsedSchema] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def request(
        self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        """One call: its JSON answer, or RegistryError with the registry's code and message."""
        try:
            response = self._http.request(method, path, json=body, params=params)
        except httpx.HTTPError as error:
            raise RegistryError(0, 0, f"no answer from {self.base_url}: {error}") from None
        if response.is_success:
            return response.json() if response.content else None
        try:
            doc = response.json()
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "error_code" in doc:
            code = doc["error_code"]
            code = code if isinstance(code, int) else response.status_code
            raise RegistryError(response.status_code, code, str(doc.get("message", "")))
        text = response.text.strip()[:200] or response.reason_phrase
        raise RegistryError(response.status_code, response.status_code, text)

    def schema(self, schema_id: int) -> ParsedSchema:
        """The schema with this id, parsed with its references (cached)."""
        with self._lock:
            hit = self._schemas.get(schema_id)
        if hit is not None:
            return hit
        answer = self.request("GET", f"/schemas/ids/{schema_id}")
        parsed = self._parse(answer, 0)
        with self._lock:
            if len(self._schemas) >= MAX_CACHED:
                self._schemas.clear()
            self._schemas[schema_id] = parsed
        return parsed

    def _parse(self, answer: Mapping[str, Any], depth: int) -> ParsedSchema:
        kind = self._kinds.get(str(answer.get("schemaType") or "AVRO"))
        if kind is None:
            raise RegistryError(
                200, 0, f"the registry answered a {answer.get('schemaType')} schema"
            )
        texts = self._referenced_texts(answer.get("references") or [], depth)
        try:
            return kind.parse(str(answer.get("schema", "")), texts)
        except InvalidSchema as error:
            raise RegistryError(200, 0, f"the registry's schema does not parse: {error}") from None

    def _referenced_texts(self, references: list[Any], depth: int) -> dict[str, str]:
        """name → text of each reference and, first, of what they reference in turn."""
        if depth > MAX_REFERENCE_DEPTH:
            raise RegistryError(200, 0, "schema references nest deeper than 32")
        texts: dict[str, str] = {}
        for ref in references:
            subject, version = str(ref["subject"]), ref["version"]
            answer = self.request("GET", f"/subjects/{subject_path(subject)}/versions/{version}")
            texts.update(self._referenced_texts(answer.get("references") or [], depth + 1))
            texts[str(ref["name"])] = str(answer["schema"])
        return texts

    def decode(self, value: bytes) -> tuple[int, Decoded]:
        """A value in Confluent's wire format: its schema id and the value decoded to JSON.
        WireFormatError for a value that is not; RegistryError for an id the registry does
        not know (40403)."""
        framed = unframe(value)
        return framed.schema_id, decode(self.schema(framed.schema_id), framed.body)
