"""Retry chains as an operator follows them: which runs are attempts of the same piece of work, oldest first.

Three ways a run continues another one (the order is the preference when a run carries more than one):

- re-execution: Dagster's parent run (`dagster/parent_run_id`, the run's field; `dagster/root_run_id` names the
  first, and links the run to it when retention deleted the parent), written by run retries, the UI's "re-execute"
  and `execute_job(reexecution_options=...)`;
- re-request: a run whose run key is another key plus a retry suffix (the race checkpoint ledger's `<key>:retry<n>`),
  found through `previous_key`;
- next attempt: a tag naming the previous attempt's run (the post-race chain's `racing/previous_run_id`).

Step retries inside one run (RetryRequested, RetryPolicy) are reported per step with the waits Dagster was asked for.
The caller supplies the location's conventions (tag names, key scheme); this module knows none of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import dagster as dg

from orchestration_core.audit.cleanup import parent_run_id_of
from orchestration_core.audit.queries import _as_utc, _window_start, iter_run_records
from orchestration_core.dagster_tags import ROOT_RUN_ID_TAG, RUN_KEY_TAG
from orchestration_core.run_outcome import outcome_of

RE_EXECUTION = "re-execution"
RE_REQUEST = "re-request"
NEXT_ATTEMPT = "next attempt"
_MAX_LOOKUPS = 500  # predecessors created before the window, fetched one by one


@dataclass(frozen=True)
class RunNode:
    """What chaining needs of one run."""

    run_id: str
    job_name: str
    outcome: str
    created_at: datetime
    run_key: str | None = None
    parent_run_id: str | None = None
    root_run_id: str | None = None
    previous_run_id: str | None = None  # from the location's "previous attempt" tag


@dataclass(frozen=True)
class ChainLink:
    run_id: str
    job_name: str
    outcome: str
    created_at: datetime
    linked_by: str | None  # None for the chain's first run
    previous_run_id: str | None
    run_key: str | None


@dataclass
class RunChain:
    root_run_id: str
    job_name: str
    links: list[ChainLink] = field(default_factory=list)

    @property
    def final_outcome(self) -> str:
        return self.links[-1].outcome

    @property
    def linked_by(self) -> list[str]:
        return sorted({link.linked_by for link in self.links if link.linked_by})


@dataclass(frozen=True)
class StepRetry:
    run_id: str
    job_name: str
    step_key: str
    retries: int
    waits_seconds: list[float]
    ended: str  # the step's last event: success / failure / (still running)
    status: str | None  # the step output's `status` metadata when it has one (e.g. a scrape's ok / empty / failed)


def predecessor(node: RunNode, runs_by_key: dict[str, RunNode], previous_key: Callable[[str], str | None]) -> tuple[str, str] | None:
    """(run id this run continues, how) or None for a first run. `runs_by_key`: newest run per run key."""
    if node.parent_run_id:
        return node.parent_run_id, RE_EXECUTION
    if node.run_key and (key := previous_key(node.run_key)) and (earlier := runs_by_key.get(key)):
        return earlier.run_id, RE_REQUEST
    if node.previous_run_id:
        return node.previous_run_id, NEXT_ATTEMPT
    return None


def build_chains(nodes: Iterable[RunNode], previous_key: Callable[[str], str | None]) -> list[RunChain]:
    """Every chain of two or more runs among `nodes` (which must include the predecessors), oldest chain first."""
    by_id = {n.run_id: n for n in nodes}
    runs_by_key: dict[str, RunNode] = {}
    for node in sorted(by_id.values(), key=lambda n: n.created_at):
        if node.run_key:
            runs_by_key[node.run_key] = node  # the newest run of a key is the one a re-request followed
    links = {n.run_id: predecessor(n, runs_by_key, previous_key) for n in by_id.values()}
    for node in by_id.values():
        # A parent deleted by retention: the re-execution still belongs to its root's chain.
        link = links[node.run_id]
        if link and link[0] not in by_id and node.root_run_id in by_id and node.root_run_id != node.run_id:
            links[node.run_id] = (node.root_run_id, RE_EXECUTION)
    members: dict[str, list[str]] = defaultdict(list)
    for run_id in by_id:
        root, seen = run_id, {run_id}
        while (link := links.get(root)) and link[0] in by_id and link[0] not in seen:
            root = link[0]
            seen.add(root)
        members[root].append(run_id)
    chains = []
    for root, run_ids in members.items():
        if len(run_ids) < 2:
            continue
        ordered = sorted((by_id[r] for r in run_ids), key=lambda n: (n.created_at, n.run_id))
        chain = RunChain(root, by_id[root].job_name)
        for node in ordered:
            link = links.get(node.run_id) if node.run_id != root else None
            chain.links.append(ChainLink(node.run_id, node.job_name, node.outcome, node.created_at,
                                         link[1] if link else None, link[0] if link else None, node.run_key))
        chains.append(chain)
    return sorted(chains, key=lambda c: (c.links[0].created_at, c.root_run_id))


def _node(record: dg.RunRecord, run: dg.DagsterRun, previous_run_tags: Sequence[str]) -> RunNode:
    tags = run.tags
    return RunNode(
        run_id=run.run_id, job_name=run.job_name, outcome=outcome_of(run.status, tags),
        created_at=_as_utc(record.create_timestamp),
        run_key=tags.get(RUN_KEY_TAG), parent_run_id=parent_run_id_of(run),
        root_run_id=run.root_run_id or tags.get(ROOT_RUN_ID_TAG),
        previous_run_id=next((tags[t] for t in previous_run_tags if tags.get(t)), None),
    )


def run_chains(
    instance: dg.DagsterInstance,
    since: timedelta,
    *,
    previous_run_tags: Sequence[str] = (),
    previous_key: Callable[[str], str | None] = lambda key: None,
    now: datetime | None = None,
) -> list[RunChain]:
    """Chains with at least one run created in the window; their earlier runs are fetched even if older."""
    nodes: dict[str, RunNode] = {}
    for record in iter_run_records(instance, dg.RunsFilter(created_after=_window_start(since, now))):
        nodes[record.dagster_run.run_id] = _node(record, record.dagster_run, previous_run_tags)
    keys = {n.run_key for n in nodes.values() if n.run_key}
    pending, lookups = list(nodes.values()), 0
    while pending and lookups < _MAX_LOOKUPS:
        node = pending.pop()
        wanted: list[dg.RunsFilter] = []
        for run_id in (node.parent_run_id, node.root_run_id, node.previous_run_id):
            if run_id and run_id not in nodes:
                wanted.append(dg.RunsFilter(run_ids=[run_id]))
        if node.run_key and (key := previous_key(node.run_key)) and key not in keys:
            wanted.append(dg.RunsFilter(tags={RUN_KEY_TAG: key}))
        for filters in wanted:
            lookups += 1
            for record in instance.get_run_records(filters=filters, limit=1):
                if record.dagster_run.run_id not in nodes:
                    found = _node(record, record.dagster_run, previous_run_tags)
                    nodes[found.run_id] = found
                    if found.run_key:
                        keys.add(found.run_key)
                    pending.append(found)
    return build_chains(nodes.values(), previous_key)


_STEP_END = {dg.DagsterEventType.STEP_SUCCESS.value: "success", dg.DagsterEventType.STEP_FAILURE.value: "failure"}


def step_retries(instance: dg.DagsterInstance, since: timedelta, now: datetime | None = None) -> list[StepRetry]:
    """Each step that was retried inside a run in the window: how often, the waits asked for, how it ended."""
    start = _window_start(since, now)
    retried: dict[tuple[str, str], list[float]] = defaultdict(list)
    jobs: dict[str, str] = {}
    up_for_retry = dg.EventRecordsFilter(event_type=dg.DagsterEventType.STEP_UP_FOR_RETRY,
                                         after_timestamp=start.timestamp())
    for record in instance.get_event_records(up_for_retry, ascending=True):
        entry = record.event_log_entry
        event = entry.dagster_event
        retried[(entry.run_id, event.step_key)].append(float(event.step_retry_data.seconds_to_wait or 0))
        jobs[entry.run_id] = entry.job_name or "?"
    ends: dict[tuple[str, str], str] = {}
    statuses: dict[tuple[str, str], str] = {}
    of_type = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.STEP_OUTPUT}
    for run_id in jobs:
        for entry in instance.all_logs(run_id, of_type=of_type):
            event = entry.dagster_event
            key = (run_id, event.step_key)
            if key not in retried:
                continue
            if event.event_type_value in _STEP_END:
                ends[key] = _STEP_END[event.event_type_value]
            elif (status := event.step_output_data.metadata.get("status")) is not None:
                statuses[key] = str(getattr(status, "value", status))
    return [StepRetry(run_id, jobs[run_id], step_key, len(waits), waits, ends.get((run_id, step_key), "(running)"),
                      statuses.get((run_id, step_key)))
            for (run_id, step_key), waits in retried.items()]
