"""Prometheus metrics of one operator replica (``/metrics`` on the health port).

Everything is registered on a ``CollectorRegistry`` passed in, never on
prometheus_client's global one: each operator (and each test) has its own.
Counters and histograms are updated where things happen (the reconciler, the
API client, discovery, the webhook, the elector); the counts of Skills and
Actors by ``Ready`` status and of MCP servers by state are read from the
replica's own store at scrape time, so a standby reports the same view as
the leader (it watches the same objects).

docs/operations.md lists the metrics and the alerts built on them.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "skillop"
#: Batch durations: a few ms (one object) to a minute (a full pass of a big cluster).
BATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: From a request for approval to its decision: a person takes seconds to an hour.
DECISION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.batches = Counter(
            f"{PREFIX}_reconcile_batches", "Reconcile batches processed", registry=registry)
        self.batch_seconds = Histogram(
            f"{PREFIX}_reconcile_batch_duration_seconds",
            "Time to resolve a batch and perform its writes", buckets=BATCH_BUCKETS,
            registry=registry)
        self.batch_objects = Counter(
            f"{PREFIX}_reconcile_objects", "Skills and Actors resolved in batches", ["kind"],
            registry=registry)
        self.queue_depth = Gauge(
            f"{PREFIX}_reconcile_queue_depth",
            "Changed keys waiting for the next batch", registry=registry)
        self.api_writes = Counter(
            f"{PREFIX}_api_writes",
            "API writes by kind (Skill and Actor: status) and outcome"
            " (success, error, conflict, refused: not the leader)",
            ["kind", "outcome"], registry=registry)
        self.events = Counter(
            f"{PREFIX}_events",
            "Events by outcome: posted; combined (folded into one Event for many objects);"
            " failed (not posted within its time, or refused); dropped (a full queue,"
            " or this replica stopped leading)", ["outcome"], registry=registry)
        self.discoveries = Counter(
            f"{PREFIX}_mcp_discovery",
            "MCP tool listings by result (Listed, or the failure reason)", ["reason"],
            registry=registry)
        self.leader = Gauge(
            f"{PREFIX}_leader", "1 while this replica holds the Lease (and writes)",
            registry=registry)
        self.leader_transitions = Counter(
            f"{PREFIX}_leader_acquired", "Times this replica became the leader",
            registry=registry)
        self.admissions = Counter(
            f"{PREFIX}_webhook_admissions", "Admission reviews by kind and outcome"
            " (allowed, denied)", ["kind", "outcome"], registry=registry)
        self.approvals_pending = Gauge(
            f"{PREFIX}_approval_requests_pending",
            "ToolCallApprovals waiting for a decision", registry=registry)
        self.approval_seconds = Histogram(
            f"{PREFIX}_approval_decision_seconds",
            "Time from a ToolCallApproval's creation to its decision, by state"
            " (Approved, Denied, Expired)", ["state"], buckets=DECISION_BUCKETS,
            registry=registry)

    # -- what happens --------------------------------------------------------------
    def batch(self, seconds: float, *, skills: int, actors: int) -> None:
        self.batches.inc()
        self.batch_seconds.observe(seconds)
        self.batch_objects.labels("Skill").inc(skills)
        self.batch_objects.labels("Actor").inc(actors)

    def api_write(self, kind: str, outcome: str) -> None:
        self.api_writes.labels(kind, outcome).inc()

    def event(self, outcome: str, n: int = 1) -> None:
        self.events.labels(outcome).inc(n)

    def discovery(self, reason: str) -> None:
        self.discoveries.labels(reason).inc()

    def leading(self, leader: bool) -> None:
        if leader:
            self.leader_transitions.inc()
        self.leader.set(1 if leader else 0)

    def admission(self, kind: str, *, allowed: bool) -> None:
        self.admissions.labels(kind, "allowed" if allowed else "denied").inc()

    def approval_decided(self, state: str, seconds: float) -> None:
        self.approval_seconds.labels(state).observe(seconds)

    # -- what is read at scrape time ---------------------------------------------------
    def watch_approvals(self, pending: Callable[[], int]) -> None:
        self.approvals_pending.set_function(lambda: float(pending()))

    def watch_queue(self, depth: Callable[[], int]) -> None:
        self.queue_depth.set_function(lambda: float(depth()))

    def watch_objects(self, statuses: Callable[[], Mapping[tuple[str, str], Mapping[str, Any]]],
                      ) -> None:
        self.registry.register(_ReadyCollector(statuses))

    def watch_servers(self, states: Callable[[], Iterable[str]]) -> None:
        self.registry.register(_ServerCollector(states))


def ready_of(status: Mapping[str, Any]) -> str:
    """The ``Ready`` condition's status: True, False, or Unknown (none yet)."""
    for condition in status.get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            value = condition.get("status")
            return value if value in ("True", "False") else "Unknown"
    return "Unknown"


class _ReadyCollector(Collector):
    def __init__(self, statuses: Callable[[], Mapping[tuple[str, str], Mapping[str, Any]]]
                 ) -> None:
        self._statuses = statuses

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(f"{PREFIX}_objects", "Skills and Actors by Ready status",
                                   labels=["kind", "ready"])
        tally = Tally((k[0], ready_of(status)) for k, status in list(self._statuses().items())
                      if k[0] in ("Skill", "Actor"))
        for kind in ("Skill", "Actor"):
            for ready in ("True", "False", "Unknown"):
                family.add_metric([kind, ready], tally[(kind, ready)])
        yield family


class _ServerCollector(Collector):
    def __init__(self, states: Callable[[], Iterable[str]]) -> None:
        self._states = states

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            f"{PREFIX}_mcp_servers", "MCP servers discovered (one per URL and Secret), by"
            " state (ok, failing, pending: first listing not over)", labels=["state"])
        tally = Tally(self._states())
        for state in ("ok", "failing", "pending"):
            family.add_metric([state], tally[state])
        yield family
