"""Sharding: which namespaces this installation writes (docs/install.md, Sharding).

Several installations each own the namespaces their label selector matches
(``SKILLOP_SHARD_SELECTOR``), each with its own Lease. Every one watches and
reads the whole cluster (a Skill of another shard's namespace that an Actor
includes resolves as ever); each writes only its own namespaces' objects, and
only the one named cluster owner writes cluster-scoped objects' status.

Who owns a namespace is judged twice:

* ``owns``: from the store's view of the namespace's labels (the Namespace
  watch). A batch only plans objects of owned namespaces; a relabel marks the
  namespace's objects, so the new owner writes all of them at once (level-based).
* ``confirm``: right before a write, a quorum read of the namespace from the API
  server. The fence that keeps a shard whose watch lags a relabel from writing
  after the new owner: its write asserts the resourceVersion it observed
  *before* this read, so a write of the new owner's that the read did not
  precede fails it with 409 (docs/decisions.md, Sharding). Reads are coalesced:
  every caller waiting joins the next read, one started after it asked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from skillop.model.shardselector import LabelSelector

log = logging.getLogger("skillop.shard")


class NamespaceReader(Protocol):
    async def namespace_labels(self, name: str) -> Mapping[str, str] | None: ...


class Shard:
    def __init__(self, selector: LabelSelector, *, cluster_owner: bool,
                 labels: Callable[[str], Mapping[str, str] | None],
                 reader: NamespaceReader | None = None) -> None:
        self.selector = selector
        self.cluster_owner = cluster_owner
        self._labels = labels
        self._reader = reader
        #: Per namespace, the next live read, not sent yet (callers join it).
        self._next: dict[str, asyncio.Future[bool]] = {}

    @property
    def sharded(self) -> bool:
        """Whether some namespaces may belong to another installation."""
        return bool(self.selector.requirements)

    def owns(self, namespace: str) -> bool:
        """Whether this installation writes ``namespace``'s objects ("" is
        cluster scope), by the store's view of its labels."""
        if not namespace:
            return self.cluster_owner
        if not self.sharded:
            return True
        labels = self._labels(namespace)
        return labels is not None and self.selector.matches(labels)

    async def confirm(self, namespace: str) -> bool:
        """Whether ``namespace`` is this shard's as the API server says now (a read
        sent after this call); unsharded, cluster scope or no reader: ``owns``."""
        if not namespace or not self.sharded or self._reader is None:
            return self.owns(namespace)
        pending = self._next.get(namespace)
        if pending is None:
            pending = self._next[namespace] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(self._send, namespace, pending)
        return await asyncio.shield(pending)

    def _send(self, namespace: str, pending: asyncio.Future[bool]) -> None:
        # From here on a caller waits for the read after this one: this one may
        # have been sent before that caller observed what its write asserts.
        del self._next[namespace]
        task = asyncio.ensure_future(self._read(namespace))
        task.add_done_callback(lambda done: _settle(pending, done))

    async def _read(self, namespace: str) -> bool:
        assert self._reader is not None
        labels = await self._reader.namespace_labels(namespace)
        owned = labels is not None and self.selector.matches(labels)
        if not owned and self.owns(namespace):
            log.info("namespace %s: no longer this shard's (%s); not writing it",
                     namespace, self.selector)
        return owned


def _settle(pending: asyncio.Future[bool], done: asyncio.Future[bool]) -> None:
    if pending.done():
        return
    if done.cancelled():
        pending.cancel()
    elif (err := done.exception()) is not None:
        pending.set_exception(err)
    else:
        pending.set_result(done.result())
