"""A hosted partition's role on this broker."""

from enum import StrEnum


class Role(StrEnum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"  # no leader is elected: nothing can be written
