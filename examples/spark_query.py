"""SQL over a tierlog topic with Spark: its archive in S3, plus what is not tiered yet.

With `./scripts/dev` running in another terminal (and a topic with some records):

    .venv/bin/python examples/spark_query.py greetings
    .venv/bin/python examples/spark_query.py greetings --cold-only   # the Delta table alone

Everything it needs comes from `tierlog dev`'s `.tierlog/dev.env` (`--data-dir` names
another): the broker's URL (TIERLOG_URL, so a dev on another --port is found), the API key of
`tierlog dev --auth`, and the S3 endpoint, bucket and credentials. Without that file the same
variables are read from the environment; with no S3 endpoint or AWS credentials at all it
stops at once and says so.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from coldstore.object_store import ObjectStoreConfig

DEFAULT_URL = "http://127.0.0.1:8080"


def dev_env(data_dir: Path) -> dict[str, str]:
    """The variables `tierlog dev` writes to {data_dir}/dev.env (KEY=shell-quoted value)."""
    path = data_dir / "dev.env"
    if not path.exists():
        return {}
    pairs = (shlex.split(line)[0].split("=", 1) for line in path.read_text().splitlines() if line)
    return {k: v for k, v in pairs}


def settings(argv: list[str] | None, environ: Mapping[str, str]) -> argparse.Namespace:
    """The command line, with dev.env's (else the environment's) URL, key and S3 settings;
    exits with a one-line reason when there is no S3 to read."""
    ap = argparse.ArgumentParser(description="SQL over a tierlog topic")
    ap.add_argument("topic")
    ap.add_argument("--url", default=None, help="any broker (default: TIERLOG_URL, else 8080)")
    ap.add_argument("--data-dir", type=Path, default=Path(".tierlog"), help="dev's data dir")
    ap.add_argument("--cold-only", action="store_true", help="skip records not tiered yet")
    args = ap.parse_args(argv)
    env = {**environ, **dev_env(args.data_dir)}
    args.url = args.url or env.get("TIERLOG_URL") or DEFAULT_URL
    args.api_key = env.get("TIERLOG_API_KEY") or ""
    has_credentials = env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_PROFILE")
    if not env.get("TIERLOG_S3_ENDPOINT") and not has_credentials:
        ap.exit(
            2,
            f"spark_query.py: no S3 settings: no {args.data_dir / 'dev.env'} (is ./scripts/dev "
            "running here? --data-dir names its data dir) and no TIERLOG_S3_ENDPOINT or AWS "
            "credentials in the environment\n",
        )
    args.store = ObjectStoreConfig.from_env(env)
    return args


def main(argv: list[str] | None = None) -> None:
    args = settings(argv, os.environ)
    from spark_tables import store_options, tierlog_session  # Spark starts only when needed

    spark = tierlog_session("spark-query", conf={"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    reader = (
        spark.read.format("tierlog")
        .options(**store_options(args.store))
        .option("brokerUrl", args.url)
        .option("includeHot", str(not args.cold_only).lower())
        .option("keyFormat", "string")
        .option("valueFormat", "string")
    )
    if args.api_key:
        reader = reader.option("apiKey", args.api_key)
    reader.load(args.topic).createOrReplaceTempView("records")
    spark.sql(
        """SELECT partition, count(*) AS records, min(offset) AS first, max(offset) AS last,
                  min(timestamp) AS oldest, max(timestamp) AS newest
           FROM records GROUP BY partition ORDER BY partition"""
    ).show(truncate=False)
    spark.sql(
        "SELECT partition, offset, timestamp, key, substr(value, 1, 60) AS value FROM records "
        "ORDER BY timestamp DESC LIMIT 10"
    ).show(truncate=False)
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
