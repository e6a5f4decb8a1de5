"""Benchmark: what kopf itself keeps for every object the operator watches.

kopf keeps a record per watched object (``ResourceMemories``, kopf's private
inventory, filled by ``recall`` when an object's first event is processed): its
uid, throttling, indexing and daemon state, and a copy of the operator's memo
for that object's handlers. ``bench/memory.py`` measures the store, not kopf;
this measures kopf's records for ``--objects`` objects (default 30,000: 20,000
Skills and 10,000 Actors), with ``tracemalloc``, once with kopf's own
``kopf.Memo`` and once with the operator's ``SharedMemo`` (one memo for every
object), each holding the 14 values the operator's ``startup`` sets.

``--listing SKILLS:ACTORS`` measures kopf's per-object workers instead: kopf's own
watcher (``queueing.watcher``) fed a listing of ``bench/memory.py``'s objects (a
page of 500 at a time, as fast as the loop takes them), each event stored with
``Store.upsert``; a worker (a task and a queue) lives until it has been idle for
``settings.queueing.idle_timeout``. Peak RSS and peak task count, one fresh
process per idle timeout (``--idle``, default 5.0 (kopf's) and 0.5).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # memory.py's objects and figures

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


def listing_peak(n_skills: int, n_actors: int, idle: float) -> dict[str, Any]:
    """Runs in a fresh process: kopf's watcher over one listing (``--listing``)."""
    import kopf
    from kopf._cogs.clients import watching
    from kopf._cogs.structs import references
    from kopf._core.reactor import queueing
    from memory import memory_objects, peak_rss_mib

    from skillop.operator.store import Store

    skills, actors = memory_objects(n_skills, n_actors)
    bodies = [*skills, *actors]
    del skills, actors
    store, peak_tasks = Store(), [0]

    async def listed(**_: Any) -> Any:
        for i, body in enumerate(bodies):
            yield {"type": None, "object": body}
            if i % 500 == 499:
                await asyncio.sleep(0)  # a page parsed: the workers run
        yield watching.Bookmark.LISTED
        await asyncio.sleep(idle + 1)  # nothing more comes: every worker idles out
        raise asyncio.CancelledError

    async def processor(*, raw_event: Any, **_: Any) -> None:
        store.upsert(raw_event["object"])
        peak_tasks[0] = max(peak_tasks[0], len(asyncio.all_tasks()))

    async def watch() -> None:
        settings = kopf.OperatorSettings()
        settings.queueing.idle_timeout = idle
        with contextlib.suppress(asyncio.CancelledError):
            await queueing.watcher(namespace=None, settings=settings, processor=processor,
                                   resource=references.Resource(*SKILLS))

    queueing.watching.infinite_watch = listed  # type: ignore[assignment]
    asyncio.run(watch())
    return {"objects": len(bodies), "peak_tasks": peak_tasks[0], "peak_mib": peak_rss_mib()}


SKILLS = ("skillop.dev", "v1alpha1", "skills")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--objects", type=int, default=30_000, help="objects watched")
    p.add_argument("--listing", metavar="SKILLS:ACTORS", help="kopf's workers over a listing")
    p.add_argument("--idle", type=float, nargs="*", default=[5.0, 0.5],
                   help="--listing: kopf's queueing.idle_timeout values, seconds")
    p.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.listing:
        return listing(args.listing, args.idle, child=args.child)
    import kopf

    from skillop.operator.handlers import SharedMemo

    print(f"kopf's records of {args.objects:,} watched objects (tracemalloc):")
    for label, cls in (("kopf.Memo (a copy per object)", kopf.Memo),
                       ("SharedMemo (one for all)", SharedMemo)):
        size = records_bytes(cls, args.objects)
        print(f"  {label}: {size / 2**20:.1f} MiB, {size / args.objects:.0f} bytes per object")
    return 0


def listing(size: str, idles: list[float], *, child: float | None) -> int:
    n_skills, n_actors = (int(x) for x in size.split(":"))
    if child is not None:
        print(json.dumps(listing_peak(n_skills, n_actors, child)))
        return 0
    print(f"kopf's watcher over a listing of {n_skills:,} Skills + {n_actors:,} Actors"
          " (fresh process each; Store.upsert per event):")
    for idle in idles:
        out = subprocess.run([sys.executable, __file__, "--listing", size, "--child", str(idle)],
                             check=True, capture_output=True, text=True, cwd=ROOT)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  idle_timeout {idle:g} s: peak {got['peak_mib']:.0f} MiB RSS, "
              f"{got['peak_tasks']:,} tasks at most")
    return 0


if __name__ == "__main__":
    sys.exit(main())
