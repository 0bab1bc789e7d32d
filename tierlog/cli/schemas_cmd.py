"""`tierlog schemas`: the Schema Registry from the command line (list, versions, get,
register a file, check compatibility, the compatibility level, delete), over its REST API
at --registry-url (TIERLOG_SCHEMA_REGISTRY_URL, which `tierlog dev` writes to dev.env;
default: --url's /schema-registry). A refusal prints the registry's message and error code
(409 incompatible, 42201 invalid schema, 40401 subject not found, ...) and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from schemaformat.registry_client import RegistryClient, RegistryError, subject_path
from tierlog.cli.credentials import creds

LEVELS = (
    "NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
    "FULL_TRANSITIVE",
)  # fmt: skip
TYPES_BY_SUFFIX = {".avsc": "AVRO", ".avro": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}
MAX_SCHEMA_FILE = 8 * 1024 * 1024


def add_registry_url(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--registry-url",
        default=os.environ.get("TIERLOG_SCHEMA_REGISTRY_URL"),
        help="the Schema Registry (default TIERLOG_SCHEMA_REGISTRY_URL, else --url's "
        "/schema-registry)",
    )


def registry_client(args: argparse.Namespace) -> RegistryClient:
    url = args.registry_url or args.url.rstrip("/") + "/schema-registry"
    found = creds(args)
    return RegistryClient(url, api_key=found["api_key"], verify=found["verify"])


def add_schemas(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    s = sub.add_parser("schemas", parents=[common], help="the Schema Registry's subjects")
    add_registry_url(s)
    verbs = s.add_subparsers(dest="verb", required=True)
    ls = verbs.add_parser("list", help="subjects, one a line")
    ls.add_argument("--prefix", default=None, help="only subjects starting with this")
    ls.add_argument("--deleted", action="store_true", help="soft-deleted subjects too")
    versions = verbs.add_parser("versions", help="a subject's versions")
    versions.add_argument("subject")
    get = verbs.add_parser("get", help="a subject's version (default latest), or --id's schema")
    get.add_argument("subject", nargs="?")
    get.add_argument("--version", default="latest")
    get.add_argument("--id", type=int, default=None, help="the schema with this id instead")
    reg = verbs.add_parser("register", help="register FILE as the subject's next version")
    check = verbs.add_parser("check", help="is FILE compatible with the subject's version(s)?")
    for p in (reg, check):
        p.add_argument("subject")
        p.add_argument("file", type=Path)
        p.add_argument(
            "--type",
            choices=("AVRO", "JSON", "PROTOBUF"),
            default=None,
            help="default: by the file's suffix (.avsc, .json, .proto), else AVRO",
        )
        p.add_argument(
            "--reference",
            action="append",
            default=[],
            metavar="NAME=SUBJECT:VERSION",
            help="a schema FILE imports (repeatable)",
        )
    reg.add_argument("--normalize", action="store_true", help="store the normalized form")
    check.add_argument("--version", default="latest", help="a version, latest, or all")
    level = verbs.add_parser("level", help="show or set the compatibility level")
    level.add_argument("subject", nargs="?", help="default: the global level")
    level.add_argument("level", nargs="?", choices=LEVELS, type=str.upper)
    delete = verbs.add_parser("delete", help="delete a subject, or one --version of it")
    delete.add_argument("subject")
    delete.add_argument("--version", default=None)
    delete.add_argument("--permanent", action="store_true", help="hard delete (after a soft one)")
    s.set_defaults(func=run_schemas)


def _schema_body(args: argparse.Namespace) -> dict[str, Any]:
    try:
        if args.file.stat().st_size > MAX_SCHEMA_FILE:
            raise RegistryError(0, 0, f"{args.file} is over {MAX_SCHEMA_FILE} bytes")
        text = args.file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RegistryError(0, 0, f"cannot read {args.file}: {error}") from None
    kind = args.type or TYPES_BY_SUFFIX.get(args.file.suffix.lower(), "AVRO")
    body: dict[str, Any] = {"schema": text, "schemaType": kind}
    refs = []
    for spec in args.reference:
        name, _, where = spec.partition("=")
        subject, _, version = where.rpartition(":")
        if not name or not subject or not version.isdigit():
            raise RegistryError(0, 0, f"--reference wants NAME=SUBJECT:VERSION, got {spec!r}")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _show(value: Any) -> None:
    if isinstance(value, str):
        print(value)
    else:
        print(json.dumps(value, indent=2, ensure_ascii=False))


def _get(client: RegistryClient, args: argparse.Namespace) -> int:
    if args.id is not None:
        _show(client.request("GET", f"/schemas/ids/{args.id}"))
    elif args.subject:
        path = f"/subjects/{subject_path(args.subject)}/versions/{args.version}"
        _show(client.request("GET", path))
    else:
        raise RegistryError(0, 0, "name a subject, or --id")
    return 0


def _check(client: RegistryClient, args: argparse.Namespace) -> int:
    version = "" if args.version == "all" else f"/{args.version}"
    path = f"/compatibility/subjects/{subject_path(args.subject)}/versions{version}"
    answer = client.request("POST", path, _schema_body(args), {"verbose": "true"})
    if answer.get("is_compatible"):
        print("compatible")
        return 0
    print("incompatible")
    for message in answer.get("messages") or []:
        print(f"  {message}")
    return 1


def _level(client: RegistryClient, args: argparse.Namespace) -> int:
    path = f"/config/{subject_path(args.subject)}" if args.subject else "/config"
    if args.level:
        _show(client.request("PUT", path, {"compatibility": args.level})["compatibility"])
    else:
        answer = client.request("GET", path, params={"defaultToGlobal": "true"})
        _show(answer.get("compatibilityLevel") or answer.get("compatibility"))
    return 0


def _delete(client: RegistryClient, args: argparse.Namespace) -> int:
    path = f"/subjects/{subject_path(args.subject)}"
    if args.version is not None:
        path += f"/versions/{args.version}"
    params = {"permanent": "true"} if args.permanent else None
    _show(client.request("DELETE", path, params=params))
    return 0


def _run(client: RegistryClient, args: argparse.Namespace) -> int:
    if args.verb == "list":
        params: dict[str, str] = {"deleted": "true"} if args.deleted else {}
        if args.prefix:
            params["subjectPrefix"] = args.prefix
        for subject in client.request("GET", "/subjects", params=params):
            print(subject)
        return 0
    if args.verb == "versions":
        _show(client.request("GET", f"/subjects/{subject_path(args.subject)}/versions"))
        return 0
    if args.verb == "register":
        path = f"/subjects/{subject_path(args.subject)}/versions"
        params = {"normalize": "true"} if args.normalize else {}
        _show(client.request("POST", path, _schema_body(args), params))
        return 0
    verbs = {"get": _get, "check": _check, "level": _level, "delete": _delete}
    return verbs[args.verb](client, args)


def run_schemas(args: argparse.Namespace) -> int:
    try:
        with registry_client(args) as client:
            return _run(client, args)
    except RegistryError as error:
        code = f" (error code {error.error_code})" if error.error_code else ""
        print(f"tierlog schemas: {error.message}{code}", file=sys.stderr)
        return 1
