"""The Messages page's produce form (issue 27 item 4): one record with a key, a value,
headers (`name=value`, one a line) and an optional partition, sent through the cluster's
produce API with the signed-in key; the page then shows the record where it landed, or the
API's error beside what was typed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response

from console import auth, forms
from console.cluster_api import ConsoleApiError
from console.topic_details import topic_path

PageOf = Callable[[Request, str], Awaitable[Response]]
MAX_FIELD_CHARS = 1_000_000  # the API's own limits (max.message.bytes) decide beyond this
MAX_HEADERS = 100


def headers_of(text: str) -> list[list[str]]:
    """`name=value` lines as the API's header list (order kept; names may repeat)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ConsoleApiError(
                "INVALID_RECORD", f"header line {number} is not name=value: {line[:80]!r}", 400
            )
        out.append([name.strip(), value])
    if len(out) > MAX_HEADERS:
        raise ConsoleApiError("INVALID_RECORD", f"at most {MAX_HEADERS} headers", 400)
    return out


def record_of(form: FormData) -> dict[str, Any]:
    """The JSON produce API's record for the form: an empty key is no key (the partition is
    then the sticky spread's), an empty partition field lets the key choose."""
    record: dict[str, Any] = {"value": forms.text(form, "value", MAX_FIELD_CHARS)}
    key = forms.text(form, "key", MAX_FIELD_CHARS)
    if key:
        record["key"] = key
    raw_headers = form.get("headers", "")
    headers = headers_of(raw_headers if isinstance(raw_headers, str) else "")
    if headers:
        record["headers"] = headers
    partition = forms.whole_number(form, "partition", "Partition", "INVALID_PARTITIONS")
    if partition is not None:
        if partition < 0:
            raise ConsoleApiError("INVALID_PARTITIONS", "partition must be 0 or more", 400)
        record["partition"] = partition
    return record


async def produce(request: Request, page: PageOf) -> Response:
    """Send the form's record; `page` renders the Messages page again for an error."""
    form = await auth.checked_form(request)
    topic = forms.text(form, "topic", 300)
    try:
        if not topic:
            raise ConsoleApiError("INVALID_REQUEST", "choose a topic to produce to", 400)
        body = {"records": [record_of(form)]}
        doc = await request.app.state.api.post(
            topic_path(topic, "records"), auth.api_key(request), body
        )
        placed = (doc or {}).get("offsets") or [{}]
        if "error_code" in placed[0]:
            raise ConsoleApiError(placed[0]["error_code"], placed[0].get("message", ""), 400)
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        request.state.produce_error = exc
        request.state.produce_typed = {k: v for k, v in form.items() if isinstance(v, str)}
        again = await page(request, topic)
        again.status_code = exc.status if exc.status < 500 else 502
        return again
    partition, offset = placed[0]["partition"], placed[0]["offset"]
    query = urlencode(
        {
            "topic": topic,
            "partition": partition,
            "position": "offset",
            "offset": offset,
            "produced": f"{partition}:{offset}",
        }
    )
    return forms.redirect(request, f"/messages?{query}")
