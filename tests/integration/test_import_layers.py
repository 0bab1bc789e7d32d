"""The layout's rules, checked: import-linter's contracts (pyproject.toml), what each role
loads when it starts, and no import cycle between modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "logformat",
    "failures",
    "metadata",
    "cluster",
    "coldstore",
    "groups",
    "ingest",
    "tiering",
    "fetch",
    "compaction",
    "spark_tables",
    "tierlog",
)
# The stateless roles: what `tierlog fetch`, `tierlog tiering` and `tierlog compaction` import.
STATELESS_ROLES = (
    "fetch.server",
    "tiering.worker",
    "compaction.worker",
    "tierlog.cli.worker_roles",
)


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("role", STATELESS_ROLES)
def test_stateless_roles_load_nothing_of_the_broker(role: str) -> None:
    """A fetch node or a worker loads no module of `ingest` and not RocksDB: the broker's
    storage stays out of the processes that do not host partitions."""
    probe = (
        f"import importlib, json, sys; importlib.import_module({role!r}); "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('ingest', 'rocksdict'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [], f"{role} loads {out.stdout}"


# What a broker imports to start (tierlog/cli/node_roles.py, tierlog/cli/extensions.py), and
# what each of those imports only where it is used: the Kafka listener's codecs when a Kafka
# listen flag is set, Alembic when a process migrates, boto3 when an S3 store is made, a
# schema type's library when a schema of that type is parsed (schemaformat/kinds.py), scramp
# when SCRAM credentials are made or checked.
BROKER_MODULES = (
    "tierlog.cli.main",
    "ingest.server",
    "tierlog.cli.extensions",
    "fetch.lake",
    "registry.mount",  # imported, and its kinds() called, as the broker starts
    "cluster.schema_lookup",
)
LOADED_WHERE_USED = (
    "kio",
    "ingest.kafka",
    "alembic",
    "boto3",
    "jsonschema",
    "google.protobuf",
    "grpc_tools",
    "avro",
    "scramp",
)


def test_a_brokers_modules_load_only_what_their_start_uses() -> None:
    probe = (
        "import importlib, json, sys\n"
        f"for m in {BROKER_MODULES!r}: importlib.import_module(m)\n"
        "from schemaformat.kinds import kinds\n"
        "assert set(kinds()) == {'AVRO', 'JSON', 'PROTOBUF'}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({LOADED_WHERE_USED!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [], f"a broker's modules load {out.stdout}"


# How each way of starting `tierlog` enters the command line: `python -m tierlog` (servers and
# tests), and the `tierlog` command pip installs (console_scripts: what users type).
STARTS = {
    "python -m tierlog": "runpy.run_module('tierlog', run_name='__main__')",
    "the tierlog command": (
        "importlib.metadata.entry_points(group='console_scripts', name='tierlog')[0].load()()"
    ),
}


@pytest.mark.parametrize("start", STARTS)
def test_a_tierlog_process_imports_no_dev_only_package(start: str) -> None:
    """Every server and CLI process imports what a production install has: pyarrow's first
    pa.array() of a Python object no longer brings pandas in; nor what it does not use:
    httpx's own command line client (with pygments)."""
    probe = (
        "import importlib.metadata, json, runpy, sys\n"
        "sys.argv = ['tierlog', '--version']\n"
        "try:\n"
        f"    {STARTS[start]}\n"
        "except SystemExit:\n"
        "    pass\n"
        "import pyarrow as pa\n"
        "pa.array(range(3))\n"
        "unused = ('pandas', 'trio', 'hypothesis', 'httpx._main', 'pygments')\n"
        "print(json.dumps(sorted(m for m in unused if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tierlog "), out.stdout  # --version: the command line ran
    assert json.loads(out.stdout.splitlines()[-1]) == [], out.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_between_modules() -> None:
    """Counting every import, those behind TYPE_CHECKING and inside functions too: a cycle
    means two modules are one job, or one of them holds what belongs below both."""
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    assert _cycles(graph) == []
