"""moto's S3 server as the tests run it: `python -m moto.server`, less two costs per request
that have nothing to do with S3 (a third of the server's CPU; it served ~16,000 requests a
suite run at 2-6 ms of CPU each).

- moto finds the service a request is for by testing the host against the names of its
  service packages, which it lists from disk (a listdir and ~200 isdir calls) on every
  request: listed once here, as the installed packages do not change while it runs.
- werkzeug logs each request at INFO to a stderr nobody reads (tests/integration/s3.py
  discards it).
- Every timestamp in a response (each object's LastModified in a listing, the Last-Modified
  header) is a string moto made itself, which its serializer parses back with botocore's
  general parser (dateutil: ~45% of a listing's CPU) before formatting it again. Its own ISO
  forms are read with `datetime.fromisoformat` here, which gives the same instant; anything
  else still goes to botocore's parser.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

from botocore.utils import parse_to_aware_datetime
from moto import backends
from moto.core import serialize
from moto.server import main

_SERVICES = tuple(backends.list_of_moto_modules())


def _services() -> tuple[str, ...]:
    return _SERVICES


def _aware_datetime(value: Any) -> datetime:
    """botocore's parse_to_aware_datetime, quick for moto's own "...T...Z" strings."""
    if isinstance(value, str) and value.endswith("Z") and "T" in value:
        try:
            return datetime.fromisoformat(value[:-1]).replace(tzinfo=UTC)
        except ValueError:
            pass
    parsed: datetime = parse_to_aware_datetime(value)
    return parsed


if __name__ == "__main__":
    backends.list_of_moto_modules = _services  # type: ignore[assignment]
    serialize.parse_to_aware_datetime = _aware_datetime  # type: ignore[attr-defined]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    main(sys.argv[1:])
