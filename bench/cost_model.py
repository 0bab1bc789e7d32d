"""Published prices and the two cost models bench/cost.py compares (dollars, per decimal GB).

Prices are AWS's published list prices for us-east-1 (S3 Standard, first 50 TB tier; EBS gp3;
data transfer between Availability Zones), and every one can be changed on the command line.
Both models keep three replicas of the hot window on broker disks with replication across
three zones, so that cost appears on both sides; what differs is where history lives: on the
brokers' disks (three copies, provisioned with headroom) or once in S3 as Parquet, paid per
request. Client traffic between zones (producers and consumers in another zone than the node
they talk to) is the same for both and left out of both.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9


@dataclass(frozen=True)
class Prices:
    s3_gb_month: float = 0.023  # S3 Standard storage, first 50 TB / month
    s3_put_per_1k: float = 0.005  # PUT, COPY, POST, LIST requests
    s3_get_per_1k: float = 0.0004  # GET, SELECT and all other requests (DELETE is free)
    disk_gb_month: float = 0.08  # EBS gp3 storage (baseline IOPS and throughput included)
    inter_az_gb: float = 0.01  # each direction, so a GB crossing zones costs twice this
    replicas: int = 3
    disk_fill: float = 0.5  # broker disks are provisioned so that they are at most this full

    def lines(self) -> list[str]:
        return [
            f"S3 Standard ${self.s3_gb_month}/GB-month; ${self.s3_put_per_1k} per 1,000 "
            f"PUT/COPY/POST/LIST; ${self.s3_get_per_1k} per 1,000 GET/HEAD; DELETE free; "
            "transfer S3 -> compute in the same region free",
            f"EBS gp3 ${self.disk_gb_month}/GB-month; between zones ${self.inter_az_gb}/GB each "
            f"direction; {self.replicas} replicas in {self.replicas} zones; disks provisioned "
            f"{self.disk_fill:.0%} full",
            "(AWS list prices, us-east-1; change them with --s3-gb-month, --s3-put-per-1k, "
            "--s3-get-per-1k, --disk-gb-month, --inter-az-gb)",
        ]


@dataclass(frozen=True)
class Requests:
    """S3 requests by price class, and bytes each way, of one phase."""

    put: int = 0
    get: int = 0
    delete: int = 0
    to_s3: int = 0
    from_s3: int = 0

    @classmethod
    def between(cls, before: dict[str, int], after: dict[str, int]) -> Requests:
        def d(name: str) -> int:
            return after.get(name, 0) - before.get(name, 0)

        return cls(d("put"), d("get"), d("delete"), d("bytes_to_s3"), d("bytes_from_s3"))

    def dollars(self, p: Prices) -> float:
        return self.put / 1000 * p.s3_put_per_1k + self.get / 1000 * p.s3_get_per_1k

    def __str__(self) -> str:
        return (
            f"{self.put:,} PUT-class, {self.get:,} GET-class, {self.delete:,} DELETE; "
            f"{self.to_s3 / 1e6:,.1f} MB to S3, {self.from_s3 / 1e6:,.1f} MB from S3"
        )


@dataclass(frozen=True)
class Measured:
    raw_bytes: int  # key + value bytes of the records ingested (and replayed)
    table_bytes: int  # the topic's Delta table in S3 after compaction: data files + log
    tiering: Requests
    compaction: Requests
    replay: Requests


def replication_per_gb(p: Prices) -> float:
    """Copying one GB from the leader to its followers in the other zones."""
    return (p.replicas - 1) * 2 * p.inter_az_gb


def tierlog_row(m: Measured, p: Prices) -> tuple[float, float, float]:
    """($ per GB ingested, $ per GB-month of history stored, $ per GB replayed)."""
    gb = m.raw_bytes / GB
    ingest = replication_per_gb(p) + (m.tiering.dollars(p) + m.compaction.dollars(p)) / gb
    stored = m.table_bytes / m.raw_bytes * p.s3_gb_month
    return ingest, stored, m.replay.dollars(p) / gb


def broker_disk_row(p: Prices) -> tuple[float, float, float]:
    """The same three figures with all history on three replicas' disks (records stored as they
    arrive, uncompressed; read back from local disk at no per-request price)."""
    return replication_per_gb(p), p.replicas * p.disk_gb_month / p.disk_fill, 0.0
