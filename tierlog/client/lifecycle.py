"""What every client (Producer, Consumer, Admin, TopicReader) is built on: one I/O thread and
one HTTP client over the bootstrap nodes, closed together, and `with client:` closing it."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Self

import httpx

from tierlog.client.http import AsyncHttp, Endpoints
from tierlog.client.iothread import IOThread


class ClientBase:
    _io: IOThread
    _http: AsyncHttp

    def _open_io(
        self,
        thread_name: str,
        bootstrap: str | Sequence[str],
        *,
        timeout_s: float,
        transport: httpx.AsyncBaseTransport | None,
        api_key: str | None,
        verify: bool | str,
        max_connections: int = 100,
    ) -> None:
        self._io = IOThread(thread_name)
        self._http = AsyncHttp(
            Endpoints(bootstrap),
            timeout_s=timeout_s,
            transport=transport,
            max_connections=max_connections,
            api_key=api_key,
            verify=verify,
        )

    def _close_io(self) -> None:
        """Close the HTTP client (best effort: its connections die with the loop anyway),
        then stop the I/O thread."""
        try:
            with contextlib.suppress(Exception):
                self._io.run(self._http.aclose(), 5)
        finally:
            self._io.stop()

    def close(self) -> None:
        self._close_io()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
