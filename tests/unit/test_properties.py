"""Properties over random include graphs and tool sets, checked against simple
reference implementations written here from the contract's words."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from skillkit import P, actor, all_problems, anon, catalog, skill, tool

from skillop.model.canonical import canonical_json
from skillop.model.names import ObjectRef
from skillop.resolve.naming import BINDING_RE
from skillop.resolve.resolver import Resolution, Resolver
from skillop.sources.builtins import builtin_groups

SETTINGS = settings(max_examples=100, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

#: What a skill can declare. Names overlap on purpose: ``a`` is also a registry
#: tool's name and ``git_log`` a built-in's, so conflicts across skills are common.
ATOMS = ["builtin:git_operations", "builtin:shell_operations", "tool:r1", "tool:r2",
         "anon:a", "anon:b", "anon:c.d", "anon:git_log", "anon:shell_execute"]
REGISTRY = {"r1": "a", "r2": "shared"}


def atom_names(atom: str) -> list[str]:
    kind, name = atom.split(":")
    if kind == "builtin":
        return [t.name for t in builtin_groups()[name]]
    return [REGISTRY[name]] if kind == "tool" else [name]


def atom_identities(atom: str, skill_name: str) -> list[str]:
    kind, name = atom.split(":")
    if kind == "builtin":
        return [t.identity for t in builtin_groups()[name]]
    if kind == "tool":
        return [f"tool:team-a/{name}"]
    return [f"anon:team-a/{skill_name}#{name}"]


@dataclass
class World:
    atoms: dict[str, list[str]]       # skill -> atoms, no name twice in a skill
    edges: dict[str, list[str]]       # skill -> included skills, in order
    roots: list[str]
    deny: list[str]

    def docs(self, *, extra: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [tool(r, name=n) for r, n in REGISTRY.items()]
        for name, atoms in self.atoms.items():
            kinds: dict[str, list[Any]] = {"builtin": [], "tool": [], "anon": []}
            for atom in atoms:
                kind, value = atom.split(":")
                kinds[kind].append(value)
            out.append(skill(name, builtins=kinds["builtin"],
                             tools=[{"ref": r} for r in kinds["tool"]],
                             anonymousTools=[anon(n) for n in kinds["anon"]],
                             includes=[{"skill": t} for t in self.edges[name]]))
        policy = {"deny": [f"team-a/{d}" for d in self.deny]}
        out.append(actor("act", skills=self.roots, skillAccessPolicy=policy))
        return out + (extra or [])

    def reachable(self) -> list[str]:
        """Reference: skills reached from the roots through allowed skills only."""
        seen: list[str] = []
        stack = [r for r in reversed(self.roots)]
        while stack:
            node = stack.pop()
            if node in seen or node in self.deny:
                continue
            seen.append(node)
            stack.extend(reversed(self.edges[node]))
        return seen


def _skill_atoms(draw: st.DrawFn) -> list[str]:
    chosen = draw(st.lists(st.sampled_from(ATOMS), unique=True, max_size=4))
    kept: list[str] = []
    taken: set[str] = set()
    for atom in chosen:
        names = atom_names(atom)
        if taken.isdisjoint(names):
            kept.append(atom)
            taken.update(names)
    return kept


@st.composite
def worlds(draw: st.DrawFn, *, acyclic: bool = True, with_deny: bool = False) -> World:
    n = draw(st.integers(1, 9))
    names = [f"s{i}" for i in range(n)]
    edges: dict[str, list[str]] = {}
    for i, name in enumerate(names):
        targets = names[i + 1:] if acyclic else names
        edges[name] = draw(st.lists(st.sampled_from(targets), unique=True, max_size=3)
                           ) if targets else []
    roots = draw(st.lists(st.sampled_from(names), unique=True, min_size=1, max_size=3))
    deny = draw(st.lists(st.sampled_from(names), unique=True, max_size=2)) if with_deny else []
    return World({name: _skill_atoms(draw) for name in names}, edges, roots, deny)


def resolve(docs: list[dict[str, Any]]) -> Resolution:
    resolution = Resolver(catalog(docs)).resolve_actor(ObjectRef("team-a", "act"))
    assert resolution is not None
    return resolution


@SETTINGS
@given(worlds(with_deny=True))
def test_names_unique_sorted_qualified_on_conflict_and_bindable(world: World) -> None:
    resolution = resolve(world.docs())
    assert resolution.ok, [p.line() for p in resolution.problems]
    names = [t.name for t in resolution.tools]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    bare = Counter(t.entry.tool.name for t in resolution.tools)
    for t in resolution.tools:
        expected = t.entry.tool.name if bare[t.entry.tool.name] == 1 else t.entry.qualified_name
        assert t.name == expected
    bindings = [t.binding_name for t in resolution.tools]
    assert all(BINDING_RE.match(b) for b in bindings)
    assert len(set(bindings)) == len(bindings)
    assert all(t.binding_name == t.name for t in resolution.tools if BINDING_RE.match(t.name))


@SETTINGS
@given(worlds(with_deny=True))
def test_flattening_is_the_union_over_the_reachable_closure(world: World) -> None:
    resolution = resolve(world.docs())
    reached = world.reachable()
    assert [s.name for s in resolution.skills] == reached
    expected = {ident for s in reached for atom in world.atoms[s]
                for ident in atom_identities(atom, s)}
    assert {t.entry.tool.identity for t in resolution.tools} == expected
    for t in resolution.tools:
        assert t.path[-1] == t.entry.skill
        assert t.path[0].name in world.roots


@SETTINGS
@given(worlds(with_deny=True), st.randoms(use_true_random=False))
def test_output_is_independent_of_manifest_order(world: World, rnd: random.Random) -> None:
    docs = world.docs()
    shuffled = list(docs)
    rnd.shuffle(shuffled)
    assert resolve(shuffled).text == resolve(docs).text


@SETTINGS
@given(worlds(with_deny=True))
def test_the_assembled_text_is_the_documents_canonical_json(world: World) -> None:
    """The ToolSet text is joined from per-ToolDef memos; the document is built from
    scratch: they must agree to the byte, and the hash is of that text."""
    resolution = resolve(world.docs())
    document = resolution.document
    assert resolution.text == canonical_json(document)
    assert json.loads(resolution.text) == document
    assert document["hash"] == resolution.hash
    again = resolve(world.docs())  # fresh memos: the same bytes
    assert again.text == resolution.text and again.hash == resolution.hash


@SETTINGS
@given(worlds())
def test_adding_an_unrelated_tool_renames_nothing(world: World) -> None:
    before = resolve(world.docs())
    world.roots.append("extra")
    after = resolve(world.docs(extra=[skill("extra", anonymousTools=[anon("brand_new")])]))
    old = {t.entry.tool.identity: (t.name, t.binding_name) for t in before.tools}
    new = {t.entry.tool.identity: (t.name, t.binding_name) for t in after.tools}
    assert {k: new[k] for k in old} == old
    assert new["anon:team-a/extra#brand_new"] == ("brand_new", "brand_new")


def on_a_cycle(edges: dict[str, list[str]]) -> set[str]:
    """Reference: a skill is on a cycle when it can reach itself."""
    out = set()
    for start in edges:
        seen: set[str] = set()
        stack = list(edges[start])
        while stack:
            node = stack.pop()
            if node == start:
                out.add(start)
                break
            if node not in seen:
                seen.add(node)
                stack.extend(edges[node])
    return out


@SETTINGS
@given(worlds(acyclic=False))
def test_every_cycle_is_detected(world: World) -> None:
    problems = [p for p in all_problems(world.docs()) if p.reason == P.CYCLE_DETECTED]
    expected = on_a_cycle(world.edges)
    assert {p.subject.name for p in problems} == expected
    for p in problems:
        path = p.message.removeprefix("include cycle: ").split(" -> ")
        assert path[0] == path[-1] == f"team-a/{p.subject.name}"
        hops = [h.split("/")[1] for h in path]
        assert all(b in world.edges[a] for a, b in itertools.pairwise(hops))
        assert len(set(hops[:-1])) == len(hops) - 1
    resolution = resolve(world.docs())
    assert resolution.ok is not (expected & set(world.reachable()))
