"""examples/spark_query.py finds a running dev by itself (issue 27 S5): the broker URL and API
key from dev.env as well as S3, and with no S3 settings at all it stops at once with a
reason instead of a deltalake/AWS traceback a minute later."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tierlog.devstack.dev_env import write_env_file

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_query.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_query", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_takes_the_url_key_and_s3_of_dev_env(tmp_path: Path) -> None:
    write_env_file(
        tmp_path / "dev.env",
        {
            "TIERLOG_URL": "http://127.0.0.1:9080",
            "TIERLOG_API_KEY": "tlk_ab_cd",
            "TIERLOG_S3_ENDPOINT": "http://127.0.0.1:8333",
            "TIERLOG_S3_BUCKET": "mine",
            "AWS_ACCESS_KEY_ID": "id",
            "AWS_SECRET_ACCESS_KEY": "secret",
        },
    )
    args = _example().settings(["greetings", "--data-dir", str(tmp_path)], {})
    assert args.url == "http://127.0.0.1:9080" and args.api_key == "tlk_ab_cd"
    assert args.store.endpoint_url == "http://127.0.0.1:8333" and args.store.bucket == "mine"
    given = _example().settings(["t", "--data-dir", str(tmp_path), "--url", "http://h:1"], {})
    assert given.url == "http://h:1"  # the command line wins


def test_without_any_s3_settings_it_stops_at_once_saying_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        _example().settings(["greetings", "--data-dir", str(tmp_path / "none")], {})
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "no S3 settings" in err and "is ./scripts/dev running here?" in err
    # The environment's settings do instead of dev.env's.
    env = {"TIERLOG_S3_ENDPOINT": "http://s3:9000", "TIERLOG_URL": "http://b:8080"}
    args = _example().settings(["greetings", "--data-dir", str(tmp_path / "none")], env)
    assert args.url == "http://b:8080" and args.store.endpoint_url == "http://s3:9000"
