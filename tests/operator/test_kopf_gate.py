"""kopf's internals skillop adapts (handlers): the start-up gate's toggle set, woken
only when its state changes, and the diff-base that copies nothing no handler reads.

These fail when kopf's internals are no longer what the adapters expect: pinned to
kopf 1.45.x (pyproject), a new kopf must pass them before it is allowed.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kopf
from kopf._cogs.aiokits import aiotoggles

from skillop.operator import handlers


def test_kopf_is_what_the_adapter_expects() -> None:
    assert handlers.kopf_fits_wake_on_change(), (
        f"kopf {handlers._kopf_version()}: its toggles or its start-up gate changed; "
        "WakeOnChangeToggleSet must be checked against the new kopf")
    assert aiotoggles.ToggleSet is handlers.WakeOnChangeToggleSet  # installed at import


def test_kopf_awaits_only_the_toggle_sets() -> None:
    """The adapter wakes on the set's changes: nothing may wait on one toggle."""
    source = Path(kopf.__file__).parent
    receivers = {match.group(1)
                 for path in source.rglob("*.py")
                 for match in re.finditer(r"(\w+)\.wait_for\((?:True|False|__state)\)",
                                          path.read_text())}
    assert receivers == {"operator_paused", "operator_indexed"}


def _gate_checks(toggle_set: type[aiotoggles.ToggleSet], objects: int) -> int:
    """kopf's start-up gate for ``objects`` listed objects: each worker drops its
    toggle, then waits for the set to be on. How often the set's state was read."""
    checks = 0

    def every(states: Iterable[bool]) -> bool:
        nonlocal checks
        checks += 1
        return all(states)

    async def gate() -> None:
        toggles = toggle_set(every)
        blocker = await toggles.make_toggle(name="listing")

        async def worker(toggle: aiotoggles.Toggle) -> None:
            await toggles.drop_toggle(toggle)  # its index handlers are done
            await toggles.wait_for(True)

        workers = []
        for i in range(objects):  # the listing's objects arrive one by one
            workers.append(asyncio.create_task(worker(await toggles.make_toggle(name=str(i)))))
            for _ in range(3):
                await asyncio.sleep(0)
        await toggles.drop_toggle(blocker)
        await asyncio.wait_for(asyncio.gather(*workers), timeout=30)
        assert toggles.is_on()

    asyncio.run(gate())
    return checks


def test_the_gate_wakes_each_waiter_once_not_on_every_drop() -> None:
    objects = 300
    adapted = _gate_checks(handlers.WakeOnChangeToggleSet, objects)
    plain = _gate_checks(_PlainToggleSet, objects)
    assert adapted <= 5 * objects
    assert plain > objects * objects // 4  # what the adapter saves: N^2 wake-ups


def test_waiters_of_either_state_are_woken_when_it_comes() -> None:
    async def flips() -> list[str]:
        seen: list[str] = []
        paused = handlers.WakeOnChangeToggleSet(any)
        toggle = await paused.make_toggle(False)
        other = await paused.make_toggle(False)

        async def wait(state: bool) -> None:
            await paused.wait_for(state)
            seen.append(f"{'on' if state else 'off'}")

        on = asyncio.create_task(wait(True))
        await asyncio.sleep(0)
        await toggle.turn_to(True)
        await asyncio.wait_for(on, timeout=5)
        await other.turn_to(True)  # no change of the set: nobody waits for it
        off = asyncio.create_task(wait(False))
        await asyncio.sleep(0)
        await toggle.turn_to(False)
        await asyncio.sleep(0.01)
        assert not off.done()  # still on: the other toggle
        await paused.drop_toggle(other)
        await asyncio.wait_for(off, timeout=5)
        again = asyncio.create_task(wait(True))
        await asyncio.sleep(0)
        await paused.make_toggle(True)
        await asyncio.wait_for(again, timeout=5)
        return seen

    assert asyncio.run(flips()) == ["on", "off", "on"]


class _PlainToggleSet(aiotoggles.ToggleSet):
    """kopf's own toggle set, whatever ``aiotoggles.ToggleSet`` is now."""

    def __init__(self, fn: Any) -> None:
        super().__init__(fn)
        self._condition = asyncio.Condition()


ACTORS = ("skillop.dev", "v1alpha1", "actors")
ACTOR = kopf.Body({
    "apiVersion": "skillop.dev/v1alpha1", "kind": "Actor",
    "metadata": {"name": "a", "namespace": "n", "labels": {"x": "1"},
                 "annotations": {"note": "kept"}},
    "spec": {"skills": [{"name": "s"}]},
    "status": {"tools": [{"name": f"t{i}"} for i in range(50)]},
})


def test_no_handler_compares_bodies_so_no_essence_is_copied() -> None:
    registry = kopf.OperatorRegistry()
    kopf.on.event(*ACTORS, registry=registry)(_handler)
    kopf.index(*ACTORS, registry=registry)(_handler)
    assert not handlers.compares_bodies(registry)
    storage = handlers.StatuslessDiffBaseStorage(prefix="skillop.dev", key="k",
                                                 compares_bodies=False)
    assert storage.build(body=ACTOR) == {}


def test_a_changing_handler_compares_bodies_without_the_status() -> None:
    registry = kopf.OperatorRegistry()
    kopf.on.update(*ACTORS, registry=registry)(_handler)
    assert handlers.compares_bodies(registry)
    storage = handlers.StatuslessDiffBaseStorage(prefix="skillop.dev", key="k",
                                                 compares_bodies=True)
    plain = kopf.AnnotationsDiffBaseStorage(prefix="skillop.dev", key="k")
    essence = storage.build(body=ACTOR)
    assert essence == plain.build(body=ACTOR)
    assert essence["spec"] == ACTOR["spec"] and "status" not in essence


def test_skillop_registers_no_handler_that_compares_bodies() -> None:
    assert not handlers.compares_bodies(kopf.get_default_registry())


async def _handler(**_: Any) -> None:
    return None


def test_the_index_sheds_what_only_it_reads_from_kopfs_own_body() -> None:
    raw: dict[str, Any] = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "dev-tools", "namespace": "team-a", "uid": "u1",
                     "resourceVersion": "7", "annotations": {"skillop.dev/tools-hash": "h"}},
        "data": {"tools.json": "x" * 10_000}, "binaryData": {"z": "eA=="}}
    actor = {**ACTOR, "status": {"toolsHash": "h"}}
    for doc in (raw, actor):
        body = kopf.Body(doc)  # as kopf wraps the parsed event's object
        handlers.shed(body)
        assert set(doc) == {"apiVersion", "kind", "metadata"}
        assert body.metadata.name == doc["metadata"]["name"]  # what kopf reads next


def test_the_initial_listing_comes_in_pages() -> None:
    from kopf._cogs.clients import fetching

    from skillop.operator.settings import OperatorConfig

    settings = kopf.OperatorSettings()
    handlers.configure(settings, OperatorConfig())
    assert settings.watching.chunk_size == handlers.LIST_CHUNK == 500
    assert "params['limit'] = str(chunk_size)" in inspect.getsource(fetching.fetch_objs)
