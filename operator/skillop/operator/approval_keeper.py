"""The operator's part in approvals: Events, metrics, Pending, expiry and cleanup.

Every replica follows the ToolCallApprovals it watches (``approvals.Tracker``);
only the leader writes: ``state: Pending`` on a new request (what the printer
column shows), an Event on the Actor for each request and each decision, the
time to decision (``skillop_approval_decision_seconds``), ``Expired`` on a
request nobody decided before ``spec.expiresAt``, and the deletion of decided
requests an hour after their decision (the Actor owns them, so deleting it
deletes them too).

Sharded, a keeper acts on its own namespaces' requests only (the event handler
passes it no other), and asks the shard's fence (``Shard.confirm``, a live read
of the namespace) before each write: a namespace relabelled into another shard
since its requests were seen is that shard's to mark, expire and clean up, and
its requests are forgotten here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from skillop.model.names import ObjectRef
from skillop.operator.approvals import Note, Tracker, expired_status
from skillop.operator.kube import Kube, NotLeader, WriteFailed
from skillop.operator.metrics import Metrics
from skillop.operator.shard import Shard
from skillop.operator.store import Store

log = logging.getLogger(__name__)
KIND = "ToolCallApproval"
#: How often expiries and cleanups are looked for.
SWEEP_SECONDS = 1.0


class ApprovalKeeper:
    def __init__(self, store: Store, writer: Kube, metrics: Metrics, *,
                 shard: Shard | None = None) -> None:
        self.store, self.writer, self.metrics = store, writer, metrics
        #: Which namespaces this installation writes (None: all).
        self.shard = shard
        self.tracker = Tracker()
        metrics.watch_approvals(self.tracker.pending)

    async def observed(self, body: Mapping[str, Any]) -> None:
        """A request was created or changed."""
        now = datetime.now(UTC)
        notes, waited = self.tracker.observe(body, now)
        meta = body.get("metadata") or {}
        ref = ObjectRef(str(meta.get("namespace", "")), str(meta.get("name", "")))
        if not self.writer.may_write():
            return  # a standby follows, the leader reports
        if not await self._mine(ref):
            return
        seen = self.tracker.requests.get(ref)
        if waited is not None and seen is not None:
            self.metrics.approval_decided(seen.state, waited)
        if not (body.get("status") or {}).get("state"):
            await self._attempt(self.writer.patch_status(KIND, ref, {"state": "Pending"}, {}))
        for note in notes:
            await self._post(note)

    def deleted(self, namespace: str, name: str) -> None:
        self.tracker.forget(ObjectRef(namespace, name))

    async def sweep(self, interval: float = SWEEP_SECONDS) -> None:
        """Forever: mark what expired, delete what was decided long ago (leader only)."""
        while True:
            await asyncio.sleep(interval)
            if not self.writer.may_write():
                continue
            self._forget_moved()
            now = datetime.now(UTC)
            expire, delete = self.tracker.due(now)
            for ref in expire:
                if await self._mine(ref):
                    await self._attempt(
                        self.writer.patch_status(KIND, ref, expired_status(now), {}))
            for ref in delete:
                if await self._mine(ref) and await self._attempt(
                        self.writer.delete_approval(ref)):
                    self.tracker.forget(ref)

    def _forget_moved(self) -> None:
        """Forget the requests of namespaces the store now sees as another shard's."""
        if self.shard is None:
            return
        for ref in [r for r in self.tracker.requests if not self.shard.owns(r.namespace)]:
            self.tracker.forget(ref)

    async def _mine(self, ref: ObjectRef) -> bool:
        """Whether ``ref``'s namespace is this shard's, as the API server says now.
        One that is not is forgotten (its shard's keeper has it); one that could
        not be read is tried again on the next sweep or change."""
        if self.shard is None:
            return True
        try:
            mine = await self.shard.confirm(ref.namespace)
        except Exception as err:  # the read failed: write nothing now
            log.warning("approval request %s: could not confirm its namespace is this"
                        " shard's: %s", ref, err)
            return False
        if not mine:
            self.tracker.forget(ref)
        return mine

    async def _post(self, note: Note) -> None:
        actor = self.store.catalog.actors.get(note.actor)
        uid = actor.meta.uid if actor is not None else ""
        await self.writer.post_event("Actor", note.actor, uid, note.type, note.reason,
                                     note.message)

    @staticmethod
    async def _attempt(write: Any) -> bool:
        try:
            await write
        except (NotLeader, WriteFailed) as err:
            # A decision made meanwhile makes Pending or Expired final-rule refusals:
            # the watch brings the decided object next.
            log.info("approval request: %s", err)
            return False
        return True
