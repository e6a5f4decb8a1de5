"""``/metrics``: scraped from a running ``skillop operator`` process (the health port).

Every value is read over HTTP, in the Prometheus text format, before and after
something a user does (apply objects, break one, ask the webhook, point a Skill
at an MCP server), and checked to move as it should. Metric-level unit checks
use a registry of their own, never prometheus_client's global one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_servers import ServerHandle, make_tool
from operatorkit import ROOT, Cluster
from prometheus_client import CollectorRegistry
from replicas import Replica, emulator_process, free_port, wait_holder

from kube_emulator import wait_for
from skillop.operator.metrics import Metrics

EXAMPLES = ROOT / "examples"
NS = "team-a"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """The emulated API in a process of its own (not conftest's in-process one)."""
    with emulator_process(tmp_path) as api:
        yield Cluster(api)  # type: ignore[arg-type]  # duck-types EmulatorHandle


@pytest.fixture
def replica(cluster: Cluster, tmp_path: Path) -> Iterator[Replica]:
    one = Replica(cluster.handle, "solo", tmp_path,
                  SKILLOP_MCP_DISCOVERY="true", SKILLOP_MCP_ALLOW="127.0.0.1",
                  SKILLOP_WEBHOOK="true", SKILLOP_WEBHOOK_PORT=str(free_port()),
                  SKILLOP_WEBHOOK_HOST="127.0.0.1")
    try:
        yield one.start()
    finally:
        one.stop()


def value(replica: Replica, sample: str) -> float:
    return replica.scrape().get(sample, 0.0)


def wait_value(replica: Replica, sample: str, expected: float, timeout: float = 15) -> None:
    wait_for(lambda: value(replica, sample) == expected, timeout=timeout, interval=0.1,
             message=f"{sample} == {expected} (is {value(replica, sample)})")


def admission(replica: Replica, obj: dict[str, Any]) -> bool:
    return replica.admit(obj)[0]


def test_metrics_follow_what_the_operator_does(cluster: Cluster, replica: Replica) -> None:
    wait_holder(cluster.handle, "solo", timeout=10)
    wait_value(replica, "skillop_leader", 1)
    text = replica.metrics_text()
    for family in ("skillop_reconcile_batch_duration_seconds histogram",
                   "skillop_reconcile_queue_depth gauge", "skillop_api_writes_total counter",
                   "skillop_objects gauge", "skillop_mcp_discovery_total counter",
                   "skillop_mcp_servers gauge", "skillop_webhook_admissions_total counter"):
        assert f"# TYPE {family}" in text, family
    assert "python_gc_objects_collected_total" not in text  # our registry, not the global one
    batches = value(replica, "skillop_reconcile_batches_total")

    cluster.apply_dir(EXAMPLES)
    cluster.wait_ready("Actor", NS, "developer", timeout=20)
    cluster.wait_ready("Actor", NS, "reviewer", timeout=20)
    wait_value(replica, 'skillop_objects{kind="Actor",ready="True"}', 2)
    samples = replica.scrape()
    assert samples["skillop_reconcile_batches_total"] > batches
    assert (samples["skillop_reconcile_batch_duration_seconds_count"]
            == samples["skillop_reconcile_batches_total"])
    assert samples['skillop_reconcile_batch_duration_seconds_bucket{le="+Inf"}'] == (
        samples["skillop_reconcile_batches_total"])
    assert samples["skillop_reconcile_batch_duration_seconds_sum"] > 0
    assert samples['skillop_api_writes_total{kind="ConfigMap",outcome="success"}'] >= 2
    assert samples['skillop_api_writes_total{kind="Actor",outcome="success"}'] >= 2
    assert samples['skillop_api_writes_total{kind="Lease",outcome="success"}'] >= 1
    # A Skill no Actor uses may be made Ready by a later batch than the Actors' (the
    # apply's watch events arrive spread over batches): the gauge follows it.
    wait_value(replica, 'skillop_objects{kind="Skill",ready="True"}',
               len(cluster.emulator.list_objects("skills")))
    # The batch that made them Ready may still be finishing (its Events, the
    # watch echoes of its own writes): the queue drains, it does not stay full.
    wait_value(replica, "skillop_reconcile_queue_depth", 0)

    # An Actor that names a Skill that does not exist: Ready=False, counted so.
    cluster.patch_spec("Actor", NS, "reviewer", {"skills": ["no-such-skill"]})
    wait_value(replica, 'skillop_objects{kind="Actor",ready="False"}', 1)
    assert value(replica, 'skillop_objects{kind="Actor",ready="True"}') == 1

    # The webhook: one denied (no description), one allowed.
    bad = {"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
           "metadata": {"name": "bad", "namespace": NS}, "spec": {"tools": 3}}
    good = {"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
            "metadata": {"name": "good", "namespace": NS},
            "spec": {"description": "fine", "builtins": ["git_operations"]}}
    assert admission(replica, bad) is False
    assert admission(replica, good) is True
    assert admission(replica, good) is True
    samples = replica.scrape()
    assert samples['skillop_webhook_admissions_total{kind="Skill",outcome="denied"}'] == 1
    assert samples['skillop_webhook_admissions_total{kind="Skill",outcome="allowed"}'] == 2

    # MCP discovery: one server that lists, one outside the allow-list (the
    # examples already name one such server).
    failing = value(replica, 'skillop_mcp_servers{state="failing"}')
    refused = value(replica, 'skillop_mcp_discovery_total{reason="URLNotAllowed"}')
    assert value(replica, 'skillop_mcp_servers{state="ok"}') == 0
    with ServerHandle(tools=[make_tool("alpha")]) as srv:
        for name, url in (("live", srv.url), ("outside", "http://example.com/mcp")):
            cluster.apply({"apiVersion": "skillop.dev/v1alpha1", "kind": "Skill",
                           "metadata": {"name": name, "namespace": NS},
                           "spec": {"description": name,
                                    "mcpServers": [{"name": "srv", "url": url}]}})
        wait_value(replica, 'skillop_mcp_servers{state="ok"}', 1)
        wait_value(replica, 'skillop_mcp_servers{state="failing"}', failing + 1)
        samples = replica.scrape()
        assert samples['skillop_mcp_discovery_total{reason="Listed"}'] >= 1
        assert samples['skillop_mcp_discovery_total{reason="URLNotAllowed"}'] >= refused + 1


def test_a_standby_reports_not_leading_and_attempts_no_write(cluster: Cluster,
                                                          tmp_path: Path) -> None:
    """The leader gauge of two replicas: exactly one is 1; the standby sends no writes."""
    a = Replica(cluster.handle, "first", tmp_path).start()
    try:
        wait_holder(cluster.handle, "first", timeout=10)
        b = Replica(cluster.handle, "second", tmp_path).start()
        try:
            cluster.apply_dir(EXAMPLES)
            cluster.wait_ready("Actor", NS, "developer", timeout=20)
            time.sleep(1)
            assert (value(a, "skillop_leader"), value(b, "skillop_leader")) == (1, 0)
            assert value(b, "skillop_leader_acquired_total") == 0
            assert value(a, "skillop_leader_acquired_total") == 1
            # Gated before the worker: the standby never even tries a write.
            assert not any(k.startswith("skillop_api_writes_total") and v
                           for k, v in b.scrape().items())
        finally:
            b.stop()
    finally:
        a.stop()


def test_counters_on_a_registry_of_their_own() -> None:
    first, second = Metrics(CollectorRegistry()), Metrics(CollectorRegistry())
    first.api_write("Actor", "success")
    first.batch(0.2, skills=3, actors=4)
    assert first.registry.get_sample_value(
        "skillop_api_writes_total", {"kind": "Actor", "outcome": "success"}) == 1
    assert second.registry.get_sample_value(
        "skillop_api_writes_total", {"kind": "Actor", "outcome": "success"}) is None
    assert first.registry.get_sample_value(
        "skillop_reconcile_batch_duration_seconds_bucket", {"le": "0.25"}) == 1
    assert first.registry.get_sample_value(
        "skillop_reconcile_objects_total", {"kind": "Actor"}) == 4
