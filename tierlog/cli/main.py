"""The `tierlog` command: server roles (imported lazily) and client commands."""

from __future__ import annotations

import argparse
import faulthandler
import importlib.metadata
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from console.settings import DEFAULT_URL
from logformat.errors import TierlogError
from tierlog.cli.console_cmd import add_console
from tierlog.cli.node_roles import add_broker, add_fetch
from tierlog.cli.quotas_cmd import add_quotas
from tierlog.cli.role_settings import resolved
from tierlog.cli.security_cmd import add_security_commands
from tierlog.cli.unreachable import refused, refused_message
from tierlog.cli.worker_roles import add_worker_roles
from tierlog.devstack.parent_watch import die_with_parent
from tierlog.devstack.settings import DEV


def _add_dev(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dev", help="run the whole system locally on embedded defaults")
    DEV.add_flags(p)
    p.set_defaults(func=_run_dev)


def _run_dev(args: argparse.Namespace) -> int:
    from tierlog.devstack import settings as dev
    from tierlog.devstack.dev import run_dev

    s = resolved(DEV, args)
    if s is None:
        return 2
    log_level = s[dev.LOG_LEVEL] or ("WARNING" if sys.stderr.isatty() else "INFO")
    return run_dev(
        Path(s[dev.DATA_DIR]).resolve(),
        s[dev.BROKERS],
        s[dev.PORT],
        log_level,
        auth=s[dev.AUTH],
        kafka_defaults=s[dev.KAFKA_DEFAULTS],
    )


def _version() -> str:
    try:
        return importlib.metadata.version("tierlog")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"


class Terminated(KeyboardInterrupt):
    """SIGTERM (a timeout, systemd, docker stop): a client command stops as on Ctrl-C, so
    `finally` blocks run (a group consumer leaves its group, produce prints its summary).
    Server roles and `tierlog dev` handle SIGTERM their own way."""


_SERVERS = frozenset({"dev", "broker", "fetch", "tiering", "compaction", "console"})


def _url_source(argv: Sequence[str] | None) -> str:
    given = argv if argv is not None else sys.argv[1:]
    if any(a == "--url" or a.startswith("--url=") for a in given):
        return "--url's"
    return (
        "TIERLOG_URL's"
        if os.environ.get("TIERLOG_URL")
        else f"the default, {DEFAULT_URL}, as TIERLOG_URL is unset"
    )


def _terminate(_signum: int, _frame: object) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    from tierlog.cli import commands

    parser = argparse.ArgumentParser(prog="tierlog", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tierlog {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_dev(sub)
    add_broker(sub)
    add_worker_roles(sub)
    add_fetch(sub)
    url = os.environ.get("TIERLOG_URL") or DEFAULT_URL
    commands.add_client_commands(sub, url)
    add_quotas(sub)
    add_security_commands(sub)
    add_console(sub, url)
    args = parser.parse_args(argv)
    die_with_parent()  # started by `tierlog dev` or a test harness: go when it goes
    # `kill -USR1 <pid>` prints every thread's stack to stderr: how to see where a hang is.
    faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    if args.command not in _SERVERS:  # servers stop on SIGTERM their own way (uvicorn's)
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.func(args) or 0)
    except TierlogError as exc:
        if refused(exc) and isinstance(getattr(args, "url", None), str):
            message = refused_message(exc, args.url, _url_source(argv))
            print(f"tierlog: NETWORK_EXCEPTION: {message}", file=sys.stderr)
            return 1
        print(f"tierlog: {exc.code.value}: {exc.message}", file=sys.stderr)
        return 1
    except Terminated:
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
