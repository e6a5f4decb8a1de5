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
    PACKED_KEY,
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
    bodies = [*plan.parts, *([plan.configmap] if plan.configmap else [])]
    return {b["metadata"]["name"]: observe_configmap(json.loads(json.dumps(b))) for b in bodies}


def _mounted(plan: Plan, directory: Any) -> None:
    """The ConfigMaps' keys as a projected volume lays them out: one directory."""
    directory.mkdir(exist_ok=True)
    for body in [*plan.parts, *([plan.configmap] if plan.configmap else [])]:
        for key, value in (body.get("data") or {}).items():
            (directory / key).write_text(value)
        for key, value in (body.get("binaryData") or {}).items():
            (directory / key).write_bytes(base64.b64decode(value))


def test_a_set_that_fits_is_tools_json_exactly_as_before() -> None:
    _, resolution = _resolve(_docs(100, size=500))
    layout = configmap_layout("dev-tools", resolution.text, resolution.hash, resolution.tools)
    assert layout.parts == () and layout.main.binary == {}
    assert dict(layout.main.data) == configmap_data(resolution.text, resolution.tools)
    assert layout.main.data[TOOLS_KEY] == resolution.text + "\n"


def test_a_set_over_one_configmap_is_gzip_in_binary_data_with_its_index() -> None:
    _, resolution = _resolve(_docs(240, compressible=True))  # about 1 MiB of tools.json
    assert len(resolution.text) > MAX_CONFIGMAP_BYTES and not resolution.problems
    plan = _plan(_docs(240, compressible=True))
    assert plan.configmap is not None and plan.parts == ()
    cm = plan.configmap
    assert TOOLS_KEY not in cm["data"] and sorted(cm["binaryData"]) == [PACKED_KEY]
    index = PackedIndex.parse(cm["data"][INDEX_KEY])
    assert index.hash == resolution.hash == cm["metadata"]["annotations"]["skillop.dev/tools-hash"]
    # The chunk is tools.json's very bytes, gzip-compressed: the hash keeps its meaning.
    raw = gzip.decompress(base64.b64decode(cm["binaryData"][PACKED_KEY]))
    assert raw == tools_json(resolution.text).encode() and len(raw) == index.size
    assert plan.status is not None and plan.status["toolsHash"] == resolution.hash


def test_a_larger_set_is_cut_into_parts_written_before_the_actors_configmap(tmp_path: Any,
                                                                             ) -> None:
    docs = _docs(600)  # about 2.4 MB of tools.json that gzip barely shrinks
    _, resolution = _resolve(docs)
    plan = _plan(docs)
    assert plan.configmap is not None
    names = [p["metadata"]["name"] for p in plan.parts]
    assert names == ["dev-tools-part-1", "dev-tools-part-2"]
    index = PackedIndex.parse(plan.configmap["data"][INDEX_KEY])
    assert [(c.key, c.config_map) for c in index.chunks] == [
        (chunk_key(i), name) for i, name in enumerate(["dev-tools", *names])]
    for body in [plan.configmap, *plan.parts]:
        size = sum(len(k) + len(v.encode()) for k, v in body["data"].items()) + sum(
            len(k) + len(base64.b64decode(v)) for k, v in body["binaryData"].items())
        assert size <= MAX_CONFIGMAP_BYTES
        assert body["metadata"]["annotations"]["skillop.dev/tools-hash"] == resolution.hash
        assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-dev"
    # Concatenated in order, the chunks are one gzip stream: tools.json itself.
    stream = b"".join(base64.b64decode(b["binaryData"][c.key])
                      for c, b in zip(index.chunks, [plan.configmap, *plan.parts], strict=True))
    assert gzip.decompress(stream) == tools_json(resolution.text).encode()
    # ... and what the gateway serves from the directory the kubelet lays out.
    _mounted(plan, tmp_path / "tools")
    served = load_served_set(tmp_path / "tools")
    assert served.hash == resolution.hash


def test_unchanged_parts_are_not_written_again_and_an_edited_one_is_repaired() -> None:
    docs = _docs(600)
    first = _plan(docs)
    seen = _echo(first)
    assert _plan(docs, seen) == Plan(status=first.status, events=())  # nothing differs
    edited = json.loads(json.dumps(first.parts[1]))
    edited["binaryData"][chunk_key(2)] = base64.b64encode(b"edited").decode()
    again = _plan(docs, {**seen, "dev-tools-part-2": observe_configmap(edited)})
    assert again.configmap is None and again.parts == (first.parts[1],)
    deleted = {k: v for k, v in seen.items() if k != "dev-tools-part-1"}
    assert _plan(docs, deleted).parts == (first.parts[0],)


def test_a_set_that_shrinks_deletes_the_parts_its_index_no_longer_names() -> None:
    seen = _echo(_plan(_docs(600)))
    assert sorted(seen) == ["dev-tools", "dev-tools-part-1", "dev-tools-part-2"]
    small = _docs(100, size=500)  # fits one ConfigMap as tools.json again
    plan = _plan(small, seen)
    assert plan.configmap is not None and TOOLS_KEY in plan.configmap["data"]
    assert [s.name for s in plan.stale] == ["dev-tools-part-1", "dev-tools-part-2"]
    # Once deleted (the watch no longer shows them), nothing more to do.
    assert _plan(small, {"dev-tools": _echo(plan)["dev-tools"]}).stale == ()
    # Shrunk to two ConfigMaps: only the third goes.
    two = _docs(400)
    assert [s.name for s in _plan(two, seen).stale] == ["dev-tools-part-2"]
    # While the Actor does not resolve, its ConfigMaps keep the last good set, parts and all.
    broken = _docs(100, size=500)
    broken[-1]["spec"]["skills"].append("missing")
    assert _plan(broken, seen).stale == ()
    # A ConfigMap of a part's name that another Actor owns is not this one's to delete.
    other = json.loads(json.dumps(_plan(_docs(600)).parts[1]))
    other["metadata"]["ownerReferences"][0].update(name="ops", uid="uid-ops")
    other["metadata"]["labels"]["skillop.dev/actor"] = "ops"
    foreign = {**seen, "dev-tools-part-2": observe_configmap(other)}
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
    old, new = _plan(_docs(600)), _plan(_docs(601))
    directory = tmp_path / "tools"
    _mounted(old, directory)
    assert load_served_set(directory).hash == json.loads(
        old.configmap["data"][INDEX_KEY])["hash"]  # type: ignore[index]
    # The kubelet showed the new Actor ConfigMap (index, first chunk) before the parts.
    _mounted(Plan(configmap=new.configmap), directory)
    with pytest.raises(ToolSetError, match=r"tools\.json\.gz\.1: not the chunk of the set"):
        load_served_set(directory)
    (directory / chunk_key(2)).unlink()
    _mounted(Plan(parts=new.parts[:1]), directory)
    with pytest.raises(ToolSetError, match=r"tools\.json\.gz\.2: missing \(ConfigMap"):
        load_served_set(directory)
    _mounted(new, directory)
    assert load_served_set(directory).hash == json.loads(
        new.configmap["data"][INDEX_KEY])["hash"]  # type: ignore[index]


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
