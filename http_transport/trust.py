"""TLS trust, one context per process for each kind of trust rather than one per client.

Building a context reads its CA bundle: certifi's ~150 certificates cost 12-20 ms of CPU,
which every HTTP client paid when it was made, plain-HTTP ones included (a broker made three
at start-up, a Python `Producer` or `Admin` one, a CLI command one, a test's helper one per
call). An `ssl.SSLContext` may serve any number of connections at once; what may not be
shared is one someone changes: the callers here pass these to httpx and aiohttp without a
client certificate and over HTTP/1.1 only, so the only change made to them (httpcore sets
the ALPN list on each TLS connection) sets the same value every time.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def default_trust() -> ssl.SSLContext:
    """httpx's default: certifi's bundle, or SSL_CERT_FILE / SSL_CERT_DIR when set (read
    once, when the first client of the process is made)."""
    return httpx.create_ssl_context()


@functools.lru_cache(maxsize=8)
def bundle_trust(path: str) -> ssl.SSLContext:
    """Trust in the PEM CA bundle at `path` (a private CA's), instead of the default."""
    return ssl.create_default_context(cafile=path)


def trust(verify: ssl.SSLContext | str | bool) -> ssl.SSLContext | bool:
    """`verify` as httpx takes it (True, False, a context, a CA bundle's path), as a shared
    context; False stays False (no verification: httpx and aiohttp both take it so)."""
    if isinstance(verify, ssl.SSLContext) or verify is False:
        return verify
    if isinstance(verify, str):
        return bundle_trust(verify)
    return default_trust()
