"""The /docs page (issue 18 item 10): Swagger UI served by brokers and fetch nodes from the
assets of a pinned package, with auth on and off. The page loads nothing from another
origin, and it, its assets and the document it renders need no API key."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from http_transport.trust import default_trust
from tests.integration.brokers import BrokerProcess
from tests.integration.fetch_nodes import FetchNodeProcess
from tests.integration.secured import secure_broker, started

# What the page's assets are served as (the browser refuses scripts of another type).
ASSET_TYPES = {"text/css", "text/javascript", "image/png"}


class _Assets(HTMLParser):
    """The URLs a page makes a browser load: scripts, stylesheets, icons, images."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is not None and name in ("src", "href"):
                self.urls.append(value)


@pytest.fixture(scope="module", params=["auth off", "auth on"])
def nodes(
    request: pytest.FixtureRequest,
    db_factory: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, bool]]:
    """The URLs of a running broker and fetch node, and whether they run with auth on."""
    secure = request.param == "auth on"
    url = db_factory()
    root = Path(tmp_path_factory.mktemp("api-docs"))
    broker = secure_broker(url, root / "data") if secure else BrokerProcess(url, root / "data")
    for b in started(broker):
        node = FetchNodeProcess(url, root / "fetch.log", {}, secure=secure).start()
        try:
            yield b.url, node.url, secure
        finally:
            node.stop()


def _page_assets(client: httpx.Client) -> list[str]:
    page = client.get("/docs")
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    parser = _Assets()
    parser.feed(page.text)
    assert parser.urls, page.text
    return parser.urls


@pytest.mark.parametrize("role", ["broker", "fetch node"])
def test_docs_page_loads_only_same_origin_assets_without_a_key(
    nodes: tuple[str, str, bool], role: str
) -> None:
    url = nodes[0] if role == "broker" else nodes[1]
    with httpx.Client(
        verify=default_trust(), base_url=url, timeout=30
    ) as anon:  # no key, even with auth on
        urls = _page_assets(anon)
        for asset in urls:
            parts = urlsplit(asset)
            assert not parts.scheme and not parts.netloc, f"{asset}: not same-origin"
            assert asset.startswith("/docs/static/"), asset
            r = anon.get(asset)
            assert r.status_code == 200 and r.content, asset
            assert r.headers["content-type"].split(";")[0] in ASSET_TYPES, asset
        assert any(a.endswith(".js") for a in urls) and any(a.endswith(".css") for a in urls)
        page = anon.get("/docs").text
        assert "http://" not in page and "https://" not in page  # no CDN, no validator badge
        assert 'url: "/openapi.json"' in page  # the node's own document
        doc = anon.get("/openapi.json")
        assert doc.status_code == 200 and doc.json()["openapi"].startswith("3.1")


def test_docs_exemption_is_only_the_docs(nodes: tuple[str, str, bool]) -> None:
    """With auth on, /docs needs no key but nothing beside it is opened; unknown assets are
    404, not a directory listing."""
    *urls, auth_on = nodes
    for url in urls:
        with httpx.Client(verify=default_trust(), base_url=url, timeout=30) as anon:
            assert anon.get("/docs/static/no-such-file.js").status_code == 404
            assert anon.get("/docs/static/").status_code == 404
            if auth_on:
                assert anon.get("/docsx").status_code == 401
                assert anon.get("/topics").status_code == 401
