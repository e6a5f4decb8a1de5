"""Performing a Plan: an object's ConfigMaps first (a packed set's parts, then the
Actor's own, which holds the index naming them), its status once the window's
ConfigMaps are written, its Events after the batch. A failed write becomes a key
to retry; one the API server refused for good is said in the status, not retried.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from skillop.model.canonical import json_digest
from skillop.model.names import ObjectRef
from skillop.model.wording import count
from skillop.operator.configmaps import ObservedConfigMap, Written, versioned
from skillop.operator.deps import Key, key
from skillop.operator.kube import Gone, Refused
from skillop.operator.outputs import EventSpec, Plan
from skillop.operator.shard import Shard
from skillop.operator.store import Store
from skillop.operator.transitions import failing_transitions

log = logging.getLogger("skillop.reconcile")


class Writer(Protocol):
    async def patch_status(self, kind: str, ref: ObjectRef, new: dict[str, Any],
                           old: dict[str, Any]) -> str | None: ...

    async def apply_configmap(self, body: dict[str, Any], *, exists: bool) -> str | None: ...

    async def delete_configmap(self, ref: ObjectRef, *, version: str | None = None) -> None: ...

    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None: ...

    async def read_configmap(self, ref: ObjectRef) -> dict[str, Any] | None: ...

    async def uid_of(self, kind: str, ref: ObjectRef) -> str | None: ...


class PlanWrites:
    """The write side of ``runtime.Reconciler`` (which sets these attributes up)."""

    store: Store
    writer: Writer
    #: This batch's writes, for its log line.
    _sent: Sent
    #: Events to post once the batch's ConfigMaps and statuses are written.
    _events: list[tuple[str, ObjectRef, str, EventSpec]]
    #: Which namespaces this installation writes.
    shard: Shard
    #: Says a kind must be checked against the API's list (an object found gone).
    relisted: Callable[[str], None]

    async def _write(self, kind: str, ref: ObjectRef, uid: str, plan: Plan, *,
                     exists: bool = False, version: str | None = None,
                     parts: Mapping[str, ObservedConfigMap] | None = None,
                     ) -> Staged | Refusal:
        """Write the plan's ConfigMaps (a packed set's parts first, then the Actor's
        own, which holds the index naming them); stage its status (and events) for
        after the window's ConfigMaps. A failed ConfigMap stages nothing: the key is
        retried; one the API server refused for good is a ``Refusal`` (not retried).
        A rewrite asserts the ``version`` last seen (docs/operations.md,
        Faults): changed meanwhile, it fails and is made again from what
        the watch then shows."""
        if plan.parts or plan.configmap is not None or plan.stale:
            mine = await self._still_mine(kind, ref)
            if mine is not True:
                return mine or None  # another shard's now, or a key to retry
        seen = parts or {}
        writes = [(body, seen.get(body["metadata"]["name"])) for body in plan.parts]
        for body, observed in writes:
            failed = await self._write_configmap(
                kind, ref, body, exists=observed is not None,
                version=observed.resource_version if observed is not None else None)
            if failed is not None:
                return failed
        if plan.written is not None:
            failed = await self._write_configmap(kind, ref, plan.written, exists=exists,
                                                 version=version)
            if failed is not None:
                return failed
        # After the index: no index a pod may read next names a part deleted here.
        for stale in plan.stale:
            failed = await self._delete_configmap(kind, ref, stale)
            if failed is not None:
                return failed
        # Only what is still to write is kept: a window holds statuses, not ConfigMaps.
        return StatusWrite(kind, ref, uid, plan.status, plan.events)

    async def _write_configmap(self, kind: str, ref: ObjectRef,
                               configmap: dict[str, Any] | Written, *,
                               exists: bool, version: str | None) -> Key | Refusal | None:
        """One ConfigMap: a part, or the Actor's own (``Written``, with its digest)."""
        plain = configmap.body if isinstance(configmap, Written) else configmap
        body = versioned(plain, version if exists else None)
        written: list[str | None] = []

        async def write() -> None:
            written.append(await self.writer.apply_configmap(body, exists=exists))

        try:
            failed = await self._attempt(kind, ref, write())
        except Refused as err:
            log.warning("%s %s: %s; not retried: its status says so", kind, ref, err)
            return Refusal(f"the API server refused ConfigMap {body['metadata']['name']}:"
                           f" HTTP {err.status}: {err.message}")
        if failed is not None:
            return failed
        self._sent.configmap(key(kind, ref))
        self.store.record_configmap(configmap.at(written[0]) if isinstance(configmap, Written)
                                    else versioned(configmap, written[0]))
        return None

    async def _delete_configmap(self, kind: str, ref: ObjectRef,
                                stale: ObservedConfigMap) -> Key | None:
        """Delete a part the set no longer has, if it is still the version seen (a
        part written since, by another replica, is left to the watch's next word)."""
        part = ObjectRef(ref.namespace, stale.name)

        async def delete() -> None:
            await self.writer.delete_configmap(part, version=stale.resource_version)

        try:
            failed = await self._attempt(kind, ref, delete())
        except Refused as err:  # nothing a retry would change; it goes with the Actor
            log.warning("%s %s: %s; left to the garbage collector", kind, ref, err)
            return None
        if failed is not None:
            return failed
        self._sent.configmap(key(kind, ref))
        self.store.forget_configmap(part)
        return None

    async def _write_status(self, staged: StatusWrite) -> Key | None:
        kind, ref, status = staged.kind, staged.ref, staged.status
        if status is not None:
            mine = await self._still_mine(kind, ref)
            if mine is not True:
                return mine or None
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

    async def _still_mine(self, kind: str, ref: ObjectRef) -> bool | Key:
        """The shard's fence (``shard.Shard.confirm``), asked after what the writes
        assert was observed. A failed read is a failed write: its key, retried."""
        try:
            return await self.shard.confirm(ref.namespace)
        except Exception as err:
            log.warning("%s %s: could not confirm its namespace is this shard's: %s;"
                        " will retry", kind, ref, err)
            return key(kind, ref)

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


@dataclass(frozen=True, slots=True)
class Refusal:
    """A ConfigMap the API server refused for good, and its words."""

    message: str


def written_digest(plan: Plan) -> str | None:
    """What identifies the ConfigMaps a plan writes (None: it writes none)."""
    bodies = [*plan.parts, *([plan.configmap] if plan.configmap is not None else [])]
    if not bodies:
        return None
    return json_digest([[b["metadata"]["name"], b.get("data"), b.get("binaryData")]
                        for b in bodies])


@dataclass(frozen=True, slots=True)
class StatusWrite:
    """An object whose ConfigMap (if any) is written: its status and events to go."""

    kind: str
    ref: ObjectRef
    uid: str
    status: dict[str, Any] | None
    events: tuple[EventSpec, ...]


@dataclass(slots=True)
class Sent:
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
Staged = StatusWrite | Key | None
