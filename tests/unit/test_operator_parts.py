"""The Reconciler's writes of a packed set: its parts before the Actor's ConfigMap,
a part deleted by hand written again alone, and the parts a shrunk set no longer
has deleted after the index, once their grace is over (docs/toolset.md, Large
sets)."""

from __future__ import annotations

import json
from typing import Any

from runtimekit import Recorder, run_batch
from runtimekit import clock as _clock
from runtimekit import cm_key as _cm
from runtimekit import with_uid as _uid
from skillkit import actor, anon, noise, ref, skill

from skillop.operator.deps import Key, key
from skillop.operator.runtime import Reconciler
from skillop.operator.store import Store


def test_a_packed_sets_parts_are_written_before_the_actors_configmap() -> None:
    store, writer = Store(), Recorder()
    made = [anon(f"tool{i:04d}", description=noise(str(i), 4000)) for i in range(500)]
    changed: set[Key] = set()
    for doc in (_uid(skill("big", anonymousTools=made)), _uid(actor("dev", skills=["big"]))):
        changed |= store.upsert(doc)
    rec = Reconciler(store, writer, clock=_clock())
    run_batch(rec, changed)
    calls = writer.take()
    written = [c[1] for c in calls if c[0] == "configmap"]
    assert written == [f"{_cm('dev')}-part-1", f"{_cm('dev')}-part-2", _cm("dev")]
    # Echoed by the watch: nothing more; a part deleted by hand is written again, alone.
    bodies = {c[1]: c[3] for c in calls if c[0] == "configmap"}
    for body in bodies.values():
        assert store.upsert(json.loads(json.dumps(body))) == set()
    run_batch(rec, {key("Actor", ref("team-a/dev"))})
    assert [c for c in writer.take() if c[0] == "configmap"] == []
    changed = store.remove("ConfigMap", "team-a", "dev-tools-part-2")
    assert changed == {key("Actor", ref("team-a/dev"))}
    run_batch(rec, changed)
    again = writer.take()
    assert [(c[0], c[1], c[2]) for c in again] == [
        ("configmap", f"{_cm('dev')}-part-2", False)]


def _shrunk(grace: float) -> tuple[Store, Recorder, Reconciler, list[tuple[Any, ...]]]:
    """An Actor's set in three ConfigMaps, then shrunk to one: the writes that makes."""
    store, writer = Store(), Recorder()
    made = [anon(f"tool{i:04d}", description=noise(str(i), 4000)) for i in range(500)]
    big = _uid(skill("big", anonymousTools=made))
    changed: set[Key] = set()
    for doc in (big, _uid(actor("dev", skills=["big"]))):
        changed |= store.upsert(doc)
    rec = Reconciler(store, writer, clock=_clock(), stale_grace=grace)
    run_batch(rec, changed)
    for n, call in enumerate(c for c in writer.take() if c[0] == "configmap"):
        echoed = json.loads(json.dumps(call[3]))
        echoed["metadata"]["resourceVersion"] = f"rv-{n}"
        store.upsert(echoed)
    big["spec"]["anonymousTools"] = made[:3]
    run_batch(rec, store.upsert(big))
    calls = [(c[0], c[1], c[2] if c[0] == "delete" else None) for c in writer.take()
             if c[0] in ("configmap", "delete", "status") and c[1] != "Skill"]
    return store, writer, rec, calls


def test_parts_a_shrunk_set_no_longer_has_are_deleted_after_the_actors_configmap() -> None:
    store, writer, rec, calls = _shrunk(0.0)  # no grace
    assert calls == [("configmap", _cm("dev"), None),
                     ("delete", f"{_cm('dev')}-part-1", "rv-0"),
                     ("delete", f"{_cm('dev')}-part-2", "rv-1"),
                     ("status", "Actor", None)]
    # Their deletion, told by the watch, is no news; asked again, nothing is written.
    assert store.remove("ConfigMap", "team-a", "dev-tools-part-1") == set()
    assert store.remove("ConfigMap", "team-a", "dev-tools-part-2") == set()
    run_batch(rec, {key("Actor", ref("team-a/dev"))})
    assert writer.take() == []


def test_parts_a_shrunk_set_no_longer_has_are_kept_for_the_grace() -> None:
    from skillop.operator.staleparts import StaleParts

    now = [0.0]
    _, writer, rec, calls = _shrunk(60.0)
    # The change: the Actor's ConfigMap and its status; the parts wait.
    assert calls == [("configmap", _cm("dev"), None), ("status", "Actor", None)]
    rec.stale_parts = StaleParts(60.0, clock=lambda: now[0])
    dev = key("Actor", ref("team-a/dev"))
    run_batch(rec, {dev})
    assert writer.take() == []
    now[0] = 59.0
    run_batch(rec, {dev})
    assert writer.take() == []
    now[0] = 60.0
    run_batch(rec, {dev})
    assert [(c[0], c[1], c[2]) for c in writer.take()] == [
        ("delete", f"{_cm('dev')}-part-1", "rv-0"), ("delete", f"{_cm('dev')}-part-2", "rv-1")]
