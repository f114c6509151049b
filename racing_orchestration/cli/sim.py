"""`racing sim`: run the simulated TAB feed until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import signal
import threading

from racing_orchestration.tab.sim_feed import SimFeedConfig, SimFeedServer


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sim", help="serve the simulated TAB affiliates API")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    parser.add_argument("--clock-offset", type=float, default=0.0, metavar="SECONDS", help="shift the simulated clock")
    parser.add_argument("--dense-every", type=float, default=None, metavar="MINUTES",
                        help="dense mode: only a race every MINUTES from now")
    parser.add_argument("--dense-races", type=int, default=40)
    parser.add_argument("--dense-lead", type=float, default=None, metavar="MINUTES",
                        help="dense mode: the first race starts this long after now (default: one interval)")
    parser.add_argument("--interim-after", type=float, default=120.0, metavar="SECONDS",
                        help="a race turns Interim this long after the jump")
    parser.add_argument("--final-after", type=float, default=480.0, metavar="SECONDS",
                        help="a race turns Final this long after the jump")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="added to every API request")
    parser.add_argument("--events-latency-ms", type=float, default=0.0,
                        help="added to /events/{id} requests only (odds and results)")
    parser.add_argument("--history-days", type=int, default=None, metavar="DAYS",
                        help="serve /meetings only for the last DAYS days (older dates answer 404)")
    parser.add_argument("--fault-5xx", type=float, default=0.0, metavar="RATE")
    parser.add_argument("--fault-timeout", type=float, default=0.0, metavar="RATE")
    parser.add_argument("--fault-malformed", type=float, default=0.0, metavar="RATE")
    parser.add_argument("--fault-429", type=float, default=0.0, metavar="RATE")
    parser.set_defaults(handler=run_sim)


def config_from_args(args: argparse.Namespace) -> SimFeedConfig:
    rates = (args.fault_5xx, args.fault_timeout, args.fault_malformed, args.fault_429)
    if any(not 0.0 <= rate <= 1.0 for rate in rates) or sum(rates) > 1.0:
        raise SystemExit("racing sim: fault rates must each be in [0, 1] and sum to at most 1")
    return SimFeedConfig(
        seed=args.seed, clock_offset_seconds=args.clock_offset, speed=args.speed,
        dense_every_minutes=args.dense_every, dense_races=args.dense_races, dense_lead_minutes=args.dense_lead,
        interim_after_seconds=args.interim_after, final_after_seconds=args.final_after, latency_ms=args.latency_ms,
        events_latency_ms=args.events_latency_ms, history_days=args.history_days,
        error_5xx_rate=args.fault_5xx, timeout_rate=args.fault_timeout, malformed_rate=args.fault_malformed,
        rate_limit_rate=args.fault_429,
    )


def run_sim(args: argparse.Namespace) -> int:
    server = SimFeedServer(config_from_args(args), host=args.host, port=args.port)
    stop = threading.Event()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"simulated TAB feed at {server.base_url} (stats: {server.root_url}/_sim/stats)", flush=True)
        server.serve_until(stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print("simulated TAB feed stopped", flush=True)
    return 0
