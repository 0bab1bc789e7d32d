"""Credentials of the client commands: `--api-key` (TIERLOG_API_KEY) and `--ca-file`
(TIERLOG_CA_FILE, for nodes with a self-signed TLS certificate)."""

from __future__ import annotations

import argparse
import os
from typing import Any


def add_credentials(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-key",
        default=os.environ.get("TIERLOG_API_KEY"),
        help="API key (default TIERLOG_API_KEY); make one with `tierlog users create`",
    )
    p.add_argument(
        "--ca-file",
        default=os.environ.get("TIERLOG_CA_FILE"),
        help="CA bundle that signed the nodes' TLS certificates (default: the system's)",
    )


def creds(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for the Python client (Producer, Consumer, Admin, TopicReader)."""
    return {"api_key": args.api_key or "", "verify": args.ca_file or True}
