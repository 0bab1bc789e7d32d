"""SQL over a tierlog topic with Spark: its archive in S3, plus what is not tiered yet.

With `./scripts/dev` running in another terminal (and a topic with some records):

    .venv/bin/python examples/spark_query.py greetings
    .venv/bin/python examples/spark_query.py greetings --cold-only   # the Delta table alone

S3 settings come from `tierlog dev`'s `.tierlog/dev.env` (endpoint, bucket, credentials), or
from TIERLOG_S3_* / AWS_* when that file is absent.
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from coldstore.object_store import ObjectStoreConfig
from spark_tables import store_options, tierlog_session


def dev_s3_env(data_dir: Path) -> dict[str, str]:
    """The variables `tierlog dev` writes to {data_dir}/dev.env (KEY=shell-quoted value)."""
    path = data_dir / "dev.env"
    if not path.exists():
        return {}
    pairs = (shlex.split(line)[0].split("=", 1) for line in path.read_text().splitlines() if line)
    return {k: v for k, v in pairs}


def main() -> None:
    ap = argparse.ArgumentParser(description="SQL over a tierlog topic")
    ap.add_argument("topic")
    ap.add_argument("--url", default="http://127.0.0.1:8080", help="any broker")
    ap.add_argument("--data-dir", type=Path, default=Path(".tierlog"))
    ap.add_argument("--cold-only", action="store_true", help="skip records not tiered yet")
    args = ap.parse_args()

    store = ObjectStoreConfig.from_env({**os.environ, **dev_s3_env(args.data_dir)})
    spark = tierlog_session("spark-query", conf={"spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    (
        spark.read.format("tierlog")
        .options(**store_options(store))
        .option("brokerUrl", args.url)
        .option("includeHot", str(not args.cold_only).lower())
        .option("keyFormat", "string")
        .option("valueFormat", "string")
        .load(args.topic)
        .createOrReplaceTempView("records")
    )
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
    main()
