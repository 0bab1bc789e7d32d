"""The produce benchmark baseline: a bare starlette endpoint that appends bodies to a file."""

from __future__ import annotations

import argparse
import os

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def make_app(path: str) -> Starlette:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    async def append(request: Request) -> Response:
        os.write(fd, await request.body())
        return Response(b'{"ok":true}', media_type="application/json")

    return Starlette(
        routes=[
            Route("/topics/{topic}/records", append, methods=["POST"]),
            Route("/readyz", lambda r: Response(b"ok"), methods=["GET"]),
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--file", required=True)
    args = parser.parse_args()
    uvicorn.run(
        make_app(args.file), host="127.0.0.1", port=args.port, log_level="warning", access_log=False
    )
