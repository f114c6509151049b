"""uvicorn's access log without query strings: a key sent as `?api_key=...` (or any query value) is never logged."""

from __future__ import annotations

import copy
import logging
from typing import Any

from uvicorn.config import LOGGING_CONFIG

ACCESS_LOGGER = "uvicorn.access"


def _without_query(path: Any) -> Any:
    return path.split("?", 1)[0] if isinstance(path, str) else path


class DropQueryString(logging.Filter):
    """Cuts the query string off the path of uvicorn's access records (args: client, method, path, version, status).

    Logged paths keep only what routing saw; the query may carry a key or other secrets a client put there.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3:
            record.args = (*args[:2], _without_query(args[2]), *args[3:])
        return True


def uvicorn_log_config() -> dict[str, Any]:
    """uvicorn's own logging config with DropQueryString on its access logger."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["drop_query_string"] = {"()": f"{__name__}.DropQueryString"}
    config["loggers"][ACCESS_LOGGER]["filters"] = ["drop_query_string"]
    return config
