"""``log_format = "json"``: one JSON object per log line, for log collectors in a cluster.

Each line has ``at`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``, ``msg`` and,
on a cluster node, ``node``; an exception adds ``exc`` (the formatted traceback).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

__all__ = ["JsonFormatter"]


class JsonFormatter(logging.Formatter):
    def __init__(self, node: str = "") -> None:
        super().__init__()
        self.node = node

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if self.node:
            line["node"] = self.node
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)
