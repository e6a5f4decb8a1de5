"""What the store keeps per object, in bytes: unrelated ConfigMaps and metadata."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from skillkit import configmap, ref, skill

from skillop.model.names import ObjectRef
from skillop.operator.deps import key
from skillop.operator.names_only import NameTable
from skillop.operator.store import Store


def _traced(fill: Any) -> int:
    """Bytes still allocated after ``fill()`` ran (and a garbage collection)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fill()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del kept
    return after - before


def test_an_unrelated_configmap_costs_its_name_and_one_slot() -> None:
    """Known by name only: no ObjectRef, set entry and epoch slot each (246 bytes
    per ConfigMap), but the name string and one dict slot (about 85 bytes)."""
    store = Store()
    count = 4000

    def fill() -> Store:
        for i in range(count):  # each body dropped after its event, as the watch does
            store.upsert(configmap(f"unrelated-{i:05d}", {"k": "v"}))
        return store

    per_configmap = _traced(fill) / count
    assert len(store.unreferenced) == count
    assert per_configmap < 130, f"{per_configmap:.0f} bytes per unrelated ConfigMap"


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
