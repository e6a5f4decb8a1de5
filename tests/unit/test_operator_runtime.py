"""The Reconciler's cascade with an in-memory writer: exactly the needed writes, once."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from runtimekit import Recorder, run_batch
from runtimekit import clock as _clock
from runtimekit import cm_key as _cm
from runtimekit import with_uid as _uid
from skillkit import actor, anon, configmap, ref, skill, skill_md

from skillop.model import problems as P
from skillop.model.names import ObjectRef
from skillop.model.toolset import TOOLS_KEY, default_configmap_name
from skillop.operator.deps import Key, key
from skillop.operator.runtime import Reconciler
from skillop.operator.store import Store

Doc = dict[str, Any]


def _world(extra_base_tool: bool = False) -> list[Doc]:
    tools = [anon("lint"), *([anon("format")] if extra_base_tool else [])]
    return [
        _uid(skill("base", anonymousTools=tools)),
        _uid(skill("mid", includes=[{"skill": "base"}], builtins=["git_operations"])),
        _uid(skill("other", builtins=["file_operations"])),
        _uid(actor("dev", skills=["mid"])),
        _uid(actor("ops", skills=["base", "other"])),
        _uid(actor("idle", skills=["other"])),
    ]


def _loaded(fail: int = 0) -> tuple[Store, Recorder, Reconciler, set[Key]]:
    store, writer = Store(), Recorder(fail)
    changed: set[Key] = set()
    for doc in _world():
        changed |= store.upsert(doc)
    return store, writer, Reconciler(store, writer, clock=_clock()), changed


def _summary(calls: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(c[:3] for c in calls)


def test_the_initial_batch_writes_every_status_and_configmap_once() -> None:
    _, writer, rec, changed = _loaded()
    run_batch(rec, changed)
    assert _summary(writer.take()) == sorted([
        ("configmap", _cm("dev"), False), ("configmap", _cm("ops"), False),
        ("configmap", _cm("idle"), False),
        ("status", "Actor", "team-a/dev"), ("status", "Actor", "team-a/ops"),
        ("status", "Actor", "team-a/idle"),
        ("status", "Skill", "team-a/base"), ("status", "Skill", "team-a/mid"),
        ("status", "Skill", "team-a/other"),
    ])
    run_batch(rec, changed)
    assert writer.take() == []


def test_a_base_skill_change_rewrites_exactly_its_dependents_once() -> None:
    store, writer, rec, changed = _loaded()
    run_batch(rec, changed)
    writer.take()
    changed = store.upsert(_world(extra_base_tool=True)[0])
    assert changed == {key("Skill", ref("team-a/base"))}
    run_batch(rec, changed)
    calls = writer.take()
    assert _summary(calls) == sorted([
        ("configmap", _cm("dev"), True), ("configmap", _cm("ops"), True),
        ("event", "Actor", "team-a/dev"), ("event", "Actor", "team-a/ops"),
        ("status", "Actor", "team-a/dev"), ("status", "Actor", "team-a/ops"),
        ("status", "Skill", "team-a/base"), ("status", "Skill", "team-a/mid"),
    ])
    events = [c for c in calls if c[0] == "event"]
    assert {(c[3], c[4]) for c in events} == {("uid-dev", "ToolSetChanged"),
                                              ("uid-ops", "ToolSetChanged")}
    dev_cm = next(c[3] for c in calls if c[:2] == ("configmap", _cm("dev")))
    assert "format" in dev_cm["data"][TOOLS_KEY]
    # the same keys again: everything is already as it should be
    run_batch(rec, changed)
    assert writer.take() == []


def test_the_echo_of_the_operators_own_writes_is_no_news() -> None:
    store, writer, rec, changed = _loaded()
    run_batch(rec, changed)
    for call in writer.take():
        if call[0] == "configmap":
            assert store.upsert(copy.deepcopy(call[3])) == set()
        elif call[0] == "status":
            name = call[2].split("/")[1]
            body = next(copy.deepcopy(d) for d in _world()
                        if d["kind"] == call[1] and d["metadata"]["name"] == name)
            body["status"] = call[3]
            assert store.upsert(body) == set()
    run_batch(rec, changed)
    assert writer.take() == []


def test_a_failed_write_is_requeued_and_retried() -> None:
    _, writer, rec, changed = _loaded(fail=1)
    run_batch(rec, changed)
    assert len(rec._dirty) == 1  # the one object whose write failed
    retry = set(rec._dirty)
    kind, name = next(iter(retry))
    first = writer.take()
    assert not any(c[0] == "status" and c[1:3] == (kind, name) for c in first)
    rec._dirty.clear()
    run_batch(rec, retry)
    again = writer.take()
    assert ("status", kind, name) in _summary(again)
    assert not rec._dirty
    run_batch(rec, changed)
    assert writer.take() == []


def test_invalid_objects_get_ready_false() -> None:
    store, writer, rec, _ = _loaded()
    bad = _uid(actor("broken", skills=["base"], skillAccessPolicy={"maxTools": "many"}), n=4)
    changed = store.upsert(bad)
    run_batch(rec, changed)
    calls = writer.take()
    assert _summary(calls) == [("event", "Actor", "team-a/broken"),
                               ("status", "Actor", "team-a/broken")]
    # The Warning names the object by the uid ``kubectl describe`` selects on.
    assert [c[3:] for c in calls if c[0] == "event"] == [("uid-broken", P.INVALID_SPEC)]
    status = next(c[3] for c in calls if c[0] == "status")
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", P.INVALID_SPEC)
    assert "skillAccessPolicy.maxTools" in ready["message"]
    assert ready["observedGeneration"] == 4
    assert status["observedGeneration"] == 4
    # seen again (the status echo): nothing more to write
    bad["status"] = status
    run_batch(rec, store.upsert(bad))
    assert writer.take() == []


def test_an_invalid_skill_makes_its_users_unresolved() -> None:
    store, writer, rec, changed = _loaded()
    run_batch(rec, changed)
    writer.take()
    changed = store.upsert(_uid(skill("base", anonymousTools="nope"), n=2))
    run_batch(rec, changed)
    calls = writer.take()
    touched = {c[1:3] for c in calls if c[0] == "status"}
    assert touched == {("Skill", "team-a/base"), ("Skill", "team-a/mid"),
                       ("Actor", "team-a/dev"), ("Actor", "team-a/ops")}
    assert not [c for c in calls if c[0] == "configmap"]  # last good tool sets stay
    for c in calls:
        if c[:2] == ("status", "Actor"):
            ready = next(x for x in c[3]["conditions"] if x["type"] == "Ready")
            assert ready["status"] == "False"


def test_the_worker_writes_nothing_before_the_initial_listing() -> None:
    async def scenario() -> tuple[int, int]:
        _, writer, rec, changed = _loaded()
        rec.debounce = 0.0
        worker = asyncio.create_task(rec.run())
        rec.mark(changed)
        await asyncio.sleep(0.05)
        before = len(writer.calls)
        rec.loaded.set()
        # Wait for the whole batch, not its first write: under CPU load the
        # writes of one batch land over several loop turns.
        for _ in range(1000):
            await asyncio.sleep(0.01)
            if len(writer.calls) >= 9 and not rec._dirty:
                break
        await asyncio.sleep(0.05)  # a tenth write, if one were owed, lands here
        worker.cancel()
        return before, len(writer.calls)

    before, after = asyncio.run(scenario())
    assert before == 0
    assert after == 9


def test_a_configmap_known_by_name_is_read_before_the_skill_using_it_resolves() -> None:
    store, writer, rec, changed = _loaded()
    run_batch(rec, changed)
    writer.take()
    pdf = _uid(configmap("pdf-skill", {"SKILL.md": skill_md("pdf", "reads PDFs")}))
    assert store.upsert(pdf) == set()  # no Skill references it yet: name only
    writer.configmaps["team-a/pdf-skill"] = pdf
    pdf_skill = skill("pdf", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}])
    changed = store.upsert(_uid(pdf_skill))
    run_batch(rec, changed)
    calls = writer.take()
    assert calls[0] == ("read", "team-a/pdf-skill")
    (status,) = [c[3] for c in calls if c[:3] == ("status", "Skill", "team-a/pdf")]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready
    assert [t["name"] for t in status["tools"]] == ["pdf"]
    run_batch(rec, changed)
    assert writer.take() == []  # read once; nothing more to write


def test_a_failed_configmap_read_retries_the_batch_without_a_wrong_status() -> None:
    store, writer, rec, changed = _loaded()
    run_batch(rec, changed)
    writer.take()
    pdf = _uid(configmap("pdf-skill", {"SKILL.md": skill_md("pdf")}))
    store.upsert(pdf)
    writer.configmaps["team-a/pdf-skill"] = pdf
    pdf_skill = skill("pdf", agentSkills=[{"configMapRef": {"name": "pdf-skill"}}])
    changed = store.upsert(_uid(pdf_skill))
    writer.fail = 1
    with pytest.raises(RuntimeError, match="could not read ConfigMap team-a/pdf-skill"):
        run_batch(rec, changed)
    assert writer.take() == []  # no status said "not found" meanwhile
    run_batch(rec, changed)
    assert ("status", "Skill", "team-a/pdf") in _summary(writer.take())


def _fan_out(actors: int) -> tuple[Store, set[Key]]:
    """A base skill and ``actors`` Actors using it (through ``mid``)."""
    store = Store()
    changed: set[Key] = set()
    for doc in [*_world()[:2], *(_uid(actor(f"a{i:03d}", skills=["mid"]))
                                 for i in range(actors))]:
        changed |= store.upsert(doc)
    return store, changed


def test_events_are_posted_after_every_configmap_and_status_of_the_batch() -> None:
    store, changed = _fan_out(20)  # under the recorder's burst: one Event each
    writer = Recorder()
    rec = Reconciler(store, writer, clock=_clock(), concurrency=4)
    run_batch(rec, changed)
    writer.take()
    run_batch(rec, store.upsert(_world(extra_base_tool=True)[0]))
    kinds = [c[0] for c in writer.take()]
    assert kinds.count("event") == 20
    first_event = kinds.index("event")
    assert kinds[first_event:] == ["event"] * 20  # no write waited for an event


def test_a_batch_ends_before_its_events_are_posted() -> None:
    store, changed = _fan_out(20)
    writer = Recorder()
    rec = Reconciler(store, writer, clock=_clock(), concurrency=4)
    run_batch(rec, changed)
    writer.take()
    asyncio.run(rec.process(store.upsert(_world(extra_base_tool=True)[0])))
    assert [c for c in writer.take() if c[0] == "event"] == []
    assert rec.events.waiting == 20  # handed over, posted by the recorder's task


class SlowWriter(Recorder):
    """Every write takes a turn of the event loop, as a real API call does."""

    def __init__(self, *, fail_configmaps: set[str] | None = None) -> None:
        super().__init__()
        self.resolved_at_status: list[int] = []
        self.resolved_at_configmap: list[int] = []
        self.resolved = 0
        self.fail_configmaps = fail_configmaps or set()

    async def apply_configmap(self, body: dict[str, Any], *, exists: bool) -> None:
        self.resolved_at_configmap.append(self.resolved)
        await asyncio.sleep(0)
        name = body["metadata"]["name"]
        if name in self.fail_configmaps:
            self.fail_configmaps.discard(name)
            raise RuntimeError("HTTP 500 from a flaky API server")
        await super().apply_configmap(body, exists=exists)

    async def patch_status(self, kind: str, ref: ObjectRef, new: dict[str, Any],
                           old: dict[str, Any]) -> None:
        if kind == "Actor":
            self.resolved_at_status.append(self.resolved)
        await asyncio.sleep(0)
        await super().patch_status(kind, ref, new, old)


def _counting(monkeypatch: pytest.MonkeyPatch, writer: SlowWriter) -> None:
    from skillop.resolve.resolver import Resolver

    original = Resolver.resolve_actor

    def counting(self: Resolver, ref: ObjectRef) -> Any:
        writer.resolved += 1
        return original(self, ref)

    monkeypatch.setattr(Resolver, "resolve_actor", counting)


def test_objects_are_resolved_only_as_write_slots_free_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store, changed = _fan_out(150)
    writer = SlowWriter()
    _counting(monkeypatch, writer)
    rec = Reconciler(store, writer, clock=_clock(), concurrency=2)  # a window of 32 objects
    run_batch(rec, changed)
    assert writer.resolved == 150
    # the first ConfigMaps are written while most actors are still unresolved
    assert writer.resolved_at_configmap[0] <= 2 + 2
    # and the first statuses once the first window's ConfigMaps are: a batch of
    # thousands holds a window's statuses, never every plan
    assert writer.resolved_at_status[0] <= 32
    assert len([c for c in writer.calls if c[0] == "configmap"]) == 150


def test_a_windows_configmaps_land_before_its_statuses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store, changed = _fan_out(40)
    writer = SlowWriter()
    rec = Reconciler(store, writer, clock=_clock(), concurrency=4)  # a window of 64 objects

    async def load_then_change() -> None:
        await rec.process(changed)
        writer.take()
        await rec.process(store.upsert(_world(extra_base_tool=True)[0]))

    asyncio.run(load_then_change())
    calls = [c for c in writer.take() if c[0] != "event"]
    kinds = [c[0] for c in calls]
    assert kinds.count("configmap") == 40 and kinds.count("status") == 40 + 2
    # every pod-facing ConfigMap of the change is written before any status
    assert kinds == ["configmap"] * 40 + ["status"] * 42


def test_a_failed_configmap_write_holds_back_its_status(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store, changed = _fan_out(10)
    writer = SlowWriter(fail_configmaps={default_configmap_name("a003")})
    rec = Reconciler(store, writer, clock=_clock(), concurrency=4)
    failed: list[set[Key]] = []
    rec.mark = lambda keys: failed.append(set(keys))  # type: ignore[method-assign]
    run_batch(rec, changed)
    statuses = {c[2] for c in writer.calls if c[0] == "status"}
    assert "team-a/a003" not in statuses  # never a status for a ConfigMap not written
    assert {"team-a/a002", "team-a/a004"} <= statuses
    assert failed == [{key("Actor", ref("team-a/a003"))}]  # retried


def test_a_configmap_seen_deleted_is_recreated_only_for_an_actor_that_still_exists() -> None:
    store, writer, rec, changed = _loaded()
    run_batch(rec, changed)
    for call in writer.take():
        if call[0] == "configmap":
            store.upsert(json.loads(json.dumps({**call[3], "metadata": {
                **call[3]["metadata"], "uid": "cm-" + call[1]}})))
    # The garbage collector deletes dev's ConfigMap: dev was deleted in a watch gap.
    run_batch(rec, store.remove("ConfigMap", "team-a", "dev-tools"))
    assert writer.take() == [("uid", "Actor", "team-a/dev")]  # asked, nothing written
    assert rec._relisted == {"Actor"}  # and the store is checked against the API
    # ops's ConfigMap is deleted by hand: ops exists, so it comes back.
    writer.uids["team-a/ops"] = "uid-ops"
    run_batch(rec, store.remove("ConfigMap", "team-a", "ops-tools"))
    calls = writer.take()
    assert calls[0] == ("uid", "Actor", "team-a/ops")
    assert [c[1] for c in calls if c[0] == "configmap"] == ["team-a/ops-tools"]


class _Versioned(Recorder):
    """Answers each ConfigMap write with a new resourceVersion, as the API does."""

    def __init__(self) -> None:
        super().__init__()
        self.versions = 0

    async def apply_configmap(self, body: dict[str, Any], *, exists: bool) -> str | None:
        await super().apply_configmap(body, exists=exists)
        self.versions += 1
        return f"rv-{self.versions}"


def test_a_configmap_rewrite_asserts_the_resource_version_last_seen() -> None:
    """A rewrite names the version the operator last saw (the answer to its own
    write, or a newer one the watch showed), so the API server refuses it if the
    ConfigMap moved on meanwhile (a new leader wrote it while this one was paused)."""
    store, writer = Store(), _Versioned()
    changed: set[Key] = set()
    for doc in _world():
        changed |= store.upsert(doc)
    rec = Reconciler(store, writer, clock=_clock())
    run_batch(rec, changed)
    created = [c for c in writer.take() if c[0] == "configmap"]
    assert all("resourceVersion" not in c[3]["metadata"] for c in created)
    answered = {c[1]: f"rv-{i}" for i, c in enumerate(created, start=1)}
    seen = copy.deepcopy(next(c[3] for c in created if c[1] == _cm("dev")))
    seen["metadata"]["resourceVersion"] = "rv-77"  # the watch: dev's moved on since
    assert store.upsert(seen) == set()  # the same ConfigMap all the same: no news
    run_batch(rec, store.upsert(_world(extra_base_tool=True)[0]))
    rewrites = {c[1]: c[3]["metadata"].get("resourceVersion")
                for c in writer.take() if c[0] == "configmap"}
    assert rewrites == {_cm("dev"): "rv-77", _cm("ops"): answered[_cm("ops")]}


class Refusing(Recorder):
    """A Writer whose API server refuses ConfigMaps for good (HTTP 422, as for one
    over its size limit): the words the operator passes on to the status."""

    async def apply_configmap(self, body: dict[str, Any], *, exists: bool) -> None:
        from skillop.operator.kube import Refused

        meta = body["metadata"]
        self.calls.append(("configmap", f"{meta['namespace']}/{meta['name']}", exists, body))
        raise Refused(f"write configmap {meta['namespace']}/{meta['name']}", 422,
                      f'ConfigMap "{meta["name"]}" is invalid: []: Too long: must have at'
                      " most 1048576 bytes")


def test_a_configmap_refused_for_good_is_ready_false_once_and_not_retried() -> None:
    store, writer = Store(), Refusing()
    changed: set[Key] = set()
    for doc in _world():
        changed |= store.upsert(doc)
    rec = Reconciler(store, writer, clock=_clock())
    run_batch(rec, changed)
    calls = writer.take()
    assert not rec._dirty  # nothing queued to retry
    statuses = {c[2]: c[3] for c in calls if c[:2] == ("status", "Actor")}
    assert sorted(statuses) == ["team-a/dev", "team-a/idle", "team-a/ops"]
    ready = next(c for c in statuses["team-a/dev"]["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", P.CONFIGMAP_REFUSED)
    assert "refused ConfigMap dev-tools: HTTP 422" in ready["message"]
    assert "must have at most 1048576 bytes" in ready["message"]
    # Asked again (any change, a resync): the same ConfigMap is not sent again,
    # and the status already says so.
    run_batch(rec, changed)
    assert [c for c in writer.take() if c[0] != "status" or c[1] == "Actor"] == []
