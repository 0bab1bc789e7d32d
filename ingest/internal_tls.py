"""What node-to-node HTTPS trusts: replica fetches, forwarded requests, tiering's segment
downloads, fetch nodes' hot reads and offset lookups.

The CA bundle named by TIERLOG_TLS_CA (each role's `--tls-ca` sets it), so a cluster whose
certificates come from a private CA can talk to itself; else httpx's default (certifi's
bundle, or SSL_CERT_FILE / SSL_CERT_DIR).
"""

from __future__ import annotations

import functools
import os
import ssl

ENV = "TIERLOG_TLS_CA"


def internal_verify() -> ssl.SSLContext | bool:
    path = os.environ.get(ENV)
    return _context(path) if path else True


@functools.lru_cache(maxsize=4)
def _context(path: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=path)
