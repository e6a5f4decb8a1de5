"""Policies in the operator's cascade: creating, changing or deleting a SkillPolicy
or ClusterSkillPolicy (or relabelling a namespace) re-resolves exactly the Actors
it governs, writes only what changed, and the offline CLI gives the same bytes."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from runtimekit import run_batch
from skillkit import anon, cluster_policy, namespace, ref, skill, skill_policy
from test_operator_runtime import Recorder, _clock, _summary, _uid
from test_skill_policies import SETTINGS, World, governed_worlds

from skillop.cli.load import load_text
from skillop.model.names import ObjectRef
from skillop.operator.deps import key
from skillop.operator.runtime import Reconciler
from skillop.operator.store import Store
from skillop.resolve.catalog import Catalog
from skillop.resolve.resolver import Resolver

Doc = dict[str, Any]


def _world() -> list[Doc]:
    from skillkit import actor

    return [
        _uid(namespace("team-a", tier="tenant")), _uid(namespace("team-b")),
        _uid(skill("tools", anonymousTools=[anon("rm", capabilities={"destructive": True}),
                                            anon("ls", capabilities={"readOnly": True})])),
        _uid(skill("tools", "team-b", anonymousTools=[
            anon("rm", capabilities={"destructive": True})])),
        _uid(actor("dev", skills=["tools"])), _uid(actor("ops", skills=["tools"])),
        _uid(actor("dev", "team-b", skills=["tools"])),
    ]


def _running() -> tuple[Store, Recorder, Reconciler]:
    store, writer = Store(), Recorder()
    rec = Reconciler(store, writer, clock=_clock())
    changed = set()
    for doc in _world():
        changed |= store.upsert(doc)
    run_batch(rec, changed)
    for call in writer.take():  # the API server echoes every write
        if call[0] == "configmap":
            store.record_configmap(call[3])
    return store, writer, rec


def _configmaps(calls: list[tuple[Any, ...]]) -> dict[str, str]:
    return {c[1]: c[3]["data"]["tools.json"] for c in calls if c[0] == "configmap"}


TENANTS = _uid(cluster_policy("tenants", namespaceSelector={"matchLabels": {"tier": "tenant"}},
                              denyCapabilities=["destructive"]))


def test_a_cluster_policy_rewrites_exactly_the_actors_it_selects() -> None:
    store, writer, rec = _running()
    changed = store.upsert(copy.deepcopy(TENANTS))
    assert changed == {key("ClusterSkillPolicy", ObjectRef("", "tenants")),
                       key("Actor", ref("team-a/dev")), key("Actor", ref("team-a/ops"))}
    run_batch(rec, changed)
    calls = writer.take()
    assert sorted(_configmaps(calls)) == ["team-a/dev-tools", "team-a/ops-tools"]
    assert all('"rm"' not in text for text in _configmaps(calls).values())
    statuses = {c[2]: c[3] for c in calls if c[0] == "status"}
    assert statuses["team-a/dev"]["policies"] == [
        {"kind": "ClusterSkillPolicy", "name": "tenants", "generation": 1}]
    assert statuses["team-a/dev"]["pruned"][0]["policy"] == "ClusterSkillPolicy tenants"
    ready = statuses["/tenants"]["conditions"][0]
    assert (ready["type"], ready["status"], statuses["/tenants"]["observedGeneration"]) == (
        "Ready", "True", 1)
    # The status echo changes nothing, and the same keys again write nothing.
    for call in calls:
        if call[0] == "status":
            kind, name = call[1], call[2]
            store.record_status(kind, ObjectRef(*name.split("/", 1)), call[3])
        elif call[0] == "configmap":
            store.record_configmap(call[3])
    echo = copy.deepcopy(TENANTS)
    echo["status"] = statuses["/tenants"]
    assert store.upsert(echo) == set()
    run_batch(rec, changed)
    assert writer.take() == []


def test_deleting_the_policy_restores_the_tools() -> None:
    store, writer, rec = _running()
    before = {"team-a/dev-tools": store.managed[ref("team-a/dev-tools")].tools_hash}
    run_batch(rec, store.upsert(copy.deepcopy(TENANTS)))
    for call in writer.take():
        if call[0] == "configmap":
            store.record_configmap(call[3])
    changed = store.remove("ClusterSkillPolicy", "", "tenants")
    assert changed == {key("ClusterSkillPolicy", ObjectRef("", "tenants")),
                       key("Actor", ref("team-a/dev")), key("Actor", ref("team-a/ops"))}
    run_batch(rec, changed)
    calls = writer.take()
    restored = [c[3] for c in calls if c[0] == "configmap" and c[1] == "team-a/dev-tools"]
    assert restored[0]["metadata"]["annotations"]["skillop.dev/tools-hash"] == before[
        "team-a/dev-tools"]


def test_a_namespace_label_change_brings_its_actors_under_the_policy() -> None:
    store, writer, rec = _running()
    run_batch(rec, store.upsert(copy.deepcopy(TENANTS)))
    writer.take()
    changed = store.upsert(_uid(namespace("team-b", tier="tenant")))
    run_batch(rec, changed)
    assert sorted(_configmaps(writer.take())) == ["team-b/dev-tools"]


def test_a_skill_policy_reaches_its_namespace_only() -> None:
    store, writer, rec = _running()
    changed = store.upsert(_uid(skill_policy("read-only", "team-b",
                                             requireCapabilities=["readOnly"])))
    run_batch(rec, changed)
    calls = writer.take()
    assert _summary(calls) == sorted([
        ("configmap", "team-b/dev-tools", True), ("event", "Actor", "team-b/dev"),
        ("status", "Actor", "team-b/dev"), ("status", "SkillPolicy", "team-b/read-only")])


def test_an_invalid_policy_freezes_the_actors_it_may_govern() -> None:
    """The API server's rules keep such a policy out; should one still come (an
    older CRD), its Actors keep their ConfigMaps and say why in status."""
    store, writer, rec = _running()
    bad = _uid(skill_policy("broken", "team-a", deny=["no-slash"]))
    changed = store.upsert(bad)
    run_batch(rec, changed)
    calls = writer.take()
    assert _configmaps(calls) == {}
    statuses = {c[2]: c[3] for c in calls if c[0] == "status"}
    assert set(statuses) == {"team-a/dev", "team-a/ops", "team-a/broken"}
    dev_ready = statuses["team-a/dev"]["conditions"][0]
    assert (dev_ready["status"], dev_ready["reason"]) == ("False", "DependencyFailed")
    assert statuses["team-a/broken"]["conditions"][0]["reason"] == "InvalidSpec"


# -- the CLI and the operator agree, with policies ----------------------------------------
def _operator_text(docs: list[Doc], actor: ObjectRef) -> str | None:
    store, writer = Store(), Recorder()
    changed = set()
    for doc in docs:
        changed |= store.upsert(copy.deepcopy(doc))
    run_batch(Reconciler(store, writer, clock=_clock()), changed)
    written = {c[1]: c[3]["data"]["tools.json"] for c in writer.calls if c[0] == "configmap"}
    return written.get(f"{actor.namespace}/{actor.name}-tools")


@SETTINGS
@given(governed_worlds(), st.booleans())
def test_the_cli_and_the_operator_write_the_same_bytes(
        case: tuple[World, list[Doc], Doc], with_extra: bool) -> None:
    import yaml

    world, policies, extra = case
    docs = world.docs(extra=[namespace("team-a", tier="tenant"), *policies,
                             *([extra] if with_extra else [])])
    loaded = load_text(yaml.safe_dump_all(docs), origin="in.yaml")
    assert not loaded.problems
    resolution = Resolver(Catalog.of(loaded.objects)).resolve_actor(ref("team-a/act"))
    assert resolution is not None
    written = _operator_text(docs, ref("team-a/act"))
    if resolution.ok:
        assert written == resolution.text + "\n"
    else:
        assert written is None
