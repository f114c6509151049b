"""`maintenance-api` / `python -m control_api`: serve the control API with uvicorn."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

from control_api.config import INSECURE_DEV_ENV, ApiConfigError, settings_from_env

log = logging.getLogger("control_api")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="maintenance-api", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--api-key-file", help="file holding the API key (default: $SCHEDULER_API_KEY_FILE, "
                                               "then $SCHEDULER_API_KEY)")
    parser.add_argument("--insecure-dev", action="store_true",
                        help="serve WITHOUT authentication when no key is set (local development only)")
    parser.add_argument("--workers", type=int, default=None,
                        help="uvicorn worker processes (default: $MAINTENANCE_API_WORKERS, else 1); one per core "
                             "serves concurrent clients on several cores")
    parser.add_argument("--log-level", default="info")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Alembic logs each of its plugins at INFO whenever the registry's revision is read (start-up), and httpx each
    # request to the webserver's GraphQL: neither is the API's news. Their warnings and errors still show.
    for chatty in ("alembic", "httpx"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        settings = settings_from_env(key_file=args.api_key_file, insecure_dev=args.insecure_dev)
    except ApiConfigError as exc:
        print(f"maintenance-api: {exc}", file=sys.stderr)
        return 2
    if settings.api_key is None:
        log.warning("!" * 78)
        log.warning("INSECURE: no API key set; every endpoint is open (--insecure-dev). Never use in production.")
        log.warning("!" * 78)

    import uvicorn

    from control_api.access_log import uvicorn_log_config

    # A key a client put in the query string (?api_key=...) must not land in the access log.
    log_config = uvicorn_log_config()
    workers = args.workers or settings.workers
    if workers > 1:
        # Worker processes build their own app from the environment: hand them what came from the command line.
        if args.api_key_file:
            os.environ["SCHEDULER_API_KEY_FILE"] = args.api_key_file
        os.environ[INSECURE_DEV_ENV] = "1" if args.insecure_dev else "0"
        # The workers' request counters live in files here so /metrics can sum them (prometheus_client's
        # multiprocess mode reads the variable when a worker imports it).
        with tempfile.TemporaryDirectory(prefix="maintenance-api-metrics-") as metrics_dir:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
            uvicorn.run("control_api.app:app_from_env", factory=True, workers=workers,
                        host=args.host, port=args.port, log_level=args.log_level.lower(), log_config=log_config)
        return 0

    from control_api.app import create_app

    uvicorn.run(create_app(settings, freeze_startup_heap=True), host=args.host, port=args.port,
                log_level=args.log_level.lower(), log_config=log_config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
