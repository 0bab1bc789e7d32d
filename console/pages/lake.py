"""Lake: each topic's Delta table (GET /topics/{topic}/lake): versions with what each did and
the offsets it added, the live files with sizes and offset ranges, and a Spark snippet to
paste, naming the table's real bucket, prefix and a broker (credentials stay in the
environment, as README's Spark section says)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from console import auth
from console.cluster_api import ClusterApi, ConsoleApiError
from console.page import Page
from console.render import render

LIST_TOPICS = 100  # tables summarized on the list page (one small request each)


def _lake_path(topic: str) -> str:
    return f"/topics/{quote(topic, safe='')}/lake"


def when(ms: int | None) -> str:
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def spark_snippet(table_uri: str, topic: str, broker_url: str) -> str:
    """The tierlog Spark source over this table (and Spark's own Delta reader beside it)."""
    bucket, _, rest = table_uri.removeprefix("s3://").partition("/")
    prefix = rest.removesuffix(f"topics/{topic}").rstrip("/")
    view = topic.replace("-", "_").replace(".", "_")
    view = view if view.isidentifier() else f"topic_{view}"  # "2024-orders" is no name
    return f'''from spark_tables import tierlog_session

spark = tierlog_session()  # local[*], the tierlog source registered
# S3 endpoint and credentials come from TIERLOG_S3_ENDPOINT / AWS_* in the environment.
{view} = (
    spark.read.format("tierlog")
    .option("bucket", "{bucket}")
    .option("prefix", "{prefix}")
    .option("brokerUrl", "{broker_url}")  # any broker
    .option("includeHot", "true")  # also the records not tiered yet
    .load("{topic}")
)
{view}.createOrReplaceTempView("{view}")
spark.sql("""SELECT partition, count(*), min(offset), max(offset), max(timestamp)
             FROM {view} GROUP BY partition ORDER BY partition""").show()

# Spark's own Delta reader (delta-spark + hadoop-aws, see README):
# spark.read.format("delta").load("{table_uri.replace("s3://", "s3a://", 1)}")
'''


async def _summary(api: ClusterApi, key: str | None, topic: str) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = await api.get(_lake_path(topic), key, limit=1)
    except ConsoleApiError as exc:
        if exc.needs_login:
            raise
        return {"topic": topic, "error": exc}
    newest = doc["versions"][0] if doc["versions"] else None
    return {**doc, "error": None, "updated": when(newest["timestamp"]) if newest else ""}


async def lake_list(request: Request) -> Response:
    api: ClusterApi = request.app.state.api
    key = auth.api_key(request)
    topics = [t["name"] for t in (await api.get("/topics", key)).get("topics", [])]
    tables = await asyncio.gather(*(_summary(api, key, t) for t in topics[:LIST_TOPICS]))
    return render(request, "lake/list.html", {"active": "lake", "tables": tables})


async def lake_table(request: Request) -> Response:
    api: ClusterApi = request.app.state.api
    topic = request.path_params["topic"]
    params: dict[str, Any] = {"limit": 50}
    before = request.query_params.get("before", "")
    if before:
        params["before"] = before  # the API checks it (400 INVALID_REQUEST, shown as such)
    doc = await api.get(_lake_path(topic), auth.api_key(request), **params)
    for v in doc["versions"]:
        v["when"] = when(v["timestamp"])
    for f in doc["files"]:
        f["from"], f["to"] = when(f["min_timestamp"]), when(f["max_timestamp"])
    context = {
        "active": "lake",
        "table": doc,
        "snippet": spark_snippet(doc["table_uri"], topic, api.base_url),
    }
    return render(request, "lake/table.html", context)


PAGE = Page(
    name="lake",
    title="Lake",
    path="/lake",
    routes=[
        Route("/lake", lake_list, methods=["GET"]),
        Route("/lake/{topic}", lake_table, methods=["GET"]),
    ],
)
