"""Token buckets for the ToolSet's ``rateLimits`` (docs/gateway.md, "Rate limits").

A limit of ``calls`` per ``perSeconds`` is a bucket of ``calls`` tokens refilled
evenly at ``calls / perSeconds`` a second; a call takes one token from the
bucket of every limit that covers it, or, when any of them is empty, takes none
and is refused with the time until that bucket has a token again.

Memory is bounded: buckets are kept in least-recently-used order, at most
``max_buckets`` of them. A bucket that has refilled to full says nothing a new
bucket would not, so such buckets are dropped from the old end as new ones come
(lossless); only past the bound is a bucket that still owes tokens dropped (its
caller then starts afresh). Time is the monotonic clock (a wall-clock step
neither refills nor empties a bucket).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from skillop.model.caller import Caller
from skillop.model.caller_rules import CallerMatch, LimitScope, matches
from skillop.model.toolset import RateLimitEntry

#: The most buckets a gateway keeps (a few dozen bytes each).
MAX_BUCKETS: Final = 100_000
#: A bucket: its tokens, when they were counted (monotonic seconds), its size
#: and its rate (tokens a second).
_State = list[float]


@dataclass(frozen=True, slots=True)
class Limit:
    """One ``rateLimits`` entry of the set, its tools as a set."""

    origin: str
    limit: int
    calls: int
    per_seconds: int
    per: LimitScope
    callers: CallerMatch | None
    tools: frozenset[str]

    @property
    def rate(self) -> float:
        """Tokens per second."""
        return self.calls / self.per_seconds

    def applies(self, caller: Caller, binding: str) -> bool:
        return binding in self.tools and (self.callers is None or matches(self.callers, caller))

    def key(self, caller: Caller, binding: str) -> Hashable:
        """The bucket a call takes from: the limit itself (same origin, number and
        size: a reload that keeps the limit keeps its buckets), and the caller's
        subject and the tool as ``per`` says (anonymous callers share one)."""
        who = caller.subject if self.per in ("CallerAndTool", "Caller") else None
        what = binding if self.per in ("CallerAndTool", "Tool") else None
        return (self.origin, self.limit, self.calls, self.per_seconds, self.per, who, what)

    def describe(self) -> str:
        whose = {"CallerAndTool": "per caller and tool", "Caller": "per caller",
                 "Tool": "per tool", "Actor": "in all"}[self.per]
        return (f"{self.origin}: rate limit {self.limit} ({self.calls} calls per"
                f" {self.per_seconds} s {whose})")


def limits_of(entries: Iterable[RateLimitEntry]) -> tuple[Limit, ...]:
    return tuple(Limit(e.origin, e.limit, e.calls, e.per_seconds, e.per, e.callers,
                       frozenset(e.tools)) for e in entries)


@dataclass(frozen=True, slots=True)
class Refused:
    """No token: ``limit`` is empty for this call, for ``retry_after`` seconds."""

    limit: Limit
    retry_after: int


class Buckets:
    """Every limit's buckets, bounded (module docstring)."""

    __slots__ = ("_buckets", "_clock", "_max")

    def __init__(self, *, max_buckets: int = MAX_BUCKETS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._buckets: OrderedDict[Hashable, _State] = OrderedDict()
        self._clock = clock
        self._max = max_buckets

    def __len__(self) -> int:
        return len(self._buckets)

    def take(self, limits: Sequence[Limit], caller: Caller, binding: str) -> Refused | None:
        """Take a token from the bucket of each of ``limits`` that applies to the
        call, or from none when one is empty: then which, and when to retry."""
        now = self._clock()
        states = []
        for limit in limits:
            if not limit.applies(caller, binding):
                continue
            state = self._state(limit.key(caller, binding), limit, now)
            if state[0] < 1.0:
                wait = (1.0 - state[0]) / limit.rate
                self._trim(now)
                return Refused(limit, max(1, math.ceil(wait - 1e-9)))
            states.append(state)
        for state in states:
            state[0] -= 1.0
        # After the take: a bucket this call made is not full any more, so kept.
        self._trim(now)
        return None

    def _state(self, key: Hashable, limit: Limit, now: float) -> _State:
        buckets = self._buckets
        state = buckets.get(key)
        if state is None:
            state = buckets[key] = [float(limit.calls), now, float(limit.calls), limit.rate]
        else:
            buckets.move_to_end(key)
            state[0] = _refilled(state, now)
            state[1] = now
        return state

    def _trim(self, now: float) -> None:
        """Drop the least recently used bucket if it has refilled (nothing is lost),
        and any beyond the bound."""
        buckets = self._buckets
        while len(buckets) > 1:
            key, state = next(iter(buckets.items()))
            if len(buckets) <= self._max and _refilled(state, now) < state[2]:
                return
            del buckets[key]


def _refilled(state: _State, now: float) -> float:
    """The bucket's tokens at ``now``."""
    return min(state[2], state[0] + (now - state[1]) * state[3])
