"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.

Every replica watches and keeps its store warm; only the one holding the Lease
writes (the reconciler and the API client are gated on ``is_leader``).

* The Lease's spec says who holds it (``holderIdentity``), for how long without
  renewal (``leaseDurationSeconds``), since when (``acquireTime``), when it was
  last renewed (``renewTime``) and how often it changed hands
  (``leaseTransitions``).
* Each replica reads it every ``retry_seconds``. The leader renews it; a standby
  takes it when it is free (no holder: released) or expired. Expiry is judged
  like client-go does, by this replica's own clock: a record that has not
  changed for ``leaseDurationSeconds`` since this replica first saw it, so
  clocks that disagree between nodes do not matter.
* Every write asserts the ``resourceVersion`` read (a create asserts there is
  none): of two replicas racing for the Lease, the API server lets exactly one
  win and answers 409 to the other.
* A leader that cannot renew for ``renew_deadline_seconds`` (shorter than the
  lease duration) stops writing before anyone else may take over. The write
  gate (``may_write``) is that rule itself, not the ``is_leader`` flag: it
  compares this replica's monotonic clock with the last successful renewal at
  every write, so a leader that was paused (SIGSTOP, a frozen node, a long GC)
  past its deadline sends nothing when it resumes, even before its election
  loop runs again. The renewal is dated when its read was sent, never later.
* On a graceful stop the leader releases the Lease (no holder, duration 1 s, as
  client-go's ReleaseOnCancel), so a standby takes it at its next look.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from skillop.operator.kube import MICRO_TIME, LeaseConflict, LeaseRecord, LeaseUnavailable
from skillop.operator.settings import LeaseConfig

log = logging.getLogger("skillop.leader")


class LeaseApi(Protocol):
    async def read_lease(self, namespace: str, name: str, *,
                         timeout: float) -> LeaseRecord | None: ...

    async def write_lease(self, namespace: str, name: str, record: LeaseRecord, *,
                          timeout: float) -> str: ...


def now_micro() -> str:
    return datetime.datetime.now(datetime.UTC).strftime(MICRO_TIME)


class Elector:
    def __init__(self, api: LeaseApi, config: LeaseConfig, *,
                 on_lead: Callable[[], None], on_follow: Callable[[], None],
                 on_resume: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.api = api
        self.config = config
        self.on_lead = on_lead
        self.on_follow = on_follow
        #: Called instead of ``on_lead`` when this process takes back a Lease that
        #: no one else held since it last led (its renewals failed: an API server
        #: restart): nothing was written meanwhile but what it will write itself.
        self.on_resume = on_resume or on_lead
        self._led = False  # this process has led before
        self._still_mine = False  # the Lease just taken named this replica
        self.clock = clock
        self.is_leader = False
        #: The Lease as last read or written, and when (this replica's clock) it
        #: last changed: the base of expiry.
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at = 0.0

    def may_write(self) -> bool:
        """Whether this replica may write now: it leads, and its last successful
        renewal is younger than the renew deadline (client-go's rule)."""
        return self.is_leader and (self.clock() - self._renewed_at
                                   < self.config.renew_deadline_seconds)

    @property
    def identity(self) -> str:
        return self.config.identity

    # -- the loop -------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except Exception:  # a bug must not freeze leadership as it is
                log.exception("lease %s: election step failed", self._name)
                if self.is_leader:
                    self._follow()
            await asyncio.sleep(self.next_look())

    def next_look(self) -> float:
        """Seconds until the next look: the retry period, or less if the other
        holder's Lease expires sooner (a crash is taken over at expiry, not up to
        a retry period later)."""
        retry = self.config.retry_seconds
        if self.is_leader or self._observed is None or not self._held_by_other():
            return retry
        expiry = self._observed_at + self._observed.duration_seconds - self.clock()
        return min(retry, max(0.05, expiry + 0.01))

    async def step(self) -> None:
        """One look at the Lease: acquire or renew it, or step down."""
        asked = self.clock()  # the renewal is no younger than its first request
        try:
            won = await self._try_acquire_or_renew()
        except (LeaseUnavailable, LeaseConflict) as err:
            log.info("lease %s: %s", self._name, err)
            won = False
        if won:
            self._renewed_at = asked
            if not self.is_leader:
                self._lead()
        elif self.is_leader and (self._held_by_other()
                                 or self.clock() - self._renewed_at
                                 > self.config.renew_deadline_seconds):
            log.warning("lease %s: lost (held by %r); stopped writing", self._name,
                        self._observed.holder if self._observed else None)
            self._follow()

    async def release(self) -> None:
        """Give the Lease up (a graceful stop): a standby takes it at once.

        Reads the Lease first: a renewal cut short by the stop may have changed it
        after this replica last looked (its own write, a newer resourceVersion).
        """
        if not self.is_leader:
            return
        self._follow()  # stop writing first
        for _ in range(3):
            try:
                current = await self.api.read_lease(self.config.namespace, self.config.name,
                                                    timeout=self._timeout)
                if current is None or current.holder != self.identity:
                    return
                now = now_micro()
                released = replace(current, holder="", duration_seconds=1, acquire_time=now,
                                   renew_time=now)
                await self.api.write_lease(self.config.namespace, self.config.name, released,
                                           timeout=self._timeout)
                log.info("lease %s: released", self._name)
                return
            except LeaseConflict:
                continue  # changed between the read and the write: look again
            except LeaseUnavailable as err:
                log.warning("lease %s: not released (%s); it expires in %gs", self._name,
                            err, self.config.duration_seconds)
                return
        log.warning("lease %s: not released (kept changing)", self._name)

    # -- internals ----------------------------------------------------------------------
    @property
    def _name(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    @property
    def _timeout(self) -> float:
        # A hung request must not hold a renewal past the renew deadline.
        return max(1.0, min(5.0, self.config.renew_deadline_seconds / 2))

    def _observe(self, record: LeaseRecord) -> None:
        old = self._observed
        if old is None or replace(old, resource_version=None) != replace(
                record, resource_version=None):
            self._observed_at = self.clock()
        self._observed = record

    def _held_by_other(self) -> bool:
        return self._observed is not None and self._observed.holder not in ("", self.identity)

    def _expired(self, record: LeaseRecord) -> bool:
        return self.clock() > self._observed_at + record.duration_seconds

    async def _try_acquire_or_renew(self) -> bool:
        namespace, name = self.config.namespace, self.config.name
        now = now_micro()
        mine = LeaseRecord(holder=self.identity,
                           duration_seconds=round(self.config.duration_seconds),
                           acquire_time=now, renew_time=now)
        current = await self.api.read_lease(namespace, name, timeout=self._timeout)
        if current is None:
            version = await self.api.write_lease(namespace, name, mine, timeout=self._timeout)
            self._observe(replace(mine, resource_version=version))
            return True
        self._observe(current)
        self._still_mine = current.holder == self.identity
        if current.holder and current.holder != self.identity and not self._expired(current):
            return False
        if current.holder == self.identity:
            mine = replace(mine, acquire_time=current.acquire_time,
                           transitions=current.transitions)
        else:
            mine = replace(mine, transitions=current.transitions + 1)
        mine = replace(mine, resource_version=current.resource_version)
        version = await self.api.write_lease(namespace, name, mine, timeout=self._timeout)
        self._observe(replace(mine, resource_version=version))
        return True

    def _lead(self) -> None:
        resumed = self._led and self._still_mine
        log.info("lease %s: %s by %s; this replica writes now", self._name,
                 "taken back" if resumed else "acquired", self.identity)
        self.is_leader = True
        self._led = True
        (self.on_resume if resumed else self.on_lead)()

    def _follow(self) -> None:
        self.is_leader = False
        self.on_follow()


async def stop(task: asyncio.Task[None] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
