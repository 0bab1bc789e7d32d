"""HTTP clients made in one process share its TLS trust (http_transport/trust.py): building a
context reads the whole CA bundle (12-20 ms of CPU), which every client made used to pay."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import certifi
import httpx
import pytest

from cluster.internal_http import internal_async_client, internal_client, trust_ca
from http_transport.aiohttp_transport import AiohttpTransport
from http_transport.trust import bundle_trust, default_trust, trust


@pytest.fixture(name="bundle_loads")
def bundle_loads_fixture(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each CA bundle read by any context made from now on."""
    loads: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: object, **kw: object) -> None:
        loads.append(args or kw)
        real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    default_trust.cache_clear()
    bundle_trust.cache_clear()
    return loads


@pytest.fixture(name="own_ca")
def own_ca_fixture() -> Iterator[str]:
    yield certifi.where()  # any PEM bundle serves as "a private CA's"
    trust_ca(None)


def test_verify_values_keep_their_meaning() -> None:
    assert trust(False) is False
    given = ssl.create_default_context()
    assert trust(given) is given
    assert isinstance(trust(True), ssl.SSLContext)
    assert trust(True).verify_mode == ssl.CERT_REQUIRED and trust(True).check_hostname


def test_clients_made_in_a_process_read_the_default_bundle_once(bundle_loads: list[object]) -> None:
    transports = [AiohttpTransport() for _ in range(5)]
    clients = [httpx.Client(verify=trust(True)) for _ in range(5)]
    nodes = [internal_async_client(lambda: "t", httpx.Timeout(1)) for _ in range(3)]
    blocking = [internal_client(lambda: "t", httpx.Timeout(1)) for _ in range(3)]
    assert len(bundle_loads) == 1
    assert len({id(t._ssl) for t in transports}) == 1
    for c in [*clients, *blocking]:
        c.close()
    assert nodes


def test_a_private_ca_bundle_is_read_once_per_path(
    bundle_loads: list[object], own_ca: str, tmp_path: Path
) -> None:
    trust_ca(own_ca)
    for _ in range(3):
        internal_client(lambda: "t", httpx.Timeout(1)).close()
        AiohttpTransport(verify=own_ca)
    assert len(bundle_loads) == 1
    other = tmp_path / "other.pem"
    other.write_bytes(Path(own_ca).read_bytes())
    assert trust(str(other)) is not trust(own_ca)
    assert len(bundle_loads) == 2
