"""The chaos workload: producers of each kind, concurrent consumers, and a leader-epoch watcher,
each a thread that writes what it saw into the History.

Clients talk to any running broker (brokers forward to the leader), as a client that knows
only a bootstrap list does, and retry what Kafka's clients retry.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import httpx

from http_transport.trust import default_trust
from logformat.partitioner import partition_for_key
from tests.chaos.history import History, Kind, value_of
from tests.integration.cluster import Cluster

TOPIC = "chaos"
# Errors after which Kafka's clients send again: the outcome of the request is unknown or
# the partition is moving (the 409s: a leader epoch older or newer than the broker's).
RETRIABLE_STATUS = frozenset({408, 429, 502, 503, 504})
RETRIABLE_409 = frozenset({"FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"})
IDEMPOTENT_PATIENCE_S = 60.0  # an idempotent batch is retried, unchanged, this long
PLAIN_PATIENCE_S = 20.0  # a plain producer gives a batch up after this (outcome unknown)


def _error_code(r: httpx.Response) -> str:
    try:
        return str(r.json().get("error_code", ""))
    except ValueError:
        return ""


def _retriable(r: httpx.Response) -> bool:
    return r.status_code in RETRIABLE_STATUS or (
        r.status_code == 409 and _error_code(r) in RETRIABLE_409
    )


class ChaosProducer(threading.Thread):
    """One producer of `kind`: batches of 1-4 records of one key, sent one at a time; a batch
    is retried until acknowledged (idempotent: unchanged, with its sequence number) or its
    patience runs out. A batch given up was never acknowledged (History.failed: in the log or
    not, as Kafka allows); an idempotent producer then goes on under a new producer id, as
    a Kafka client bumps its epoch after a delivery timeout."""

    def __init__(
        self,
        cluster: Cluster,
        history: History,
        name: str,
        kind: Kind,
        keys: list[str],
        partitions: int,
        stop: threading.Event,
        seed: int,
        urls: Callable[[], list[str]] | None = None,
    ) -> None:
        """`urls`: the running brokers' addresses as clients reach them (default: their own)."""
        super().__init__(name=name, daemon=True)
        self.cluster, self.history, self.kind, self.keys = cluster, history, kind, keys
        self.partitions, self.stop = partitions, stop
        self.rng = random.Random(seed)
        self.urls = urls or (lambda: [b.url for b in cluster.alive()])
        self.retries = 0
        history.producer(name, kind)

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:  # a crashed client thread must fail the run, not vanish
            self.history.error(f"{self.name} crashed: {exc!r}")

    def _run(self) -> None:
        http = httpx.Client(verify=default_trust(), timeout=12)
        idempotent = self.kind is Kind.IDEMPOTENT_ALL
        acks = "1" if self.kind is Kind.PLAIN_ONE else "all"
        producer_id = self._producer_id(http) if idempotent else None
        sequence: dict[int, int] = defaultdict(int)
        n = 0
        while not self.stop.is_set():
            key = self.rng.choice(self.keys)
            p = partition_for_key(key.encode(), self.partitions)
            values = [value_of(self.name, key, n + i) for i in range(self.rng.randint(1, 4))]
            n += len(values)
            headers = {}
            if producer_id is not None:
                headers = {
                    "X-Tierlog-Producer-Id": str(producer_id),
                    "X-Tierlog-Producer-Epoch": "0",
                    "X-Tierlog-Sequence": str(sequence[p]),
                }
            body = {"records": [{"key": key, "value": v} for v in values]}
            sent = time.monotonic()
            doc, why = self._send(http, acks, body, headers, idempotent)
            if doc is None:
                if why is None:  # refused outright (recorded) or stopped while retrying
                    if idempotent:
                        return  # _send recorded why; the sequence cannot go on past it
                    continue
                for v in values:  # given up: unacknowledged, in the log or not
                    self.history.delivery_failed(self.name, v, sent, why)
                if idempotent:  # its sequence cannot go on past a lost batch: a new id
                    producer_id = self._producer_id(http)
                    sequence.clear()
                continue
            offsets = doc["offsets"]
            for o, v in zip(offsets, values, strict=True):
                if o.get("partition") != p or "offset" not in o:
                    self.history.error(f"{self.name}: odd produce answer {doc}")
                    return
                self.history.ack(self.name, p, o["offset"], key, v)
            sequence[p] += len(values)

    def _producer_id(self, http: httpx.Client) -> int:
        while True:
            try:
                r = http.post(f"{self._broker()}/producers")
                if r.status_code == 201:
                    return int(r.json()["producer_id"])
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

    def _broker(self) -> str:
        alive = self.urls()
        return self.rng.choice(alive) if alive else next(iter(self.cluster.brokers.values())).url

    def _send(
        self,
        http: httpx.Client,
        acks: str,
        body: dict[str, Any],
        headers: dict[str, str],
        idempotent: bool,
    ) -> tuple[dict[str, Any] | None, str | None]:
        """The answer, else None and why it was given up after its patience (None: refused
        outright, recorded as an error, or the run stopped while a plain batch retried)."""
        patience = IDEMPOTENT_PATIENCE_S if idempotent else PLAIN_PATIENCE_S
        deadline = time.monotonic() + patience
        last = ""
        while time.monotonic() < deadline and (idempotent or not self.stop.is_set()):
            try:
                r = http.post(
                    f"{self._broker()}/topics/{TOPIC}/records",
                    params={"acks": acks},
                    json=body,
                    headers=headers,
                )
            except httpx.HTTPError as exc:
                last = repr(exc)
            else:
                if r.status_code == 200:
                    return dict(r.json()), None
                if not _retriable(r):
                    # OUT_OF_ORDER_SEQUENCE_NUMBER for one: unchanged retries never leave a gap.
                    self.history.error(f"{self.name}: {r.status_code} {r.text[:300]}")
                    return None, None
                last = f"{r.status_code} {r.text[:200]}"
            self.retries += 1
            time.sleep(0.1)
        if time.monotonic() < deadline:
            return None, None  # stopped: a plain batch's outcome is simply unknown
        return None, f"unacknowledged after {patience:.0f}s: {last}"


class ChaosConsumer(threading.Thread):
    """Reads every partition from the start, in order, through any running broker."""

    def __init__(
        self,
        cluster: Cluster,
        history: History,
        name: str,
        partitions: int,
        stop: threading.Event,
        urls: Callable[[], list[str]] | None = None,
    ) -> None:
        """`urls`: where to read (default: the running brokers; a fetch node's, say)."""
        super().__init__(name=name, daemon=True)
        self.cluster, self.history, self.partitions, self.stop = cluster, history, partitions, stop
        self.next = dict.fromkeys(range(partitions), 0)
        self.rng = random.Random(name)
        self.urls = urls or (lambda: [b.url for b in cluster.alive()])

    def run(self) -> None:
        try:
            http = httpx.Client(verify=default_trust(), timeout=12)
            while not self.stop.is_set():
                if not any([self._poll(http, p) for p in range(self.partitions)]):
                    time.sleep(0.1)
        except Exception as exc:
            self.history.error(f"{self.name} crashed: {exc!r}")

    def _poll(self, http: httpx.Client, p: int) -> bool:
        alive = self.urls()
        if not alive:
            return False
        url = self.rng.choice(alive)
        try:
            r = http.get(
                f"{url}/topics/{TOPIC}/partitions/{p}/records",
                params={"offset": self.next[p], "max_records": 200},
            )
        except httpx.HTTPError:
            return False
        if r.status_code != 200:
            if not _retriable(r):
                self.history.error(
                    f"{self.name} fetch {p}@{self.next[p]}: {r.status_code} {r.text[:300]}"
                )
            return False
        doc = r.json()
        for rec in doc["records"]:
            self.history.read(self.name, p, rec["offset"], rec.get("key"), rec.get("value"))
        moved = bool(doc["next_offset"] > self.next[p])
        self.next[p] = max(self.next[p], doc["next_offset"])
        return moved


class EpochWatcher(threading.Thread):
    """Describes the topic every few hundred ms: the leader epochs the checker needs to tell
    an allowed acks=1 loss (a failover came after the ack) from a real one."""

    def __init__(self, cluster: Cluster, history: History, stop: threading.Event) -> None:
        super().__init__(name="epochs", daemon=True)
        self.cluster, self.history, self.stop = cluster, history, stop

    def run(self) -> None:
        http = httpx.Client(verify=default_trust(), timeout=3)
        while not self.stop.wait(0.25):
            alive = self.cluster.alive()
            if not alive:
                continue
            try:
                r = http.get(f"{random.choice(alive).url}/topics/{TOPIC}")
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                for part in r.json()["partitions"]:
                    self.history.epoch(part["partition"], part["leader_epoch"])
