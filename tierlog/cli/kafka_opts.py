"""Flags of the Kafka listeners' connections and of failed-login throttling (docs/limits.md,
"Kafka listener: connections"; docs/security.md). Every one has a TIERLOG_* variable too."""

from __future__ import annotations

import argparse
import os
from typing import Any


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(f"TIERLOG_{name}", str(default)) or default)


def _int_flag(p: argparse.ArgumentParser, flag: str, default: int, help_text: str) -> None:
    env = flag.removeprefix("--").replace("-", "_").upper()
    p.add_argument(flag, type=int, default=_env_int(env, default), help=help_text)


def add_kafka_listener_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kafka-sasl-ssl-listen",
        default=os.environ.get("TIERLOG_KAFKA_SASL_SSL_LISTEN"),
        help="HOST:PORT of a SASL_SSL Kafka listener (TLS with --tls-cert/--tls-key, then "
        "SASL PLAIN or SCRAM)",
    )
    p.add_argument(
        "--kafka-ssl-listen",
        default=os.environ.get("TIERLOG_KAFKA_SSL_LISTEN"),
        help="HOST:PORT of an SSL Kafka listener (TLS only: clients are User:ANONYMOUS to "
        "the ACLs)",
    )
    _int_flag(
        p,
        "--kafka-preauth-max-frame-bytes",
        512 * 1024,
        "largest Kafka request frame before SASL authentication (Kafka: 512 KiB); larger "
        "closes the connection",
    )
    _int_flag(
        p,
        "--kafka-auth-timeout-ms",
        10_000,
        "a Kafka connection (TLS handshake included) must authenticate within this, else it "
        "is closed",
    )
    _int_flag(
        p,
        "--kafka-max-preauth-connections",
        1024,
        "Kafka connections not yet authenticated, broker-wide; more are refused",
    )
    _int_flag(
        p,
        "--kafka-preauth-inflight-bytes",
        16 * 1024 * 1024,
        "request bytes in flight before authentication (apart from --max-inflight-bytes)",
    )


def add_failed_auth_flags(p: argparse.ArgumentParser) -> None:
    _int_flag(
        p,
        "--failed-auth-free",
        3,
        "failed logins per address or key id (within --failed-auth-window-ms) before that "
        "source's attempts take turns",
    )
    _int_flag(
        p,
        "--failed-auth-delay-ms",
        1000,
        "once a source has failed too often: one attempt per this (Kafka's "
        "connection.failed.authentication.delay.ms is one model)",
    )
    _int_flag(p, "--failed-auth-window-ms", 60_000, "how long a failed login counts")
    _int_flag(
        p,
        "--failed-auth-max-wait-ms",
        5000,
        "an attempt whose turn is further off is refused at once (HTTP 429 + Retry-After)",
    )


def kafka_conn_config(args: argparse.Namespace) -> dict[str, Any]:
    """The BrokerConfig fields of the Kafka connection flags."""
    from cluster.http.server import parse_listen
    from ingest.broker_config import KafkaConnSettings

    def listen(raw: str | None) -> tuple[str, int] | None:
        return parse_listen(raw) if raw else None

    return {
        "kafka_sasl_ssl_listen": listen(args.kafka_sasl_ssl_listen),
        "kafka_ssl_listen": listen(args.kafka_ssl_listen),
        "kafka_conn": KafkaConnSettings(
            preauth_max_frame_bytes=args.kafka_preauth_max_frame_bytes,
            auth_timeout_ms=args.kafka_auth_timeout_ms,
            max_preauth_connections=args.kafka_max_preauth_connections,
            preauth_inflight_bytes=args.kafka_preauth_inflight_bytes,
        ),
    }


def throttle_settings(args: argparse.Namespace) -> dict[str, int]:
    """The ThrottleSettings fields (cluster/auth_throttle.py) of the failed-auth flags."""
    return {
        "free": args.failed_auth_free,
        "delay_ms": args.failed_auth_delay_ms,
        "window_ms": args.failed_auth_window_ms,
        "max_wait_ms": args.failed_auth_max_wait_ms,
    }
