"""What the store keeps per object, in bytes: unrelated ConfigMaps and metadata."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from skillkit import configmap, ref, skill

from skillop.model.names import ObjectRef
from skillop.operator.deps import key
from skillop.operator.names_only import NameTable
from skillop.operator.shared_items import SharedItems
from skillop.operator.store import Store


def _traced(fill: Any) -> int:
    """Bytes allocated under ``fill()`` and still held after it ran (and a garbage
    collection): only what was allocated with this file on the stack, so a thread
    an earlier test left running in this process is not counted."""
    gc.collect()
    tracemalloc.start(64)
    try:
        kept = fill()
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    del kept
    ours = snapshot.filter_traces([tracemalloc.Filter(True, __file__, all_frames=True)])
    return sum(stat.size for stat in ours.statistics("filename"))


#: The fill of the test below, run in a fresh interpreter: in a process where other
#: tests ran, a table of the interpreter's that the fill adds to (interned strings,
#: before the store stopped interning these names: 3.8 MB at its doubling) can grow
#: during it and be charged to it (1,051 bytes a ConfigMap, against 90).
_UNRELATED = """
import gc, sys, tracemalloc
from skillkit import configmap
from skillop.operator.store import Store
store, count = Store(), 4000
gc.collect()
tracemalloc.start(64)
for i in range(count):  # each body dropped after its event, as the watch does
    store.upsert(configmap(f"unrelated-{i:05d}", {"k": "v"}))
gc.collect()
snapshot = tracemalloc.take_snapshot()
tracemalloc.stop()
assert len(store.unreferenced) == count
held = sum(stat.size for stat in snapshot.filter_traces(
    [tracemalloc.Filter(True, "<string>", all_frames=True)]).statistics("filename"))
print(held / count)
"""


def test_an_unrelated_configmap_costs_its_name_and_one_slot() -> None:
    """Known by name only: no ObjectRef, set entry and epoch slot each (246 bytes
    per ConfigMap), but the name string and one dict slot (about 85 bytes)."""
    here = Path(__file__).resolve().parent
    path = os.pathsep.join([str(here), str(here.parents[1] / "operator"),
                            os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", _UNRELATED], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path}, check=True, timeout=120)
    per_configmap = float(done.stdout.strip())
    assert per_configmap < 130, f"{per_configmap:.0f} bytes per unrelated ConfigMap"


def test_an_unrelated_configmaps_name_is_not_interned() -> None:
    """Interned, each name would also hold an entry in the interpreter's table of
    interned strings (38 bytes more a ConfigMap at 50,000, bench/configmaps.py)."""
    name = "".join(["unrelated-", "interned?"])
    store = Store()
    store.upsert(configmap(name, {"k": "v"}))
    assert ref(f"team-a/{name}") in store.unreferenced
    again = "".join(["unrelated-", "interned?"])  # equal, another object
    assert sys.intern(again) is again  # no equal string was interned before it
    store.upsert(configmap(name, {"k": "v"}, ns="".join(["team-", "interned?"])))
    namespace = "".join(["team-", "interned?"])
    assert sys.intern(namespace) is not namespace  # a namespace is (one string for all)


refs = st.builds(ObjectRef, st.sampled_from(["team-a", "team-b", "c"]),
                 st.text("abcxyz-", min_size=1, max_size=4))


@given(st.lists(st.tuples(st.booleans(), refs, st.integers(0, 5)), max_size=40))
def test_the_name_table_is_a_set_of_refs_with_their_epochs(
        steps: list[tuple[bool, ObjectRef, int]]) -> None:
    table, model = NameTable(), dict[ObjectRef, int]()
    for add, r, epoch in steps:
        if add:
            table.add(r, epoch)
            model[r] = epoch
        else:
            assert table.discard(r) == model.pop(r, None)
    assert table == set(model)
    assert len(table) == len(model)
    assert dict(table.items()) == model
    assert all(r in table for r in model)
    assert ref("elsewhere/none") not in table
    assert "team-a/x" not in table


def test_a_parsed_object_keeps_skillops_annotations_not_kubectls_copy_of_it() -> None:
    """kubectl apply leaves the whole object, as JSON, in an annotation: the store
    would hold every applied object twice. Other annotations are still checked."""
    doc = skill("pdf", description="reads PDF files")
    doc["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(doc),
        "skillop.dev/accept-digests": "srv=abc"}
    store = Store()
    store.upsert(doc)
    kept = store.catalog.skills[ref("team-a/pdf")].meta
    assert dict(kept.annotations) == {"skillop.dev/accept-digests": "srv=abc"}
    assert dict(kept.labels) == {}
    doc["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": 7}
    store.upsert(doc)
    assert store.invalid[key("Skill", ref("team-a/pdf"))][0].field == "metadata.annotations"


def test_equal_status_tool_items_of_two_actors_are_one_dict() -> None:
    """1,000 Actors reaching the same tools held 108,000 item dicts; equal ones are
    one dict now, what the store says of each status staying the same."""
    item = {"name": "read", "bindingName": "read", "source": "anonymous",
            "skill": "team-a/pdf", "digest": "sha256:abc"}
    store = Store()
    for name in ("one", "two"):
        store.record_status("Actor", ref(f"team-a/{name}"),
                            {"toolsHash": "h", "tools": [dict(item), {"odd": [1]}]})
    one, two = (store.statuses[key("Actor", ref(f"team-a/{n}"))]["tools"] for n in ("one", "two"))
    assert one == two == [item, {"odd": [1]}]
    assert one[0] is two[0]
    assert one[1] is not two[1]  # an unhashable value: kept as it is


def test_shared_items_let_go_of_what_no_status_uses() -> None:
    items = SharedItems(floor=2)
    statuses = [items.share({"tools": [{"n": i}]}) for i in range(5)]
    items.prune(statuses[-1:])
    assert len(items) == 1
    assert items.share({"tools": [{"n": 4}]})["tools"][0] is statuses[-1]["tools"][0]


def test_equal_conditions_and_the_names_of_skills_reached_are_held_once() -> None:
    """A Skill's status names every skill it reaches (20 or more each in chains of
    10,000 Skills), and most objects of a batch carry equal conditions: each name
    and each distinct condition is one object in the store."""
    ready = {"type": "Ready", "status": "True", "reason": "Resolved",
             "message": "2 tools from 2 skills", "observedGeneration": 1,
             "lastTransitionTime": "2026-01-01T00:00:00Z"}
    store = Store()
    for name in ("one", "two"):
        reached = [f"team-a/{s}" for s in (name, "base")]  # built anew, as each plan does
        store.record_status("Skill", ref(f"team-a/{name}"),
                            {"conditions": [dict(ready)], "skills": reached})
    one, two = (store.statuses[key("Skill", ref(f"team-a/{n}"))] for n in ("one", "two"))
    assert one["skills"] == ["team-a/one", "team-a/base"]
    assert one["skills"][1] is two["skills"][1]
    assert one["conditions"] == two["conditions"] == [ready]
    assert one["conditions"][0] is two["conditions"][0]
