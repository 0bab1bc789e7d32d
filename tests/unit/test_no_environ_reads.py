"""No library or server module reads the environment: only the composition root (tierlog/cli,
tierlog/devstack, and tierlog/startup.py where every process starts) hands it to the roles'
settings tables (cluster/settings_table.py), and libraries take the typed config objects built
from them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "logformat",
    "metadata",
    "cluster",
    "coldstore",
    "groups",
    "ingest",
    "tiering",
    "fetch",
    "compaction",
    "spark_tables",
    "console",
    "registry",
    "schemaformat",
    "tierlog",
)
COMPOSITION_ROOT = ("tierlog/cli/", "tierlog/devstack/", "tierlog/startup.py")
# Entry points a user's own program or Spark calls, with no composition root of ours above
# them: they read the environment the way boto3 reads AWS_*.
ENTRY_POINTS = {
    "tierlog/client/http.py": "the Python client's TIERLOG_API_KEY default for user programs",
    "spark_tables/source.py": "the data source class Spark instantiates (TIERLOG_S3_* options)",
    "spark_tables/delta_session.py": "a SparkSession helper for user programs and notebooks",
    "spark_tables/session.py": "the same: sets PYSPARK_PYTHON before Spark starts its workers",
}


_NAMES = ("environ", "getenv", "environb")


def _reads_environment(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _NAMES:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            lines += [node.lineno for a in node.names if a.name in _NAMES]
    return lines


def test_only_the_composition_root_reads_the_environment() -> None:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(COMPOSITION_ROOT) or rel in ENTRY_POINTS:
                continue
            found += [f"{rel}:{n}" for n in _reads_environment(ast.parse(path.read_text()))]
    assert not found, "libraries read the environment (take a config object instead):\n" + (
        "\n".join(found)
    )


def test_the_check_sees_each_way_of_reading_it() -> None:
    for source in (
        "import os\nos.environ.get('X')",
        "import os\nos.getenv('X')",
        "from os import environ",
        "import os\nenv = os.environ",
    ):
        assert _reads_environment(ast.parse(source)), source
    assert not _reads_environment(ast.parse("import os\nos.path.join('a')"))


def test_the_entry_points_allowed_still_exist() -> None:
    for rel in ENTRY_POINTS:
        assert (ROOT / rel).is_file(), rel
