"""The gateway's counting of a call that went well (``GatewayMetrics.called`` and
``forwarded``, by the children's values found once) against prometheus_client's
own ``inc`` and ``observe``: the same samples, bucket bounds included."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from skillop.gateway.metrics import CALL_BUCKETS, GatewayMetrics


def test_a_call_is_counted_as_prometheus_clients_own_methods_count_it() -> None:
    ours, theirs = GatewayMetrics(CollectorRegistry()), GatewayMetrics(CollectorRegistry())
    for metrics in (ours, theirs):
        metrics.serve({"ping"}, {"up"})
    amounts = [0.0, 1e-9, *CALL_BUCKETS, *(bound * 1.0001 for bound in CALL_BUCKETS), 1e6]
    for seconds in amounts:
        ours.called("ping", "ok", None, seconds, upstream="up")
        ours.forwarded("up", seconds / 2)
        theirs.calls.labels("ping", "ok", "").inc()
        theirs.call_seconds.labels("ok").observe(seconds)
        theirs.upstream_seconds.labels("up").observe(seconds / 2)
    assert _samples(ours) == _samples(theirs)
    counts = [value for (name, _), value in _samples(ours).items() if name.endswith("_count")]
    assert len(counts) == 2 and set(counts) == {len(amounts)}


def _samples(metrics: GatewayMetrics) -> dict[tuple[str, tuple[Any, ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in metrics.registry.collect() for s in family.samples
            if not s.name.endswith("_created")}
