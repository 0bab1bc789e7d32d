"""moto's S3 server as the tests run it: `python -m moto.server`, less two costs per request
that have nothing to do with S3 (a third of the server's CPU; it served ~16,000 requests a
suite run at 2-6 ms of CPU each).

- moto finds the service a request is for by testing the host against the names of its
  service packages, which it lists from disk (a listdir and ~200 isdir calls) on every
  request: listed once here, as the installed packages do not change while it runs.
- werkzeug logs each request at INFO to a stderr nobody reads (tests/integration/s3.py
  discards it).
"""

from __future__ import annotations

import logging
import sys

from moto import backends
from moto.server import main

_SERVICES = tuple(backends.list_of_moto_modules())


def _services() -> tuple[str, ...]:
    return _SERVICES


if __name__ == "__main__":
    backends.list_of_moto_modules = _services  # type: ignore[assignment]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    main(sys.argv[1:])
