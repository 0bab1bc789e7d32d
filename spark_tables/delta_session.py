"""The JVM path (docs/design.md §6): the topics' tables are plain Delta tables, so Spark's own Delta
reader reads them too, given delta-spark and hadoop-aws on the classpath.

    spark = delta_session(ObjectStoreConfig.from_env(os.environ))
    spark.read.format("delta").load(s3a_uri(config, "orders"))

`delta_session` configures the builder with configure_spark_with_delta_pip (the delta-spark
jar matching the installed pip package) plus hadoop-aws matching pyspark's Hadoop, and the
s3a connector for the endpoint: path-style addressing, the credentials, plain HTTP when the
endpoint is http://. Spark fetches the jars from Maven Central (or its ivy cache) at start;
`jars_available` says quickly whether that can work here, so callers can fail or skip with
a reason instead of hanging on an unreachable repository. TIERLOG_SPARK_IVY names the ivy
directory (the spark image resolves the jars into one at build time and starts offline).
"""

from __future__ import annotations

import importlib.metadata
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from coldstore.layout import table_key
from coldstore.object_store import ObjectStoreConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAVEN_HOST = "repo1.maven.org"
SCALA = "2.13"


def hadoop_version() -> str:
    """The Hadoop version pyspark bundles (hadoop-aws must match it exactly)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("hadoop-client-api-*.jar"):
        return jar.name[len("hadoop-client-api-") : -len(".jar")]
    raise RuntimeError(f"no hadoop-client-api jar in {jars}")


def packages() -> list[str]:
    """Maven coordinates: delta-spark for this pyspark, and hadoop-aws for its Hadoop."""
    import pyspark

    spark = ".".join(pyspark.__version__.split(".")[:2])
    delta = importlib.metadata.version("delta-spark")
    return [
        f"io.delta:delta-spark_{spark}_{SCALA}:{delta}",
        f"org.apache.hadoop:hadoop-aws:{hadoop_version()}",
    ]


def _ivy_jar(coordinate: str, ivy_home: Path) -> Path:
    group, artifact, version = coordinate.split(":")
    return ivy_home / "jars" / f"{group}_{artifact}-{version}.jar"


def ivy_home() -> str | None:
    """Where Spark keeps resolved jars: TIERLOG_SPARK_IVY, else Spark's default."""
    return os.environ.get("TIERLOG_SPARK_IVY") or None


def jars_available(timeout_s: float = 3.0) -> tuple[bool, str]:
    """(True, where) if the jars are in the local ivy cache or Maven Central answers within
    `timeout_s`; else (False, why)."""
    configured = ivy_home()
    homes = [Path(configured)] if configured else [Path.home() / ".ivy2.5.2", Path.home() / ".ivy2"]
    for home in homes:
        if all(_ivy_jar(c, home).exists() for c in packages()):
            return True, f"ivy cache {home}"
    try:
        with socket.create_connection((MAVEN_HOST, 443), timeout=timeout_s):
            return True, MAVEN_HOST
    except OSError as exc:
        return False, (
            f"delta-spark and hadoop-aws jars ({', '.join(packages())}) are not in the ivy "
            f"cache and {MAVEN_HOST}:443 is unreachable ({exc})"
        )


def s3a_conf(store: ObjectStoreConfig) -> dict[str, str]:
    """spark.hadoop.fs.s3a.* settings for the store's endpoint and credentials."""
    conf = {
        "spark.hadoop.fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.hadoop.fs.s3a.endpoint.region": store.region,
    }
    if store.endpoint_url:
        conf["spark.hadoop.fs.s3a.endpoint"] = store.endpoint_url
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"  # no wildcard DNS locally
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            store.endpoint_url.startswith("https://")
        ).lower()
    if store.access_key_id and store.secret_access_key:
        conf["spark.hadoop.fs.s3a.access.key"] = store.access_key_id
        conf["spark.hadoop.fs.s3a.secret.key"] = store.secret_access_key
        provider = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        if store.session_token:
            conf["spark.hadoop.fs.s3a.session.token"] = store.session_token
            provider = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        conf["spark.hadoop.fs.s3a.aws.credentials.provider"] = provider
    return conf


def s3a_uri(store: ObjectStoreConfig, topic: str) -> str:
    """The topic's Delta table as the JVM's s3a connector names it."""
    return f"s3a://{store.bucket}/{table_key(store, topic)}"


def delta_session(
    store: ObjectStoreConfig | None = None,
    app_name: str = "tierlog-delta",
    master: str = "local[*]",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with Delta Lake and s3a configured for `store` (default: from the
    environment). Needs the jars: see jars_available()."""
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    store = store or ObjectStoreConfig.from_env(os.environ)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.sql.session.timeZone", "UTC")
    )
    if ivy_home():
        builder = builder.config("spark.jars.ivy", ivy_home())
    for k, v in {**s3a_conf(store), **(conf or {})}.items():
        builder = builder.config(k, v)
    # configure_spark_with_delta_pip names delta-spark's artifact; hadoop-aws rides along.
    builder = configure_spark_with_delta_pip(builder, extra_packages=packages()[1:])
    return builder.getOrCreate()
