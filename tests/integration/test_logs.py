"""Log lines of real broker processes (issue 18 item 6): JSON when stderr is a file, readable
text on a terminal, the role and node on every line, no ANSI codes inside JSON, fields as
fields, and a brand-new topic's log reported as created, not as an unclean rebuild."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import orjson

from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port
from tierlog.devstack.parent_watch import child_env


def test_json_lines_name_the_node_and_keep_fields(fresh_db: str, tmp_path: Path) -> None:
    broker = BrokerProcess(fresh_db, tmp_path / "data", 7).start()
    try:
        broker.create_topic("fresh")
        assert broker.http.get("/healthz").status_code == 200  # an access line, if any
    finally:
        broker.stop()
    text = broker.log_path.read_text()
    assert "\x1b" not in text  # no ANSI codes (uvicorn's color_message)
    lines = [orjson.loads(line) for line in text.splitlines() if line.strip()]
    assert lines and all(line["role"] == "broker" and line["node"] == "7" for line in lines)
    assert not any("color_message" in line for line in lines)
    created = [line for line in lines if line["msg"] == "log created"]
    assert created and created[0]["topic"] == "fresh" and created[0]["partition"] == 0
    assert not any("full_rebuild" in line["msg"] or "topic=" in line["msg"] for line in lines)


def test_a_terminal_gets_readable_lines(fresh_db: str, tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, "-m", "tierlog", "broker", "--insecure", "--broker-id", "3"]
    argv += ["--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")]
    env = child_env(dict(os.environ, TIERLOG_DATABASE_URL=fresh_db))
    env.pop("TIERLOG_LOG_FORMAT", None)
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, env=env, stdout=slave, stderr=slave)
    os.close(slave)
    seen = b""
    try:
        deadline = time.monotonic() + 60
        while b"broker started" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                seen += os.read(master, 65536)
            assert proc.poll() is None, seen.decode(errors="replace")
    finally:
        proc.terminate()
        proc.wait(30)
        os.close(master)
    text = seen.decode(errors="replace")
    started = next(line for line in text.splitlines() if "broker started" in line)
    assert not started.lstrip().startswith("{"), started
    assert " INFO " in started and " broker 3 " in started, started


def test_an_unknown_format_is_refused(fresh_db: str, tmp_path: Path) -> None:
    env = child_env(dict(os.environ, TIERLOG_DATABASE_URL=fresh_db, TIERLOG_LOG_FORMAT="xml"))
    done = subprocess.run(
        [sys.executable, "-m", "tierlog", "broker", "--insecure", "--data-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "TIERLOG_LOG_FORMAT must be one of auto, json, console, not 'xml'" in done.stderr
