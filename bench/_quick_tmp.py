import sys, tempfile, os, time, cProfile, pstats
from pathlib import Path
from bench.client_produce import send_loop, send_table, raw_arrow, PARTITIONS
from tests.integration.brokers import BrokerProcess
from tierlog.devstack.localpg import LocalPostgres
cases = sys.argv[1].split(",")
with tempfile.TemporaryDirectory(prefix="tierlog-quick-") as tmp:
    os.chmod(tmp, 0o755)
    pg = LocalPostgres(Path(tmp) / "pg"); db = pg.start()
    b = BrokerProcess(db, Path(tmp) / "b", 99).start()
    try:
        for i, c in enumerate(cases):
            t = f"q{i}"; b.create_topic(t, partitions=PARTITIONS)
            if c == "raw": r = raw_arrow(b.url, t, 1_000_000)
            elif c == "send": r = send_loop(b.url, t, 200_000, {})
            elif c == "table": r = send_table(b.url, t, 1_000_000)
            elif c == "tableprof":
                pr = cProfile.Profile(); pr.enable(); r = send_table(b.url, t, 1_000_000); pr.disable()
                pstats.Stats(pr).sort_stats("tottime").print_stats(25)
            print(c, {k: (round(v) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    finally:
        b.stop(); pg.stop()
