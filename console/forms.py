"""How a form's answer goes back: htmx requests get the form's fragment (errors inside it,
200 so htmx swaps it) or an HX-Redirect; plain form posts get the whole page with the
error's status, or a 303 to the result (post/redirect/get)."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from console.cluster_api import ConsoleApiError
from console.render import render


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def redirect(request: Request, url: str) -> Response:
    if is_htmx(request):
        return Response(status_code=204, headers={"HX-Redirect": url})
    return RedirectResponse(url, status_code=303)


def rejected(
    request: Request,
    fragment: str,
    page: str,
    context: dict[str, Any],
    error: ConsoleApiError,
) -> Response:
    """The form again, with the API's (or our own) error in it."""
    ctx = {**context, "error": error}
    if is_htmx(request):
        return render(request, fragment, ctx)
    return render(request, page, ctx, status_code=error.status if error.status < 500 else 502)


def text(form: FormData, name: str, max_chars: int = 1000) -> str:
    value = form.get(name, "")
    return value.strip()[:max_chars] if isinstance(value, str) else ""


def whole_number(form: FormData, name: str, label: str, error_name: str) -> int | None:
    """An optional integer field; a clear error (not a 500) when it is not one."""
    raw = text(form, name, 20)
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConsoleApiError(
            error_name, f"{label} must be a whole number, not {raw!r}", 400
        ) from None
