"""Equal spec parts are held once by the store (operator/specshare.py), without
one owner's change, or one namespace's Secrets and listings, reaching another."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from skillkit import actor, anon, ref, skill

from skillop.model.manifest import parse_object
from skillop.model.specs import SkillSpec
from skillop.operator.specshare import SpecShare
from skillop.operator.store import Store
from skillop.resolve.resolver import Resolver
from skillop.sources.mcp_tools import McpToolInfo

SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "description": "query"}}}


def _search(ns: str, **extra: Any) -> dict[str, Any]:
    return skill("search", ns, description="search things",
                 anonymousTools=[anon("find", inputSchema=SCHEMA, **extra)],
                 includes=[{"skill": "base", "overrides": {"x": {"description": "x"}}}],
                 builtins=[])


def _spec(store: Store, name: str) -> SkillSpec:
    return store.catalog.skills[ref(name)].spec


def _parsed(doc: dict[str, Any]) -> SkillSpec:
    obj = parse_object(doc).obj
    assert obj is not None and not isinstance(obj, dict)
    spec = getattr(obj, "spec")  # noqa: B009
    assert isinstance(spec, SkillSpec)
    return spec


def test_equal_parts_of_two_namespaces_skills_are_one_object() -> None:
    store = Store()
    store.upsert(_search("team-a"))
    store.upsert(_search("team-b"))
    a, b = _spec(store, "team-a/search"), _spec(store, "team-b/search")
    assert a is not b  # each object keeps its own spec
    assert a.anonymous_tools[0] is b.anonymous_tools[0]  # a model of shared parts
    assert a.anonymous_tools[0].input_schema is b.anonymous_tools[0].input_schema
    assert a.includes[0] is b.includes[0]
    assert a.sharing is b.sharing
    assert a.builtins is b.builtins and a.mcp_servers is a.builtins  # one empty list
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__


def test_a_shared_spec_is_what_parsing_gives() -> None:
    store = Store()
    for ns in ("team-a", "team-b"):
        store.upsert(_search(ns))
    fresh = _parsed(_search("team-b"))
    held = _spec(store, "team-b/search")
    assert held == fresh
    assert held.model_dump(by_alias=True, exclude_unset=True) == \
        fresh.model_dump(by_alias=True, exclude_unset=True)


def test_values_equal_in_python_but_not_in_json_are_not_merged() -> None:
    """``True == 1`` and key order: two values shared are two values printed alike."""
    store = Store()
    docs = {"one": {"default": 1, "type": "integer"}, "true": {"default": True, "type": "integer"},
            "reordered": {"type": "integer", "default": 1}}
    for name, schema in docs.items():
        store.upsert(skill(name, anonymousTools=[anon("t", inputSchema=schema)]))
    held = {name: _spec(store, f"team-a/{name}").anonymous_tools[0].input_schema
            for name in docs}
    assert held["one"]["default"] is not True and held["true"]["default"] is True
    assert list(held["reordered"]) == ["type", "default"]
    assert list(held["one"]) == ["default", "type"]
    assert len({id(schema) for schema in held.values()}) == 3


def test_a_shared_part_cannot_be_changed_through_one_owner() -> None:
    store = Store()
    store.upsert(_search("team-a"))
    store.upsert(_search("team-b"))
    tool = _spec(store, "team-a/search").anonymous_tools[0]
    with pytest.raises(ValidationError):
        tool.description = "changed"  # type: ignore[misc]
    # A new spec for one owner is parsed afresh: the other keeps its parts.
    store.upsert(_search("team-a", description="changed"))
    assert _spec(store, "team-a/search").anonymous_tools[0].description == "changed"
    assert _spec(store, "team-b/search").anonymous_tools[0].description == "inline find"


def test_parts_no_spec_uses_are_let_go() -> None:
    store = Store()
    for i in range(50):
        store.upsert(skill(f"s{i}", anonymousTools=[anon(f"t{i}", inputSchema={"i": i})]))
    gc.collect()
    held = len(store.specs)
    for i in range(50):
        store.remove("Skill", "team-a", f"s{i}")
    gc.collect()
    assert len(store.specs) < held - 50  # the models went with their specs


def test_the_json_table_keeps_what_is_in_use_once_it_has_doubled() -> None:
    share = SpecShare(floor=4)
    kept = [share.share(_parsed(skill(f"s{i}", anonymousTools=[anon("t", inputSchema={"i": i})])))
            for i in range(3)]
    for i in range(3, 20):
        share.share(_parsed(skill(f"s{i}", anonymousTools=[anon("t", inputSchema={"i": i})])))
    share.prune(kept)
    again = share.share(_parsed(skill("x", anonymousTools=[anon("t", inputSchema={"i": 0})])))
    assert again.anonymous_tools[0] is kept[0].anonymous_tools[0]
    gone = share.share(_parsed(skill("y", anonymousTools=[anon("t", inputSchema={"i": 9})])))
    assert gone.anonymous_tools[0].input_schema == {"i": 9}
    assert len(share._json) < 17


URL = "https://mcp.example.com/mcp"


def _tenant(store: Store, ns: str, listing: tuple[str, ...]) -> None:
    """A Skill with an MCP server sending the headers of its namespace's Secret
    "token", and an Actor using it: the same specs in every namespace."""
    store.upsert(skill("web", ns, mcpServers=[{
        "name": "web", "url": URL, "headersFrom": {"secretRef": {"name": "token"}}}],
        anonymousTools=[anon("note", inputSchema=SCHEMA)]))
    store.upsert(actor("dev", ns, skills=["web"]))
    server = store.catalog.skills[ref(f"{ns}/web")].spec.mcp_servers[0]
    key = server.discovery_key(ns)
    assert key is not None
    store.set_discovered(key, tuple(McpToolInfo(name=n, description=f"{n} in {ns}")
                                    for n in listing))


def _tools(store: Store, ns: str) -> dict[str, tuple[str, str]]:
    """The Actor's tools: name -> (identity, description)."""
    resolution = Resolver(store.catalog).resolve_actor(ref(f"{ns}/dev"))
    assert resolution is not None and not resolution.problems
    return {t.entry.tool.name: (t.entry.tool.identity, t.entry.tool.description)
            for t in resolution.tools}


def _expected(ns: str, *listed: str) -> dict[str, tuple[str, str]]:
    return {"note": (f"anon:{ns}/web#note", "inline note"),
            **{n: (f"mcp:{URL}#{n}", f"{n} in {ns}") for n in listed}}


def test_equal_specs_in_two_namespaces_resolve_with_their_own_secrets_and_listings() -> None:
    store = Store()
    _tenant(store, "team-a", ("fetch", "a_only"))
    _tenant(store, "team-b", ("fetch", "b_only"))
    server_a = store.catalog.skills[ref("team-a/web")].spec.mcp_servers[0]
    server_b = store.catalog.skills[ref("team-b/web")].spec.mcp_servers[0]
    assert server_a is server_b  # shared: what tells them apart is the owner
    for _ in range(2):  # a second batch reads what the first memoized
        assert _tools(store, "team-a") == _expected("team-a", "fetch", "a_only")
        assert _tools(store, "team-b") == _expected("team-b", "fetch", "b_only")
    # One namespace's new listing reaches its Actor only.
    _tenant(store, "team-a", ("fetch", "a_new"))
    assert _tools(store, "team-a") == _expected("team-a", "fetch", "a_new")
    assert _tools(store, "team-b") == _expected("team-b", "fetch", "b_only")


def test_capabilities_with_lists_are_shared_and_keep_what_they_derive() -> None:
    caps = {"writeScope": ["github:issues"], "sideEffects": True}
    store = Store()
    store.upsert(skill("a", "team-a", anonymousTools=[anon("t", capabilities=caps)]))
    first = _spec(store, "team-a/a").anonymous_tools[0].capabilities
    assert first is not None and first.true_flags == {"sideEffects"}  # a cached_property
    store.upsert(skill("a", "team-b", anonymousTools=[anon("t", capabilities=caps)]))
    store.upsert(skill("b", "team-b", anonymousTools=[anon("u", capabilities={
        **caps, "sideEffects": False})]))
    assert _spec(store, "team-b/a").anonymous_tools[0].capabilities is first
    other = _spec(store, "team-b/b").anonymous_tools[0].capabilities
    assert other is not first and other is not None and other.true_flags == frozenset()
    # A copy with a change has its own fields set: the shared one stays as it was.
    assert first.__pydantic_fields_set__ is other.__pydantic_fields_set__
    changed = first.model_copy(update={"unsafe": True})
    assert "unsafe" in changed.model_fields_set
    assert "unsafe" not in first.model_fields_set | other.model_fields_set


class _Open(BaseModel):
    """A model that may be written to: never shared, nor are its parts."""

    schema_: dict[str, Any]
    names: list[str]


def test_a_model_that_is_not_frozen_keeps_its_own_parts() -> None:
    share = SpecShare()
    one, two = (_Open(schema_={"type": "object"}, names=[]) for _ in range(2))
    share.share(one)
    share.share(two)
    assert one.schema_ is not two.schema_ and one.names is not two.names
    assert one.__pydantic_fields_set__ is not two.__pydantic_fields_set__


def test_an_objects_names_are_held_once() -> None:
    """The catalog's key, the epochs' and the metadata share their strings, however
    each was come by (a key split, a body read)."""
    store = Store()
    store.upsert(skill("".join(["sea", "rch"]), "".join(["team-", "a"])))
    (held,) = store.catalog.skills
    meta = store.catalog.skills[held].meta
    (epoch,) = store.epochs["Skill"]
    assert held.name is meta.name is epoch.name
    assert held.namespace is meta.namespace is epoch.namespace


def test_equal_tools_of_two_namespaces_keep_one_text_per_fragment() -> None:
    store = Store()
    _tenant(store, "team-a", ("fetch",))
    _tenant(store, "team-b", ("fetch",))
    notes = []
    for ns in ("team-a", "team-b"):
        resolution = Resolver(store.catalog).resolve_actor(ref(f"{ns}/dev"))
        assert resolution is not None
        notes += [t.entry.tool for t in resolution.tools if t.entry.tool.name == "note"]
    a, b = notes
    assert a is not b and a.identity != b.identity
    assert a.digest() == b.digest()
    assert all(a.fragments()[k] is b.fragments()[k] for k in a.fragments())
