"""Token buckets (``gateway.buckets``) on a fake clock: bursts, even refill, the
retry time, every applying limit at once, and memory bounded without losing a
bucket that still owes tokens (until the hard bound)."""

from __future__ import annotations

from skillop.gateway.buckets import Buckets, Limit
from skillop.model.caller import ANONYMOUS, Caller
from skillop.model.caller_rules import CallerMatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def limit(calls: int, per_seconds: int, per: str = "CallerAndTool", *, number: int = 1,
          tools: frozenset[str] = frozenset({"t", "u"}),
          callers: CallerMatch | None = None) -> Limit:
    return Limit("Actor a/b", number, calls, per_seconds, per, callers, tools)  # type: ignore[arg-type]


ALICE, BOB = Caller("alice"), Caller("bob")


def test_a_burst_then_one_call_per_refill_with_the_time_to_wait() -> None:
    clock = Clock()
    buckets = Buckets(clock=clock)
    limits = (limit(3, 30),)
    assert [buckets.take(limits, ALICE, "t") for _ in range(3)] == [None, None, None]
    refused = buckets.take(limits, ALICE, "t")
    assert refused is not None and refused.retry_after == 10
    clock.now += 4
    refused = buckets.take(limits, ALICE, "t")
    assert refused is not None and refused.retry_after == 6
    clock.now += 6
    assert buckets.take(limits, ALICE, "t") is None
    assert buckets.take(limits, ALICE, "t") is not None


def test_whose_bucket_per_says() -> None:
    for per, expected in (("CallerAndTool", [None, None, None, None, "x"]),
                          ("Caller", [None, None, "x", "x", "x"]),
                          ("Tool", [None, "x", None, "x", "x"]),
                          ("Actor", [None, "x", "x", "x", "x"])):
        buckets = Buckets(clock=Clock())
        limits = (limit(1, 60, per),)
        got = ["x" if buckets.take(limits, caller, tool) else None
               for caller, tool in ((ALICE, "t"), (BOB, "t"), (ALICE, "u"), (BOB, "u"),
                                    (BOB, "u"))]
        assert got == expected, per


def test_every_applying_limit_needs_a_token_and_a_refusal_takes_none() -> None:
    buckets = Buckets(clock=Clock())
    tight, loose = limit(1, 60, number=1), limit(5, 60, "Actor", number=2)
    assert buckets.take((loose, tight), ALICE, "t") is None
    refused = buckets.take((loose, tight), ALICE, "t")
    assert refused is not None and refused.limit is tight
    # The refused call took nothing from the loose limit: 4 tokens remain.
    assert [buckets.take((loose,), BOB, "t") for _ in range(5)][-1] is not None
    assert buckets.take((limit(1, 60, number=3, tools=frozenset({"other"})),), ALICE, "t") is None


def test_a_limit_applies_only_to_the_callers_it_names() -> None:
    buckets = Buckets(clock=Clock())
    limits = (limit(1, 60, "Actor", callers=CallerMatch(subjects=["a*"])),)
    assert buckets.take(limits, ALICE, "t") is None
    assert buckets.take(limits, ALICE, "t") is not None
    assert [buckets.take(limits, BOB, "t") for _ in range(3)] == [None, None, None]
    assert buckets.take(limits, ANONYMOUS, "t") is None


def test_refilled_buckets_are_dropped_and_the_bound_holds() -> None:
    clock = Clock()
    buckets = Buckets(clock=clock, max_buckets=10)
    limits = (limit(2, 10, "Caller"),)
    for i in range(100):
        buckets.take(limits, Caller(f"user-{i}"), "t")
        clock.now += 10  # each bucket is full again before the next caller comes
    assert len(buckets) == 1
    for i in range(100):
        buckets.take(limits, Caller(f"busy-{i}"), "t")
    assert len(buckets) == 10
    # The most recent owe tokens and are kept: busy-99 has one token left.
    assert buckets.take(limits, Caller("busy-99"), "t") is None
    assert buckets.take(limits, Caller("busy-99"), "t") is not None
