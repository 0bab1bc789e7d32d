"""Client commands: `tierlog topics`, `produce`, `consume`, `groups`, `replay`, each in its
own module (topics_cmd, produce_cmd, consume_cmd, groups_cmd, replay_cmd, search_cmd,
lake_cmd); they use the Python client (tierlog.client), search its streamed answer directly;
`schemas` (schemas_cmd) the Schema Registry's REST API."""

from __future__ import annotations

import argparse

from tierlog.cli.consume_cmd import add_consume
from tierlog.cli.credentials import add_credentials
from tierlog.cli.erase_cmd import add_erase
from tierlog.cli.groups_cmd import add_groups
from tierlog.cli.lake_cmd import add_lake
from tierlog.cli.produce_cmd import add_produce
from tierlog.cli.replay_cmd import add_replay
from tierlog.cli.schemas_cmd import add_schemas
from tierlog.cli.search_cmd import add_search
from tierlog.cli.topics_cmd import add_topics


def add_client_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], default_url: str
) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=default_url, help=f"any node (default {default_url})")
    add_credentials(common)
    add_topics(sub, common)
    add_produce(sub, common)
    add_consume(sub, common)
    add_groups(sub, common)
    add_replay(sub, common)
    add_search(sub, common)
    add_schemas(sub, common)
    add_lake(sub, common)
    add_erase(sub, common)
