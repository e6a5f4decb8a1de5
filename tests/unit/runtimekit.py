"""The Reconciler's tests' writer and helpers: a Writer that records every call,
the ConfigMap key an Actor's calls name, a clock, uids for manifests."""

from __future__ import annotations

import asyncio
import copy
import itertools
from typing import Any

from skillop.model.names import ObjectRef
from skillop.model.toolset import default_configmap_name

Doc = dict[str, Any]


class Recorder:
    """A Writer that remembers every call; ``fail`` makes the next N calls raise."""

    def __init__(self, fail: int = 0) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail = fail
        #: What read_configmap serves, by "namespace/name".
        self.configmaps: dict[str, Doc] = {}
        #: What uid_of answers, by "namespace/name" (absent: no such object).
        self.uids: dict[str, str] = {}

    def _maybe_fail(self) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("HTTP 500 from a flaky API server")

    async def patch_status(self, kind: str, ref: ObjectRef, new: dict[str, Any],
                           old: dict[str, Any]) -> None:
        self._maybe_fail()
        self.calls.append(("status", kind, ref.canonical, copy.deepcopy(new)))

    async def apply_configmap(self, body: dict[str, Any], *, exists: bool) -> None:
        self._maybe_fail()
        meta = body["metadata"]
        self.calls.append(("configmap", f"{meta['namespace']}/{meta['name']}", exists,
                           copy.deepcopy(body)))

    async def delete_configmap(self, ref: ObjectRef, *, version: str | None = None) -> None:
        self._maybe_fail()
        self.calls.append(("delete", ref.canonical, version))

    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None:
        self.calls.append(("event", kind, ref.canonical, uid, reason))

    async def read_configmap(self, ref: ObjectRef) -> dict[str, Any] | None:
        self._maybe_fail()
        self.calls.append(("read", ref.canonical))
        body = self.configmaps.get(ref.canonical)
        return copy.deepcopy(body) if body is not None else None

    async def uid_of(self, kind: str, ref: ObjectRef) -> str | None:
        self.calls.append(("uid", kind, ref.canonical))
        return self.uids.get(ref.canonical)

    def take(self) -> list[tuple[Any, ...]]:
        out, self.calls = self.calls, []
        return out


def cm_key(actor: str) -> str:
    """The key of an Actor's ConfigMap in team-a, as the recorded calls name it."""
    return f"team-a/{default_configmap_name(actor)}"


def clock() -> Any:
    counter = itertools.count()
    return lambda: f"2024-01-01T00:00:{next(counter) % 60:02d}Z"


def with_uid(doc: Doc, n: int = 1) -> Doc:
    doc["metadata"].update(uid=f"uid-{doc['metadata']['name']}", generation=n)
    return doc


def run_batch(rec: Any, changed: set[Any]) -> None:
    """One batch, then the Events it handed over posted (the operator's recorder
    task posts them in the background; a test waits for them)."""
    async def batch() -> None:
        await rec.process(changed)
        await rec.events.drain()

    asyncio.run(batch())
