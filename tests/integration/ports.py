"""Loopback ports for the servers tests start, safe under pytest-xdist.

A port probed with bind(0) is free only at the moment of the probe: a broker binds it seconds
later, after its start-up, and meanwhile another test worker's probe (or any outgoing
connection, which takes its local port from the same ephemeral range) could take it. Then a
test talks to another test's server. So each xdist worker draws ports from its own block below
the kernel's ephemeral range, in order, skipping any in use.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import socket

_FIRST = 20000  # the ephemeral range starts at 32768 (net.ipv4.ip_local_port_range)
_BLOCK = 1500  # ports per worker: 8 workers fit below 32000


def _worker_index() -> int:
    match = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) % 8 if match else 0


_base = _FIRST + _worker_index() * _BLOCK
# A random start, so two test sessions on one machine rarely walk the same ports together.
_next = itertools.count(random.randrange(_BLOCK))


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(span: int = 1, also: tuple[int, ...] = ()) -> int:
    """The first of `span` consecutive free ports that no other worker of this run hands out,
    with the ports at offsets `also` from it free too (within this worker's block as well)."""
    reach = max([span, *(k + 1 for k in also)])
    for _ in range(_BLOCK):
        first = _base + next(_next) % (_BLOCK - reach)
        wanted = [*range(first, first + span), *(first + k for k in also)]
        if all(_bindable(p) for p in wanted):
            for _ in range(span - 1):  # the next call starts past this span, not inside it
                next(_next)
            return first
    raise RuntimeError(f"no {span} free consecutive ports in {_base}..{_base + _BLOCK - 1}")
