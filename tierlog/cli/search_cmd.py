"""`tierlog search`: records by key, value substring or JSON field, across both tiers (the
cluster's GET /topics/{topic}/search). Hits go to stdout as JSON lines (one record each,
with its partition and tier), the progress and the summary to stderr; --history KEY is
every value a key ever had."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO
from urllib.parse import quote

import httpx
import orjson

from http_transport.trust import trust
from logformat.errors import ErrorCode, TierlogError


def add_search(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    s = sub.add_parser(
        "search", parents=[common], help="find records by key, value or JSON field (hot + S3)"
    )
    s.add_argument("topic")
    what = s.add_mutually_exclusive_group(required=True)
    what.add_argument("--key", help="records whose key is exactly this (UTF-8)")
    what.add_argument("--key-b64", help="records whose key is exactly these bytes (base64)")
    what.add_argument("--history", metavar="KEY", help="every value KEY ever had (all offsets)")
    what.add_argument("--value", help="records whose value contains this text")
    what.add_argument("--json", nargs=2, metavar=("PATH", "VALUE"), help="a JSON field = value")
    s.add_argument("--partition", type=int, default=None, help="only this partition")
    s.add_argument("--start-offset", type=int, default=None)
    s.add_argument("--end-offset", type=int, default=None, help="exclusive")
    s.add_argument("--max-hits", type=int, default=None, help="the cap (default 100)")
    s.add_argument("--value-format", choices=["auto", "base64", "string"], default="auto")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    s.set_defaults(func=run_search)


def _params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {"value_format": args.value_format}
    if args.history is not None:
        params.update(key=args.history, max_hits=10_000)
    elif args.json is not None:
        params.update(json_path=args.json[0], json_value=args.json[1])
    else:
        for name in ("key", "key_b64", "value"):
            if getattr(args, name) is not None:
                params[name] = getattr(args, name)
    for name in ("partition", "start_offset", "end_offset", "max_hits"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    return params


def _progress(doc: dict[str, Any]) -> str:
    return (
        f"{doc['hits']} hits; cold files {doc['files_scanned']}/{doc['files_total']}, "
        f"{doc['bytes_scanned']:,} bytes read of a {doc['table_bytes']:,}-byte table; "
        f"hot records {doc['hot_records_scanned']:,}/{doc['hot_records_total']:,}"
    )


def run_search(args: argparse.Namespace) -> int:
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    url = f"{args.url.rstrip('/')}/topics/{quote(args.topic, safe='')}/search"
    timeout = httpx.Timeout(30.0, read=300.0)
    try:
        with (
            httpx.Client(verify=trust(args.ca_file or True), timeout=timeout) as http,
            http.stream("GET", url, params=_params(args), headers=headers) as response,
        ):
            if response.status_code != 200:
                response.read()
                raise _error(response)
            return _print(response.iter_lines(), sys.stdout, sys.stderr, args.quiet)
    except httpx.HTTPError as exc:
        raise TierlogError(ErrorCode.REQUEST_TIMED_OUT, f"{url}: {exc!r}") from None


def _print(lines: Any, out: TextIO, err: TextIO, quiet: bool) -> int:
    failed = 0
    for line in lines:
        if not line:
            continue
        doc = orjson.loads(line)
        kind = doc.pop("type", None)
        if kind == "hit":
            out.write(orjson.dumps(doc).decode() + "\n")
            out.flush()
        elif kind == "progress" and not quiet and err.isatty():
            err.write(f"\r{_progress(doc)}")
        elif kind == "error":
            failed += 1
            err.write(
                f"\npartition {doc.get('partition')}: {doc['error_code']}: {doc['message']}\n"
            )
        elif kind == "done":
            capped = " (the cap: there may be more)" if doc["capped"] else ""
            err.write(f"\r{_progress(doc)}; {doc['elapsed_ms']} ms{capped}\n")
    return 1 if failed else 0


def _error(response: httpx.Response) -> TierlogError:
    try:
        doc = response.json()
        return TierlogError(ErrorCode(doc["error_code"]), str(doc["message"]))
    except (ValueError, KeyError):
        return TierlogError(ErrorCode.UNKNOWN_SERVER_ERROR, f"HTTP {response.status_code}")
