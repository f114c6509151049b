"""A fresh probe of the hostile-content rules (SECURITY.md's probe table): new inputs of the kinds an audit
used, generated here from a seed, against the real validators, real git and a real API process.

    .venv/bin/python bench/security_probe.py [--seed 2026] [--per-kind 40] [--scrapers 60] [--seconds 15]

Parts:
1. Upstream URLs: inward addresses in every spelling (dotted, decimal, hex, octal, short forms, IPv6, IPv4-mapped),
   inward names, bad ports and credentials, through `DocSyncConfig` (what the API and the run check). Each must be
   refused; a control set of public URLs must be accepted.
2. Resolution: public names that resolve to random non-public addresses, through the run-time check.
3. Labels: every C0/C1 control and bidi formatting character in `service`/`description`/`created_by`.
4. Nesting: JSON bodies nested 33..5000 levels, through the API's byte scanner and `validate_task`.
5. Hostile upstreams (real git): crafted trees (hooks through a symlink under random hook names, `.git` variants,
   symlink escapes, submodules, oversize blobs) synced with `sync_docs`; after each, no hook may have run and no
   executable or out-of-place file may exist.
6. Anonymous /metrics load: the median of authenticated `GET /tasks` alone and with `--scrapers` anonymous clients
   scraping /metrics in a loop, with the metrics cache off (0 s) and on (5 s), side by side in one run.
7. Run config from a launch (the UI's launchpad, GraphQL `launchRun`): random resource overrides (any resource of
   any job of both code locations, endpoint/secret/folder field names, hostile values) and `{"env": …}` in random op
   config fields (as a scalar, a list item or nested), through Dagster's own launch-time validation with the secret
   set in this process as in a run worker. Each must be refused, and no refusal may quote the secret.
8. TAB payloads: the real day's meetings sample with one random value Postgres cannot store (NUL or a lone surrogate
   in a random string, an integer beyond int4 in a random integer field) in a random meeting or race, read as the
   scrape reads it: the bad meeting or race must be refused with its reason and every other one kept.
Prints a Markdown table per part.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import ipaddress
import logging
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

INWARD_NETWORKS = ["127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
                   "100.64.0.0/10", "0.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4"]
INWARD_V6 = ["::1/128", "fc00::/7", "fe80::/10", "ff00::/8", "::/128"]


def random_address(rng: random.Random, networks: list[str]) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    net = ipaddress.ip_network(rng.choice(networks))
    return net[rng.randrange(net.num_addresses)] if net.num_addresses > 1 else net[0]


def spellings(address: ipaddress.IPv4Address, rng: random.Random) -> list[str]:
    """The ways a resolver or URL parser may read an IPv4 address."""
    value = int(address)
    octets = [int(o) for o in str(address).split(".")]
    return [
        str(address),
        str(value),
        hex(value),
        "0" + oct(value)[2:],
        ".".join(hex(o) for o in octets),
        ".".join("0" + oct(o)[2:] for o in octets),
        f"{octets[0]}.{(octets[1] << 16) | (octets[2] << 8) | octets[3]}",
        f"{octets[0]}.{octets[1]}.{(octets[2] << 8) | octets[3]}",
        f"[::ffff:{address}]",
        f"[::ffff:{hex(value >> 16)[2:]}:{hex(value & 0xFFFF)[2:]}]",
        f"{address}.",
        rng.choice([f"{address}%2e", f"{address}:443", f"{str(address).upper()}"]),
    ]


def url_probes(rng: random.Random, per_kind: int) -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {"inward IPv4, every spelling": [], "inward IPv6": [], "inward names": [],
                                   "ports": [], "credentials": [], "schemes and shapes": []}
    for _ in range(per_kind):
        v4 = random_address(rng, INWARD_NETWORKS)
        kinds["inward IPv4, every spelling"] += [f"https://{host}/org/repo.git" for host in spellings(v4, rng)]
        v6 = random_address(rng, INWARD_V6)
        kinds["inward IPv6"] += [f"https://[{v6}]/r.git", f"https://[{v6}]:443/r.git", f"https://[64:ff9b::{v4}]/r"]
        label = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(rng.randint(1, 12)))
        kinds["inward names"] += [f"https://{label}/r.git", f"https://{label}.localhost/r",
                                  f"https://{label}.internal/r", f"https://{label}.local/r", f"https://{label}.lan/r",
                                  f"https://{label}.home.arpa/r", f"https://{label}:5432/r"]
        kinds["ports"] += [f"https://github.com:{rng.choice([0, 22, 80, 5432, 2375, 6443, 8080, 65535])}/r",
                           f"https://github.com:{rng.randint(65536, 10**6)}/r", f"https://github.com:-{rng.randint(1, 9)}/r"]
        secret = "".join(rng.choice("abcdef0123456789") for _ in range(16))
        kinds["credentials"] += [f"https://u:{secret}@github.com/r.git", f"https://{secret}@github.com/r.git",
                                 f"https://github.com@{label}.example/r", f"https://:{secret}@github.com/r"]
        kinds["schemes and shapes"] += [f"http://github.com/{label}", f"file:///{label}", f"ssh://git@github.com/{label}",
                                        f"git@github.com:{label}.git", f"ext::sh -c {label}", f"--upload-pack={label}",
                                        f"https://github.com/{label}?x=1", f"https://github.com/{label}\n",
                                        f"https://github\u00e9.com/{label}"]
    return kinds


CONTROLS = ["https://github.com/fastapi/fastapi.git", "https://gitlab.com/group/sub/repo.git",
            "https://codeberg.org/forgejo/forgejo", "https://github.com:443/ollama/ollama.git"]


def probe_urls(rng: random.Random, per_kind: int) -> list[tuple[str, int, int]]:
    from pydantic import ValidationError

    from maintenance_jobs.executor_configs import DocSyncConfig

    def accepted(url: str) -> bool:
        try:
            DocSyncConfig(project="p", upstream_repo=url, gitea_repo="o/n")
        except (ValidationError, ValueError):
            return False
        return True

    rows = [(kind, len(urls), sum(accepted(u) for u in urls)) for kind, urls in url_probes(rng, per_kind).items()]
    rows.append(("control: public https hosts (must be accepted)", len(CONTROLS), sum(accepted(u) for u in CONTROLS)))
    return rows


def probe_resolution(rng: random.Random, per_kind: int) -> tuple[int, int]:
    from maintenance_jobs import upstream_urls

    refused = 0
    for _ in range(per_kind * 5):
        inward = [str(random_address(rng, INWARD_NETWORKS if rng.random() < 0.7 else INWARD_V6))]
        answers = inward + (["93.184.216.34"] if rng.random() < 0.5 else [])
        rng.shuffle(answers)
        upstream_urls.resolve = lambda host, port, a=answers: a
        try:
            upstream_urls.pin_public_host("https://docs.example.org/r.git")
        except upstream_urls.AddressRefused:
            refused += 1
    upstream_urls.resolve = upstream_urls.system_resolver
    return per_kind * 5, refused


def probe_labels() -> tuple[int, int]:
    from maintenance_jobs.models import TaskValidationError, validate_task

    characters = [chr(c) for c in [*range(0, 32), 127, *range(0x80, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F),
                                   *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]]
    total = refused = 0
    for character in characters:
        for field in ("service", "description", "created_by"):
            total += 1
            try:
                validate_task({"task_name": "t", "service": "s", "executor": "example_executor",
                               field: f"ok{character}ok"})
            except TaskValidationError:
                refused += 1
    return total, refused


RUN_CONFIG_SECRET = "canary-secret-0f3a"
RESOURCE_FIELDS = ["base_url", "url", "token", "database_url", "path", "work_dir", "base_dir", "timezone", "host",
                   "password", "from_email", "timeout_seconds", "max_attempts"]
HOSTILE_VALUES = ["ext::sh -c id;#", "http://169.254.169.254/latest", "/var/backups", "file:///etc",
                  "postgresql://attacker.example/x", "https://attacker.example"]


def _op_fields(job) -> list[tuple[str, str]]:
    """(op, field) of every op config field of `job`, from the run config schema the launchpad shows."""
    ops = job.run_config_schema.config_type.fields.get("ops")
    found = []
    for op, op_field in (ops.config_type.fields.items() if ops else []):
        config = op_field.config_type.fields.get("config")
        if config is not None and hasattr(config.config_type, "fields"):
            found += [(op, name) for name in config.config_type.fields]
    return found


def probe_run_config(rng: random.Random, per_kind: int) -> list[tuple[str, int, int, int]]:
    """(kind, probes, accepted, refusals quoting the secret)."""
    import dagster as dg

    from maintenance_jobs.definitions import defs as maintenance_defs
    from racing_orchestration.definitions import defs as racing_defs

    jobs = sorted([*racing_defs.resolve_all_job_defs(), *maintenance_defs.resolve_all_job_defs()], key=lambda j: j.name)
    variables = ["PROBE_GITEA_TOKEN", "PROBE_DATABASE_URL"]
    os.environ.update({name: RUN_CONFIG_SECRET for name in variables})

    def outcome(job, run_config: dict, path: str, field: str, resource: bool) -> tuple[bool, bool]:
        """(accepted, a refusal quoted the secret). A resource field counts as refused only when it is not a field
        at all: "missing required entry" for the others would just make an attacker send them too."""
        try:
            dg.validate_run_config(job, run_config)
        except dg.DagsterInvalidConfigError as exc:
            messages = [error.message for error in exc.errors]
            if resource:
                refused = any(f'unexpected config entry "{field}"' in m for m in messages)
            else:
                refused = any(path in m for m in messages)
            return not refused, any(RUN_CONFIG_SECRET in m for m in messages)
        return True, False

    rows = []
    for kind in ("resource override", "op config from the environment"):
        total = accepted = leaked = 0
        for _ in range(per_kind * 5):
            job = rng.choice(jobs)
            if kind == "resource override":
                key = rng.choice(sorted(job.resource_defs))
                field = rng.choice(RESOURCE_FIELDS)
                run_config = {"resources": {key: {"config": {field: rng.choice(HOSTILE_VALUES)}}}}
                path = f"root:resources:{key}:config"
            else:
                fields = _op_fields(job)
                if not fields:
                    continue
                op, field = rng.choice(fields)
                source = {"env": rng.choice(variables)}
                value = rng.choice([source, [source], [source, source], {"nested": source}])
                run_config = {"ops": {op: {"config": {field: value}}}}
                path = f"root:ops:{op}:config:{field}"
            was_accepted, quoted = outcome(job, run_config, path, field, kind == "resource override")
            total += 1
            accepted += was_accepted
            leaked += quoted
        rows.append((kind, total, accepted, leaked))
    return rows


def probe_tab_payloads(rng: random.Random, per_kind: int) -> list[tuple[str, int, int, int]]:
    """(kind, probes, probes where the bad value was read (or more than its meeting/race refused), probes where a
    good meeting or race was lost)."""
    import copy
    import json

    from racing_orchestration.tab.models import read_meetings

    sample = json.loads((ROOT / "tests/racing_orchestration/tab/samples/nz_meetings_list_2025-07-17.json").read_text())
    meetings = sample["data"]["meetings"]
    total_races = sum(len(m["races"]) for m in meetings)

    def paths(node, prefix, kind):
        for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
            here = (*prefix, key)
            if isinstance(value, bool):
                continue
            if kind is str and isinstance(value, str) and value or kind is int and isinstance(value, int):
                yield here
            if isinstance(value, (dict, list)) and key != "races":
                yield from paths(value, here, kind)

    rows = []
    for kind, value_type, values in (("NUL in a string", str, ["\x00"]), ("lone surrogate in a string", str,
                                                                          ["\ud800", "\udfff"]),
                                     ("integer beyond int4", int, [2**31, -(2**31) - 1, 10**30])):
        total = missed = lost = 0
        for _ in range(per_kind):
            payload = copy.deepcopy(sample)
            i = rng.randrange(len(meetings))
            meeting = payload["data"]["meetings"][i]
            in_race = rng.random() < 0.5 and meeting["races"]
            target = rng.choice(meeting["races"]) if in_race else meeting
            candidates = list(paths(target, (), value_type))
            if not candidates:
                continue
            *parents, last = rng.choice(candidates)
            node = target
            for key in parents:
                node = node[key]
            bad = rng.choice(values)
            node[last] = (node[last][:3] + bad + node[last][3:]
                          if value_type is str else bad)
            page = read_meetings(payload)
            races_kept = sum(len(m.races) for m in page.meetings)
            total += 1
            if page.refused:  # the bad meeting or race refused: every other one kept
                expected_meetings = len(meetings) if in_race else len(meetings) - 1
                expected_races = total_races - 1 if in_race else total_races - len(meeting["races"])
            else:  # a field the models do not read: nothing of it stored, and nothing else lost
                missed += repr(bad)[1:-1] in repr([m.model_dump() for m in page.meetings])
                expected_meetings, expected_races = len(meetings), total_races
            missed += len(page.refused) > 1
            lost += len(page.meetings) != expected_meetings or races_kept != expected_races
        rows.append((kind, total, missed, lost))
    return rows


def probe_nesting(rng: random.Random, per_kind: int) -> tuple[int, int, float]:
    from maintenance_jobs.limits import MAX_NESTING_DEPTH
    from maintenance_jobs.text_rules import json_nesting_over

    total = refused = 0
    slowest = 0.0
    for _ in range(per_kind):
        depth = rng.choice([MAX_NESTING_DEPTH + 1, rng.randint(34, 1000), rng.randint(1000, 200_000)])
        opening = "".join(rng.choice(['{"k":', "["]) for _ in range(depth))
        body = ('{"task_name": "t", "config": ' + opening).encode()
        began = time.perf_counter()
        refused += json_nesting_over(body, MAX_NESTING_DEPTH)
        slowest = max(slowest, time.perf_counter() - began)
        total += 1
    return total, refused, slowest * 1000


def git(*args: str, cwd: Path | None = None, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True, capture_output=True).stdout.decode().strip()


def probe_upstreams(rng: random.Random, per_kind: int) -> list[tuple[str, int, int, int]]:
    """(kind, syncs, syncs where something ran or landed outside the mirror, syncs refused or left out)."""
    from maintenance_jobs.executor_configs import DocSyncConfig
    from maintenance_jobs.executors.doc_sync import GitCommandError, sync_docs, target_repo_url

    os.environ["MAINTENANCE_DOC_SYNC_TEST_SCHEMES"] = "file"
    hooks = ["post-commit", "pre-commit", "pre-push", "reference-transaction", "post-checkout", "post-merge",
             "pre-auto-gc", "post-update", "fsmonitor-watchman", "push-to-checkout"]
    log = logging.getLogger("probe")
    rows = []
    for kind in ("hook through a symlink", ".git component", "symlink escape", "submodule", "oversize blob"):
        bad = handled = 0
        for round_ in range(per_kind):
            with tempfile.TemporaryDirectory(prefix="probe-git-") as tmp:
                root = Path(tmp)
                marker = root / "RAN"
                up = root / "up.git"
                git("init", "-q", "--bare", "-b", "main", str(up))
                target = root / "gitea" / "o" / "n.git"
                git("init", "-q", "--bare", "-b", "main", str(target))
                script = git("hash-object", "-w", "--stdin", cwd=up, stdin=f"#!/bin/sh\ntouch {marker}\n".encode())
                page = git("hash-object", "-w", "--stdin", cwd=up, stdin=b"# page\n")
                name = rng.choice(["x", "docs", "a", ".hidden", "hooks"])
                if kind == "hook through a symlink":
                    inner = git("mktree", cwd=up, stdin="".join(f"100755 blob {script}\t{h}\n" for h in
                                                                rng.sample(hooks, 4)).encode())
                    link = git("hash-object", "-w", "--stdin", cwd=up,
                               stdin=rng.choice([".git/hooks", "../.git/hooks", "./.git/hooks", ".git/./hooks"]).encode())
                    raw = (b"100644 index.md\0" + bytes.fromhex(page) + f"120000 {name}\0".encode() + bytes.fromhex(link)
                           + f"40000 {name}\0".encode() + bytes.fromhex(inner))
                    tree = git("hash-object", "-t", "tree", "--literally", "-w", "--stdin", cwd=up, stdin=raw)
                elif kind == ".git component":
                    cfg = git("hash-object", "-w", "--stdin", cwd=up, stdin=b"[core]\n\thooksPath = /tmp\n")
                    inner = git("mktree", cwd=up, stdin=f"100644 blob {cfg}\tconfig\n".encode())
                    dotgit = rng.choice([".git", ".GIT", ".Git", ".git.", "git~1", ".git "])
                    raw = (f"40000 {dotgit}\0".encode() + bytes.fromhex(inner) + b"100644 index.md\0"
                           + bytes.fromhex(page))
                    tree = git("hash-object", "-t", "tree", "--literally", "-w", "--stdin", cwd=up, stdin=raw)
                elif kind == "symlink escape":
                    target_text = rng.choice(["/etc/passwd", "../" * rng.randint(1, 8) + "etc", "/root/.ssh",
                                              "/proc/self/environ"])
                    link = git("hash-object", "-w", "--stdin", cwd=up, stdin=target_text.encode())
                    tree = git("mktree", cwd=up, stdin=f"100644 blob {page}\tindex.md\n120000 blob {link}\tz\n".encode())
                elif kind == "submodule":
                    tree = git("mktree", "--missing", cwd=up, stdin=f"100644 blob {page}\tindex.md\n160000 commit "
                                                                    f"{rng.randbytes(20).hex()}\tvendor\n".encode())
                else:
                    big = git("hash-object", "-w", "--stdin", cwd=up, stdin=os.urandom(300_000))
                    tree = git("mktree", cwd=up, stdin=f"100644 blob {big}\tbig.bin\n".encode())
                docs = git("mktree", cwd=up, stdin=f"040000 tree {tree}\tdocs\n".encode())
                commit = subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@a", "commit-tree", docs, "-m",
                                         "x"], cwd=up, check=True, capture_output=True, text=True).stdout.strip()
                git("update-ref", "refs/heads/main", commit, cwd=up)
                os.environ["MAINTENANCE_DOC_SYNC_MAX_FETCH_BYTES"] = "200000"
                config = DocSyncConfig(project="p", upstream_repo=f"file://{up}",
                                       docs_paths=["docs"] if round_ % 2 else [], gitea_repo="o/n")
                work = root / "work"
                try:
                    result = sync_docs(config, target_url=target_repo_url(f"file://{root / 'gitea'}", "o/n"),
                                       token="t0k3n", work_dir=work, now=dt.datetime.now(dt.UTC), log=log)
                    handled += bool(result.skipped)
                except GitCommandError:
                    handled += 1
                executables = [p for p in work.rglob("*") if p.is_file() and not p.is_symlink()
                               and (p.stat().st_mode & 0o111 or "hooks" in p.parts)]
                stray = [p for p in root.iterdir() if p.name not in {"up.git", "gitea", "work"}]
                bad += bool(marker.exists() or executables or stray)
        rows.append((kind, per_kind, bad, handled))
    os.environ.pop("MAINTENANCE_DOC_SYNC_MAX_FETCH_BYTES", None)
    return rows


def probe_metrics_load(scrapers: int, seconds: float) -> list[tuple[str, float, float, int]]:
    """Median and p90 of authenticated GET /tasks with and without anonymous /metrics scrapers, cache off and on."""
    import dagster as dg

    from api_latency import KEY, Connection, bench_storage, dagster_url_of, insert_runs
    from local_stack.stack import free_port, wait_for_http

    server, home, registry_url = bench_storage("probe-api-")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        insert_runs(instance, 20_000, 0.10)
    rows = []

    async def measure(base: str, with_scrapers: bool) -> tuple[list[float], int]:
        authed = Connection(base, "/tasks")
        stop = False

        async def scrape() -> int:
            host, port = base.removeprefix("http://").split(":")
            count = 0
            while not stop:
                try:
                    reader, writer = await asyncio.open_connection(host, int(port))
                    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
                    await writer.drain()
                    await reader.read()
                    writer.close()
                    count += 1
                except OSError:
                    await asyncio.sleep(0.05)
            return count

        tasks = [asyncio.create_task(scrape()) for _ in range(scrapers if with_scrapers else 0)]
        await asyncio.sleep(1.0 if with_scrapers else 0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await authed.get()
            await asyncio.sleep(0.05)
        stop = True
        scraped = sum(await asyncio.gather(*tasks)) if tasks else 0
        authed.close()
        return authed.latencies, scraped

    try:
        for cache in (0.0, 5.0):
            port = free_port()
            env = {**os.environ, "DAGSTER_HOME": str(home), "DAGSTER_POSTGRES_URL": dagster_url_of(home),
                   "MAINTENANCE_DATABASE_URL": registry_url, "SCHEDULER_API_KEY": KEY,
                   "MAINTENANCE_API_METRICS_CACHE_SECONDS": str(cache)}
            api = subprocess.Popen([sys.executable, "-m", "control_api", "--port", str(port), "--log-level",
                                    "warning"], env=env, cwd=ROOT)
            base = f"http://127.0.0.1:{port}"
            try:
                wait_for_http(f"{base}/health", 60, api)
                asyncio.run(measure(base, False))  # warm up
                for with_scrapers in (False, True):
                    latencies, scraped = asyncio.run(measure(base, with_scrapers))
                    label = f"cache {cache:g} s, {'with ' + str(scrapers) + ' scrapers' if with_scrapers else 'alone'}"
                    rows.append((label, statistics.median(latencies), sorted(latencies)[int(len(latencies) * 0.9)],
                                 scraped))
            finally:
                api.terminate()
                api.wait(timeout=30)
    finally:
        server.cleanup()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--per-kind", type=int, default=40)
    parser.add_argument("--scrapers", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--skip-load", action="store_true", help="leave out part 6 (starts Postgres and the API)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    logging.basicConfig(level=logging.ERROR)

    print(f"Seed {args.seed}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f} at the start.\n")
    print("| upstream URL kind | probes | accepted |\n|---|---|---|")
    for kind, total, accepted in probe_urls(rng, args.per_kind):
        print(f"| {kind} | {total} | {accepted} |")
    total, refused = probe_resolution(rng, args.per_kind)
    print(f"\n| run-time resolution | probes | refused |\n|---|---|---|\n| public name resolving inward "
          f"(alone or beside a public address) | {total} | {refused} |")
    total, refused = probe_labels()
    print(f"\n| labels | probes | refused |\n|---|---|---|\n| control and bidi characters in service/description/"
          f"created_by | {total} | {refused} |")
    total, refused, slowest = probe_nesting(rng, args.per_kind)
    print(f"\n| nesting | probes | refused | slowest scan |\n|---|---|---|---|\n| JSON 33-200,000 levels deep "
          f"| {total} | {refused} | {slowest * 1000:.0f} µs |")
    print("\n| hostile upstream (real git) | syncs | something ran or landed | refused or left out |\n|---|---|---|---|")
    for kind, syncs, bad, handled in probe_upstreams(rng, max(4, args.per_kind // 4)):
        print(f"| {kind} | {syncs} | {bad} | {handled} |")
    print("\n| run config from a launch | probes | accepted | refusals quoting the secret |\n|---|---|---|---|")
    for kind, total, accepted, leaked in probe_run_config(rng, args.per_kind):
        print(f"| {kind} | {total} | {accepted} | {leaked} |")
    print("\n| TAB meetings payload, one unstorable value | probes | bad value read | good ones lost |"
          "\n|---|---|---|---|")
    for kind, total, missed, lost in probe_tab_payloads(rng, args.per_kind):
        print(f"| {kind} | {total} | {missed} | {lost} |")
    if not args.skip_load:
        print("\n| authenticated GET /tasks | p50 | p90 | anonymous scrapes served |\n|---|---|---|---|")
        for label, p50, p90, scraped in probe_metrics_load(args.scrapers, args.seconds):
            print(f"| {label} | {p50:.1f} ms | {p90:.1f} ms | {scraped} |")
    print(f"\nLoad average {os.getloadavg()[0]:.1f} at the end.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
