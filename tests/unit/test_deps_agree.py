"""The dependency index and the resolver agree on what a Skill depends on.

The cascade re-resolves a Skill when any key in its dependencies changes. If a
source kind were read by the resolver but not named in the dependencies, a
change to it would silently never reach the Actors. So: on generated catalogs,
every object the resolver looks up while building a Skill's view (found or not)
is one of the Skill's dependency keys, and every dependency key is looked up.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from skillkit import catalog, configmap, skill, skill_md, tool

from skillop.model.serverkeys import ServerKey
from skillop.operator.deps import Key, key, server_dep, skill_dependencies
from skillop.resolve.catalog import Catalog
from skillop.resolve.skills import skill_view

NAMESPACES = ("team-a", "team-b")
NAMES = ("s0", "s1", "s2", "s3")
URLS = ("http://one.tools.svc/mcp", "http://two.tools.svc/mcp")


class Recording(dict[Any, Any]):
    """A catalog index that remembers every key the resolver asks it for."""

    def __init__(self, data: dict[Any, Any], kind: str, seen: set[Key]) -> None:
        super().__init__(data)
        self.kind, self.seen = kind, seen

    def _note(self, k: Any) -> None:
        if not isinstance(k, ServerKey):
            self.seen.add(key(self.kind, k))
            return
        self.seen.add(server_dep(k))
        if k.ca is not None and k.ca.kind == "ConfigMap":  # the listing is made with it
            self.seen.add(key("ConfigMap", k.ca.ref))

    def get(self, k: Any, default: Any = None) -> Any:
        self._note(k)
        return super().get(k, default)

    def __getitem__(self, k: Any) -> Any:
        self._note(k)
        return super().__getitem__(k)

    def __contains__(self, k: object) -> bool:
        self._note(k)
        return super().__contains__(k)


def recorded(cat: Catalog) -> tuple[Catalog, set[Key]]:
    seen: set[Key] = set()
    copy = Catalog(**{**cat.__dict__,
                      "skills": Recording(cat.skills, "Skill", seen),
                      "tools": Recording(cat.tools, "Tool", seen),
                      "configmaps": Recording(cat.configmaps, "ConfigMap", seen),
                      "discovered": Recording(cat.discovered, "McpServer", seen)})
    return copy, seen


refs = st.builds(lambda ns, name: name if ns is None else f"{ns}/{name}",
                 st.none() | st.sampled_from(NAMESPACES), st.sampled_from(NAMES))
tls = st.none() | st.builds(lambda kind, name: {kind: {"name": name, "key": "ca.crt"}},
                            st.sampled_from(("caConfigMapRef", "caSecretRef")),
                            st.sampled_from(NAMES))
servers = st.builds(
    lambda i, url, secret, ca: {
        "name": f"m{i}", "url": url,
        **({"headersFrom": {"secretRef": {"name": secret}}} if secret else {}),
        **({"tls": ca} if ca else {})},
    st.integers(0, 3), st.sampled_from(URLS), st.none() | st.sampled_from(("auth", "other")), tls)


@st.composite
def skills(draw: st.DrawFn, ns: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "includes": [{"skill": r} for r in draw(st.lists(refs, max_size=3))],
        "tools": [{"ref": r} for r in draw(st.lists(refs, max_size=3, unique=True))],
        "agentSkills": [{"configMapRef": {"name": n}}
                        for n in draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True))],
        "mcpServers": list({s["name"]: s for s in draw(st.lists(servers, max_size=3))}.values()),
        "sharing": {"from": draw(st.sampled_from(("Same", "All")))},
    }
    return skill(name, ns, **spec)


@st.composite
def worlds(draw: st.DrawFn) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for ns in NAMESPACES:
        for name in draw(st.lists(st.sampled_from(NAMES), max_size=4, unique=True)):
            docs.append(draw(skills(ns, name)))
        for name in draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True)):
            shared = {"skillop.dev/shared": "true"} if draw(st.booleans()) else None
            docs.append(tool(name, ns, description="t", labels=shared))
        for name in draw(st.lists(st.sampled_from(NAMES), max_size=2, unique=True)):
            docs.append(configmap(name, {"SKILL.md": skill_md(f"md-{name}")}, ns))
    return docs


@settings(max_examples=150, deadline=None)
@given(worlds())
def test_every_lookup_of_the_resolver_is_a_dependency_and_back(docs: list[dict[str, Any]]) -> None:
    cat = catalog(docs)
    for ref, resource in cat.skills.items():
        spy, seen = recorded(cat)
        skill_view(resource, spy)
        assert seen == skill_dependencies(resource), ref


def test_a_skill_naming_nothing_that_exists_still_depends_on_it() -> None:
    # Creating the missing objects must heal the Skill, so it depends on them now.
    cat = catalog([skill("lonely", "team-a", includes=[{"skill": "later"}],
                         tools=[{"ref": "team-b/soon"}],
                         agentSkills=[{"configMapRef": {"name": "md"}}])])
    (resource,) = cat.skills.values()
    spy, seen = recorded(cat)
    skill_view(resource, spy)
    assert seen == skill_dependencies(resource) == {
        ("Skill", "team-a/later"), ("Tool", "team-b/soon"), ("ConfigMap", "team-a/md")}
