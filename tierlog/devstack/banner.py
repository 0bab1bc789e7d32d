"""The block `tierlog dev` prints once everything is up: one line per service, so that a
newcomer sees at a glance where each part is, and one more line per part is all a new
service needs (`banner_lines` takes them in order)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tierlog.devstack.dev_env import ADMIN
from tierlog.devstack.supervisor import GIVE_UP_AFTER, RESTART_WITHIN_S

TITLE = "tierlog dev is up"

# `tierlog dev`'s defaults for new topics: a segment seals after 5 s or 1 MiB, so the tiering
# worker copies a dev run's records to S3 within seconds instead of after Kafka's 7 days or
# 1 GiB. `tierlog dev --kafka-defaults` leaves Kafka's.
DEV_TOPIC_DEFAULTS: tuple[tuple[str, str], ...] = (
    ("segment.bytes", "1048576"),
    ("segment.ms", "5000"),
)


def describe_defaults(defaults: Sequence[tuple[str, str]]) -> str:
    """`segment.bytes=1048576, segment.ms=5000`, as the banner says it."""
    return ", ".join(f"{name}={value}" for name, value in defaults)


class DevUrls:
    """Where dev's parts listen."""

    def __init__(
        self, brokers: Sequence[str], kafka: Sequence[str], fetch: str, console: str
    ) -> None:
        self.brokers, self.kafka, self.fetch, self.console = brokers, kafka, fetch, console


def banner_lines(
    env: Mapping[str, str],
    urls: DevUrls,
    workers: Sequence[str],
    topic_defaults: str | None,
    env_path: Path,
) -> list[str]:
    """The banner's lines after its title, one per service; `env` is what dev.env holds."""
    key = env.get("TIERLOG_API_KEY")
    security = (
        f"API keys and ACLs on; admin key ({ADMIN}, a super user): {key}"
        if key
        else "open, no auth: loopback only"
    )
    new_topics = (
        f"new topics: {topic_defaults}, so records reach S3 within seconds "
        "(--kafka-defaults: Kafka's 1 GiB and 7 days)"
        if topic_defaults
        else "new topics: Kafka's defaults (segment.bytes 1 GiB, segment.ms 7 days)"
    )
    return [
        f"web console at {urls.console}",
        f"brokers at {', '.join(urls.brokers)} ({security})",
        f"Kafka clients: {','.join(urls.kafka)}; librdkafka clients (kcat) take "
        "-X partitioner=murmur2_random to place keys as HTTP and Java clients do",
        *(
            [f"Schema Registry at {env['TIERLOG_SCHEMA_REGISTRY_URL']} (every broker serves it)"]
            if "TIERLOG_SCHEMA_REGISTRY_URL" in env
            else []
        ),
        f"fetch node at {urls.fetch}",
        f"S3 at {env['TIERLOG_S3_ENDPOINT']} bucket {env['TIERLOG_S3_BUCKET']}",
        f"workers: {', '.join(workers)} (a child that dies is restarted within "
        f"{RESTART_WITHIN_S} s; dev gives up after {GIVE_UP_AFTER} fast failures in a row)",
        new_topics,
        f"your shell (TIERLOG_URL and the rest): set -a; . {env_path}; set +a",
        f"data in {env_path.parent}; Ctrl-C stops everything",
    ]


def render(lines: Sequence[str]) -> str:
    """The title and its lines indented under it, between rules, so the block stands apart
    from the log lines around it."""
    rule = "─" * min(100, max(len(TITLE), *(len(line) + 2 for line in lines)))
    return "\n".join(["", rule, TITLE, *(f"  {line}" for line in lines), rule, ""])
