"""The operator's memo is one object for every watched object (handlers.SharedMemo)."""

from __future__ import annotations

import asyncio
import copy

import kopf
from kopf._core.reactor.inventory import ResourceMemories

from skillop.operator.handlers import SharedMemo


def test_kopf_gives_every_object_the_operators_memo_itself() -> None:
    memo = SharedMemo(config="c")
    memo.store = "s"
    memories = ResourceMemories()
    bodies = [{"metadata": {"uid": f"uid-{i}", "name": f"o{i}"}} for i in range(3)]

    async def recall() -> list[object]:
        return [(await memories.recall(b, memobase=memo)).memo for b in bodies]

    assert all(m is memo for m in asyncio.run(recall()))
    assert copy.copy(memo) is memo and memo.store == "s"
    plain = kopf.Memo(config="c")  # kopf's own: a copy per object, what SharedMemo saves
    assert copy.copy(plain) is not plain
