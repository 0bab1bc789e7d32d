"""`tierlog console`: the web console, a client of any node's public HTTP API."""

from __future__ import annotations

import argparse
import sys

from console import settings as console
from console.settings import CONSOLE


def add_console(sub: argparse._SubParsersAction[argparse.ArgumentParser], default_url: str) -> None:
    """The console's flags, from its settings table (console/settings.py). `default_url` is
    what the client commands default to, TIERLOG_URL's: --broker's default is the same."""
    del default_url  # the table reads TIERLOG_URL itself, once
    p = sub.add_parser("console", help="run the web console against a cluster (HTTP API)")
    CONSOLE.add_flags(p)
    p.set_defaults(func=run_console)


def run_console(args: argparse.Namespace) -> int:
    import uvicorn

    from cluster.http.server import parse_listen
    from console.app import create_app
    from console.sessions import SessionStore
    from tierlog import logs
    from tierlog.cli.role_settings import resolved

    s = resolved(CONSOLE, args)
    if s is None:
        return 2
    try:
        host, port = parse_listen(s[console.LISTEN])
    except ValueError as exc:
        print(f"tierlog console: {exc}", file=sys.stderr)
        return 2
    ttl, idle = s[console.SESSION_TTL], s[console.SESSION_IDLE]
    if not (0 < idle <= ttl):
        print("tierlog console: want 0 < --session-idle <= --session-ttl", file=sys.stderr)
        return 2
    logs.setup("console", s[console.LOG_LEVEL], s[console.LISTEN], s[console.LOG_FORMAT])
    app = create_app(
        s[console.BROKER],
        verify=s[console.CA_FILE] or True,
        sampler_api_key=s[console.API_KEY],
        sample_interval_s=s[console.SAMPLE_INTERVAL],
        sessions=SessionStore(ttl, idle),
    )
    print(f"tierlog console: http://{host}:{port}/ (cluster {s[console.BROKER]})", file=sys.stderr)
    uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
    ).run()
    return 0
