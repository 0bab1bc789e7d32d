"""The Messages page's Erase form → the API's body, and an audit row's totals (issue 31)."""

from __future__ import annotations

import pytest

from console.cluster_api import ConsoleApiError
from console.erase_form import body_of, summary


def test_erase_body_text_or_base64_and_an_empty_key_refused() -> None:
    assert body_of("alice", binary=False) == {"keys": ["alice"]}
    assert body_of("AAH/", binary=True) == {"keys_b64": ["AAH/"]}
    with pytest.raises(ConsoleApiError) as caught:
        body_of("", binary=False)
    assert caught.value.status == 400 and "enter the key" in caught.value.message


def test_audit_row_sums_each_tier() -> None:
    doc = {
        "id": "e1",
        "state": "done",
        "hot": {"0/1": {"records_removed": 3}, "0/2": {"records_removed": 3}},
        "cold": {"0": {"records_removed": 5, "files_rewritten": 2, "bytes_rewritten": 900}},
    }
    row = summary(doc)
    assert (row["hot_removed"], row["replicas"]) == (6, 2)
    assert (row["cold_removed"], row["cold_files"], row["cold_bytes"]) == (5, 2, 900)
    assert summary({"id": "e2", "state": "pending", "hot": {}, "cold": {}})["hot_removed"] == 0
