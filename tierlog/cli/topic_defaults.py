"""`tierlog broker --topic-default NAME=VALUE`: the configs new topics get unless their
creator sets them (Kafka's broker-level defaults such as log.segment.bytes and log.roll.ms;
`tierlog dev` sets small segments: tierlog/devstack/banner.py)."""

from __future__ import annotations

from collections.abc import Sequence

from logformat.errors import ErrorCode, TierlogError


def parse_topic_defaults(
    flags: Sequence[str] | None, env: str | None
) -> tuple[tuple[str, str], ...]:
    """NAME=VALUE pairs from the flags, else from TIERLOG_TOPIC_DEFAULTS (comma-separated),
    each checked as a topic config; INVALID_CONFIG naming the bad one."""
    from metadata.configs import validate_configs

    items = list(flags) if flags else [i for i in (env or "").split(",") if i.strip()]
    pairs: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise TierlogError(ErrorCode.INVALID_CONFIG, f"expected NAME=VALUE, got {item!r}")
        pairs[name.strip()] = value.strip()
    return tuple(validate_configs(pairs).items())
