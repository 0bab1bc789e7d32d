"""Log lines on stderr: readable text on a terminal, one JSON object per line otherwise.

TIERLOG_LOG_FORMAT=json|console|auto chooses (auto, the default: console on a TTY, JSON when
stderr is a pipe or a file, for log shippers). Every line names the process's role and node
(the broker id, a fetch node's address, a worker's id), so the lines of several nodes in one
stream stay apart; `extra=` fields stay fields in both formats.
"""

from __future__ import annotations

import logging
import sys
import time

import orjson

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
# uvicorn adds an ANSI-coloured copy of its message for its own formatter: never a field.
_DROPPED = {"color_message"}
FORMATS = ("auto", "json", "console")


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {
        k: v
        for k, v in record.__dict__.items()
        if k not in _STANDARD and k not in _DROPPED and not k.startswith("_")
    }


class NodeFormatter(logging.Formatter):
    """Holds the node's identity; `node` is set once the process knows it (a worker's id)."""

    def __init__(self, role: str, node: str | None = None) -> None:
        super().__init__()
        self.role, self.node = role, node


class JSONFormatter(NodeFormatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "role": self.role,
        }
        if self.node is not None:
            line["node"] = self.node
        line["logger"] = record.name
        line["msg"] = record.getMessage()
        line.update(_fields(record))
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


class ConsoleFormatter(NodeFormatter):
    """`12:00:01.234 INFO  broker 1  tierlog.controller: became controller  epoch=3`."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(record.created))
        who = self.role if self.node is None else f"{self.role} {self.node}"
        fields = "  ".join(f"{k}={_text(v)}" for k, v in _fields(record).items())
        line = (
            f"{stamp}.{int(record.msecs):03d} {record.levelname:<7} {who}  "
            f"{record.name}: {record.getMessage()}" + (f"  {fields}" if fields else "")
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: object) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if text and " " not in text else orjson.dumps(text).decode()


def chosen_format(role: str, wanted: str = "auto") -> str:
    """json or console, from --log-format / TIERLOG_LOG_FORMAT (auto: console on a TTY)."""
    wanted = wanted.strip().lower() or "auto"
    if wanted not in FORMATS:
        raise SystemExit(
            f"tierlog {role}: TIERLOG_LOG_FORMAT must be one of {', '.join(FORMATS)}, "
            f"not {wanted!r}"
        )
    if wanted == "auto":
        return "console" if sys.stderr.isatty() else "json"
    return wanted


def setup(role: str, level: str = "INFO", node: str | None = None, fmt: str = "auto") -> None:
    formatter: NodeFormatter = (
        ConsoleFormatter(role, node)
        if chosen_format(role, fmt) == "console"
        else JSONFormatter(role, node)
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # httpx logs every request at INFO: replica fetches, forwards and polls would flood the log.
    for noisy in ("uvicorn.access", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel("WARNING")


def name_node(node: str) -> None:
    """Name the node on every later line (for roles that learn their id after setup)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler.formatter, NodeFormatter):
            handler.formatter.node = node
