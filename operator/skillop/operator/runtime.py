"""The cascade: gather changes, resolve exactly what they affect, write what differs.

Watch events mark keys dirty; one worker waits a short debounce so a burst of
changes (an ``kubectl apply -f dir/``) becomes one batch, then resolves every
affected Skill and Actor against one Resolver (each skill flattened once per
batch) and performs only the writes a Plan says are needed. Nothing is written
before the store has seen the initial listing of every kind.

With leader election a standby keeps its store warm and gathers changes but
processes no batch (``leading`` is clear); on becoming the leader it marks every
Skill and Actor (``lead``): one level-based full pass writes whatever changed
while no one was leading, and nothing else.

At most ``concurrency`` objects are in progress at once, each resolved, planned
and its ConfigMap written within its slot, so a batch of thousands starts
writing at once. ConfigMaps go first: they are what an actor's pods read. A
window of ``16 * concurrency`` objects has its ConfigMaps written, then its
statuses (each after its own ConfigMap, as before), so a batch holds at most
that many statuses (a few MiB), and a change reaching 60 Actors lands in their
pods without waiting for 60 status writes. Events go to ``events.EventRecorder``
after the batch's writes, posted in the background: they never delay a write
that carries a tool set, nor the next batch.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from skillop.model.manifest import POLICY_KINDS, ActorResource, SkillResource
from skillop.model.names import ObjectRef
from skillop.model.problems import Problem
from skillop.model.shardselector import LabelSelector
from skillop.model.status import RecordedStatus, utcnow
from skillop.model.toolset import MAX_PARTS, part_configmap_name
from skillop.model.wording import count
from skillop.operator.actorplan import actor_plan
from skillop.operator.credentials import CredentialChecker
from skillop.operator.deps import Affected, Key, key, ref_of
from skillop.operator.events import EventRecorder, posting_through
from skillop.operator.metrics import Metrics
from skillop.operator.outputs import (
    EventSpec,
    Plan,
    ServerReport,
    invalid_status,
    policy_status,
    skill_plan,
)
from skillop.operator.shard import Shard
from skillop.operator.staleparts import StaleParts
from skillop.operator.store import Store
from skillop.operator.writing import (
    PlanWrites,
    Refusal,
    Sent,
    Staged,
    StatusWrite,
    Writer,
    written_digest,
)
from skillop.resolve.inject import set_credentials
from skillop.resolve.resolver import Resolver
from skillop.resolve.toolset import configmap_name

log = logging.getLogger("skillop.reconcile")
T = TypeVar("T")


class Lister(Protocol):
    async def list_uids(self, kind: str, namespaces: Sequence[str] = (),
                        ) -> dict[ObjectRef, str]: ...


#: The kinds the store holds, in the order their membership is checked: Actors
#: first, so that no ConfigMap is written for an Actor about to be dropped.
KINDS = ("Actor", "Skill", "Tool", "SkillPolicy", "ClusterSkillPolicy", "ConfigMap", "Namespace")


ServerStates = Callable[[SkillResource], Sequence[ServerReport]]
ActorWarnings = Callable[[ActorResource, Sequence[ObjectRef]], Sequence[str]]


class Reconciler(PlanWrites):
    def __init__(self, store: Store, writer: Writer, *, debounce: float = 0.05,
                 concurrency: int = 16, clock: Callable[[], str] = utcnow,
                 server_states: ServerStates | None = None,
                 actor_warnings: ActorWarnings | None = None,
                 metrics: Metrics | None = None,
                 credentials: CredentialChecker | None = None,
                 shard: Shard | None = None, stale_grace: float = 120.0,
                 events: EventRecorder | None = None) -> None:
        self.store = store
        #: Parts no index names, deleted after this grace (``staleparts``).
        self.stale_parts = StaleParts(stale_grace)
        #: Which namespaces this installation writes (all, unsharded).
        self.shard = shard or Shard(LabelSelector(), cluster_owner=True,
                                    labels=store.catalog.namespaces.get)
        self.writer = writer
        self.debounce = debounce
        self.clock = clock
        self.loaded = asyncio.Event()
        #: Set while this replica may write (always, without leader election).
        self.leading = asyncio.Event()
        self.leading.set()
        self._dirty: set[Key] = set()
        self._wake = asyncio.Event()
        self._limit = asyncio.Semaphore(concurrency)
        self._window = 16 * concurrency
        self._events: list[tuple[str, ObjectRef, str, EventSpec]] = []
        self._sent = Sent()  # this batch's writes, for its log line
        #: Actors whose ConfigMaps the API server refused for good: what was sent
        #: (``written_digest``) and its words, so the same is not sent again.
        self._refused: dict[ObjectRef, tuple[str, str]] = {}
        #: Kinds a watch listed again (a watch gap): their membership is checked.
        self._relisted: set[str] = set()
        self._relist_wake = asyncio.Event()
        #: What status says of a Skill's MCP servers, and extra warnings for an
        #: Actor: plain declared facts unless discovery provides live ones.
        self.server_states: ServerStates = server_states or _declared_states
        self.actor_warnings: ActorWarnings = actor_warnings or (lambda actor, skills: ())
        self.batches = 0
        self.metrics = metrics
        #: Posts a batch's Events in the background (its ``run``: the operator's task).
        self.events = events or EventRecorder(posting_through(writer))
        #: With injection on: the Actors' Secrets and out-of-date pods (status).
        self.credentials = credentials
        if metrics is not None:
            metrics.watch_queue(lambda: len(self._dirty))
            metrics.watch_objects(lambda: self.store.statuses)

    # -- intake -------------------------------------------------------------------
    def mark(self, keys: Iterable[Key]) -> None:
        before = len(self._dirty)
        self._dirty.update(keys)
        if len(self._dirty) != before:
            self._wake.set()

    def request(self, kind: str, namespace: str, name: str) -> None:
        self.mark({key(kind, ObjectRef(namespace, name))})

    def relisted(self, kind: str) -> None:
        """A watch listed ``kind`` again, or a write found an object gone: the store
        is checked against the API server's list (``membership``)."""
        self._relisted.add(kind)
        self._relist_wake.set()

    def everything(self) -> set[Key]:
        catalog = self.store.catalog
        return ({key("Skill", r) for r in catalog.skills}
                | {key("Actor", r) for r in catalog.actors}
                | {key(p.kind, r) for r, p in catalog.policies.items()}
                | set(self.store.invalid))

    def of_namespace(self, namespace: str) -> set[Key]:
        """Every object of ``namespace`` a batch plans (a namespace changed shard)."""
        return {k for k in self.everything() if ref_of(k).namespace == namespace}

    # -- leadership -----------------------------------------------------------------
    def lead(self) -> None:
        """This replica became the leader: a full pass, then business as usual."""
        self.mark(self.everything())
        self._wake.set()
        self.leading.set()

    def resume(self) -> None:
        """Leading again, no other replica having led meanwhile: what changed was
        gathered (re-lists included) and failed writes kept; no full pass."""
        self._wake.set()
        self.leading.set()

    def follow(self) -> None:
        """This replica is a standby: changes gather, no batch runs."""
        self.leading.clear()

    # -- the worker ---------------------------------------------------------------
    async def run(self) -> None:
        await self.loaded.wait()
        while True:
            await self._wake.wait()
            await self.leading.wait()
            await asyncio.sleep(self.debounce)
            if not self.leading.is_set():
                continue
            self._wake.clear()
            batch, self._dirty = self._dirty, set()
            try:
                await self.process(batch)
            except Exception:  # keep the worker alive; the keys are retried
                log.exception("reconcile batch failed; retrying in 2s")
                await asyncio.sleep(2)
                self.mark(batch)

    async def resync(self, every: float) -> None:
        """The slow timer: re-check every Skill and Actor (writes only what drifted),
        and what the store holds against the API's lists (a deletion no watch told)."""
        await self.loaded.wait()
        while True:
            await asyncio.sleep(every)
            for kind in KINDS:
                self.relisted(kind)
            self.mark(self.everything())

    async def membership(self, lister: Lister, namespaces: Sequence[str] = (), *,
                         settle: float = 0.5) -> None:
        """Make the store hold what the API server holds, for each kind relisted.

        kopf lists again after a watch gap but reports no deletion for what
        vanished meanwhile; one metadata-only list per kind (after ``settle``
        seconds, so a re-list of thousands of objects costs one) tells what is
        gone, or re-created under a new uid, and that cascades like a deletion.
        Every replica does it: a standby's store must be right when it leads.
        """
        while True:
            await self._relist_wake.wait()
            await asyncio.sleep(settle)
            self._relist_wake.clear()
            kinds, self._relisted = self._relisted, set()
            for kind in sorted(kinds, key=KINDS.index):
                since = self.store.checkpoint()  # before the list is asked for
                try:
                    listed = await lister.list_uids(kind, namespaces)
                except Exception as err:  # WriteFailed (after retries) or a client error
                    log.warning("could not list %s to check the store: %s; retrying",
                                kind, err)
                    self.relisted(kind)
                    await asyncio.sleep(1)
                    continue
                gone = self.store.reconcile_members(kind, listed, since=since)
                if gone:
                    log.info("%s: %d gone or re-created without an event", kind, len(gone))
                self.mark(gone)

    async def process(self, changed: set[Key]) -> None:
        self.batches += 1
        started = time.monotonic()
        changed = changed | await self._read_wanted()
        # Another shard's objects are read (an include across namespaces) but
        # neither planned nor written here.
        owns = self.shard.owns
        reached = self.store.deps.dependents(changed)
        affected = Affected(frozenset(r for r in reached.skills if owns(r.namespace)),
                            frozenset(r for r in reached.actors if owns(r.namespace)))
        changed = {k for k in changed if owns(ref_of(k).namespace)}
        resolver = Resolver(self.store.catalog)
        jobs: list[Callable[[], Awaitable[Staged]]] = [
            *(functools.partial(self._skill, resolver, ref) for ref in sorted(affected.skills)),
            *(functools.partial(self._actor, resolver, ref) for ref in sorted(affected.actors)),
            *(functools.partial(self._policy, k) for k in sorted(changed)
              if k[0] in POLICY_KINDS and k not in self.store.invalid),
            *(functools.partial(self._invalid, k) for k in sorted(changed)
              if k in self.store.invalid)]
        failed: list[Key] = []
        self._sent = Sent()
        for start in range(0, len(jobs), self._window):
            staged = await self._bounded(jobs[start:start + self._window])
            failed += [s for s in staged if isinstance(s, tuple)]
            writes = [functools.partial(self._write_status, s) for s in staged
                      if isinstance(s, StatusWrite)]
            failed += [k for k in await self._bounded(writes) if k is not None]
        written = time.monotonic() - started
        events, self._events = self._events, []
        self.events.submit(events)
        if self.metrics is not None:
            self.metrics.batch(time.monotonic() - started, skills=len(affected.skills),
                               actors=len(affected.actors))
        log.info("batch %d: %s -> %s, %s; %s in %.3fs, %s queued",
                 self.batches, count(len(changed), "change"), count(len(affected.skills), "skill"),
                 count(len(affected.actors), "actor"),
                 self._sent.summary(len(jobs), set(failed)), written,
                 count(len(events), "event"))
        if failed:
            await asyncio.sleep(1)
            self.mark(failed)

    async def _bounded(self, jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        """Run every job, at most ``concurrency`` at a time.

        A job resolves and plans only once it has its slot: were every object
        resolved up front, a big batch would hold every plan in memory and its
        first writes would wait for the last object to be resolved.
        """
        async def one(job: Callable[[], Awaitable[T]]) -> T:
            async with self._limit:
                return await job()

        return list(await asyncio.gather(*(one(job) for job in jobs)))

    async def _read_wanted(self) -> set[Key]:
        """Read the ConfigMaps Skills started referencing while the store knew only
        their names, so those Skills resolve with their data, not as not found."""
        wanted = sorted(self.store.take_wanted())
        if not wanted:
            return set()
        bodies = await asyncio.gather(*(self.writer.read_configmap(r) for r in wanted),
                                      return_exceptions=True)
        failed = [r for r, b in zip(wanted, bodies, strict=True) if isinstance(b, BaseException)]
        if failed:
            self.store.wanted.update(wanted)
            raise RuntimeError(f"could not read ConfigMap {failed[0]}: "
                               f"{bodies[wanted.index(failed[0])]}")
        changed: set[Key] = set()
        for ref, body in zip(wanted, bodies, strict=True):
            if isinstance(body, dict):
                changed |= self.store.upsert(body)
            else:  # deleted meanwhile
                changed |= self.store.remove("ConfigMap", ref.namespace, ref.name)
        return changed

    def _waiting(self, resolver: Resolver, skills: Iterable[ObjectRef]) -> bool:
        """Whether a resolution reaches an MCP server still being listed since start.

        Such objects are resolved when that first listing ends (Discovery marks
        them), so a restart never flips an Actor to declared tools and back.
        """
        pending = self.store.catalog.pending
        if not pending:
            return False
        for ref in skills:
            view = resolver.view(ref)
            if view is not None and any(s.discovery_key(ref.namespace) in pending
                                        for s in view.servers):
                return True
        return False

    async def _skill(self, resolver: Resolver, ref: ObjectRef) -> Staged:
        skill = self.store.catalog.skills.get(ref)
        resolution = resolver.resolve_skill(ref)
        if skill is None or resolution is None or self._waiting(resolver, resolution.skills):
            return None
        k = key("Skill", ref)
        plan = skill_plan(skill, resolution, old_status=self.store.statuses.get(k, {}),
                          servers=self.server_states(skill), now=self.clock())
        return StatusWrite("Skill", ref, skill.meta.uid, plan.status, plan.events)

    async def _actor(self, resolver: Resolver, ref: ObjectRef) -> Staged:
        actor = self.store.catalog.actors.get(ref)
        resolution = resolver.resolve_actor(ref)
        if actor is None or resolution is None or self._waiting(resolver, resolution.skills):
            return None
        observed = self.store.observed_configmap(ObjectRef(ref.namespace, configmap_name(actor)))
        if observed is None and ref in self.store.lost and not await self._exists(
                "Actor", ref, actor.meta.uid):
            return None
        credentials = None
        if self.credentials is not None:
            needed = set_credentials(resolution.bound_servers, actor.spec.callers)
            credentials = await self.credentials.state(ref, needed)
            if credentials.missing:  # look again soon: someone is creating it, one hopes
                asyncio.get_running_loop().call_later(
                    self.credentials.missing_ttl, self.request, "Actor", ref.namespace, ref.name)
        parts = {name: found for name in self._part_names(ref, actor)
                 if (found := self.store.observed_configmap(ObjectRef(ref.namespace, name)))}

        def plan_with(refused: str | None = None) -> Plan:
            return actor_plan(actor, resolution,
                              old_status=self.store.statuses.get(key("Actor", ref), {}),
                              observed=observed, now=self.clock(),
                              extra_warnings=self.actor_warnings(actor, resolution.skills),
                              credentials=credentials, observed_parts=parts, refused=refused)

        plan = plan_with()
        due, wait = self.stale_parts.due(ref, plan.stale)
        if wait is not None:  # asked again once the grace is over
            asyncio.get_running_loop().call_later(wait, self.request, "Actor", ref.namespace,
                                                  ref.name)
        plan = replace(plan, stale=due)
        before = self._refused.get(ref)
        # The hash of what the plan writes: compared only with a refusal on record.
        attempt = written_digest(plan) if before is not None else None
        if attempt is not None and before is not None and before[0] == attempt:
            # Refused for good already: the same ConfigMaps are not sent again.
            plan = plan_with(before[1])
        elif before is not None and attempt is None:
            del self._refused[ref]
        staged = await self._write("Actor", ref, actor.meta.uid, plan,
                                   exists=observed is not None,
                                   version=observed.resource_version if observed else None,
                                   parts=parts)
        if not isinstance(staged, Refusal):
            return staged
        attempt = written_digest(plan)
        assert attempt is not None
        self._refused[ref] = (attempt, staged.message)
        refused = plan_with(staged.message)
        return StatusWrite("Actor", ref, actor.meta.uid, refused.status, refused.events)

    def _part_names(self, ref: ObjectRef, actor: ActorResource) -> list[str]:
        """The names a packed set's parts may have (whether written or not)."""
        name = configmap_name(actor)
        return [part_configmap_name(name, i) for i in range(1, MAX_PARTS)]

    async def _exists(self, kind: str, ref: ObjectRef, uid: str) -> bool:
        """Whether the object the store holds still exists, asked of the API before
        re-creating a ConfigMap the store saw deleted: the garbage collector deletes
        the ConfigMap of an Actor deleted in a watch gap, and re-creating it for the
        dead Actor would loop (create, collect) until the membership check."""
        self.store.lost.discard(ref)
        try:
            current = await self.writer.uid_of(kind, ref)
        except Exception as err:  # unknown: write as before; the check follows
            log.warning("%s %s: could not check it exists: %s", kind, ref, err)
            return True
        if current != uid:
            log.info("%s %s: gone or re-created; not writing for it", kind, ref)
            self.relisted(kind)
            return False
        return True

    async def _policy(self, k: Key) -> Staged:
        """A policy's own status: Ready once it is in force."""
        kind, ref = k[0], ref_of(k)
        policy = self.store.catalog.policies.get(ref)
        if policy is None:
            return None
        status = policy_status(kind, (), generation=policy.meta.generation,
                               old=self.store.statuses.get(k, {}), now=self.clock())
        if status is None:
            return None
        return StatusWrite(kind, ref, policy.meta.uid, status, ())

    async def _invalid(self, k: Key) -> Staged:
        """An object whose spec does not parse: Ready=False with every problem."""
        kind, ref = k[0], ref_of(k)
        if kind not in ("Skill", "Actor", *POLICY_KINDS):
            return None
        problems: Sequence[Problem] = self.store.invalid[k]
        old = self.store.statuses.get(k, {})
        generation = self.store.generations.get(
            k, RecordedStatus.read(old).observed_generation or 0)
        if kind in POLICY_KINDS:
            status = policy_status(kind, problems, generation=generation, old=old,
                                   now=self.clock())
        else:
            status = invalid_status(kind, problems, generation=generation, old=old,
                                    now=self.clock())
        if status is None:
            return None
        # The uid the store holds: ``kubectl describe`` finds an Event by it.
        return StatusWrite(kind, ref, self.store.uids.get(kind, {}).get(ref, ""), status, ())


def _declared_states(skill: SkillResource) -> list[ServerReport]:
    return [ServerReport.declared(s) for s in skill.spec.mcp_servers]
