"""The shard's ownership of namespaces and its fence before writes (operator.shard)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from skillop.model.shardselector import LabelSelector
from skillop.operator.shard import Shard

SELECTOR = LabelSelector.parse("skillop.dev/shard=a")


class Namespaces:
    """The API server's namespaces; each read answers what is there when it is sent."""

    def __init__(self, labels: dict[str, dict[str, str]]) -> None:
        self.labels = labels
        self.reads = 0

    async def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        self.reads += 1
        answer = self.labels.get(name)
        await asyncio.sleep(0.01)  # on the way back, the namespace may change
        return answer


def test_owns_by_the_stores_view_and_cluster_scope_by_the_owner_flag() -> None:
    view = {"mine": {"skillop.dev/shard": "a"}, "theirs": {"skillop.dev/shard": "b"}}
    shard = Shard(SELECTOR, cluster_owner=False, labels=view.get)
    assert (shard.owns("mine"), shard.owns("theirs"), shard.owns("unknown")) == \
        (True, False, False)
    assert not shard.owns("")  # cluster scope: not the cluster owner
    unsharded = Shard(LabelSelector(), cluster_owner=True, labels={}.get)
    assert unsharded.owns("anything") and unsharded.owns("")


def test_confirm_asks_the_api_server_not_the_stale_view() -> None:
    stale = {"moved": {"skillop.dev/shard": "a"}}
    api = Namespaces({"moved": {"skillop.dev/shard": "b"}})
    shard = Shard(SELECTOR, cluster_owner=True, labels=stale.get, reader=api)
    assert shard.owns("moved")
    assert asyncio.run(shard.confirm("moved")) is False
    assert api.reads == 1


def test_callers_share_a_read_sent_after_they_asked_never_an_earlier_one() -> None:
    labels = {"ns": {"skillop.dev/shard": "a"}}
    api = Namespaces(labels)
    shard = Shard(SELECTOR, cluster_owner=True, labels=labels.get, reader=api)

    async def scenario() -> tuple[list[bool], bool]:
        first = await asyncio.gather(*(shard.confirm("ns") for _ in range(20)))
        early = asyncio.ensure_future(shard.confirm("ns"))
        while api.reads < 2:  # until that read is sent
            await asyncio.sleep(0)
        api.labels = {"ns": {"skillop.dev/shard": "b"}}  # relabelled meanwhile
        late = await shard.confirm("ns")  # asked after: must not join the early read
        assert await early is True
        return list(first), late

    first, late = asyncio.run(scenario())
    assert first == [True] * 20 and late is False
    assert api.reads == 3  # 20 callers, one read; then one each
