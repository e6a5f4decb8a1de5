"""Benchmark: what kopf itself keeps for every object the operator watches.

kopf keeps a record per watched object (``ResourceMemories``, kopf's private
inventory, filled by ``recall`` when an object's first event is processed): its
uid, throttling, indexing and daemon state, and a copy of the operator's memo
for that object's handlers. ``bench/memory.py`` measures the store, not kopf;
this measures kopf's records for ``--objects`` objects (default 30,000: 20,000
Skills and 10,000 Actors), with ``tracemalloc``, once with kopf's own
``kopf.Memo`` and once with the operator's ``SharedMemo`` (one memo for every
object), each holding the 14 values the operator's ``startup`` sets.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
from typing import Any

#: What ``handlers.startup`` sets on the memo (its values do not matter here).
MEMO_KEYS = ("config", "metrics", "store", "writer", "reconciler", "discovery", "health",
             "elector", "election", "worker", "resync", "membership", "approvals",
             "approval_sweep")


def records_bytes(memo_class: type[Any], n: int) -> int:
    """Bytes traced for kopf's records of ``n`` objects recalled with a memo of
    ``memo_class`` (the bodies themselves not counted)."""
    from kopf._core.reactor.inventory import ResourceMemories

    memo = memo_class(**{k: object() for k in MEMO_KEYS})
    memories = ResourceMemories()
    bodies = [{"metadata": {"uid": f"{i:08x}-1c2b-4f7e-9a63-5d2e8f0b{i:04x}"[:36],
                            "namespace": f"team-{i % 10}", "name": f"s-{i:05d}"}}
              for i in range(n)]

    async def recall_all() -> None:
        for body in bodies:
            await memories.recall(body, memobase=memo, noticed_by_listing=True)

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    asyncio.run(recall_all())
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--objects", type=int, default=30_000, help="objects watched")
    args = p.parse_args(argv)
    import kopf

    from skillop.operator.handlers import SharedMemo

    print(f"kopf's records of {args.objects:,} watched objects (tracemalloc):")
    for label, cls in (("kopf.Memo (a copy per object)", kopf.Memo),
                       ("SharedMemo (one for all)", SharedMemo)):
        size = records_bytes(cls, args.objects)
        print(f"  {label}: {size / 2**20:.1f} MiB, {size / args.objects:.0f} bytes per object")
    return 0


if __name__ == "__main__":
    sys.exit(main())
