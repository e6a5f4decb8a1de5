"""The echoes of the operator's own writes are dropped before kopf; nothing else is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from operatorkit import Cluster, wait_for

from skillop.model.names import ObjectRef
from skillop.model.toolset import TOOLS_KEY, default_configmap_name
from skillop.operator.echoes import ECHOES, EchoFilter, drop_echoes, kopf_fits_echo_filter, own_echo
from skillop.operator.store import Store

EXAMPLES = "examples"


def configmap(name: str, version: str, *, data: str = "{}") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": version,
                         "uid": "cm-uid", "labels": {"app.kubernetes.io/managed-by": "skillop",
                                                     "skillop.dev/actor": "a"},
                         "ownerReferences": [{"apiVersion": "skillop.dev/v1alpha1",
                                              "kind": "Actor", "name": "a", "uid": "a-uid",
                                              "controller": True}]},
            "data": {TOOLS_KEY: data}}


def actor(version: str) -> dict[str, Any]:
    return {"apiVersion": "skillop.dev/v1alpha1", "kind": "Actor",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": version}}


def test_the_version_a_write_made_is_an_echo_and_no_other() -> None:
    store = Store()
    store.record_configmap(configmap("a-tools", "10"))
    assert own_echo(store, "ConfigMap", configmap("a-tools", "10"))
    assert not own_echo(store, "ConfigMap", configmap("a-tools", "11"))  # a hand edit after
    assert not own_echo(store, "ConfigMap", configmap("b-tools", "10"))
    store.record_status("Actor", ObjectRef("ns", "a"), {"toolsHash": "h"}, version="7")
    assert own_echo(store, "Actor", actor("7"))
    assert not own_echo(store, "Actor", actor("8"))
    assert not own_echo(store, "Actor", actor("6"))  # older: still told to the store
    # A write whose answer gave no resourceVersion makes no echo by version.
    store.record_status("Actor", ObjectRef("ns", "a"), {"toolsHash": "i"}, version=None)
    assert not own_echo(store, "Actor", actor("9"))
    assert not own_echo(store, "Skill", actor("7"))


def test_an_echo_still_counts_as_the_objects_latest_sighting() -> None:
    store = Store()
    store.upsert(configmap("a-tools", "9"))
    store.checkpoint()
    store.record_configmap(configmap("a-tools", "10"))
    assert store.epochs["ConfigMap"][ObjectRef("ns", "a-tools")] == 0
    assert own_echo(store, "ConfigMap", configmap("a-tools", "10"))
    assert store.epochs["ConfigMap"][ObjectRef("ns", "a-tools")] == 1


@dataclass(frozen=True)
class Resource:
    group: str
    plural: str


def test_the_filter_drops_modified_echoes_of_actors_and_configmaps_only() -> None:
    echoes = EchoFilter()
    events = [{"type": t, "object": configmap("a-tools", v)}
              for t, v in (("MODIFIED", "10"), ("MODIFIED", "11"), ("DELETED", "10"),
                           (None, "10"), ("ADDED", "10"))]

    async def stream(*, resource: Any, **_: Any) -> AsyncIterator[Any]:
        for event in events:
            yield event

    async def seen(resource: Resource) -> list[Any]:
        return [e async for e in echoes.wrap(stream)(resource=resource, settings=None)]

    assert asyncio.run(seen(Resource("", "configmaps"))) == events  # no judge yet
    echoes.judge = lambda kind, body: body["metadata"]["resourceVersion"] == "10"
    assert asyncio.run(seen(Resource("", "configmaps"))) == events[1:]
    assert echoes.dropped == 1
    assert asyncio.run(seen(Resource("skillop.dev", "skills"))) == events


def test_kopf_is_as_the_filter_expects() -> None:
    import skillop.operator  # noqa: F401  (installs the filter)

    assert kopf_fits_echo_filter()
    assert drop_echoes()


def test_own_writes_are_dropped_and_others_changes_repaired(running: Cluster) -> None:
    running.apply_dir(running_examples())
    running.wait_ready("Actor", "team-a", "developer")
    name = default_configmap_name("developer")
    good = wait_for(lambda: running.configmap("team-a", name).data[TOOLS_KEY])
    before = ECHOES.dropped
    running.patch_spec("Skill", "platform", "read-only-git",
                       {"description": "Git history", "builtins": ["git_operations",
                                                                   "shell_operations"]})
    wait_for(lambda: running.configmap("team-a", name).data[TOOLS_KEY] != good,
             message="developer's ConfigMap rewritten")
    # Its new ConfigMap and status (and the reviewer's status) come back as echoes;
    # one that overtakes its write's answer goes to kopf as any event, so at least one.
    wait_for(lambda: ECHOES.dropped > before, message="the writes' echoes dropped")
    written = running.configmap("team-a", name).data[TOOLS_KEY]
    running.core.patch_namespaced_config_map(name, "team-a", {"data": {TOOLS_KEY: "{}"}})
    wait_for(lambda: running.configmap("team-a", name).data[TOOLS_KEY] == written,
             message="a hand edit after the write repaired")


def running_examples() -> Any:
    from operatorkit import ROOT

    return ROOT / EXAMPLES
