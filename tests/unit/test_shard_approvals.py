"""A shard follows (and so writes) only its own namespaces' ToolCallApprovals."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from skillop.model.shardselector import LabelSelector
from skillop.operator import handlers
from skillop.operator.shard import Shard


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
