"""Security settings of the server roles (`tierlog broker`, `tierlog fetch`): auth mode, super
users, TLS (cluster/node_settings.py declares them). Secure by default: API keys are required
unless `--insecure` says otherwise, and turning auth off any other way (`--auth none`) without
`--insecure` refuses to start.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from cluster import node_settings as node
from tierlog.cli.role_settings import throttle_settings

if TYPE_CHECKING:  # the server package is imported only when a server role runs
    from cluster.authorizer import AuthSettings
    from cluster.settings_table import Settings


def super_users(raw: str) -> frozenset[str]:
    names = [n.strip() for n in raw.replace(",", ";").split(";") if n.strip()]
    return frozenset(n if n.startswith("User:") else f"User:{n}" for n in names)


def auth_settings(s: Settings) -> AuthSettings | None:
    """The role's AuthSettings, or None after printing why it must not start."""
    role = s.role
    if s[node.AUTH] == "none" and not s[node.INSECURE]:
        print(
            f"tierlog {role}: refusing to start without authentication (--auth none): "
            "give --insecure (or TIERLOG_INSECURE=1) to run an open node, or keep API keys "
            "(the default; create them with `tierlog users create`)",
            file=sys.stderr,
        )
        return None
    cert, key = s[node.TLS_CERT], s[node.TLS_KEY]
    if bool(cert) != bool(key):
        print(f"tierlog {role}: --tls-cert and --tls-key go together", file=sys.stderr)
        return None
    for path in (cert, key):
        if path and not Path(path).is_file():
            print(f"tierlog {role}: no such file {path}", file=sys.stderr)
            return None
    from cluster.authorizer import AuthSettings

    return AuthSettings(
        enabled=not s[node.INSECURE],
        super_users=super_users(s[node.SUPER_USERS]),
        cache_ttl_s=s[node.AUTH_CACHE_MS] / 1000,
        throttle=throttle_settings(s),
    )


def scheme(s: Settings) -> str:
    return "https" if s[node.TLS_CERT] else "http"
