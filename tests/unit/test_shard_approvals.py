"""A shard follows (and so writes) only its own namespaces' ToolCallApprovals, and
asks its fence before each write."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf
from prometheus_client import CollectorRegistry

from skillop.model.names import ObjectRef
from skillop.model.shardselector import LabelSelector
from skillop.operator import handlers
from skillop.operator.approval_keeper import ApprovalKeeper
from skillop.operator.metrics import Metrics
from skillop.operator.shard import Shard
from skillop.operator.store import Store


class Keeper:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def observed(self, body: dict[str, Any]) -> None:
        self.seen.append(body["metadata"]["namespace"])

    def deleted(self, namespace: str, name: str) -> None:
        self.seen.append(f"-{namespace}")


class Reconciler:
    def __init__(self, shard: Shard) -> None:
        self.shard = shard


def test_another_shards_approvals_are_left_to_it() -> None:
    labels = {"mine": {"skillop.dev/shard": "a"}, "theirs": {"skillop.dev/shard": "b"}}
    shard = Shard(LabelSelector.parse("skillop.dev/shard=a"), cluster_owner=True,
                  labels=labels.get)
    keeper = Keeper()
    memo = kopf.Memo(approvals=keeper, reconciler=Reconciler(shard))
    for ns in ("mine", "theirs"):
        body = kopf.Body({"metadata": {"namespace": ns, "name": "r"}})  # type: ignore[typeddict-item]
        asyncio.run(handlers.approval_event(type="ADDED", body=body, name="r", namespace=ns,
                                            memo=memo))
        asyncio.run(handlers.approval_event(type="DELETED", body=body, name="r", namespace=ns,
                                            memo=memo))
    assert keeper.seen == ["mine", "-mine"]


class Writer:
    """The keeper's API client: what it wrote, by kind of write."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str]] = []

    def may_write(self) -> bool:
        return True

    async def patch_status(self, kind: str, ref: ObjectRef, new: dict[str, Any],
                           old: dict[str, Any]) -> None:
        self.writes.append((f"status {new['state']}", ref.namespace))

    async def delete_approval(self, ref: ObjectRef) -> None:
        self.writes.append(("delete", ref.namespace))

    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None:
        self.writes.append((f"event {reason}", ref.namespace))


class Labels:
    """Namespace labels as the store's watch saw them and as the API server says now."""

    def __init__(self) -> None:
        self.live = {"mine": {"skillop.dev/shard": "a"}}

    async def namespace_labels(self, name: str) -> dict[str, str] | None:
        return self.live.get(name)


def request(name: str, *, expired: bool) -> dict[str, Any]:
    expires = datetime.now(UTC) + (timedelta(seconds=-1) if expired else timedelta(hours=1))
    return {"kind": "ToolCallApproval",
            "metadata": {"namespace": "mine", "name": name},
            "spec": {"actor": "dev", "tool": {"bindingName": "deploy"},
                     "expiresAt": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}


async def sweep_once(keeper: ApprovalKeeper) -> None:
    task = asyncio.create_task(keeper.sweep(interval=0.01))
    await asyncio.sleep(0.2)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def test_a_namespace_moved_to_another_shard_is_not_written_by_this_one() -> None:
    """The store saw ``mine`` as this shard's when its requests came; the API server
    now says another shard's: nothing is marked Pending or Expired, deleted or
    reported here, and the requests are forgotten (no longer pending here), the
    rest once the store sees the move too."""
    labels = Labels()
    seen_labels = {"mine": {"skillop.dev/shard": "a"}}
    shard = Shard(LabelSelector.parse("skillop.dev/shard=a"), cluster_owner=True,
                  labels=seen_labels.get, reader=labels)
    writer = Writer()
    keeper = ApprovalKeeper(Store(), writer, Metrics(CollectorRegistry()),  # type: ignore[arg-type]
                            shard=shard)

    async def run() -> None:
        await keeper.observed(request("before", expired=False))
        assert ("status Pending", "mine") in writer.writes  # its own namespace: written
        writer.writes.clear()
        await keeper.observed(request("late", expired=True))
        labels.live["mine"] = {"skillop.dev/shard": "b"}  # relabelled; the watch lags
        await keeper.observed(request("after", expired=True))
        await sweep_once(keeper)
        assert [r.name for r in keeper.tracker.requests] == ["before"]  # not due yet
        seen_labels["mine"] = labels.live["mine"]  # the watch catches up
        await sweep_once(keeper)

    asyncio.run(run())
    assert writer.writes == [("status Pending", "mine"), ("event ApprovalRequested", "mine")]
    assert keeper.tracker.requests == {}
