"""The operator's Events: posted in the background, folded when many objects say the same.

A batch hands its Events over when its writes are done (``submit``) and goes on:
posting them never delays the next batch. A worker (``run``) posts them a few at
a time on the API client's own Event threads, Warnings first.

Folding, after client-go's EventCorrelator: one change to a Skill that 10,000
Actors include owes 10,000 ``ToolSetChanged`` Events, the same news each time.
Per namespace, kind, type and reason, the first ``burst`` Normal Events of a
``window`` are posted one an object; the rest of a batch's are counted and
posted as one Event, on the first object folded, that says how many objects it
stands for. Warnings (a condition turning ``False``) are never folded: each
object gets its own, once per transition.

An Event is named when it is made (the object's name and a clock reading, as
client-go names them), so posting it again after a failure the client could not
tell from success (a reset connection, a 5xx) finds it there (409) and makes no
second one. What cannot be posted before ``max_age`` (the API server down that
long), or what a full queue cannot hold, is counted in
``skillop_events_total{outcome}`` and logged once per episode, never silently.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from skillop.model.names import ObjectRef
from skillop.model.wording import count
from skillop.operator.kube.errors import Gone, NotLeader, Refused
from skillop.operator.outputs import EventSpec

log = logging.getLogger("skillop.events")

#: Normal Events posted one an object per (namespace, kind, type, reason) and window.
BURST = 25
WINDOW_SECONDS = 60.0
#: Events in flight at once (each on one of the API client's Event threads).
CONCURRENCY = 2
#: Events waiting at most; past it the oldest Normal one is dropped (and counted).
CAPACITY = 20_000
#: An Event not posted within this many seconds of being made is given up (counted).
MAX_AGE_SECONDS = 300.0
#: Pauses of the worker while the API server does not answer.
RETRY_DELAYS = (1.0, 2.0, 5.0, 10.0, 20.0)
_NAME_MAX = 253


@dataclass(frozen=True, slots=True)
class Event:
    """One Event to post: on what, what it says, and its name (fixed when made)."""

    kind: str
    ref: ObjectRef
    uid: str
    spec: EventSpec
    name: str
    made: float  # the monotonic clock's reading when it was made
    at: float  # the wall clock's, for its timestamps


Post = Callable[[Event], Awaitable[None]]
Outcome = Callable[[str, int], None]
_Fold = tuple[str, str, str, str]  # namespace, kind, type, reason


@dataclass(slots=True)
class _Folded:
    first: Event
    objects: int = 0


@dataclass(slots=True)
class _Window:
    started: float
    posted: int = 0


@dataclass
class EventRecorder:
    """Folds, queues and posts Events; ``outcome(outcome, n)`` counts them."""

    post: Post
    outcome: Outcome = lambda outcome, n: None
    burst: int = BURST
    window: float = WINDOW_SECONDS
    concurrency: int = CONCURRENCY
    capacity: int = CAPACITY
    max_age: float = MAX_AGE_SECONDS
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    _warnings: deque[Event] = field(default_factory=deque)
    _normal: deque[Event] = field(default_factory=deque)
    _windows: dict[_Fold, _Window] = field(default_factory=dict)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _serial: Iterator[int] = field(default_factory=itertools.count)
    _lost: dict[str, int] = field(default_factory=dict)  # this episode's, logged once

    # -- intake --------------------------------------------------------------------------
    def submit(self, events: Iterable[tuple[str, ObjectRef, str, EventSpec]]) -> None:
        """Queue a batch's Events (never waits): Warnings each, Normal ones folded."""
        now = self.clock()
        if len(self._windows) > 1024:  # namespaces come and go: their spent windows too
            self._windows = {k: w for k, w in self._windows.items()
                             if now - w.started < self.window}
        folded: dict[_Fold, _Folded] = {}
        for kind, ref, uid, spec in events:
            event = self._made(kind, ref, uid, spec, now)
            if spec.type == "Warning":
                self._queue(event)
                continue
            fold = (ref.namespace, kind, spec.type, spec.reason)
            window = self._windows.get(fold)
            if window is None or now - window.started >= self.window:
                window = self._windows[fold] = _Window(now)
            if window.posted < self.burst:
                window.posted += 1
                self._queue(event)
            else:
                folded.setdefault(fold, _Folded(event)).objects += 1
        for (namespace, kind, _, reason), group in folded.items():
            self.outcome("combined", group.objects)
            self._queue(self._made(kind, group.first.ref, group.first.uid, EventSpec(
                "Normal", reason, _combined(kind, namespace, group, self.burst, self.window)),
                now))
        self._wake.set()

    def _made(self, kind: str, ref: ObjectRef, uid: str, spec: EventSpec,
              now: float) -> Event:
        at = self.wall()
        suffix = f".{int(at * 1e9):x}{next(self._serial) % 4096:03x}"
        return Event(kind, ref, uid, spec, ref.name[:_NAME_MAX - len(suffix)] + suffix, now, at)

    def _queue(self, event: Event) -> None:
        if len(self._warnings) + len(self._normal) >= self.capacity:
            if not self._normal and event.spec.type != "Warning":
                self._lose("dropped", event, "the queue is full")
                return
            self._lose("dropped", (self._normal or self._warnings).popleft(),
                       "the queue is full")
        (self._warnings if event.spec.type == "Warning" else self._normal).append(event)

    @property
    def waiting(self) -> int:
        return len(self._warnings) + len(self._normal)

    # -- posting ----------------------------------------------------------------------
    async def run(self) -> None:
        """Post what is queued, for ever."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.drain()

    async def drain(self) -> None:
        """Post everything queued; while the API server does not answer, pause
        between rounds and keep what failed (in order) until it is too old."""
        delays = iter(RETRY_DELAYS)
        while self.waiting:
            taken = [self._take() for _ in range(min(self.concurrency * 8, self.waiting))]
            failed = [e for e in await self._post_all(taken) if e is not None]
            if not failed:
                delays = iter(RETRY_DELAYS)
                continue
            for event in reversed(failed):
                if self.clock() - event.made > self.max_age:
                    self._lose("failed", event, f"not posted within {self.max_age:g} s")
                else:
                    (self._warnings if event.spec.type == "Warning"
                     else self._normal).appendleft(event)
            await asyncio.sleep(next(delays, RETRY_DELAYS[-1]))
        if self._lost:
            self._lost.clear()  # the next loss is a new episode: logged again

    def _take(self) -> Event:
        return (self._warnings or self._normal).popleft()

    async def _post_all(self, events: list[Event]) -> list[Event | None]:
        limit = asyncio.Semaphore(self.concurrency)

        async def one(event: Event) -> Event | None:
            async with limit:
                return await self._post_one(event)

        return list(await asyncio.gather(*(one(e) for e in events)))

    async def _post_one(self, event: Event) -> Event | None:
        """None when done with (posted, or given up for good); the event to retry."""
        try:
            await self.post(event)
        except NotLeader:
            self._lose("dropped", event, "this replica stopped leading")
        except (Gone, Refused) as err:
            self._lose("failed", event, str(err))
        except Exception:  # the API server down or overloaded: retried
            return event
        else:
            self.outcome("posted", 1)
        return None

    def _lose(self, outcome: str, event: Event, why: str) -> None:
        self.outcome(outcome, 1)
        if outcome not in self._lost:
            log.warning("event %s on %s %s %s: %s (counted in skillop_events_total{outcome=%r};"
                        " further ones not logged until the queue is empty)",
                        event.spec.reason, event.kind, event.ref, outcome, why, outcome)
        self._lost[outcome] = self._lost.get(outcome, 0) + 1


class Poster(Protocol):
    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None: ...


def posting_through(writer: Poster) -> Post:
    """Events posted by ``writer.post_event`` (the operator gives the recorder
    ``Kube.create_event``, which posts each under its name)."""
    async def post(event: Event) -> None:
        spec = event.spec
        await writer.post_event(event.kind, event.ref, event.uid, spec.type, spec.reason,
                                spec.message)

    return post


def _combined(kind: str, namespace: str, group: _Folded, burst: int, window: float) -> str:
    """"this one and 9,974 other Actors of namespace team-a: 12 tools (+1 -0 ~0), ...
    (one Event for them all; the first 25 in 60 s have one each)"."""
    others = count(group.objects - 1, f"other {kind}")
    return (f"this one and {others} of namespace {namespace}: {group.first.spec.message}"
            f" (one Event for them all; the first {burst} in {window:g} s have one each)"
            )[:1024]
