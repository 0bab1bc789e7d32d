"""The closed loop many applications run: send 1,000 records, wait for all of them, repeat.

    .venv/bin/python -m bench.client_closed_loop [--processes 4] [--seconds 10]
    .venv/bin/python -m bench.client_closed_loop --smoke     # 2 processes, 0.5 s (the tests)

Starts its own Postgres and one broker (and, when Debian's `redis-server` and redis-py are
installed, a Redis server: the baseline). --processes processes each run, for --seconds:
1,000 `Producer.send()` calls (4-partition topic, keys, ~100 B JSON values, the Producer's
defaults: acks=all, idempotence on, linger_ms 5), then `future.result()` on every one of them,
and again. The baseline does the same with redis-py: a pipeline of 1,000 XADDs to one stream,
`execute()`, and again (Redis's default configuration). Prints records/s over all processes
and the p50/p99 time of one round of 1,000, and checks that the broker's log (and the
stream) holds exactly the records acknowledged.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.client_produce import PARTITIONS, log_end, records
from bench.servers import bench_postgres
from tests.integration.brokers import BrokerProcess

ROUND = 1000
Result = tuple[int, list[float]]  # records acknowledged, seconds per round
Measured = tuple[int, list[float], float]  # records, every round's seconds, records/s


def tierlog_worker(url: str, topic: str, seconds: float, start_at: float) -> Result:
    from tierlog import Producer

    vals, keys = records(ROUND)
    rounds: list[float] = []
    with Producer(url) as producer:
        producer.send(topic, b"warm-up", key=b"w").result(30)
        time.sleep(max(0.0, start_at - time.time()))
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            futures = [producer.send(topic, v, key=k) for k, v in zip(keys, vals, strict=True)]
            for f in futures:
                f.result(60)
            rounds.append(time.perf_counter() - t0)
    return len(rounds) * ROUND, rounds


def redis_worker(port: int, stream: str, seconds: float, start_at: float) -> Result:
    import redis

    vals, keys = records(ROUND)
    r = redis.Redis(port=port)
    rounds: list[float] = []
    time.sleep(max(0.0, start_at - time.time()))
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        pipe = r.pipeline(transaction=False)
        for k, v in zip(keys, vals, strict=True):
            pipe.xadd(stream, {"key": k, "value": v})
        pipe.execute()
        rounds.append(time.perf_counter() - t0)
    r.close()
    return len(rounds) * ROUND, rounds


def run_processes(target: Any, first_arg: Any, name: str, args: argparse.Namespace) -> Measured:
    """--processes runs of `target`, started together; records/s is each process's records
    over the time its own rounds took, summed."""
    ctx = mp.get_context("spawn")
    start_at = time.time() + 3.0  # after every process has imported and connected
    with ctx.Pool(args.processes) as pool:
        jobs = [
            pool.apply_async(target, (first_arg, name, args.seconds, start_at))
            for _ in range(args.processes)
        ]
        results = [j.get(args.seconds + 120) for j in jobs]
    rate = sum(n / sum(rounds) for n, rounds in results if rounds)
    return sum(n for n, _ in results), [s for _, rounds in results for s in rounds], rate


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_case(args: argparse.Namespace, tmp: Path) -> Measured | None:
    if shutil.which("redis-server") is None:
        return None
    try:
        import redis
    except ImportError:
        return None
    port = _free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp)],
        stdout=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.1)
        measured = run_processes(redis_worker, port, "bench", args)
        if (got := client.xlen("bench")) != measured[0]:
            raise SystemExit(f"redis: the stream holds {got} entries, {measured[0]} acked")
        client.close()
        return measured
    finally:
        proc.terminate()
        proc.wait(10)


def _pct(rounds: list[float], q: float) -> float:
    s = sorted(rounds)
    return s[min(len(s) - 1, int(q * len(s)))] * 1000 if s else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--smoke", action="store_true", help="2 processes, 0.5 s")
    args = parser.parse_args()
    if args.smoke:
        args.processes, args.seconds = 2, 0.5
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)
        pg = bench_postgres(tmp / "pg", fast=args.smoke)
        db = pg.start()
        try:
            broker = BrokerProcess(db, tmp / "broker").start()
            try:
                broker.create_topic("loop", partitions=PARTITIONS)
                ours = run_processes(tierlog_worker, broker.url, "loop", args)
                # + one warm-up record per process
                if (got := log_end(broker.url, "loop")) != ours[0] + args.processes:
                    raise SystemExit(f"tierlog: the log holds {got} records, {ours[0]} acked")
            finally:
                broker.stop()
        finally:
            pg.stop()
        base = redis_case(args, tmp)
    print(
        f"tierlog closed-loop benchmark: {args.processes} processes x {args.seconds:g} s, "
        f"rounds of {ROUND} records (~100 B JSON values with keys) sent then awaited; 1 broker, "
        f"{PARTITIONS} partitions, Producer defaults (acks=all, idempotence, linger_ms 5); "
        f"{os.cpu_count()} cores shared by servers and clients"
    )
    print(f"\n{'case':<44} {'records/s':>10} {'round p50 ms':>13} {'p99 ms':>8} {'vs Redis':>9}")
    rows = [("tierlog Producer.send() x1000, then wait", ours)]
    if base is not None:
        rows.insert(0, ("baseline: Redis XADD pipeline x1000", base))
    else:
        print("(no baseline: install Debian's redis-server and redis-py for it)")
    for case, (_n, rounds, rate) in rows:
        vs = f"{rate / base[2]:>9.0%}" if base is not None else f"{'-':>9}"
        print(
            f"{case:<44} {rate:>10,.0f} {_pct(rounds, 0.5):>13.1f} {_pct(rounds, 0.99):>8.1f} {vs}"
        )
    print(
        "\nchecked: the broker's log (and the Redis stream) holds exactly the records acknowledged"
    )


if __name__ == "__main__":
    main()
