"""Security flags of the server roles (`tierlog broker`, `tierlog fetch`): auth mode, super
users, TLS. Secure by default: API keys are required unless `--insecure` says otherwise, and
turning auth off any other way (`--auth none`) without `--insecure` refuses to start.
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tierlog.cli.kafka_opts import add_failed_auth_flags, throttle_settings

if TYPE_CHECKING:  # the server package is imported only when a server role runs
    from cluster.authorizer import AuthSettings


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"TIERLOG_{name}", default)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def add_server_security(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--auth",
        choices=["apikey", "none"],
        default=_env("AUTH", "apikey"),
        help="client authentication (default apikey; none needs --insecure too)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        default=_truthy(_env("INSECURE")),
        help="run with no authentication or ACLs: every client may do anything (dev only)",
    )
    p.add_argument(
        "--super-users",
        default=_env("SUPER_USERS", ""),
        help="principals allowed everything, e.g. User:admin;User:ops (Kafka's super.users)",
    )
    p.add_argument(
        "--auth-cache-ms",
        type=int,
        default=int(_env("AUTH_CACHE_MS", "5000") or 5000),
        help="how long verified keys and ACLs are cached (revocation takes at most this)",
    )
    p.add_argument("--tls-cert", default=_env("TLS_CERT"), help="PEM certificate: serve HTTPS")
    p.add_argument("--tls-key", default=_env("TLS_KEY"), help="PEM private key of --tls-cert")
    add_tls_ca(p)
    add_failed_auth_flags(p)


def add_tls_ca(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tls-ca",
        default=_env("TLS_CA"),
        help="PEM CA bundle that calls to other nodes trust (a cluster's private CA)",
    )


def trust_tls_ca(args: argparse.Namespace, role: str) -> bool:
    """Make --tls-ca the trust of this process's node-to-node clients (cluster/internal_http.py
    reads TIERLOG_TLS_CA); False, after saying why, when it is not a readable CA bundle."""
    if not args.tls_ca:
        return True
    try:
        ssl.create_default_context(cafile=args.tls_ca)
    except (OSError, ssl.SSLError) as exc:
        print(f"tierlog {role}: --tls-ca {args.tls_ca}: {exc}", file=sys.stderr)
        return False
    os.environ["TIERLOG_TLS_CA"] = args.tls_ca
    return True


def super_users(raw: str) -> frozenset[str]:
    names = [n.strip() for n in raw.replace(",", ";").split(";") if n.strip()]
    return frozenset(n if n.startswith("User:") else f"User:{n}" for n in names)


def auth_settings(args: argparse.Namespace, role: str) -> AuthSettings | None:
    """The role's AuthSettings, or None after printing why it must not start."""
    if args.auth not in ("apikey", "none"):
        print(f"tierlog {role}: TIERLOG_AUTH must be apikey or none", file=sys.stderr)
        return None
    if args.auth == "none" and not args.insecure:
        print(
            f"tierlog {role}: refusing to start without authentication (--auth none): "
            "give --insecure (or TIERLOG_INSECURE=1) to run an open node, or keep API keys "
            "(the default; create them with `tierlog users create`)",
            file=sys.stderr,
        )
        return None
    if bool(args.tls_cert) != bool(args.tls_key):
        print(f"tierlog {role}: --tls-cert and --tls-key go together", file=sys.stderr)
        return None
    for path in (args.tls_cert, args.tls_key):
        if path and not Path(path).is_file():
            print(f"tierlog {role}: no such file {path}", file=sys.stderr)
            return None
    if not trust_tls_ca(args, role):
        return None
    if args.auth_cache_ms < 0:
        print(f"tierlog {role}: --auth-cache-ms must be >= 0", file=sys.stderr)
        return None
    from cluster.auth_throttle import ThrottleSettings
    from cluster.authorizer import AuthSettings

    return AuthSettings(
        enabled=not args.insecure,
        super_users=super_users(args.super_users or ""),
        cache_ttl_s=args.auth_cache_ms / 1000,
        throttle=ThrottleSettings(**throttle_settings(args)),
    )


def scheme(args: argparse.Namespace) -> str:
    return "https" if args.tls_cert else "http"
