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
pods without waiting for 60 status writes. Events are posted after the batch's
ConfigMaps and statuses: they never delay the writes that carry new tool sets.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from skillop.model.canonical import json_digest
from skillop.model.manifest import POLICY_KINDS, ActorResource, SkillResource
from skillop.model.names import ObjectRef
from skillop.model.problems import Problem
from skillop.model.status import RecordedStatus, utcnow
from skillop.model.toolset import MAX_PARTS, part_configmap_name
from skillop.model.wording import count
from skillop.operator.actorplan import actor_plan
from skillop.operator.configmaps import ObservedConfigMap
from skillop.operator.credentials import CredentialChecker
from skillop.operator.deps import Key, key, ref_of
from skillop.operator.kube import Gone, Refused
from skillop.operator.metrics import Metrics
from skillop.operator.outputs import (
    EventSpec,
    Plan,
    ServerReport,
    invalid_status,
    policy_status,
    skill_plan,
)
from skillop.operator.store import Store
from skillop.operator.transitions import failing_transitions
from skillop.resolve.inject import credentials_of
from skillop.resolve.resolver import Resolver
from skillop.resolve.toolset import configmap_name

log = logging.getLogger("skillop.reconcile")
T = TypeVar("T")


class Writer(Protocol):
    async def patch_status(self, kind: str, ref: ObjectRef, new: dict[str, Any],
                           old: dict[str, Any]) -> str | None: ...

    async def apply_configmap(self, body: dict[str, Any], *, exists: bool) -> str | None: ...

    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None: ...

    async def read_configmap(self, ref: ObjectRef) -> dict[str, Any] | None: ...

    async def uid_of(self, kind: str, ref: ObjectRef) -> str | None: ...


class Lister(Protocol):
    async def list_uids(self, kind: str, namespaces: Sequence[str] = (),
                        ) -> dict[ObjectRef, str]: ...


#: The kinds the store holds, in the order their membership is checked: Actors
#: first, so that no ConfigMap is written for an Actor about to be dropped.
KINDS = ("Actor", "Skill", "Tool", "SkillPolicy", "ClusterSkillPolicy", "ConfigMap", "Namespace")


ServerStates = Callable[[SkillResource], Sequence[ServerReport]]
ActorWarnings = Callable[[ActorResource, Sequence[ObjectRef]], Sequence[str]]


class Reconciler:
    def __init__(self, store: Store, writer: Writer, *, debounce: float = 0.05,
                 concurrency: int = 16, clock: Callable[[], str] = utcnow,
                 server_states: ServerStates | None = None,
                 actor_warnings: ActorWarnings | None = None,
                 metrics: Metrics | None = None,
                 credentials: CredentialChecker | None = None) -> None:
        self.store = store
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
        self._sent = _Sent()  # this batch's writes, for its log line
        #: Actors whose ConfigMaps the API server refused for good: what was sent
        #: (``_written_digest``) and its words, so the same is not sent again.
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

    # -- leadership -----------------------------------------------------------------
    def lead(self) -> None:
        """This replica became the leader: a full pass, then business as usual."""
        self.mark(self.everything())
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
        affected = self.store.deps.dependents(changed)
        resolver = Resolver(self.store.catalog)
        jobs: list[Callable[[], Awaitable[Staged]]] = [
            *(functools.partial(self._skill, resolver, ref) for ref in sorted(affected.skills)),
            *(functools.partial(self._actor, resolver, ref) for ref in sorted(affected.actors)),
            *(functools.partial(self._policy, k) for k in sorted(changed)
              if k[0] in POLICY_KINDS and k not in self.store.invalid),
            *(functools.partial(self._invalid, k) for k in sorted(changed)
              if k in self.store.invalid)]
        failed: list[Key] = []
        self._sent = _Sent()
        for start in range(0, len(jobs), self._window):
            staged = await self._bounded(jobs[start:start + self._window])
            failed += [s for s in staged if isinstance(s, tuple)]
            writes = [functools.partial(self._write_status, s) for s in staged
                      if isinstance(s, _StatusWrite)]
            failed += [k for k in await self._bounded(writes) if k is not None]
        written = time.monotonic() - started
        events, self._events = self._events, []
        await self._bounded([functools.partial(self._post, *e) for e in events])
        if self.metrics is not None:
            self.metrics.batch(time.monotonic() - started, skills=len(affected.skills),
                               actors=len(affected.actors))
        log.info("batch %d: %s -> %s, %s; %s in %.3fs, %s in %.3fs",
                 self.batches, count(len(changed), "change"), count(len(affected.skills), "skill"),
                 count(len(affected.actors), "actor"),
                 self._sent.summary(len(jobs), set(failed)), written,
                 count(len(events), "event"), time.monotonic() - started - written)
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

    async def _post(self, kind: str, ref: ObjectRef, uid: str, event: EventSpec) -> None:
        try:
            await self.writer.post_event(kind, ref, uid, event.type, event.reason, event.message)
        except Exception as err:  # an Event is information: never worth a retry
            log.warning("could not post event %s on %s %s: %s", event.reason, kind, ref, err)

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
        return _StatusWrite("Skill", ref, skill.meta.uid, plan.status, plan.events)

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
            needed = credentials_of(resolution.bound_servers)
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
        attempt = _written_digest(plan)
        before = self._refused.get(ref)
        if attempt is not None and before is not None and before[0] == attempt:
            # Refused for good already: the same ConfigMaps are not sent again.
            plan = plan_with(before[1])
        elif before is not None and attempt is None:
            del self._refused[ref]
        staged = await self._write("Actor", ref, actor.meta.uid, plan,
                                   exists=observed is not None,
                                   version=observed.resource_version if observed else None,
                                   parts=parts)
        if not isinstance(staged, _Refusal):
            return staged
        assert attempt is not None
        self._refused[ref] = (attempt, staged.message)
        refused = plan_with(staged.message)
        return _StatusWrite("Actor", ref, actor.meta.uid, refused.status, refused.events)

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
        return _StatusWrite(kind, ref, policy.meta.uid, status, ())

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
        return _StatusWrite(kind, ref, self.store.uids.get(kind, {}).get(ref, ""), status, ())

    async def _write(self, kind: str, ref: ObjectRef, uid: str, plan: Plan, *,
                     exists: bool = False, version: str | None = None,
                     parts: Mapping[str, ObservedConfigMap] | None = None,
                     ) -> Staged | _Refusal:
        """Write the plan's ConfigMaps (a packed set's parts first, then the Actor's
        own, which holds the index naming them); stage its status (and events) for
        after the window's ConfigMaps. A failed ConfigMap stages nothing: the key is
        retried; one the API server refused for good is a ``_Refusal`` (not retried).
        A rewrite asserts the ``version`` last seen (docs/operations.md,
        Faults): changed meanwhile, it fails and is made again from what
        the watch then shows."""
        seen = parts or {}
        writes = [(body, seen.get(body["metadata"]["name"])) for body in plan.parts]
        for body, observed in writes:
            failed = await self._write_configmap(
                kind, ref, body, exists=observed is not None,
                version=observed.resource_version if observed is not None else None)
            if failed is not None:
                return failed
        if plan.configmap is not None:
            failed = await self._write_configmap(kind, ref, plan.configmap, exists=exists,
                                                 version=version)
            if failed is not None:
                return failed
        # Only what is still to write is kept: a window holds statuses, not ConfigMaps.
        return _StatusWrite(kind, ref, uid, plan.status, plan.events)

    async def _write_configmap(self, kind: str, ref: ObjectRef, configmap: dict[str, Any], *,
                               exists: bool, version: str | None) -> Key | _Refusal | None:
        body = _versioned(configmap, version if exists else None)
        written: list[str | None] = []

        async def write() -> None:
            written.append(await self.writer.apply_configmap(body, exists=exists))

        try:
            failed = await self._attempt(kind, ref, write())
        except Refused as err:
            log.warning("%s %s: %s; not retried: its status says so", kind, ref, err)
            return _Refusal(f"the API server refused ConfigMap {body['metadata']['name']}:"
                            f" HTTP {err.status}: {err.message}")
        if failed is not None:
            return failed
        self._sent.configmap(key(kind, ref))
        self.store.record_configmap(_versioned(configmap, written[0]))
        return None

    async def _write_status(self, staged: _StatusWrite) -> Key | None:
        kind, ref, status = staged.kind, staged.ref, staged.status
        if status is not None:
            old = self.store.statuses.get(key(kind, ref), {})
            made: list[str | None] = []

            async def write() -> None:
                made.append(await self.writer.patch_status(kind, ref, status, old))

            try:
                failed = await self._attempt(kind, ref, write())
            except Refused as err:  # the same status would be refused again
                log.warning("%s %s: %s; not retried", kind, ref, err)
                return None
            if failed is not None:
                return failed
            self._sent.status(key(kind, ref))
            self.store.record_status(kind, ref, status, version=made[0] if made else None)
            # Compared with what the API server held: once per transition, and
            # nothing when a restart finds the status as it should be.
            warnings = failing_transitions(old, status)
        else:
            warnings = ()
        # Events go out once the batch's ConfigMaps and statuses are written: they
        # inform, and must not delay the writes that carry the new tool sets.
        self._events += [(kind, ref, staged.uid, event)
                         for event in (*warnings, *staged.events)]
        return None

    async def _attempt(self, kind: str, ref: ObjectRef, write: Awaitable[None]) -> Key | None:
        """Await one write; on failure, log it and return the key to retry.
        ``Refused`` (for good) is raised to the caller, who says so where it can."""
        try:
            await write
        except Refused:
            raise
        except Gone as err:  # deleted meanwhile: no retry; the store is checked
            log.info("%s %s: %s; checking what still exists", kind, ref, err)
            self.relisted(kind)
            return None
        except Exception as err:  # WriteFailed, or the API client's own errors
            log.warning("%s %s: %s; will retry", kind, ref, err)
            return key(kind, ref)
        return None


def _versioned(body: dict[str, Any], version: str | None) -> dict[str, Any]:
    """``body`` asserting ``version`` (None: as it is)."""
    if version is None:
        return body
    return {**body, "metadata": {**body["metadata"], "resourceVersion": version}}


@dataclass(frozen=True, slots=True)
class _Refusal:
    """A ConfigMap the API server refused for good, and its words."""

    message: str


def _written_digest(plan: Plan) -> str | None:
    """What identifies the ConfigMaps a plan writes (None: it writes none)."""
    bodies = [*plan.parts, *([plan.configmap] if plan.configmap is not None else [])]
    if not bodies:
        return None
    return json_digest([[b["metadata"]["name"], b.get("data"), b.get("binaryData")]
                        for b in bodies])


@dataclass(frozen=True, slots=True)
class _StatusWrite:
    """An object whose ConfigMap (if any) is written: its status and events to go."""

    kind: str
    ref: ObjectRef
    uid: str
    status: dict[str, Any] | None
    events: tuple[EventSpec, ...]


@dataclass(slots=True)
class _Sent:
    """What one batch sent the API server (not what it resolved): the log says it."""

    statuses: int = 0
    configmaps: int = 0
    objects: set[Key] = field(default_factory=set)

    def status(self, k: Key) -> None:
        self.statuses += 1
        self.objects.add(k)

    def configmap(self, k: Key) -> None:
        self.configmaps += 1
        self.objects.add(k)

    def summary(self, planned: int, failed: set[Key]) -> str:
        """"2 written (2 statuses, 1 ConfigMap), 14 unchanged, 0 to retry"."""
        unchanged = planned - len(self.objects | failed)
        return (f"{count(len(self.objects), 'object')} written"
                f" ({count(self.statuses, 'status', 'statuses')},"
                f" {count(self.configmaps, 'ConfigMap')}), {unchanged} unchanged,"
                f" {len(failed)} to retry")


#: What an object's first phase leaves: nothing to do (None), a key to retry, or
#: a status to write once the window's ConfigMaps are written.
Staged = _StatusWrite | Key | None


def _declared_states(skill: SkillResource) -> list[ServerReport]:
    return [ServerReport.declared(s) for s in skill.spec.mcp_servers]
