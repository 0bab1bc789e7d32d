"""PYTHONSTARTUP of the spark image: `spark` with the tierlog source and Delta Lake, both
pointed at the compose stack's S3 (TIERLOG_S3_* / AWS_*) and brokers (TIERLOG_BROKER_URL)."""

import os

from coldstore.object_store import ObjectStoreConfig
from spark_tables import register
from spark_tables.delta_session import delta_session, s3a_uri

store = ObjectStoreConfig.from_env(os.environ)
spark = delta_session(store, app_name="tierlog-shell")
register(spark)
print(
    "spark is ready:\n"
    '  spark.read.format("tierlog").load("orders")                     # the Python source\n'
    '  spark.read.format("tierlog").option("includeHot", "true").load("orders")\n'
    f'  spark.read.format("delta").load("{s3a_uri(store, "orders")}")   # the JVM Delta reader'
)
