"""A set too large for one ConfigMap is stored packed: gzip in binaryData, cut into
parts when one ConfigMap cannot hold it; a set that fits is stored as it always was
(docs/toolset.md, Large sets)."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from skillkit import actor, anon, catalog, noise, ref, skill

from skillop.gateway.served import ToolSetError, load_served_set
from skillop.model import problems as P
from skillop.model.toolset import (
    INDEX_KEY,
    MAX_CONFIGMAP_BYTES,
    MAX_PARTS,
    TOOLS_KEY,
    PackedIndex,
    chunk_key,
)
from skillop.operator.actorplan import actor_plan
from skillop.operator.configmaps import ObservedConfigMap, observe_configmap
from skillop.operator.outputs import Plan
from skillop.resolve.resolver import Resolution, Resolver
from skillop.resolve.toolset import configmap_data, configmap_layout, tools_json

Doc = dict[str, Any]
T0 = "2024-01-01T00:00:00Z"


def _docs(tools: int, *, size: int = 4000, compressible: bool = False) -> list[Doc]:
    """An Actor of ``tools`` tools (skills of at most 1,000, as a Skill's list is bounded)."""
    made = [anon(f"tool{i:05d}", description=("x" * size if compressible
                                               else noise(f"t{i}", size)))
            for i in range(tools)]
    skills = [skill(f"base{n}", anonymousTools=made[n * 1000:(n + 1) * 1000])
              for n in range((tools + 999) // 1000)]
    dev = actor("dev", skills=[s["metadata"]["name"] for s in skills])
    dev["metadata"].update(uid="uid-dev", generation=1)
    return [*skills, dev]


def _resolve(docs: list[Doc]) -> tuple[Any, Resolution]:
    cat = catalog(docs)
    resolution = Resolver(cat).resolve_actor(ref("team-a/dev"))
    assert resolution is not None
    return cat.actors[ref("team-a/dev")], resolution


def _plan(docs: list[Doc], observed: dict[str, ObservedConfigMap] | None = None) -> Plan:
    dev, resolution = _resolve(docs)
    observed = observed or {}
    return actor_plan(dev, resolution, old_status={}, observed=observed.get("dev-tools"),
                      observed_parts=observed, now=T0)


def _echo(plan: Plan) -> dict[str, ObservedConfigMap]:
    """What the watch shows once the plan's ConfigMaps are written (through JSON)."""
    return {name: observe_configmap(body) for name, body in _applied(plan, {}).items()}


def _applied(plan: Plan, state: dict[str, Doc]) -> dict[str, Doc]:
    """The API server's ConfigMaps, by name, once ``plan`` is written to ``state``."""
    out = dict(state)
    for body in [*plan.parts, *([plan.configmap] if plan.configmap else [])]:
        out[body["metadata"]["name"]] = json.loads(json.dumps(body))
    for stale in plan.stale:
        del out[stale.name]
    return out


def _seen(state: dict[str, Doc]) -> dict[str, ObservedConfigMap]:
    return {name: observe_configmap(body) for name, body in state.items()}


def _mounted(state: dict[str, Doc] | Plan, directory: Any) -> None:
    """The ConfigMaps' keys as a projected volume lays them out: one directory,
    holding every key of every source and nothing else."""
    bodies = (list(state.values()) if isinstance(state, dict)
              else [*state.parts, *([state.configmap] if state.configmap else [])])
    directory.mkdir(exist_ok=True)
    for old in directory.iterdir():
        old.unlink()
    for body in bodies:
        for key, value in (body.get("data") or {}).items():
            (directory / key).write_text(value)
        for key, value in (body.get("binaryData") or {}).items():
            (directory / key).write_bytes(base64.b64decode(value))


def _chunk_of(body: Doc) -> tuple[str, bytes]:
    key = sorted(body["binaryData"])[0]
    return key, base64.b64decode(body["binaryData"][key])


def test_a_set_that_fits_is_tools_json_exactly_as_before() -> None:
    _, resolution = _resolve(_docs(100, size=500))
    layout = configmap_layout("dev-tools", resolution.text, resolution.hash, resolution.tools)
    assert layout.parts == () and layout.main.binary == {}
    assert dict(layout.main.data) == configmap_data(resolution.text, resolution.tools)
    assert layout.main.data[TOOLS_KEY] == resolution.text + "\n"


def test_a_set_over_one_configmap_is_gzip_members_in_binary_data_with_its_index() -> None:
    _, resolution = _resolve(_docs(240, compressible=True))  # about 1 MiB of tools.json
    assert len(resolution.text) > MAX_CONFIGMAP_BYTES and not resolution.problems
    plan = _plan(_docs(240, compressible=True))
    assert plan.configmap is not None and plan.parts == ()
    cm = plan.configmap
    index = PackedIndex.parse(cm["data"][INDEX_KEY])
    assert TOOLS_KEY not in cm["data"] and len(index.chunks) > 2
    assert sorted(cm["binaryData"]) == sorted(c.key for c in index.chunks)
    assert all(c.key == chunk_key(0, c.sha256) and c.config_map == "dev-tools"
               for c in index.chunks)
    assert index.hash == resolution.hash == cm["metadata"]["annotations"]["skillop.dev/tools-hash"]
    # In the index's order, the members are tools.json's very bytes: the hash keeps
    # its meaning, and gunzip reads them as one file.
    members = [base64.b64decode(cm["binaryData"][c.key]) for c in index.chunks]
    raw = gzip.decompress(b"".join(members))
    assert raw == tools_json(resolution.text).encode() and len(raw) == index.size
    assert plan.status is not None and plan.status["toolsHash"] == resolution.hash


def test_a_larger_set_fills_parts_written_before_the_actors_configmap(tmp_path: Any) -> None:
    docs = _docs(500)  # about 2.2 MB of tools.json that gzip barely shrinks
    _, resolution = _resolve(docs)
    plan = _plan(docs)
    assert plan.configmap is not None
    names = [p["metadata"]["name"] for p in plan.parts]
    assert names == ["dev-tools-part-1", "dev-tools-part-2"]
    index = PackedIndex.parse(plan.configmap["data"][INDEX_KEY])
    # The Actor's ConfigMap keeps the header (it changes with every version) and
    # room for the changes to come; the parts hold the tools.
    assert [c.config_map for c in index.chunks[:1]] == ["dev-tools"]
    assert {c.config_map for c in index.chunks[1:]} == set(names)
    bodies = {b["metadata"]["name"]: b for b in [plan.configmap, *plan.parts]}
    for body in bodies.values():
        size = sum(len(k) + len(v.encode()) for k, v in body["data"].items()) + sum(
            len(k) + len(base64.b64decode(v)) for k, v in body["binaryData"].items())
        assert size <= MAX_CONFIGMAP_BYTES
        assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-dev"
    assert len(json.dumps(plan.configmap)) < MAX_CONFIGMAP_BYTES // 8
    # A part holds chunks of whichever versions name them: it carries no set's hash.
    assert all("annotations" not in p["metadata"] for p in plan.parts)
    members = [base64.b64decode(bodies[c.config_map]["binaryData"][c.key])
               for c in index.chunks]
    assert gzip.decompress(b"".join(members)) == tools_json(resolution.text).encode()
    # ... and what the gateway serves from the directory the kubelet lays out.
    _mounted(plan, tmp_path / "tools")
    served = load_served_set(tmp_path / "tools")
    assert served.hash == resolution.hash


def test_unchanged_parts_are_not_written_again_and_an_edited_one_is_repaired() -> None:
    docs = _docs(500)
    first = _plan(docs)
    state = _applied(first, {})
    assert _plan(docs, _seen(state)) == Plan(status=first.status, events=())  # nothing differs
    edited = json.loads(json.dumps(state["dev-tools-part-2"]))
    key, _ = _chunk_of(edited)
    edited["binaryData"][key] = base64.b64encode(b"edited").decode()
    again = _plan(docs, _seen({**state, "dev-tools-part-2": edited}))
    assert again.configmap is None and again.parts == (first.parts[1],)
    deleted = {k: v for k, v in state.items() if k != "dev-tools-part-1"}
    assert _plan(docs, _seen(deleted)).parts == (first.parts[0],)


def test_one_tool_changed_writes_the_actors_configmap_alone(tmp_path: Any) -> None:
    docs = _docs(500)
    state = _applied(_plan(docs), {})
    changed = _docs(500)
    changed[0]["spec"]["anonymousTools"][300]["description"] = noise("changed", 4000)
    plan = _plan(changed, _seen(state))
    # The changed tool's chunk and the header go beside the index; no part is written.
    assert plan.configmap is not None and plan.parts == () and plan.stale == ()
    index = PackedIndex.parse(plan.configmap["data"][INDEX_KEY])
    assert sum(c.config_map == "dev-tools" for c in index.chunks) <= 3
    after = _applied(plan, state)
    assert {k: v for k, v in after.items() if k != "dev-tools"} == {
        k: v for k, v in state.items() if k != "dev-tools"}
    # The parts keep the chunks the index before named: a pod that still shows that
    # index reads it whole; the new one reads whole from the new index.
    _mounted(after, tmp_path / "tools")
    assert load_served_set(tmp_path / "tools").hash == index.hash
    _mounted({**after, "dev-tools": state["dev-tools"]}, tmp_path / "tools")
    assert load_served_set(tmp_path / "tools").hash == PackedIndex.parse(
        state["dev-tools"]["data"][INDEX_KEY]).hash
    # Back to the set before: its chunks are still in the parts.
    assert _plan(docs, _seen(after)).parts == ()


def test_a_grown_set_adds_its_chunks_beside_the_index_until_that_is_full(tmp_path: Any,
                                                                       ) -> None:
    state = _applied(_plan(_docs(500)), {})
    grown = _plan(_docs(600), _seen(state))  # about 300 KB more of gzip
    assert grown.configmap is not None and grown.parts == ()
    state = _applied(grown, state)
    _mounted(state, tmp_path / "tools")
    assert load_served_set(tmp_path / "tools").hash == json.loads(
        state["dev-tools"]["data"][INDEX_KEY])["hash"]
    # Grown past what the Actor's ConfigMap holds beside the index: laid out afresh,
    # the parts filled again in order; a part whose chunks stay is not written.
    full = _plan(_docs(820), _seen(state))
    assert full.configmap is not None
    assert [p["metadata"]["name"] for p in full.parts] == ["dev-tools-part-2",
                                                          "dev-tools-part-3"]
    state = _applied(full, state)
    _mounted(state, tmp_path / "tools")
    index = PackedIndex.parse(state["dev-tools"]["data"][INDEX_KEY])
    assert load_served_set(tmp_path / "tools").hash == index.hash
    assert [c.config_map for c in index.chunks].count("dev-tools") == 1


def test_a_set_that_shrinks_deletes_the_parts_its_index_no_longer_names() -> None:
    state = _applied(_plan(_docs(500)), {})
    seen = _seen(state)
    assert sorted(seen) == ["dev-tools", "dev-tools-part-1", "dev-tools-part-2"]
    small = _docs(100, size=500)  # fits one ConfigMap as tools.json again
    plan = _plan(small, seen)
    # Deleted after the index (and, in the operator, after a grace: a pod whose
    # kubelet still shows the index before reads them meanwhile).
    assert plan.configmap is not None and TOOLS_KEY in plan.configmap["data"]
    assert plan.parts == ()
    assert [s.name for s in plan.stale] == ["dev-tools-part-1", "dev-tools-part-2"]
    state = _applied(Plan(written=plan.written), state)
    assert [s.name for s in _plan(small, _seen(state)).stale] == [
        "dev-tools-part-1", "dev-tools-part-2"]
    # Once deleted (the watch no longer shows them), nothing more to do.
    assert _plan(small, {"dev-tools": _seen(state)["dev-tools"]}).stale == ()
    # While the Actor does not resolve, its ConfigMaps keep the last good set, parts and all.
    broken = _docs(100, size=500)
    broken[-1]["spec"]["skills"].append("missing")
    assert _plan(broken, _seen(state)).stale == ()
    # A ConfigMap of a part's name that another Actor owns is not this one's to delete.
    other = json.loads(json.dumps(state["dev-tools-part-2"]))
    other["metadata"]["ownerReferences"][0].update(name="ops", uid="uid-ops")
    other["metadata"]["labels"]["skillop.dev/actor"] = "ops"
    foreign = _seen({**state, "dev-tools-part-2": other})
    assert [s.name for s in _plan(small, foreign).stale] == ["dev-tools-part-1"]


def test_a_set_too_large_even_packed_names_its_size_and_largest_tools() -> None:
    docs = _docs(1300)
    docs[0]["spec"]["anonymousTools"][7]["description"] = noise("big", 4096)
    plan = _plan(docs)
    assert plan.configmap is None and plan.parts == () and plan.status is not None
    ready = next(c for c in plan.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", P.TOO_LARGE)
    assert f"at most {MAX_PARTS} ConfigMaps of {MAX_CONFIGMAP_BYTES // 1024} KiB" in (
        ready["message"])
    assert "compressed" in ready["message"] and "the largest: tool00007 (" in ready["message"]


def test_the_gateway_waits_until_every_part_is_the_one_the_index_names(tmp_path: Any) -> None:
    old = _applied(_plan(_docs(500)), {})
    new = _applied(_plan(_docs(820), _seen(old)), old)  # laid out afresh: parts rewritten
    directory = tmp_path / "tools"
    _mounted(old, directory)
    assert load_served_set(directory).hash == json.loads(old["dev-tools"]["data"][INDEX_KEY])[
        "hash"]
    # The kubelet showed the new Actor ConfigMap (the index) before the parts.
    _mounted({**old, "dev-tools": new["dev-tools"]}, directory)
    with pytest.raises(ToolSetError, match=r"tools\.json\.gz\.2\.[0-9a-f]{16}: missing \("
                                           r"ConfigMap dev-tools-part-2"):
        load_served_set(directory)
    # A part edited by hand: its chunk is refused.
    _mounted(new, directory)
    key, _ = _chunk_of(new["dev-tools-part-2"])
    (directory / key).write_bytes(b"edited")
    with pytest.raises(ToolSetError, match=r"not the chunk of the set"):
        load_served_set(directory)
    _mounted(new, directory)
    assert load_served_set(directory).hash == json.loads(new["dev-tools"]["data"][INDEX_KEY])[
        "hash"]


def test_a_packed_set_that_decompresses_past_its_stated_size_is_refused(tmp_path: Any) -> None:
    plan = _plan(_docs(240, compressible=True))
    assert plan.configmap is not None
    directory = tmp_path / "tools"
    _mounted(plan, directory)
    index = json.loads((directory / INDEX_KEY).read_text())
    index["size"] -= 1
    (directory / INDEX_KEY).write_text(json.dumps(index))
    with pytest.raises(ToolSetError, match="decompress to other than"):
        load_served_set(directory)
