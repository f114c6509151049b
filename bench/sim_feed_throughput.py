"""How fast the simulated TAB feed answers, so scrape benchmarks measure the scraper and not the sim.

Run by hand: `.venv/bin/python bench/sim_feed_throughput.py`. Prints medians of 3 runs: 60 (date, category,
country) `/meetings` combinations with 100 ms injected latency at 1/8/16 client threads against the ideal
(requests x latency / threads), and the sim's own cost per `/events/{id}` without latency.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from racing_orchestration.tab.client import TabClient
from racing_orchestration.tab.sim_day import NZ_TZ
from racing_orchestration.tab.sim_feed import SimFeedConfig, SimFeedServer

COUNTRIES = ("NZ", "AUS", "UK", "IRE", "FR", "USA", "JPN", "SAF", "TUR", "CHI")


def main() -> None:
    with SimFeedServer(SimFeedConfig(latency_ms=100)) as server:
        day = server.feed.now().astimezone(NZ_TZ).date()
        combos = [(day + dt.timedelta(days=d), c, n) for d in (0, 1) for c in "THG" for n in COUNTRIES]
        for d in (0, 1):
            server.feed.day(day + dt.timedelta(days=d))  # generate both days before timing
        for threads in (1, 8, 16):
            client = TabClient(base_url=server.base_url)
            runs = []
            for _ in range(3):
                started = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(lambda combo: client.list_meetings(*combo), combos))
                runs.append(time.perf_counter() - started)
            ideal = len(combos) * 0.1 / threads
            median = statistics.median(runs)
            print(f"/meetings x{len(combos)} threads={threads:2d}: median {median:.2f} s, ideal {ideal:.2f} s, "
                  f"ratio {median / ideal:.2f}")
    with SimFeedServer(SimFeedConfig()) as server:
        client = TabClient(base_url=server.base_url)
        races = [r.race_id for m in client.list_meetings(day, "G", "AUS") for r in m.races]
        per_event = []
        for _ in range(3):
            started = time.perf_counter()
            for race_id in races:
                client.get_event(race_id)
            per_event.append((time.perf_counter() - started) / len(races) * 1000)
        print(f"/events/{{id}} x{len(races)} sequential, no latency: median {statistics.median(per_event):.1f} ms each")


if __name__ == "__main__":
    main()
