"""A thin HTTP client for the command line: JSON in, JSON out, Kafka-style errors raised."""

from __future__ import annotations

import ssl
from typing import Any

import httpx
import orjson

from logformat.errors import ErrorCode, TierlogError


class AdminHTTP:
    def __init__(
        self,
        url: str,
        timeout: float = 30.0,
        api_key: str | None = None,
        verify: bool | str = True,
    ) -> None:
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        ctx = ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
        self.client = httpx.Client(
            base_url=url.rstrip("/"), timeout=timeout, headers=headers, verify=ctx
        )

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        content = orjson.dumps(body) if body is not None else None
        headers = {"content-type": "application/json"} if content is not None else {}
        query = {k: v for k, v in params.items() if v is not None}
        try:
            response = self.client.request(
                method, path, content=content, headers=headers, params=query
            )
        except httpx.HTTPError as exc:
            raise TierlogError(
                ErrorCode.REQUEST_TIMED_OUT, f"cannot reach {self.client.base_url}: {exc}"
            ) from exc
        doc = orjson.loads(response.content) if response.content else None
        if response.status_code >= 400:
            code = doc.get("error_code") if isinstance(doc, dict) else None
            message = doc.get("message") if isinstance(doc, dict) else response.text
            try:
                error_code = ErrorCode(code)
            except ValueError:
                error_code = ErrorCode.UNKNOWN_SERVER_ERROR
            raise TierlogError(error_code, str(message))
        return doc

    def close(self) -> None:
        self.client.close()
