"""The console's metric history: Prometheus text to series, rates across counter resets,
per-replica gauges counted once per partition, rings bounded to the window."""

from __future__ import annotations

import time

from console.cluster_api import ClusterApi
from console.history import History, Sampler, parse_metrics
from console.pages.overview import partition_health

BROKER_1 = """
# TYPE tierlog_produce_records_total counter
tierlog_produce_records_total{topic="a"} 100.0
tierlog_produce_records_total{topic="b"} 50.0
# TYPE tierlog_partition_tiering_lag_records gauge
tierlog_partition_tiering_lag_records{topic="a",partition="0"} 7.0
# TYPE tierlog_remote_copy_lag_bytes gauge
tierlog_remote_copy_lag_bytes{topic="a",partition="0"} 1000.0
# TYPE tierlog_remote_copy_lag_seconds gauge
tierlog_remote_copy_lag_seconds{topic="a",partition="0"} 12.5
# TYPE tierlog_partitions_led gauge
tierlog_partitions_led 3.0
"""


def _sampler(interval_s: float = 5.0) -> Sampler:
    return Sampler(ClusterApi("http://127.0.0.1:9"), History(3600, interval_s), None)


def test_parse_sums_counters_and_keeps_replica_gauges_per_partition() -> None:
    s = parse_metrics(BROKER_1)
    assert s.counters["tierlog_produce_records_total"] == 150.0
    assert s.gauges["tierlog_partitions_led"] == 3.0
    assert s.per_partition["tierlog_remote_copy_lag_bytes"] == {("a", "0"): 1000.0}


def test_rates_over_brokers_and_a_restarted_broker() -> None:
    sampler = _sampler()
    first = parse_metrics(BROKER_1)
    t0 = time.time() - 10
    sampler._record(t0, {"b1": first, "b2": first})
    assert sampler.history.series("produce_records_per_s") == []  # no rate from one scrape
    later = parse_metrics(BROKER_1.replace("100.0", "200.0"))
    restarted = parse_metrics(BROKER_1.replace("100.0", "10.0").replace("50.0", "0.0"))
    sampler._record(t0 + 10, {"b1": later, "b2": restarted})
    # b1: +100 in 10 s; b2's counters went back (a restart): its 10 count from zero.
    assert sampler.history.series("produce_records_per_s") == [(t0 + 10, 11.0)]


def test_replica_gauges_count_each_partition_once() -> None:
    sampler = _sampler()
    leader = parse_metrics(BROKER_1)
    follower = parse_metrics(BROKER_1.replace("1000.0", "400.0").replace("12.5", "30.0"))
    now = time.time()
    sampler._record(now, {"b1": leader, "b2": follower})
    assert sampler.history.series("tiering_lag_bytes") == [(now, 1000.0)]
    assert sampler.history.series("tiering_lag_seconds") == [(now, 30.0)]
    # A leader-only gauge is summed: each broker reports its own led partitions.
    assert sampler.history.series("tiering_lag_records") == [(now, 14.0)]
    assert sampler.leaderships == {"b1": 3.0, "b2": 3.0}


def test_rings_keep_one_window() -> None:
    history = History(window_s=60, interval_s=10)
    for i in range(100):
        history.add("x", 1000.0 + 10 * i, float(i))
    assert len(history._series["x"]) == 7  # 60 s of 10 s points


def test_partition_health_names_offline_and_under_replicated() -> None:
    topics = [
        {
            "name": "t",
            "partitions": [
                {"partition": 0, "leader": 1, "replicas": [1, 2], "isr": [1, 2]},
                {"partition": 1, "leader": 1, "replicas": [1, 2], "isr": [1]},
                {"partition": 2, "leader": 2, "replicas": [2, 1], "isr": [2, 1]},
                {"partition": 3, "leader": None, "replicas": [2], "isr": []},
            ],
        }
    ]
    troubled, leads = partition_health(topics, alive={1})
    assert [(p["partition"], p["state"]) for p in troubled] == [
        (1, "under-replicated"),
        (2, "offline"),  # its leader is dead
        (3, "offline"),
    ]
    assert leads == {1: 2, 2: 1}
