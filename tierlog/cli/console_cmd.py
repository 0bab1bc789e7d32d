"""`tierlog console`: the web console, a client of any node's public HTTP API."""

from __future__ import annotations

import argparse
import os
import sys

from console.sessions import DEFAULT_IDLE_S, DEFAULT_TTL_S

DEFAULT_LISTEN = "127.0.0.1:8070"


def add_console(sub: argparse._SubParsersAction[argparse.ArgumentParser], default_url: str) -> None:
    p = sub.add_parser("console", help="run the web console against a cluster (HTTP API)")
    p.add_argument(
        "--broker",
        default=os.environ.get("TIERLOG_URL", default_url),
        help=f"URL of any node of the cluster (default TIERLOG_URL or {default_url})",
    )
    p.add_argument(
        "--listen",
        default=os.environ.get("TIERLOG_CONSOLE_LISTEN", DEFAULT_LISTEN),
        help=f"HOST:PORT to serve the console on (default {DEFAULT_LISTEN})",
    )
    p.add_argument(
        "--api-key",
        default=os.environ.get("TIERLOG_API_KEY"),
        help="key the metric sampler lists brokers with when the cluster requires keys "
        "(default TIERLOG_API_KEY); users sign in with their own",
    )
    p.add_argument(
        "--ca-file",
        default=os.environ.get("TIERLOG_CA_FILE"),
        help="CA bundle that signed the nodes' TLS certificates (default: the system's)",
    )
    p.add_argument(
        "--sample-interval",
        type=float,
        default=5.0,
        help="seconds between scrapes of the brokers' metrics for the charts (default 5)",
    )
    p.add_argument(
        "--session-ttl",
        type=float,
        default=DEFAULT_TTL_S,
        help=f"seconds a sign-in lasts, used or not (default {DEFAULT_TTL_S:.0f})",
    )
    p.add_argument(
        "--session-idle",
        type=float,
        default=DEFAULT_IDLE_S,
        help=f"seconds without a request that end a sign-in (default {DEFAULT_IDLE_S:.0f})",
    )
    p.add_argument("--log-level", default=os.environ.get("TIERLOG_LOG_LEVEL", "INFO"))
    p.set_defaults(func=run_console)


def run_console(args: argparse.Namespace) -> int:
    import uvicorn

    from cluster.http.server import parse_listen
    from console.app import create_app
    from console.sessions import SessionStore
    from tierlog import logs

    try:
        host, port = parse_listen(args.listen)
    except ValueError as exc:
        print(f"tierlog console: {exc}", file=sys.stderr)
        return 2
    if not args.broker.startswith(("http://", "https://")):
        print(f"tierlog console: --broker wants an http(s) URL: {args.broker!r}", file=sys.stderr)
        return 2
    if not 0.5 <= args.sample_interval <= 300:
        print("tierlog console: --sample-interval must be 0.5 to 300 seconds", file=sys.stderr)
        return 2
    if not (0 < args.session_idle <= args.session_ttl):
        print("tierlog console: want 0 < --session-idle <= --session-ttl", file=sys.stderr)
        return 2
    logs.setup("console", args.log_level, args.listen)
    app = create_app(
        args.broker,
        verify=args.ca_file or True,
        sampler_api_key=args.api_key,
        sample_interval_s=args.sample_interval,
        sessions=SessionStore(args.session_ttl, args.session_idle),
    )
    print(f"tierlog console: http://{host}:{port}/ (cluster {args.broker})", file=sys.stderr)
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
