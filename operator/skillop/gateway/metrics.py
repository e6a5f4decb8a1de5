"""The gateway's Prometheus metrics (``--metrics-listen``, a port of its own).

Every label value comes from the mounted set (a binding the set serves, an
upstream it names) or from a fixed enum here: a call of a name the set does not
serve counts under ``UNKNOWN``, and a reason is counted by its kind
(``refusal_kind``, ``failure_kind``), never by its text. So a hostile agent
calling ten thousand made-up names adds one series, not ten thousand.

Everything is registered on a ``CollectorRegistry`` of the gateway's own (as the
operator's ``operator/metrics.py``). docs/operations.md lists the metrics and
the alerts built on them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Container
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX: Final = "skillop_gateway"
#: The label value of a name the served set does not have.
UNKNOWN: Final = "(unknown)"
#: A call: a fraction of a millisecond (an Agent Skill) to its ``timeoutSeconds``.
CALL_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                       1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: From a request for approval to its decision: a person takes seconds to an hour.
DECISION_BUCKETS: Final = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)

#: Why a call was refused, by the first words of the gateway's own reason (its
#: words are fixed: ``server.py``, ``approval.py``, ``approval_request.py``).
_REFUSALS: Final = (
    ("unknown tool", "unknown_tool"),
    ("malformed", "malformed_arguments"),
    ("definition changed", "definition_changed"),
    ("upstream ", "tool_gone"),
    ("denied by", "approval_denied"),
    ("approval declined", "approval_denied"),
    ("approval cancel", "approval_denied"),
    ("approval decline", "approval_denied"),
    ("no decision", "approval_expired"),
    ("the approval was already used", "approval_expired"),
    ("the approval was not answered", "approval_expired"),
    ("the tool requires approval", "approval_unavailable"),
    ("the approval request", "approval_unavailable"),
    # identity/callers.py: the caller's token (stdio, or one that expired mid-request)
    ("no caller token", "caller_missing"),
    ("invalid caller token", "caller_invalid"),
    ("caller token not verifiable", "caller_unavailable"),
)
REFUSAL_KINDS: Final = frozenset(kind for _, kind in _REFUSALS) | {"other"}
_CALLER_REFUSALS: Final = frozenset({"missing", "invalid", "unavailable"})
#: How a call failed, by words of the gateway's own reason (a JSON-RPC error is
#: recorded by its code, ``upstream.py``).
_FAILURES: Final = (
    ("timed out", "timeout"),
    ("cancelled", "cancelled"),
    ("the tool reported an error", "tool_error"),
    ("unavailable", "unavailable"),
    ("answered MCP error", "rpc_error"),
    ("not a tool result", "bad_result"),
    ("output schema", "bad_result"),
    ("input_required", "bad_result"),
    ("is not mounted", "not_mounted"),
    ("is not in the mounted set", "not_mounted"),
)
FAILURE_KINDS: Final = frozenset(kind for _, kind in _FAILURES) | {"internal"}
#: Failures that say the upstream, not the tool or the gateway, is at fault.
UPSTREAM_FAULTS: Final = frozenset({"timeout", "unavailable", "rpc_error", "bad_result"})


def refusal_kind(reason: str | None) -> str:
    text = reason or ""
    for start, kind in _REFUSALS:
        if text.startswith(start):
            return kind
    return "other"


def failure_kind(reason: str | None) -> str:
    text = reason or ""
    for words, kind in _FAILURES:
        if words in text:
            return kind
    return "internal"


def bounded(name: str, known: Container[str]) -> str:
    """``name`` if the set has it, else ``UNKNOWN``."""
    return name if name in known else UNKNOWN


#: Label children kept found (bindings, upstreams: a set's worth).
_CACHED: Final = 4096


class GatewayMetrics:
    """The gateway's counters; ``served`` says which names may be label values."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def counter(name: str, text: str, *labels: str) -> Counter:
            return Counter(f"{PREFIX}_{name}", text, labels, registry=registry)

        def timing(name: str, text: str, label: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"{PREFIX}_{name}", text, [label], buckets=buckets,
                             registry=registry)

        self.calls = counter("calls", "tools/call by binding, outcome (ok, error, refused)"
                             " and reason (the refusal's or failure's kind; empty when ok)",
                             "binding", "outcome", "reason")
        self.call_seconds = timing("call_duration_seconds", "A call, whole (approval wait"
                                   " included), by outcome", "outcome", CALL_BUCKETS)
        self.upstream_seconds = timing("upstream_duration_seconds", "The upstream's share of"
                                       " a call (the forward and its answer), by upstream",
                                       "upstream", CALL_BUCKETS)
        self.upstream_failures = counter("upstream_failures", "Calls the upstream failed, by"
                                         " upstream and kind (timeout, unavailable, rpc_error,"
                                         " bad_result)", "upstream", "kind")
        self.approvals_requested = counter("approvals_requested", "Approvals asked for, by"
                                           " way (Request, Elicitation)", "via")
        self.approvals_decided = counter("approvals_decided", "Approvals decided, by decision"
                                         " (approved, refused)", "decision")
        self.approvals_waiting = Gauge(f"{PREFIX}_approvals_waiting",
                                       "Calls waiting for an approval now", registry=registry)
        self.approval_seconds = timing("approval_wait_seconds", "From asking for an approval"
                                       " to its decision, by decision", "decision",
                                       DECISION_BUCKETS)
        self.redactions = counter("redactions", "Upstream results that echoed a secret value"
                                  " (removed before the agent saw it), by upstream", "upstream")
        self.relistings = counter("upstream_relistings", "Upstream tool listings after the"
                                  " first (on list_changed or the relist interval), by"
                                  " upstream", "upstream")
        self.definition_changes = counter("definition_changes", "Re-listings whose"
                                          " definitions differ from the previous listing's,"
                                          " by upstream", "upstream")
        self.sessions = Gauge(f"{PREFIX}_sessions", "MCP sessions open now", registry=registry)
        self.sessions_opened = counter("sessions_opened", "MCP sessions opened")
        self.searches = counter("search_queries", "search_tools queries by result (matched,"
                                " abstained: nothing fit, refused: malformed)", "result")
        self.caller_refusals = counter("caller_refusals", "Requests refused for the caller's"
                                       " token, by reason (missing, invalid, unavailable:"
                                       " the issuer's keys); never by subject", "reason")
        self.spans_dropped = counter("spans_dropped", "Spans dropped before export: their"
                                     " queue was full, or the receiver never took them"
                                     " (slow, down or refusing)")
        self._served: Container[str] = ()
        self._upstreams: Container[str] = ()
        #: How a call that went well is counted, by binding; an upstream's time, by
        #: upstream: the children found once, not by ``labels`` for every call (its
        #: checks were half of a call's metrics), and counted as ``_counting`` and
        #: ``_observing`` do. Emptied when the names change.
        self._ok: dict[str, tuple[Callable[[float], None], Callable[[float], None]]] = {}
        self._forwarded: dict[str, Callable[[float], None]] = {}

    def serve(self, bindings: Container[str], upstreams: Container[str]) -> None:
        """The names that may be label values from now on (the set just loaded)."""
        self._served, self._upstreams = bindings, upstreams
        self._ok, self._forwarded = {}, {}

    def watch_sessions(self, count: Callable[[], int]) -> None:
        self.sessions.set_function(lambda: float(count()))

    # -- what happens --------------------------------------------------------------
    def called(self, binding: str, outcome: str, reason: str | None, seconds: float, *,
               upstream: str | None = None) -> None:
        if outcome == "ok":
            children = self._ok.get(binding)
            if children is None:
                children = (
                    _counting(self.calls.labels(bounded(binding, self._served), "ok", "")),
                    _observing(self.call_seconds.labels("ok")))
                if len(self._ok) < _CACHED:
                    self._ok[binding] = children
            children[0](1)
            children[1](seconds)
            return
        kind = ("" if outcome == "ok" else refusal_kind(reason) if outcome == "refused"
                else failure_kind(reason))
        self.calls.labels(bounded(binding, self._served), outcome, kind).inc()
        self.call_seconds.labels(outcome).observe(seconds)
        if upstream is not None and kind in UPSTREAM_FAULTS:
            self.upstream_failures.labels(bounded(upstream, self._upstreams), kind).inc()

    def forwarded(self, upstream: str, seconds: float) -> None:
        observe = self._forwarded.get(upstream)
        if observe is None:
            observe = _observing(self.upstream_seconds.labels(bounded(upstream,
                                                                      self._upstreams)))
            if len(self._forwarded) < _CACHED:
                self._forwarded[upstream] = observe
        observe(seconds)

    def approval_asked(self, via: str) -> None:
        self.approvals_requested.labels(via if via in ("Request", "Elicitation")
                                        else "other").inc()
        self.approvals_waiting.inc()

    def approval_decided(self, decision: str | None, seconds: float) -> None:
        """``decision`` None: the wait ended undecided (the call was cancelled, or the
        client is to be asked in a later round)."""
        self.approvals_waiting.dec()
        if decision is not None:
            self.approvals_decided.labels(decision).inc()
            self.approval_seconds.labels(decision).observe(seconds)

    def redacted(self, upstream: str) -> None:
        self.redactions.labels(bounded(upstream, self._upstreams)).inc()

    def relisted(self, upstream: str, *, changed: bool) -> None:
        label = bounded(upstream, self._upstreams)
        self.relistings.labels(label).inc()
        if changed:
            self.definition_changes.labels(label).inc()

    def caller_refused(self, reason: str) -> None:
        self.caller_refusals.labels(reason if reason in _CALLER_REFUSALS else "other").inc()

    def session_opened(self) -> None:
        self.sessions_opened.inc()

    def searched(self, result: str) -> None:
        self.searches.labels(result).inc()


def serve_metrics(host: str, port: int, registry: CollectorRegistry) -> tuple[Any, Any]:
    """``/metrics`` at ``http://host:port`` in a thread of its own (a scrape does not
    wait for the event loop, nor the loop for it); the server and its thread."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=host, registry=registry)


def _counting(child: Any) -> Callable[[float], None]:
    """A counter's child's ``inc`` as its value's own: what ``Counter.inc`` does for a
    positive amount without an exemplar, less its two calls of checks (the child is
    a labelled one: observable)."""
    value = getattr(child, "_value", None)
    inc = getattr(value, "inc", None)
    return inc if callable(inc) else child.inc  # type: ignore[no-any-return]


def _observing(child: Any) -> Callable[[float], None]:
    """A histogram's child's ``observe``, as ``Histogram.observe`` does without an
    exemplar: the sum, and the first bucket whose bound is not below the amount,
    found by bisection (its Python loop walks the bounds one by one)."""
    try:
        add, bounds = child._sum.inc, list(child._upper_bounds)
        buckets = [bucket.inc for bucket in child._buckets]
    except AttributeError:
        return child.observe  # type: ignore[no-any-return]
    if len(buckets) != len(bounds) or bounds[-1] != float("inf"):
        return child.observe  # type: ignore[no-any-return]

    def observe(amount: float) -> None:
        add(amount)
        buckets[bisect_left(bounds, amount)](1)

    return observe
