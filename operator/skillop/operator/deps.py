"""The dependency index: who must be re-resolved when something changes.

Every Skill and Actor records what it refers to: skills, tools, ConfigMaps (for
SKILL.md) and MCP endpoints (for discovered tool lists), even when the target
does not exist yet, so creating a missing object heals its dependents. A change
to any key re-resolves exactly the skills and actors that reach it, transitively.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from skillop.model.manifest import ActorResource, SkillResource
from skillop.model.names import ObjectRef, RefError, parse_ref
from skillop.model.serverkeys import ServerKey
from skillop.resolve.graph import reachable
from skillop.resolve.skills import skill_refs

Key = tuple[str, str]  # (kind, "namespace/name" or ServerKey.text)


def key(kind: str, ref: ObjectRef | str) -> Key:
    return (kind, ref if isinstance(ref, str) else ref.canonical)


@dataclass(frozen=True, slots=True)
class Affected:
    skills: frozenset[ObjectRef]
    actors: frozenset[ObjectRef]

    def __bool__(self) -> bool:
        return bool(self.skills or self.actors)


def _refs(texts: Iterable[str], namespace: str) -> list[ObjectRef]:
    out = []
    for text in texts:
        try:
            out.append(parse_ref(text, namespace=namespace))
        except RefError:
            continue
    return out


def skill_dependencies(skill: SkillResource) -> set[Key]:
    """What the resolver looks up for this Skill (``skill_refs``: one source)."""
    return set(skill_refs(skill).watched())


def server_dep(server: ServerKey) -> Key:
    """The key of one discovery (URL and Secret): a new listing marks its users."""
    return ("McpServer", server.text)


def actor_dependencies(actor: ActorResource) -> set[Key]:
    return {key("Skill", r) for r in _refs(actor.spec.skills, actor.meta.namespace)}


class DependencyIndex:
    def __init__(self) -> None:
        #: Each owner's dependencies, as a tuple: a set of a few keys is 216 bytes
        #: or more, a tuple 40 plus 8 a key, and this one is only iterated.
        self._forward: dict[Key, tuple[Key, ...]] = {}
        self._reverse: dict[Key, set[Key]] = {}
        #: One key object per key in use (a dependency named by many owners, an
        #: owner that is a dependency too): each owner's set built its own.
        self._keys: dict[Key, Key] = {}

    def update(self, owner: Key, deps: set[Key]) -> None:
        owner = self._keys.setdefault(owner, owner)
        deps = {self._keys.setdefault(dep, dep) for dep in deps}
        for dep in (d for d in self._forward.get(owner, ()) if d not in deps):
            users = self._reverse.get(dep)
            if users is not None:
                users.discard(owner)
                if not users:
                    del self._reverse[dep]
                    self._drop(dep)
        for dep in deps:
            self._reverse.setdefault(dep, set()).add(owner)
        self._forward[owner] = tuple(deps)

    def remove(self, owner: Key) -> None:
        self.update(owner, set())
        self._forward.pop(owner, None)
        self._drop(owner)

    def _drop(self, k: Key) -> None:
        """Forget ``k``'s key object once neither an owner nor a dependency."""
        if k not in self._forward and k not in self._reverse:
            self._keys.pop(k, None)

    def dependents(self, changed: Iterable[Key]) -> Affected:
        """Every Skill and Actor that reaches any changed key (themselves included)."""
        seen = reachable(changed, lambda k: self._reverse.get(k, ()))
        return Affected(
            frozenset(ref_of(k) for k in seen if k[0] == "Skill"),
            frozenset(ref_of(k) for k in seen if k[0] == "Actor"),
        )

    def users_of(self, dep: Key) -> set[Key]:
        return set(self._reverse.get(dep, ()))

    def has_users(self, dep: Key) -> bool:
        return dep in self._reverse  # entries are deleted when their last user goes

    def dependencies_of(self, owner: Key) -> frozenset[Key]:
        return frozenset(self._forward.get(owner, ()))


def ref_of(k: Key) -> ObjectRef:
    """The object a Skill/Actor/Tool/ConfigMap key names (``held_ref``)."""
    ns, name = k[1].split("/", 1)
    return held_ref(ns, name)


def held_ref(namespace: Any, name: Any) -> ObjectRef:
    """A reference to keep: its strings interned, so the tables keyed by it (the
    catalog's, epochs, uids) and the object's metadata hold one string per name,
    not each a copy split from a key or read from another event's body. Not for a
    ConfigMap known by name only (``Store.upsert``): its name is held once anyway,
    and an interned string costs an entry in the interpreter's table of them too."""
    return ObjectRef(_interned(namespace), _interned(name))


def _interned(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value
