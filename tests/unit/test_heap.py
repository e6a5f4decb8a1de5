"""Freed memory given back after a large batch (``operator.heap``)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from skillkit import actor, anon, skill

from skillop.model.names import ObjectRef
from skillop.operator import heap
from skillop.operator.deps import Key
from skillop.operator.runtime import Reconciler
from skillop.operator.store import Store


def _rss_mib() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf(
        "SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux") or heap.release_free_memory() is False,
                    reason="malloc_trim is glibc's")
def test_the_pages_of_freed_blocks_go_back_to_the_system() -> None:
    """Blocks over 512 bytes come from the C allocator, which keeps the pages of
    freed blocks between live ones: resident until trimmed."""
    blocks = [bytearray(4000) for _ in range(20_000)]  # about 80 MiB, one heap
    kept = blocks[::64]
    del blocks
    heap.release_free_memory()  # the run so far: not this test's doing
    blocks = [bytearray(4000) for _ in range(20_000)]
    kept += blocks[::64]
    del blocks
    before = _rss_mib()
    assert heap.release_free_memory()
    assert _rss_mib() < before - 40, "freed pages still resident after the trim"
    assert len(kept) == 2 * 313


class Writer:
    async def patch_status(self, kind: str, ref: ObjectRef, new: dict[str, Any],
                           old: dict[str, Any]) -> None:
        pass

    async def apply_configmap(self, body: dict[str, Any], *, exists: bool) -> None:
        pass

    async def post_event(self, kind: str, ref: ObjectRef, uid: str, type_: str, reason: str,
                         message: str) -> None:
        pass


def test_a_batch_of_many_objects_is_followed_by_a_trim(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[bool] = []
    monkeypatch.setattr(heap, "release_free_memory", lambda: trims.append(True) or True)
    monkeypatch.setattr(heap, "TRIM_AFTER_OBJECTS", 4)
    store = Store()
    changed: set[Key] = set()
    for doc in (skill("base", anonymousTools=[anon("lint")]), skill("other"),
                actor("dev", skills=["base"]), actor("ops", skills=["other"])):
        doc["metadata"].update(uid=f"uid-{doc['metadata']['name']}", generation=1)
        changed |= store.upsert(doc)
    reconciler = Reconciler(store, Writer())  # type: ignore[arg-type]
    asyncio.run(reconciler.process(changed))
    assert trims == [True]  # 2 Skills and 2 Actors planned
    asyncio.run(reconciler.process({("Actor", "team-a/dev")}))
    assert trims == [True]  # one Actor: not worth a trim
