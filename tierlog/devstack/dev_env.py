"""What `tierlog dev` tells the user's tools: one env file (data_dir/dev.env) with the
database URL, the S3 endpoint, bucket and credentials, the broker and fetch node URLs and,
with --auth, the admin's API key; and that admin key itself.

`set -a; . .tierlog/dev.env; set +a` gives a shell everything `tierlog users`, `tierlog acls`,
the client commands, boto3 and aws-cli need. The file names itself (TIERLOG_DEV_ENV), so a
`tierlog dev` started from such a shell knows those variables are its own, not an external
database or S3 endpoint to use instead of its embedded ones.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

ENV_FILE = "dev.env"
MARKER = "TIERLOG_DEV_ENV"
ADMIN = "User:admin"
_ADMIN_KEY_FILE = "admin.key"


def env_file(data_dir: Path) -> Path:
    return data_dir / ENV_FILE


def write_env_file(path: Path, variables: Mapping[str, str]) -> None:
    """KEY=shell-quoted value lines, readable by the owner only (they hold secrets)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.writelines(f"{k}={shlex.quote(v)}\n" for k, v in {**variables, MARKER: str(path)}.items())


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of an env file written by write_env_file."""
    env = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        env[key] = shlex.split(value)[0] if value else ""
    return env


def own_environment(environ: Mapping[str, str], path: Path) -> dict[str, str]:
    """`environ` without the variables that came from this data dir's own env file (a shell
    that sourced it): they name the servers of the last run, not external ones."""
    if environ.get(MARKER) != str(path) or not path.exists():
        return dict(environ)
    sourced = read_env_file(path)
    return {k: v for k, v in environ.items() if k not in sourced or sourced[k] != v}


def admin_key(data_dir: Path, database_url: str) -> str:
    """User:admin's API key for `tierlog dev --auth`: made on the first run, kept in
    data_dir/admin.key, and stored (idempotently) in the cluster's Postgres."""
    from metadata.api_keys import new_key
    from metadata.db import make_engine, migrate
    from metadata.security import SecurityRepo

    path = data_dir / _ADMIN_KEY_FILE
    if path.exists():
        key = path.read_text().strip()
    else:
        key = new_key()[0]
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key + "\n")
    engine = make_engine(database_url, pool_size=1)
    try:
        migrate(engine)
        SecurityRepo(engine).create_key(ADMIN, "tierlog dev --auth", key)
    finally:
        engine.dispose()
    return key
