"""The gateway's counting of a call that went well (``GatewayMetrics.called`` and
``forwarded``, by the children's values found once) against prometheus_client's
own ``inc`` and ``observe``: the same samples, bucket bounds included."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from pinkit import installed_within_pin
from skillop.gateway.metrics import CALL_BUCKETS, GatewayMetrics, _counting, _observing


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


def test_the_installed_prometheus_client_is_counted_the_short_way() -> None:
    """The short way reads prometheus_client's private children (``_value``, ``_sum``,
    ``_buckets``, ``_upper_bounds``) and falls back to the public methods without
    them: a release that renames them would be slower, not wrong, and is caught
    here, not in a benchmark."""
    installed_within_pin("prometheus-client")
    metrics = GatewayMetrics(CollectorRegistry())
    counter = metrics.calls.labels("ping", "ok", "")
    histogram = metrics.call_seconds.labels("ok")
    assert _counting(counter) is not counter.inc
    observe = _observing(histogram)
    assert observe != histogram.observe
    observe(CALL_BUCKETS[0])
    assert _samples(metrics)[("skillop_gateway_call_duration_seconds_bucket",
                              (("le", str(CALL_BUCKETS[0])), ("outcome", "ok")))] == 1.0
